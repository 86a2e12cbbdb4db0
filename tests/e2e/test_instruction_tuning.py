"""fine_tune_t5.py with FLAN's templates: a tiny random model trains on a templated SST-2 + MRPC mixture and is
evaluated zero-shot on RTE, held out of training (--eval_tasks), as FLAN evaluates held-out clusters; its predictions
files hold the instruction inputs, its card names the templates and tasks; rank scoring ranks FLAN's answers."""
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from absl.testing import absltest, parameterized

from tests.helpers import fine_tune, require, tiny_flags

RTE_OPTIONS = "OPTIONS:\n- yes\n- no"


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


@pytest.mark.train_class  # one templated mixture run shared by the tests
class InstructionTuningTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = Path(tempfile.mkdtemp())
        cls.run_dir = cls.tmp / "flan_mix"
        fine_tune(tiny_flags(str(cls.run_dir), dataset_name=None, tasks="glue/sst2,glue/mrpc", eval_tasks="glue/rte",
                             data_dir=[str(require("glue"))], instruction_templates="flan",
                             instruction_options="true", max_train_samples=16, max_eval_samples=8,
                             max_source_length=192))
        cls.saved = json.loads((cls.run_dir / "metrics.json").read_text())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def test_the_held_out_task_is_evaluated_but_never_trained(self):
        self.assertCountEqual(self.saved["per_task_metrics"], ["sst2", "mrpc", "rte"])
        self.assertCountEqual(self.saved["mixing_rates"], ["sst2", "mrpc"])
        self.assertIn("rte/validation", self.saved["data"])
        self.assertNotIn("rte/train", self.saved["data"])
        self.assertBetween(self.saved["per_task_metrics"]["rte"]["accuracy"], 0.0, 100.0)
        m = self.saved["per_task_metrics"]  # the average (best-model metric) leaves the held-out task out
        self.assertAlmostEqual(self.saved["average"],
                               (m["sst2"]["accuracy"] + (m["mrpc"]["f1"] + m["mrpc"]["accuracy"]) / 2) / 2)

    def test_predictions_hold_the_instruction_inputs_and_flans_answers(self):
        rows = read_jsonl(self.run_dir / "predictions_rte_validation.jsonl")
        self.assertLen(rows, 8)
        dev = (require("glue/RTE") / "dev.tsv").read_text().splitlines()[1:9]
        for row, line in zip(rows, dev):
            premise, hypothesis = line.split("\t")[1:3]
            self.assertIn(premise, row["input"])
            self.assertEqual(row["input"].count(RTE_OPTIONS), 1)
            self.assertIn(hypothesis, row["input"])
            self.assertTrue(row["input"].endswith(RTE_OPTIONS))  # every RTE template ends with its options
            self.assertIn(row["target"], ("yes", "no"))
            self.assertEqual(row["target"], "yes" if line.endswith("\tentailment") else "no")

    def test_the_model_card_names_the_templates_and_tasks(self):
        card = (self.run_dir / "README.md").read_text()
        self.assertIn("FLAN's instruction templates", card)
        self.assertIn("`glue/rte` (classification, held out: evaluated, never trained on)", card)
        self.assertIn("flan/templates.py `sst2`, --instruction_templates flan, with OPTIONS, zero-shot", card)
        self.assertIn("instruction_templates: flan", card)
        self.assertIn("pass --task none with inputs already in a template", card)

    def test_one_shot_rank_scoring_ranks_flans_answers(self):
        out = Path(self.create_tempdir().full_path) / "rank"
        fine_tune(tiny_flags(str(out), model_size=None, tokenizer_name_or_path=None,
                             model_name_or_path=str(self.run_dir), do_train=False, instruction_templates="flan",
                             instruction_options="true", few_shot=1, label_scoring="rank", max_eval_samples=8,
                             max_train_samples=16, max_source_length=512))
        predictions = [row["prediction"] for row in read_jsonl(out / "predictions_rte_validation.jsonl")]
        self.assertLen(predictions, 8)
        self.assertContainsSubset(set(predictions), {"yes", "no"})
        inputs = [row["input"] for row in read_jsonl(out / "predictions_rte_validation.jsonl")]
        self.assertTrue(all(text.count(RTE_OPTIONS) == 2 for text in inputs))  # the exemplar's and the example's


if __name__ == "__main__":
    absltest.main()
