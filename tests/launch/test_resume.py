"""Exact resume under SIGKILL: one tiny pre-training run is killed at five different moments (mid-save, after the
manifest but before the rename, right after a commit, mid-step, while loading a checkpoint), each time resumed
with --resume_from_checkpoint auto, and must end with weights bit-identical to the same run left alone."""
import json
import os

import pytest
from absl.testing import absltest
from safetensors.torch import load_file

from t5kit.outputs import run_folder
from t5kit.train import checkpointing
from tests.forked import run_forked
from tests.helpers import TinyRunTestCase, tiny_flags, tiny_run_flags

pytestmark = pytest.mark.kill  # SIGKILLs a real run five times and resumes it

MAX_STEPS = 12

# Each run is pre_train_t5.py (or fine_tune_t5.py) in a process of its own, forked from an interpreter that has
# imported them (tests/forked.py), plus one test-only hook that SIGKILLs the process at the moment named
# by where:step. SIGKILL cannot be caught, so nothing gets to clean up.
def kill_at(where, step):
    """Runs in the forked process before the script: wraps the function of the kill point `where` so that the
    process SIGKILLs itself right after it returns at `step`."""
    import signal

    import transformers

    from t5kit.train import nonfinite_guard

    def is_checkpoint(path):
        return os.path.basename(str(path).rstrip("/")) == f"checkpoint-{step}"

    hooks = {
        "mid_save": (transformers.Trainer, "_save_rng_state", lambda trainer, *_: trainer.state.global_step == step),
        "before_rename": (checkpointing, "write_manifest", lambda folder: is_checkpoint(folder)),
        "after_commit": (checkpointing, "commit", lambda staged, target: is_checkpoint(target)),
        "mid_step": (nonfinite_guard.NonFiniteGuardMixin, "training_step",
                     lambda trainer, *_: trainer.state.global_step + 1 == step),
        "loading": (transformers.Trainer, "_load_optimizer_and_scheduler", lambda trainer, path: is_checkpoint(path)),
    }
    owner, name, when = hooks[where]
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        if when(*args):
            os.kill(os.getpid(), signal.SIGKILL)
        return result
    setattr(owner, name, wrapper)


# (kill point, step) in order; each run resumes from what the previous one left.
KILLS = [("mid_save", 2), ("mid_step", 5), ("loading", 4), ("before_rename", 6), ("after_commit", 8)]


def run_child(argv, kill_at_point="", entry="pre_train_t5"):
    where, _, step = kill_at_point.partition(":")
    return run_forked(entry, argv, setup=(kill_at, where, int(step)) if where else None)


