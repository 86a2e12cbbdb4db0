"""train/nonfinite_guard.py, --nan_policy: a NaN/inf loss or gradient norm stops the run naming the step and the last
good checkpoint (stop), or drops the whole optimizer step and counts it (skip). On a trainer stand-in: the verdict
taken on the device and read a step later, what it says, the count a resumed run continues, the logged loss and
count under skip; on real tiny pre-training runs: the weights, optimizer state, checkpoints and log lines."""
import json
import logging
import math
from types import SimpleNamespace

import pytest
import torch
from absl.testing import absltest, parameterized
from safetensors.torch import load_file

from t5kit.errors import UsageError
from t5kit.outputs import run_folder
from t5kit.train import checkpointing, nonfinite_guard
from t5kit.train.deferred_read import DeferredRead
from t5kit.train.nonfinite_guard import NonFiniteGuardMixin, NonFiniteLossError
from tests.helpers import OneThreadTestCase, inf_gradient_at, nan_loss_at, pre_train

NAN, INF = float("nan"), float("inf")


class TrainerStandIn:
    """What the guard calls on Trainer: its arguments at construction, a training step giving the loss it is told,
    and the log call."""

    def __init__(self, args, resume_point=None, deepspeed=False):
        self.args, self.resume_point, self.is_deepspeed_enabled = args, resume_point, deepspeed
        self.accelerator = SimpleNamespace(num_processes=1)
        self.state = SimpleNamespace(global_step=0)
        self.optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
        self.next_loss, self.logged = None, []

    def training_step(self, model, inputs, num_items_in_batch=None):
        return self.next_loss

    def log(self, logs, *args, **kwargs):
        self.logged.append(dict(logs))


class Guarded(NonFiniteGuardMixin, TrainerStandIn):
    pass


class VerdictTest(parameterized.TestCase):

    def guard(self, nan_policy="stop", **kwargs):
        args = SimpleNamespace(nan_policy=nan_policy, output_dir=self.create_tempdir().full_path, fp16=False)
        return Guarded(args, **kwargs)

    def pending(self, guard, loss_bad, norm_bad, loss, norm, step=3):
        guard._verdict = (step, DeferredRead(torch.tensor([loss_bad, norm_bad, loss, norm])))

    def test_a_good_step_or_none_pending_says_nothing(self):
        guard = self.guard()
        self.assertFalse(guard.read_verdict())
        self.pending(guard, 0.0, 0.0, 2.5, 1.0)
        self.assertFalse(guard.read_verdict())
        self.assertIsNone(guard._verdict)  # read once

    @parameterized.named_parameters(
        ("loss", (1.0, 0.0, NAN, 1.0), r"non-finite loss \(nan\) at step 3"),
        ("loss_on_another_process", (1.0, 0.0, 2.5, 1.0), r"non-finite loss \(on another process\) at step 3"),
        ("gradient_norm", (0.0, 1.0, 2.5, INF), r"non-finite gradient norm \(inf\) with a finite loss at step 3"))
    def test_stop_names_what_and_the_step(self, verdict, message):
        guard = self.guard()
        self.pending(guard, *verdict)
        with self.assertRaisesRegex(NonFiniteLossError, f"^{message}; training stopped before saving it, no "
                                                        "checkpoint was saved yet. Lower --learning_rate, prefer "
                                                        "--bf16 to --fp16, or pass --nan_policy skip"):
            guard.read_verdict()

    def test_a_fused_optimizer_stops_before_applying_the_update(self):
        guard = self.guard()
        guard.optimizer = torch.optim.AdamW([torch.zeros(1, requires_grad=True)], lr=0.1, fused=True)
        self.assertTrue(guard.skips_on_device())
        self.assertIn("training stopped before applying it", guard.stop_message("loss (nan)", 3))
        guard.args.fp16 = True  # the loss scaler's own skipping: the verdict does not go in as found_inf
        self.assertFalse(guard.skips_on_device())

    def test_skip_warns_and_counts(self):
        guard = self.guard("skip", resume_point=SimpleNamespace(skipped_nonfinite_steps=4))
        self.assertEqual(guard.skipped_steps, 4)  # a resumed run continues its checkpoint's count
        self.pending(guard, 1.0, 0.0, NAN, 1.0, step=7)
        with self.assertLogs("t5kit.train.nonfinite_guard", logging.WARNING) as logs:
            self.assertTrue(guard.read_verdict())
        self.assertIn("non-finite loss (nan) at step 7: skipping this step's update (--nan_policy skip)",
                      logs.output[0])
        self.assertEqual(guard.skipped_steps, 5)

    def test_the_verdict_sums_the_steps_micro_batches_on_the_device(self):
        guard = self.guard()
        for loss in (1.0, 2.0, NAN):
            guard.next_loss = torch.tensor(loss)
            guard.training_step(None, {})
        loss_bad, norm_bad, loss, norm = guard.step_verdict(torch.tensor(0.5)).tolist()
        self.assertEqual((loss_bad, norm_bad, norm), (1.0, 0.0, 0.5))
        self.assertTrue(math.isnan(loss))
        self.assertIsNone(guard._step_loss)  # the next step starts its own sum
        guard.next_loss = torch.tensor(3.0)
        guard.training_step(None, {})
        self.assertEqual(guard.step_verdict(None).tolist(), [0.0, 0.0, 3.0, 0.0])  # no norm (DeepSpeed): 0

    def test_under_fp16_the_scaler_judges_the_gradient_norm(self):
        guard = self.guard()
        guard.args.fp16 = True
        guard.next_loss = torch.tensor(1.0)
        guard.training_step(None, {})
        self.assertEqual(guard.step_verdict(torch.tensor(INF)).tolist()[:2], [0.0, 0.0])

    def test_skip_logs_the_finite_mean_and_the_count(self):
        guard = self.guard("skip")
        logged_losses = []
        for loss in (2.0, NAN, 4.0):
            guard.next_loss = torch.tensor(loss)
            logged_losses.append(guard.training_step(None, {}).item())
        self.assertEqual(logged_losses, [2.0, 2.0, 4.0])  # the NaN replaced by the window's finite mean so far
        guard.skipped_steps = 1
        guard.log({"loss": 2.67})
        guard.log({"eval_loss": 3.0})
        self.assertEqual(guard.logged, [{"loss": 2.67, nonfinite_guard.SKIP_LOG_KEY: 1}, {"eval_loss": 3.0}])
        self.assertIsNone(guard._finite)  # a new logging window
        guard.next_loss = torch.tensor(NAN)
        self.assertTrue(math.isnan(guard.training_step(None, {}).item()))  # no finite loss in the window yet

    def test_stop_logs_no_count(self):
        guard = self.guard()
        guard.log({"loss": 2.0})
        self.assertEqual(guard.logged, [{"loss": 2.0}])

    def test_skip_is_refused_under_deepspeed(self):
        with self.assertRaisesRegex(UsageError, r"^--nan_policy skip cannot undo a DeepSpeed step"):
            self.guard("skip", deepspeed=True)
        self.assertEqual(self.guard("stop", deepspeed=True).nan_policy, "stop")


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



if __name__ == "__main__":
    absltest.main()
