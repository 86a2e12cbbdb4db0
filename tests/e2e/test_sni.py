"""fine_tune_t5.py --benchmark sni end to end: a tiny random T5 trains on the fixture's two training tasks and is
evaluated on its two held-out test tasks (tests/fixtures/natural_instructions), then its predictions are scored
again by each --sni_metric; nanoT5's config parses and passes the flag checks."""
import json
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from absl.testing import absltest, parameterized
from rouge_score import rouge_scorer

from t5kit.config import parsing
from t5kit.config.script_flags import FINETUNE_FLAG_CLASSES
from t5kit.data import sni, task_splits
from t5kit.model import building
from t5kit.outputs import finetuning_card
from t5kit.train import best_model_metric
from tests.helpers import REPO, fine_tune, tiny_flags

FIXTURE = REPO / "tests" / "fixtures" / "natural_instructions"
TEST_TASKS = ("task1159_bard_analogical_reasoning_containers", "task1388_cb_entailment")
TRAIN_TASKS = ("task1146_country_capital", "task1331_reverse_array")


@pytest.mark.train_class  # one SNI fine-tune shared by the tests
class SNIEndToEndTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = Path(tempfile.mkdtemp())
        cls.run_dir = cls.tmp / "sni"
        fine_tune(tiny_flags(str(cls.run_dir), benchmark="sni", dataset_name=None, data_dir=[str(FIXTURE)],
                             max_source_length=192, max_target_length=12, max_train_samples=None,
                             max_eval_samples=None))
        cls.metrics = json.loads((cls.run_dir / "metrics.json").read_text())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def test_metrics_per_task_per_category_and_overall(self):
        sni = self.metrics["per_task_metrics"]["sni"]
        groups = ["word_analogy", "textual_entailment", *TEST_TASKS]
        expected = {"exact_match", "rougeL", *[f"{m}_for_{g}" for g in groups for m in ("exact_match", "rougeL")]}
        self.assertContainsSubset(expected, sni)
        for name in expected:
            self.assertBetween(sni[name], 0.0, 100.0)
        self.assertEqual(self.metrics["metric_for_best_model"], "rougeL")
        self.assertEqual(self.metrics["data"]["sni/train"]["tasks"], list(TRAIN_TASKS))
        self.assertEqual(self.metrics["data"]["sni/test"]["tasks"], list(TEST_TASKS))
        self.assertEqual(self.metrics["data"]["sni/test"]["used"], 11)  # every fixture test instance

    def test_predictions_hold_the_instruction_input_and_every_reference(self):
        rows = [json.loads(line) for line in (self.run_dir / "predictions_sni_test.jsonl").read_text().splitlines()]
        self.assertLen(rows, 11)
        by_id = {row["id"]: row for row in rows}
        milk = by_id["task1159-36faa2a14fe84bc598aad0ad66e68f0a"]
        self.assertEqual((milk["task"], milk["references"]), (TEST_TASKS[0], ["jug", "bottle"]))
        self.assertIn(milk["target"], milk["references"])
        # Every input starts with its task's definition (--sni_add_task_definition true) and ends with the instance.
        for row in rows:
            self.assertTrue(row["input"].startswith("Definition: "), row["input"][:40])
        self.assertTrue(milk["input"].endswith("Now complete the following example -\nInput: plates : cupboard. "
                                               "milk : ?\nOutput: "))

    def test_model_card_names_the_benchmark_and_its_tasks(self):
        card = (self.run_dir / "README.md").read_text()
        self.assertIn("Super-NaturalInstructions in the Tk-Instruct format", card)
        self.assertIn("Predictions are generated and scored by the official evaluation (natural-instructions "
                      "eval/automatic/evaluation.py, `--sni_metric official`)", card)
        for name in (*TRAIN_TASKS, *TEST_TASKS):
            self.assertIn(f"`{name}`", card)

    def test_run_record_reproduces_the_benchmark(self):
        record = yaml.safe_load((self.run_dir / "config.yaml").read_text())
        self.assertEqual((record["benchmark"], record["dataset_name"], record["sni_num_pos_examples"]),
                         ("sni", "sni", 2))
        evaluation = {"sni": {"label_scoring": "generate", "sni_metric": "official"}}
        self.assertEqual((record["sni_metric"], record["derived"]["evaluation"]), ("official", evaluation))
        self.assertEqual(self.metrics["evaluation"], evaluation)

    def score_again(self, metric):
        """The trained model's test predictions, scored by --sni_metric `metric` in an evaluation-only run."""
        out = Path(self.create_tempdir().full_path) / metric
        fine_tune(tiny_flags(str(out), benchmark="sni", dataset_name=None, data_dir=[str(FIXTURE)], do_train=False,
                             model_size=None, tokenizer_name_or_path=None, model_name_or_path=str(self.run_dir),
                             max_source_length=192, max_target_length=12, max_eval_samples=None,
                             sni_metric=metric))
        rows = [json.loads(line) for line in (out / "predictions_sni_test.jsonl").read_text().splitlines()]
        return out, json.loads((out / "metrics.json").read_text()), rows

    def test_each_metric_scores_the_same_predictions_and_is_named(self):
        official_dir, official, official_rows = self.score_again("official")
        nanot5_dir, nanot5, rows = self.score_again("nanot5")
        self.assertEqual([row["prediction"] for row in rows], [row["prediction"] for row in official_rows])
        self.assertEqual(nanot5["evaluation"], {"sni": {"label_scoring": "generate", "sni_metric": "nanot5"}})
        self.assertEqual(official["evaluation"]["sni"]["sni_metric"], "official")
        scores = nanot5["per_task_metrics"]["sni"]
        self.assertNotIn("exact_match", scores)  # nanoT5 reports Rouge-L alone
        self.assertEqual(nanot5["metric_for_best_model"], "rougeL")
        # nanoT5's figure from the predictions file: each prediction cleaned up as nanoT5 decodes it, against the
        # drawn output (the row's target) cut to --max_target_length 12 and decoded; Rouge-L with the Porter stemmer
        scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
        tokenizer = building.load_tokenizer(str(self.run_dir))
        for row in rows:
            self.assertEqual(row["nanot5_reference"], sni.nanot5_reference(tokenizer, row["target"], 12))
        expected = [scorer.score(row["nanot5_reference"], sni.nanot5_text(row["prediction"]))["rougeL"].fmeasure
                    for row in rows]
        self.assertAlmostEqual(scores["rougeL"], 100 * sum(expected) / len(expected), places=9)
        # the card of a trained run names the metric from metrics.json (an evaluation-only run writes no card)
        self.assertIn("scored as nanoT5 reports it (`--sni_metric nanot5`, the metric of nanoT5's published "
                      "figures)", finetuning_card.sni_scoring(nanot5))
        self.assertIn(f"sni test (generated): {scores['invalid_count']} of 11 predictions invalid",
                      (nanot5_dir / "out.log").read_text())
        self.assertFalse((official_dir / "README.md").is_file())  # evaluation-only: no model, no card