class ResumeAfterKillTest(TinyRunTestCase):

    def flags(self, out, **extra):
        return tiny_run_flags(str(out), self.corpus, **{**dict(max_steps=MAX_STEPS, save_strategy="steps",
                                                               save_steps=2, save_total_limit=2, logging_steps=1),
                                                        **extra})

    def test_killed_five_times_ends_bit_identical(self):
        plain = self.dir / "plain"
        result = run_child(self.flags(plain))
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])

        killed = self.dir / "killed"
        expected_resume = [None, None, "checkpoint-4", "checkpoint-4", "checkpoint-4"]
        for (where, step), resume in zip(KILLS, expected_resume):
            result = run_child(self.flags(killed, resume_from_checkpoint="auto"), kill_at_point=f"{where}:{step}")
            self.assertEqual(result.returncode, -9, f"{where}:{step} was not killed\n{result.stderr[-3000:]}")
            self.assert_resumed_from(result, resume, where)
        # The kill right after committing checkpoint-8 left it valid: the last run resumes there and finishes.
        self.assertIsNone(checkpointing.find_problem(killed / "checkpoint-8"))
        result = run_child(self.flags(killed, resume_from_checkpoint="auto"))
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assert_resumed_from(result, "checkpoint-8", "final")

        expected, got = load_file(plain / "model.safetensors"), load_file(killed / "model.safetensors")
        self.assertEqual(sorted(got), sorted(expected))
        for name, tensor in expected.items():
            self.assertTrue(got[name].equal(tensor), f"{name} differs after resuming")
        # Rotation (--save_total_limit 2) kept the newest and the one this run resumed from; nothing half-written
        # remains as checkpoint-N.
        names = [p.name for p in run_folder.list_checkpoints(killed)]
        self.assertEqual(names, ["checkpoint-8", "checkpoint-12"])  # 8: resumed from, kept
        self.assertEqual([n for n in names if checkpointing.find_problem(killed / n)], [])

    def test_fine_tuning_killed_mid_step_ends_bit_identical(self):
        """Fine-tuning (length-bucketed batches drawn from seed + epoch): killed during step 5, resumed from
        checkpoint-4, same step-6 weights as the run left alone (the last weights, not the best checkpoint's,
        which could predate the kill)."""
        def fine_tune_flags(out, **extra):
            return tiny_flags(str(out), max_steps=6, save_steps=2, eval_steps=2, save_total_limit=2,
                              load_best_model_at_end=False, max_train_samples=64, **extra)

        plain = self.dir / "ft_plain"
        result = run_child(fine_tune_flags(plain), entry="fine_tune_t5")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        killed = self.dir / "ft_killed"
        result = run_child(fine_tune_flags(killed), kill_at_point="mid_step:5", entry="fine_tune_t5")
        self.assertEqual(result.returncode, -9, result.stderr[-3000:])
        result = run_child(fine_tune_flags(killed, resume_from_checkpoint="auto"), entry="fine_tune_t5")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assert_resumed_from(result, "checkpoint-4", "fine-tuning")
        expected, got = load_file(plain / "model.safetensors"), load_file(killed / "model.safetensors")
        for name, tensor in expected.items():
            self.assertTrue(got[name].equal(tensor), f"{name} differs after resuming")

    def test_packed_ul2_killed_mid_step_ends_bit_identical(self):
        """--packing true (UL2 windows packed into rows keyed by seed and epoch): SIGKILLed during step 5, resumed
        from checkpoint-4, the step-8 weights of the run left alone; 5 paragraphs make epochs of a few batches, so
        the run crosses epochs (the packed sampler's epoch and skip are restored, not only the weights)."""
        def packed_flags(out, **extra):
            return self.flags(out, objective="ul2", packing=True, max_train_samples=5, lr_scheduler_type="constant",
                              **extra)

        plain = self.dir / "packed_plain"
        result = run_child(packed_flags(plain))
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        killed = self.dir / "packed_killed"
        result = run_child(packed_flags(killed), kill_at_point="mid_step:5")
        self.assertEqual(result.returncode, -9, result.stderr[-3000:])
        result = run_child(packed_flags(killed, resume_from_checkpoint="auto"))
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assert_resumed_from(result, "checkpoint-4", "packed")
        history = json.loads((plain / "metrics.json").read_text())["log_history"]
        self.assertGreater(min(entry["examples_per_step"] for entry in history if "loss" in entry), 4)
        expected, got = load_file(plain / "model.safetensors"), load_file(killed / "model.safetensors")
        for name, tensor in expected.items():
            self.assertTrue(got[name].equal(tensor), f"{name} differs after resuming")

    def test_streaming_killed_in_two_epochs_ends_bit_identical(self):
        """--streaming: 20 documents make 37 windows, 4 held out for evaluation, so an epoch is 33 windows (8 full
        batches of 4 and one of 1). Killed during step 5 (resumes at window 16 of epoch 0) and during step 12
        (checkpoint-10: epoch 0's 33 windows and 4 of epoch 1 trained on, resumes at window 37 of epoch 1)."""
        def stream_flags(out, **extra):
            return self.flags(out, streaming=True, max_train_samples=20, max_eval_samples=4, max_steps=14,
                              **extra)

        plain = self.dir / "stream_plain"
        result = run_child(stream_flags(plain))
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        killed = self.dir / "stream_killed"
        runs = (("mid_step:5", None), ("mid_step:12", "window 16 (epoch 0)"), ("", "window 37 (epoch 1)"))
        for point, resume in runs:
            result = run_child(stream_flags(killed, resume_from_checkpoint="auto"), kill_at_point=point)
            self.assertEqual(result.returncode, -9 if point else 0, result.stderr[-3000:])
            if resume:
                self.assertIn(f"stream resumes at {resume}", result.stdout + result.stderr)
        expected, got = load_file(plain / "model.safetensors"), load_file(killed / "model.safetensors")
        for name, tensor in expected.items():
            self.assertTrue(got[name].equal(tensor), f"{name} differs after resuming")

    def assert_resumed_from(self, result, checkpoint, where):
        log = result.stdout + result.stderr
        if checkpoint is None:
            self.assertIn("no valid checkpoint yet, starting from scratch", log, where)
        else:
            self.assertRegex(log, rf"--resume_from_checkpoint auto: \S*{checkpoint}\b", where)


if __name__ == "__main__":
    absltest.main()
