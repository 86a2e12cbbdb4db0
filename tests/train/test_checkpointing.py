"""train/checkpointing.py, checkpointing.py, nonfinite_guard.py: broken checkpoints are skipped or refused,
rotation keeps the best and the resumed-from checkpoint, NaN losses stop or are skipped. (SIGTERM/SIGUSR1 and the
requeue script: tests/launch/test_preemption.py.)"""
import json
import logging
import math
import shutil
import types
from pathlib import Path

import pytest
import torch
from absl.testing import absltest, parameterized
from safetensors.torch import load_file

from t5kit.errors import UsageError
from t5kit.outputs import run_folder
from t5kit.train import checkpointing, nonfinite_guard
from tests.helpers import OneThreadTestCase, inf_gradient_at, nan_loss_at, pre_train, snapshot, tiny_run_flags


@pytest.mark.train_class  # pre-trains the checkpoints it breaks
class BrokenCheckpointTest(OneThreadTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.template = Path(absltest.get_default_test_tmpdir()) / "checkpointing_template"
        shutil.rmtree(cls.template, ignore_errors=True)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:  # one real run with checkpoint-2 and checkpoint-4, copied by each test
            pre_train(tiny_run_flags(str(cls.template), cls.corpus, max_steps=4, save_strategy="steps",
                                             save_steps=2))
        finally:
            torch.set_num_threads(threads)

    def setUp(self):
        super().setUp()
        self.out = self.dir / "run"
        shutil.copytree(self.template, self.out)

    def test_complete_checkpoints_have_a_manifest_and_nothing_is_left_staged(self):
        self.assertEqual([p.name for p in run_folder.list_checkpoints(self.out)],
                         ["checkpoint-2", "checkpoint-4"])
        for folder in run_folder.list_checkpoints(self.out):
            self.assertIsNone(checkpointing.find_problem(folder))
            self.assertTrue((folder / "model.safetensors").is_file())
            self.assertEmpty(list(folder.glob("pytorch_model*.bin")))  # weights as safetensors only
        self.assertFalse((self.out / checkpointing.STAGING_DIR).exists())

    @parameterized.named_parameters(
        ("flipped_byte", "model.safetensors", "flip", "model.safetensors does not match its sha256"),
        ("truncated", "optimizer.pt", "truncate", "optimizer.pt has .* bytes, the manifest says"),
        ("missing_file", "scheduler.pt", "delete", "scheduler.pt is missing"),
        ("missing_manifest", "manifest.json", "delete", "no manifest.json"),
    )
    def test_auto_skips_a_broken_latest_checkpoint_with_a_warning(self, name, damage, reason):
        damage_file(self.out / "checkpoint-4" / name, damage)
        with self.assertLogs(checkpointing.logger, logging.WARNING) as logs:
            chosen = checkpointing.resolve_checkpoint(str(self.out), "auto")
        self.assertEqual(Path(chosen).name, "checkpoint-2")
        self.assertRegex(logs.output[0], f"skipping checkpoint {self.out / 'checkpoint-4'}: {reason}")

    def test_an_explicit_broken_path_is_refused_and_nothing_is_written(self):
        damage_file(self.out / "checkpoint-4" / "model.safetensors", "flip")
        before = snapshot(self.out)
        with self.assertRaisesRegex(UsageError, "checkpoint-4 is not a complete checkpoint: model.safetensors"):
            pre_train(self.run_flags(self.out, resume_from_checkpoint=str(self.out / "checkpoint-4")))
        self.assertEqual(snapshot(self.out), before)

    def test_rotation_keeps_the_new_best_and_resumed_from_checkpoints(self):
        for step in (2, 4, 6, 8, 10):
            (self.dir / f"checkpoint-{step}").mkdir()
        best, resumed = str(self.dir / "checkpoint-4"), str(self.dir / "checkpoint-6")
        trainer = types.SimpleNamespace(args=types.SimpleNamespace(save_total_limit=2), resumed_from=resumed,
                                        state=types.SimpleNamespace(best_model_checkpoint=best))
        checkpointing.SafeCheckpointMixin.rotate(trainer, self.dir, self.dir / "checkpoint-10")
        self.assertEqual([p.name for p in run_folder.list_checkpoints(self.dir)],
                         ["checkpoint-4", "checkpoint-6", "checkpoint-10"])


FAULTS = (  # (name, fault, what the stop message calls it)
    ("nan_loss", nan_loss_at, r"loss \(nan\)"),
    ("inf_gradient_finite_loss", inf_gradient_at, r"gradient norm \((inf|nan)\) with a finite loss"),
)


# (name, --optim, when `stop` stops). The default fused AdamW skips a bad update on the device (found_inf).
# Adafactor has its gradients dropped under `skip`; under `stop` its update reaches the weights in memory (the
# verdict is read a step later), never a checkpoint.
OPTIMIZERS = (("fused_adamw", "adamw_torch_fused", "before applying it"),
              ("adafactor", "adafactor", "before saving it"))
FAULTS_AND_OPTIMIZERS = tuple((f"{fault}_{opt_name}", fault_at_call, what, optim, stopped)
                              for fault, fault_at_call, what in FAULTS for opt_name, optim, stopped in OPTIMIZERS)


@pytest.mark.slow  # a pre-training run per case
class NonFiniteLossTest(OneThreadTestCase):

    @parameterized.named_parameters(*FAULTS_AND_OPTIMIZERS)
    def test_stop_names_the_step_and_keeps_the_last_good_checkpoint(self, fault_at_call, what, optim, stopped):
        out = self.dir / "run"
        with fault_at_call(3), self.assertRaisesRegex(
                nonfinite_guard.NonFiniteLossError,
                rf"non-finite {what} at step 3; training stopped {stopped}, the last good checkpoint is "
                rf"{out / 'checkpoint-2'}"):
            pre_train(self.run_flags(out, max_steps=6, optim=optim))
        self.assertEqual([p.name for p in run_folder.list_checkpoints(out)], ["checkpoint-2"])
        self.assertIsNone(checkpointing.find_problem(out / "checkpoint-2"))
        self.assertFalse((out / "model.safetensors").exists())

    @parameterized.named_parameters(*((f"{name}_{where}", optim, stopped, step, flags, last)
                                      for name, optim, stopped in OPTIMIZERS for where, step, flags, last in (
                                          ("at_a_save", 4, {"max_steps": 6}, "checkpoint-2"),
                                          ("at_the_end", 3, {"max_steps": 3, "save_strategy": "no",
                                                             "logging_steps": 100}, None))))
    def test_stop_reads_the_verdict_before_a_save_or_the_end(self, optim, stopped, step, flags, last):
        """A bad step that saves (or ends training) is stopped right there, although its verdict is read late."""
        out = self.dir / "run"
        resume = f"the last good checkpoint is {out / last}" if last else "no checkpoint was saved yet"
        with nan_loss_at(step), self.assertRaisesRegex(
                nonfinite_guard.NonFiniteLossError,
                rf"non-finite loss \(nan\) at step {step}; training stopped {stopped}, {resume}\."):
            pre_train(self.run_flags(out, optim=optim, **flags))
        self.assertEqual([p.name for p in run_folder.list_checkpoints(out)], [last] if last else [])
        self.assertFalse((out / "model.safetensors").exists())

    @parameterized.named_parameters(*FAULTS_AND_OPTIMIZERS)
    def test_skip_leaves_the_weights_untouched_and_counts_the_skip(self, fault_at_call, _, optim, __):
        out = self.dir / "run"
        with fault_at_call(3):
            pre_train(self.run_flags(out, save_steps=1, nan_policy="skip", optim=optim))
        step2, step3, step4 = (load_file(out / f"checkpoint-{n}" / "model.safetensors") for n in (2, 3, 4))
        for name, tensor in step2.items():
            self.assertTrue(step3[name].equal(tensor), f"{name} changed in the skipped step")
        self.assertFalse(all(step4[name].equal(tensor) for name, tensor in step2.items()))
        moments2, moments3 = (optimizer_state_tensors(out / f"checkpoint-{n}") for n in (2, 3))
        self.assertNotEmpty(moments2)
        self.assertTrue(all(moments3[key].equal(value) for key, value in moments2.items()), "optimizer state moved")
        logs = load_log_history(out)
        self.assertEqual([entry["skipped_nonfinite_steps"] for entry in logs], [0, 0, 1, 1])
        self.assertTrue(all(torch.isfinite(t).all() for t in step4.values()))

    def test_skip_logs_the_mean_of_the_finite_losses_in_place_of_a_nan(self):
        """Step 3's second micro-batch is NaN: its log line shows the first micro-batch's loss, not nan."""
        out = self.dir / "run"
        with nan_loss_at(6):
            pre_train(self.run_flags(out, nan_policy="skip", gradient_accumulation_steps=2))
        logs = load_log_history(out)
        self.assertEqual([entry["skipped_nonfinite_steps"] for entry in logs], [0, 0, 1, 1])
        self.assertTrue(all(math.isfinite(entry["loss"]) for entry in logs), logs)

    def test_an_unknown_policy_is_refused(self):
        with self.assertRaisesRegex(UsageError, "--nan_policy='ignore' is not a valid choice; choices: stop, skip"):
            pre_train(self.run_flags(self.dir / "run", nan_policy="ignore"))


def optimizer_state_tensors(checkpoint):
    state = torch.load(checkpoint / "optimizer.pt", weights_only=True)["state"]
    return {(param, key): value for param, values in state.items() for key, value in values.items()
            if isinstance(value, torch.Tensor)}


def load_log_history(out):
    history = json.loads((out / "metrics.json").read_text())["log_history"]
    return [entry for entry in history if "loss" in entry]


def damage_file(path, how):
    if how == "delete":
        path.unlink()
    elif how == "truncate":
        path.write_bytes(path.read_bytes()[:-100])
    else:  # flip one byte in the middle: same size, different hash
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))


if __name__ == "__main__":
    absltest.main()
