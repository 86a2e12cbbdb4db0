"""outputs/run_record.py: config.yaml and the W&B config hold the flags as the validated dataclasses have them,
every default filled; its derived section is ignored on reload; reloading it gives the same record."""
import sys
from types import SimpleNamespace
from unittest import mock

import yaml
from absl.testing import absltest, parameterized

from t5kit.config import parsing
from t5kit.config.script_flags import FINETUNE_FLAG_CLASSES, PRETRAIN_FLAG_CLASSES
from t5kit.outputs import run_record
from t5kit.train.callbacks import WandbConfigCallback
from tests.helpers import require, tiny_flags, tiny_run_flags


class RunRecordTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.create_tempdir().full_path

    def pretrain_argv(self, **overrides):
        return tiny_run_flags(f"{self.dir}/out", str(require("gutenberg/austen-persuasion.txt")), **overrides)

    def test_values_are_those_the_run_uses_not_the_command_line(self):
        record = run_record.flag_values(parsing.parse_flags(PRETRAIN_FLAG_CLASSES, self.pretrain_argv(
            report_to="tensorboard,wandb")))
        self.assertIs(record["bf16"], False)  # unset on the command line: filled for this machine
        self.assertEqual(record["report_to"], ["tensorboard", "wandb"])
        self.assertEqual(record["accelerator_config"]["non_blocking"], True)
        self.assertEqual(record["lr_scheduler_type"], "linear")  # an enum, recorded as its value
        self.assertNotIn("local_rank", record)
        self.assertNotIn("hub_token", record)

    def test_the_fine_tuning_record_holds_the_metric_chosen_from_the_task(self):
        from t5kit.data import task_splits
        from t5kit.train import best_model_metric

        flags = parsing.parse_flags(FINETUNE_FLAG_CLASSES, tiny_flags(f"{self.dir}/ft"))
        plans = task_splits.plan_splits(task_splits.resolve_tasks(flags[1].task_selection()), flags[1].task_data(),
                                        flags[2].do_train, flags[2].do_eval, flags[2].do_predict)
        best_model_metric.choose_best_model_metric(flags[2], plans)
        record = run_record.flag_values(flags)
        self.assertEqual((record["metric_for_best_model"], record["greater_is_better"]), ("accuracy", True))

    @parameterized.named_parameters(
        ("defaults", {}),
        ("schedule_and_groups", {"lr_scheduler_type": "cosine", "warmup_steps": 3,
                                 "param_group_lr": ["lm_head=1e-3", ".*=1e-4"], "optim": "adafactor"}),
        ("trackers_and_loader", {"report_to": "tensorboard", "accelerator_config": '{"non_blocking": false}',
                                 "dataloader_pin_memory": "false", "gradient_accumulation_steps": 2}),
    )
    def test_reloading_the_record_gives_the_same_record(self, overrides):
        record = run_record.flag_values(parsing.parse_flags(PRETRAIN_FLAG_CLASSES, self.pretrain_argv(**overrides)))
        derived = {"global_batch_size": 8, "versions": {"torch": "x"}}
        path = run_record.write_run_record(self.dir, {**record, parsing.DERIVED_KEY: derived})
        self.assertEqual(yaml.safe_load(path.read_text())[parsing.DERIVED_KEY], derived)
        again = run_record.flag_values(parsing.parse_flags(PRETRAIN_FLAG_CLASSES, [str(path)]))
        self.assertEqual(again, record)

    def test_derived_values(self):
        args = SimpleNamespace(per_device_train_batch_size=4, gradient_accumulation_steps=3, world_size=2,
                               bf16=True, fp16=False)
        derived = run_record.derived_values(args, 178, 1000, 0.1, tokens_length=568, input_length=512,
                                            target_length=114)
        self.assertEqual((derived["global_batch_size"], derived["tokens_per_optimizer_step"], derived["precision"],
                          derived["tokens_length"], derived["parameters"], derived["dropout_rate"]),
                         (24, 24 * 178, "bf16", 568, 1000, 0.1))
        self.assertEqual(set(derived["versions"]), {"python", *run_record.VERSIONED_PACKAGES})

    def test_the_wandb_config_receives_the_record(self):
        record = {"learning_rate": 0.1, parsing.DERIVED_KEY: {"global_batch_size": 8}}
        run = SimpleNamespace(config=mock.Mock())
        with mock.patch.dict(sys.modules, {"wandb": SimpleNamespace(run=run)}):
            WandbConfigCallback(record).on_train_begin(None, SimpleNamespace(is_world_process_zero=True), None)
        run.config.update.assert_called_once_with(record, allow_val_change=True)

    def test_output_dir_expands_environment_variables(self):
        with mock.patch.dict("os.environ", {"WANDB_RUN_ID": "r42"}):
            flags = parsing.parse_flags(PRETRAIN_FLAG_CLASSES, self.pretrain_argv() + [
                "--output_dir", f"{self.dir}/sweep/${{WANDB_RUN_ID}}"])
        self.assertEqual(flags[-1].output_dir, f"{self.dir}/sweep/r42")
        self.assertEqual(run_record.flag_values(flags)["output_dir"], f"{self.dir}/sweep/r42")


if __name__ == "__main__":
    absltest.main()
