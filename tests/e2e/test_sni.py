"""fine_tune_t5.py --benchmark sni end to end: a tiny random T5 trains on the fixture's two training tasks and is
evaluated on its two held-out test tasks (tests/fixtures/natural_instructions); nanoT5's config parses and passes
the flag checks."""
import json
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from absl.testing import absltest, parameterized

from t5kit.config import parsing
from t5kit.config.script_flags import FINETUNE_FLAG_CLASSES
from t5kit.data import task_splits
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
        self.assertIn("scored against every output of their instance", card)
        for name in (*TRAIN_TASKS, *TEST_TASKS):
            self.assertIn(f"`{name}`", card)

    def test_run_record_reproduces_the_benchmark(self):
        record = yaml.safe_load((self.run_dir / "config.yaml").read_text())
        self.assertEqual((record["benchmark"], record["dataset_name"], record["sni_num_pos_examples"]),
                         ("sni", "sni", 2))


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
        self.assertEqual((data_args.max_source_length, data_args.max_target_length, data_args.sni_num_pos_examples,
                          data_args.sni_max_num_instances_per_task), (1024, 128, 2, 100))
        self.assertEqual((training_args.learning_rate, training_args.per_device_train_batch_size,
                          training_args.num_train_epochs, training_args.lr_scheduler_type.value,
                          training_args.optim.value, training_args.max_grad_norm, training_args.seed),
                         (5e-5, 8, 2, "constant", "adamw_torch", 0.0, 2137))


if __name__ == "__main__":
    absltest.main()
