"""fine_tune_t5.py with FLAN's templates, FLAN's zero-shot pattern end to end: a tiny random model trains on a templated
RTE + MRPC mixture and is evaluated on WiC, held out of training (--eval_tasks), as FLAN evaluates held-out clusters.
With the defaults the held-out task's inputs carry FLAN's OPTIONS and it is scored by ranking its options: no
prediction is invalid, whatever the model; --label_scoring generate generates it instead, each prediction exact or
invalid. Its predictions files hold the instruction inputs, its card and records say how each task was predicted."""
import json
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from absl.testing import absltest, parameterized

from tests.helpers import fine_tune, require, tiny_flags

WIC_OPTIONS = "OPTIONS:\n- different meanings\n- the same meaning"  # FLAN's _process_wic options, label order
WIC_ANSWERS = ("different meanings", "the same meaning")
RTE_OPTIONS = "OPTIONS:\n- yes\n- no"
EVAL_ROWS = 8


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


@pytest.mark.train_class  # one templated mixture run shared by the tests
class InstructionTuningTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = Path(tempfile.mkdtemp())
        cls.run_dir = cls.tmp / "flan_mix"
        # --instruction_options and --label_scoring left unset: FLAN's pattern is the default
        fine_tune(tiny_flags(str(cls.run_dir), dataset_name=None, tasks="glue/rte,glue/mrpc",
                             eval_tasks="super_glue/wic", data_dir=[str(require("glue")), str(require("superglue"))],
                             instruction_templates="flan", max_train_samples=16, max_eval_samples=EVAL_ROWS,
                             max_source_length=192))
        cls.saved = json.loads((cls.run_dir / "metrics.json").read_text())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def test_the_held_out_task_is_evaluated_but_never_trained(self):
        self.assertCountEqual(self.saved["per_task_metrics"], ["rte", "mrpc", "wic"])
        self.assertCountEqual(self.saved["mixing_rates"], ["rte", "mrpc"])
        self.assertIn("wic/validation", self.saved["data"])
        self.assertNotIn("wic/train", self.saved["data"])
        m = self.saved["per_task_metrics"]  # the average (best-model metric) leaves the held-out task out
        self.assertAlmostEqual(self.saved["average"],
                               (m["rte"]["accuracy"] + (m["mrpc"]["f1"] + m["mrpc"]["accuracy"]) / 2) / 2)

    def test_the_held_out_task_is_ranked_and_never_invalid(self):
        wic = self.saved["per_task_metrics"]["wic"]
        self.assertEqual((wic["invalid_count"], wic["invalid_rate"]), (0, 0.0))
        rows = read_jsonl(self.run_dir / "predictions_wic_validation.jsonl")
        self.assertLen(rows, EVAL_ROWS)
        self.assertContainsSubset({row["prediction"] for row in rows}, WIC_ANSWERS)
        labels = [json.loads(line)["label"] for line in
                  (require("superglue/WiC") / "val.jsonl").read_text().splitlines()[:EVAL_ROWS]]
        self.assertEqual([row["target"] for row in rows], [WIC_ANSWERS[label] for label in labels])
        self.assertAlmostEqual(wic["accuracy"], 100 * sum(row["correct"] for row in rows) / EVAL_ROWS)

    def test_config_and_metrics_record_how_each_split_was_predicted(self):
        expected = {"rte": {"label_scoring": "generate"}, "mrpc": {"label_scoring": "generate"},
                    "wic": {"label_scoring": "rank"}}
        record = yaml.safe_load((self.run_dir / "config.yaml").read_text())
        self.assertEqual((record["label_scoring"], record["instruction_options"]), (None, True))
        self.assertEqual(record["derived"]["evaluation"], expected)
        self.assertEqual(self.saved["evaluation"], expected)
        log = (self.run_dir / "out.log").read_text()
        self.assertIn("--label_scoring unset: held-out super_glue/wic ranked by FLAN's answers", log)
        # every evaluation prints its invalid rate
        self.assertIn(f"super_glue/wic validation (ranked): 0 of {EVAL_ROWS} predictions invalid (0.00 %)", log)
        rte = self.saved["per_task_metrics"]["rte"]
        self.assertIn(f"glue/rte validation (generated): {rte['invalid_count']} of {EVAL_ROWS} predictions invalid "
                      f"({rte['invalid_rate']:.2f} %)", log)

    def test_predictions_hold_the_instruction_inputs_with_flans_options(self):
        rows = read_jsonl(self.run_dir / "predictions_wic_validation.jsonl")
        val = [json.loads(line) for line in
               (require("superglue/WiC") / "val.jsonl").read_text().splitlines()[:EVAL_ROWS]]
        for row, source in zip(rows, val, strict=True):
            self.assertIn(source["sentence1"], row["input"])
            self.assertIn(source["sentence2"], row["input"])
            self.assertTrue(row["input"].endswith(WIC_OPTIONS))  # every WiC template ends with its options
        for row in read_jsonl(self.run_dir / "predictions_rte_validation.jsonl"):
            self.assertTrue(row["input"].endswith(RTE_OPTIONS))
            self.assertIn(row["target"], ("yes", "no"))

    def test_the_model_card_names_the_templates_tasks_and_scoring(self):
        card = (self.run_dir / "README.md").read_text()
        self.assertIn("FLAN's instruction templates", card)
        self.assertIn("`super_glue/wic` (classification, held out: evaluated, never trained on)", card)
        self.assertIn("flan/templates.py `rte`, --instruction_templates flan, with OPTIONS, zero-shot", card)
        self.assertIn("`super_glue/wic`: predicted by ranking the label words, never invalid (--label_scoring "
                      "unset: held-out tasks in FLAN's templates are ranked, as FLAN scores them).", card)
        self.assertIn("label_scoring:\n    glue/rte: generate\n    glue/mrpc: generate\n    super_glue/wic: rank",
                      card)
        self.assertIn("pass --task none with inputs already in a template", card)

    def test_generation_is_one_flag_away_and_exact(self):
        out = Path(self.create_tempdir().full_path) / "generate"
        fine_tune(self.eval_only_flags(out, label_scoring="generate"))
        saved = json.loads((out / "metrics.json").read_text())
        self.assertEqual(saved["evaluation"]["wic"], {"label_scoring": "generate"})
        rows = read_jsonl(out / "predictions_wic_validation.jsonl")
        # exact answers only: a generation that is not one of FLAN's answers byte for byte (case kept) is invalid
        invalid = sum(row["prediction"].strip() not in WIC_ANSWERS for row in rows)
        wic = saved["per_task_metrics"]["wic"]
        self.assertEqual((wic["invalid_count"], wic["invalid_rate"]), (invalid, 100 * invalid / EVAL_ROWS))
        self.assertIn(f"super_glue/wic validation (generated): {invalid} of {EVAL_ROWS} predictions invalid",
                      (out / "out.log").read_text())

    def test_one_shot_ranking_ranks_flans_answers(self):
        out = Path(self.create_tempdir().full_path) / "rank"
        fine_tune(self.eval_only_flags(out, few_shot=1, max_source_length=512))
        rows = read_jsonl(out / "predictions_wic_validation.jsonl")
        self.assertContainsSubset({row["prediction"] for row in rows}, WIC_ANSWERS)
        self.assertTrue(all(row["input"].count(WIC_OPTIONS) == 2 for row in rows))  # the exemplar's and the row's

    def eval_only_flags(self, out, **overrides):
        """The trained model evaluated again on the held-out task alone."""
        return tiny_flags(str(out), **{
            "model_size": None, "tokenizer_name_or_path": None, "model_name_or_path": str(self.run_dir),
            "do_train": False, "dataset_name": None, "tasks": "glue/rte", "eval_tasks": "super_glue/wic",
            "data_dir": [str(require("glue")), str(require("superglue"))], "instruction_templates": "flan",
            "max_eval_samples": EVAL_ROWS, "max_train_samples": 16, "max_source_length": 192, **overrides})


if __name__ == "__main__":
    absltest.main()
