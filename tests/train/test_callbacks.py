"""train/callbacks.py: eval_log.jsonl belongs to the run that writes it; tokens/s on training log lines."""
import json
from pathlib import Path
from types import SimpleNamespace

from absl.testing import absltest, parameterized

from t5kit.outputs.run_folder import EVAL_LOG_FILE
from t5kit.train.callbacks import EvalLogCallback, ThroughputCallback


def state(step, rank_zero=True, log_history=None):
    return SimpleNamespace(global_step=step, is_world_process_zero=rank_zero, log_history=log_history or [])


class EvalLogTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.out = Path(self.create_tempdir().full_path)
        self.args = SimpleNamespace(output_dir=str(self.out))
        self.path = self.out / EVAL_LOG_FILE

    def lines(self):
        return [json.loads(line) for line in self.path.read_text().splitlines()]

    def write_earlier_run(self):
        callback = EvalLogCallback()
        for step in (2, 4, 6):
            callback.on_log(self.args, state(step), None, logs={"eval_loss": step / 10, "loss": 1.0})
        self.path.write_text(self.path.read_text() + '{"step": 8, "eval_lo')  # a line cut by a kill

    @parameterized.named_parameters(("fresh_start", 0, []), ("resumed_at_4", 4, [2, 4]))
    def test_a_run_keeps_only_its_own_lines(self, resumed_step, kept_steps):
        self.write_earlier_run()
        callback = EvalLogCallback()
        callback.on_train_begin(self.args, state(resumed_step), None)
        self.assertEqual([line["step"] for line in self.lines()], kept_steps)
        callback.on_log(self.args, state(resumed_step + 2), None, logs={"eval_loss": 0.5})
        self.assertEqual(self.lines()[-1], {"step": resumed_step + 2, "eval_loss": 0.5})

    def test_only_rank_zero_writes_and_training_logs_are_not_evaluations(self):
        callback = EvalLogCallback()
        callback.on_log(self.args, state(2, rank_zero=False), None, logs={"eval_loss": 0.1})
        callback.on_log(self.args, state(2), None, logs={"loss": 0.1})
        self.assertFalse(self.path.exists())


class ThroughputTest(absltest.TestCase):

    def test_tokens_per_second_is_added_to_training_logs(self):
        callback = ThroughputCallback(tokens_per_step=1000)
        history = [{"step": 10, "loss": 1.0}]
        callback.on_step_begin(None, state(0), None)
        callback.last_time -= 2.0  # two seconds for ten steps
        logs = {"loss": 1.0}
        callback.on_log(None, state(10, log_history=history), None, logs=logs)
        self.assertAlmostEqual(logs["tokens_per_second"], 5000.0, delta=50.0)
        self.assertEqual(history[-1]["tokens_per_second"], logs["tokens_per_second"])


if __name__ == "__main__":
    absltest.main()
