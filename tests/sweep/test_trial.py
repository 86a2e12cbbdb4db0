"""sweep/trial.py: one sweep trial. The command with W&B's macros expanded as `wandb agent` expands them, the base
configs it passes, the trial's environment, new evaluations read from a growing eval_log.jsonl, the program run to
COMPLETE, PRUNED (its process group stopped) or FAIL (its stderr's tail kept), and the final value taken from
metrics.json, its log history or the eval log."""
import json
import os
import sys
import time
from pathlib import Path
from unittest import mock

import yaml
from absl.testing import absltest, parameterized

from t5kit.config import parsing
from t5kit.config.script_flags import FINETUNE_FLAG_CLASSES
from t5kit.sweep import trial as sweep_trial
from tests.helpers import REPO


class AgentArgsTest(parameterized.TestCase):
    """What `wandb agent` passes (--name=value after the base config) parses through parsing.parse_flags."""

    @parameterized.named_parameters(("args", "${args}"), ("no_boolean_flags", "${args_no_boolean_flags}"))
    def test_agent_flags_parse(self, macro):
        values = {"model_name_or_path": "google-t5/t5-small", "learning_rate": 3e-4,
                  "per_device_train_batch_size": 16, "overwrite_output_dir": True,
                  "lr_scheduler_type": "linear", "do_predict": False}
        argv = sweep_trial.expand_command(["${program}", str(REPO / "configs/glue/sst2.yaml"), macro], "p.py",
                                          values, None)[1:]
        (_, data_args, training_args) = parsing.parse_flags(FINETUNE_FLAG_CLASSES, argv)
        self.assertEqual(data_args.dataset_name, "sst2")
        self.assertEqual(training_args.learning_rate, 3e-4)
        self.assertEqual(training_args.per_device_train_batch_size, 16)
        self.assertTrue(training_args.overwrite_output_dir)
        self.assertFalse(training_args.do_predict)

    def test_macros(self):
        json_file = Path(self.create_tempdir().full_path) / "args.json"
        argv = sweep_trial.expand_command(["${env}", "${interpreter}", "${program}", "${args_no_hyphens}",
                                           "${args_json_file}"], "p.py", {"a": 1, "b": None}, json_file)
        self.assertEqual(argv[0], "/usr/bin/env")
        self.assertEqual(argv[2:4], ["p.py", "a=1"])
        self.assertEqual(yaml.safe_load(json_file.read_text()), {"a": 1})

    def test_values_as_the_program_reads_them(self):
        argv = sweep_trial.expand_command(
            ["${program}", "base.yaml", "${args}", "${args_no_boolean_flags}", "${args_json}", "--fixed"], "p.py",
            {"lr": 0.001, "files": ["a.txt", "b.txt"], "packing": True, "bf16": False, "seed": None}, None)
        self.assertEqual(argv, ["p.py", "base.yaml",
                                "--lr=0.001", '--files=["a.txt", "b.txt"]', "--packing=True", "--bf16=False",
                                "--lr=0.001", '--files=["a.txt", "b.txt"]', "--packing",
                                '{"lr": 0.001, "files": ["a.txt", "b.txt"], "packing": true, "bf16": false}',
                                "--fixed"])  # None: the flag left at its default, in every macro

    def test_what_a_wandb_agent_runs_for_a_run(self):
        argv, env = sweep_trial.wandb_agent_command(("${program}", "${args}"), "p.py", {"lr": 0.1}, "agent0-run3")
        self.assertEqual((argv, env), (["p.py", "--lr=0.1"], {"WANDB_RUN_ID": "agent0-run3"}))

    def test_base_configs_are_the_yaml_files_after_the_program(self):
        command = ["${env}", "configs/x.yaml", "${program}", "configs/glue/sst2.yaml", "extra.yml",
                   "--output_dir=runs/${WANDB_RUN_ID}.yaml", "${args}"]
        self.assertEqual(sweep_trial.base_config_files(command), ["configs/glue/sst2.yaml", "extra.yml"])

    def test_the_trial_sees_this_python_first_and_logs_offline_by_sweep(self):
        with mock.patch.dict(os.environ, {"WANDB_MODE": "online"}):
            env = sweep_trial.trial_env("my sweep/v2", 7)
        self.assertEqual(env["PATH"].split(os.pathsep)[0], str(Path(sys.executable).parent))
        self.assertEqual(env["WANDB_MODE"], "online")  # set by the user: kept
        self.assertEqual((env["WANDB_RUN_GROUP"], env["WANDB_NAME"]), ("my sweep/v2", "my sweep/v2-trial-7"))
        self.assertEqual(env["WANDB_RUN_ID"], "my-sweep-v2-trial-7")  # W&B's id characters only
        with mock.patch.dict(os.environ, clear=True):
            env = sweep_trial.trial_env("x" * 80, 12)
        self.assertEqual((env["WANDB_MODE"], len(env["WANDB_RUN_ID"])), ("offline", 64))

    @parameterized.named_parameters(("list", ["a", 1], '["a", 1]'), ("dict", {"k": 1}, '{"k": 1}'),
                                    ("float", 0.5, "0.5"), ("bool", True, "True"), ("text", "x y", "x y"))
    def test_flag_text(self, value, text):
        self.assertEqual(sweep_trial.flag_text(value), text)


class EvalLogTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        self.log = self.dir / "eval_log.jsonl"

    def test_new_values_only_once_and_a_line_being_written_left_for_later(self):
        reader = sweep_trial.EvalLogReader(self.log, "eval_loss")
        self.assertEqual(reader.new_values(), [])  # no log yet
        self.log.write_text('{"step": 2, "eval_loss": 3.5}\n{"step": 4, "eval_accuracy": 0.5}\n{"step": 6, "eval_lo')
        self.assertEqual(reader.new_values(), [3.5])
        with open(self.log, "a") as handle:
            handle.write('ss": 2.5}\n{"step": 8, "eval_loss": "nan?"}\n')
        self.assertEqual(reader.new_values(), [2.5])  # the finished line; a value that is no number is skipped
        self.assertEqual(reader.new_values(), [])
        self.assertEqual(reader.names, {"step", "eval_loss", "eval_accuracy"})

    def test_the_final_value_comes_from_metrics_json_first(self):
        self.log.write_text('{"step": 2, "eval_loss": 3.0}\n')
        reader = sweep_trial.EvalLogReader(self.log, "eval_loss")
        (self.dir / "metrics.json").write_text(json.dumps({"eval_loss": 2.0, "log_history": [{"eval_loss": 2.5}]}))
        self.assertEqual(sweep_trial.final_outcome(self.dir, "eval_loss", reader),
                         sweep_trial.TrialOutcome("complete", value=2.0))
        (self.dir / "metrics.json").write_text(json.dumps({"log_history": [{"eval_loss": 2.7}, {"eval_loss": 2.5},
                                                                           {"loss": 1.0}]}))
        self.assertEqual(sweep_trial.final_outcome(self.dir, "eval_loss", reader).value, 2.5)  # the last logged
        (self.dir / "metrics.json").unlink()
        self.assertEqual(sweep_trial.final_outcome(self.dir, "eval_loss", reader).value, 3.0)  # the eval log's
        self.assertEqual(sweep_trial.read_eval_log(self.dir), [{"step": 2, "eval_loss": 3.0}])

    @parameterized.named_parameters(("missing", {"eval_accuracy": 0.5}), ("not_a_number", {"eval_loss": "low"}),
                                    ("nan", {"eval_loss": float("nan")}), ("boolean", {"eval_loss": True}))
    def test_a_missing_metric_fails_naming_what_was_reported(self, metrics):
        (self.dir / "metrics.json").write_text(json.dumps({**metrics, "step": 4}))
        outcome = sweep_trial.final_outcome(self.dir, "eval_loss", sweep_trial.EvalLogReader(self.log, "eval_loss"))
        self.assertEqual(outcome.state, "fail")
        self.assertEqual(outcome.detail, f"metric 'eval_loss' missing or not a number in {self.dir}/metrics.json")
        self.assertNotIn("step", outcome.reported)
        self.assertEqual(sweep_trial.read_eval_log(self.dir / "absent"), [])


def shell(script):
    """A trial program in sh (no second Python interpreter): writes into $OUT, the trial folder."""
    return ["sh", "-c", script]


class RunTrialTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        self.trial_dir = self.dir / "trial_0000"
        self.trial_dir.mkdir()
        self.env = {**os.environ, "OUT": str(self.trial_dir)}
        self.reported = []
        self.heartbeats = []

    def run_trial(self, script, prune_at=None, heartbeat_interval=60.0):
        def report(value):
            self.reported.append(value)
            return prune_at is not None and value <= prune_at

        return sweep_trial.run_trial(shell(script), self.trial_dir, self.dir / "logs" / "trial_0000", self.env,
                                     "eval_loss", report, lambda: self.heartbeats.append(1), heartbeat_interval)

    def test_a_program_that_finishes_completes_with_its_metric(self):
        outcome = self.run_trial('echo \'{"eval_loss": 3.0}\' >> "$OUT/eval_log.jsonl"; echo hello; '
                                 'echo \'{"eval_loss": 2.0}\' > "$OUT/metrics.json"')
        self.assertEqual(outcome, sweep_trial.TrialOutcome("complete", value=2.0))
        self.assertEqual(self.reported, [3.0])  # written just before exit: still reported
        self.assertEqual((self.dir / "logs" / "trial_0000.stdout.log").read_text(), "hello\n")

    def test_a_program_that_fails_keeps_the_tail_of_its_stderr(self):
        outcome = self.run_trial("echo 'Traceback: it broke' >&2; exit 3")
        self.assertEqual(outcome.state, "fail")
        self.assertEqual(outcome.detail, "exit code 3; stderr: ...Traceback: it broke")

    def test_a_pruned_program_is_stopped_with_its_children(self):
        started = time.monotonic()
        outcome = self.run_trial('echo \'{"eval_loss": 1.0}\' >> "$OUT/eval_log.jsonl"; sleep 30 & wait',
                                 prune_at=1.5)
        self.assertEqual((outcome.state, self.reported), ("pruned", [1.0]))
        self.assertLess(time.monotonic() - started, 20)  # SIGTERM to the group ended the child sleep too

    def test_a_long_trial_beats_its_heartbeat(self):
        self.run_trial('sleep 1.2; echo \'{"eval_loss": 2.0}\' > "$OUT/metrics.json"', heartbeat_interval=0.1)
        self.assertNotEmpty(self.heartbeats)


if __name__ == "__main__":
    absltest.main()