class NanoT5ConfigTest(absltest.TestCase):

    def test_nanot5_config_parses_and_passes_the_flag_checks(self):
        """configs/sni/ft_nanot5.yaml as nanoT5's ft.yaml sets it (a hub model that cannot be downloaded here: only
        the flags and the checkout are checked)."""
        flags = parsing.parse_flags(FINETUNE_FLAG_CLASSES, [str(REPO / "configs/sni/ft_nanot5.yaml"),
                                                            "--data_dir", str(FIXTURE)])
        model_args, data_args, training_args = flags
        tasks = task_splits.resolve_tasks(data_args.task_selection())
        plans = task_splits.plan_splits(tasks, data_args.task_data(), training_args.do_train, training_args.do_eval,
                                        training_args.do_predict)
        self.assertEqual([(plan.role, plan.split) for plan in plans], [("train", "train"), ("eval", "test")])
        self.assertEqual(best_model_metric.choose_best_model_metric(training_args, plans), "rougeL")
        self.assertEqual(model_args.model_name_or_path, "google/t5-v1_1-base")
        # scored as nanoT5 scores, every task of the split files read as nanoT5 reads them
        self.assertEqual((data_args.sni_metric, data_args.sni_english_only), ("nanot5", False))
        self.assertEqual((data_args.max_source_length, data_args.max_target_length, data_args.sni_num_pos_examples,
                          data_args.sni_max_num_instances_per_task), (1024, 128, 2, 100))
        self.assertEqual((training_args.learning_rate, training_args.per_device_train_batch_size,
                          training_args.num_train_epochs, training_args.lr_scheduler_type.value,
                          training_args.optim.value, training_args.max_grad_norm, training_args.seed),
                         (5e-5, 8, 2, "constant", "adamw_torch", 0.0, 2137))


if __name__ == "__main__":
    absltest.main()
