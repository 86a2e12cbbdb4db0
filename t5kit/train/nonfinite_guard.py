"""--nan_policy: what a NaN/inf training loss or gradient norm does, without stalling the GPU every step.

    class PretrainTrainer(SafeCheckpointMixin, NonFiniteGuardMixin, Seq2SeqTrainer): ...

`stop` raises NonFiniteLossError, naming the step and the last good checkpoint, before the bad update reaches any
checkpoint. `skip` drops the whole optimizer step (all its micro-batches), so the optimizer leaves every parameter
and moment untouched; the step still counts (data and learning-rate schedule move on), `skipped_nonfinite_steps`
is added to every training log, and the non-finite loss is replaced in the logged average by the mean of the
window's finite ones (what HF's logging_nan_inf_filter does, see config/arguments.py; a window of skipped steps only
logs
their nan/inf). A finite loss can still give inf/NaN gradients (an overflow inside backward), and clipping then
turns every gradient into NaN, so HF's pre-clip gradient norm is checked too; not under fp16, whose loss scaler
skips steps with inf gradients and lowers the scale.

How, per optimizer step: the micro-batch losses are summed on the device, and just before optimizer.step() one
verdict [loss non-finite on any process, norm non-finite, loss, norm] is computed there (one all-reduce of a flag,
so all processes agree). The host reads it one step later (deferred_read.py), once the next step's work is queued:
no GPU sync in the step. `stop` then raises at the next step, before that step's update. A log, a save or an
evaluation reads a pending verdict first, so a checkpoint or log line never misses a bad step, and so does the end
of training. With a fused torch optimizer (the default adamw_torch_fused) the verdict also goes in as the
optimizer's `found_inf`, the tensor through which torch's GradScaler has fused kernels skip an update on the device
(step count restored), so the bad update never reaches the weights. Other optimizers (Adafactor, unfused AdamW),
fp16 and DeepSpeed apply it in memory under `stop` (the weights are thrown away with the error, never saved); under
`skip` they read the verdict at once (a sync) and skip by dropping the gradients. Under DeepSpeed the engine steps
inside backward, before the verdict: `skip` is refused there.
"""
import logging
import math

import torch

from t5kit.config.checks import check_nan_policy
from t5kit.train import checkpointing
from t5kit.train.deferred_read import DeferredRead

logger = logging.getLogger(__name__)

SKIP_LOG_KEY = "skipped_nonfinite_steps"


class NonFiniteLossError(RuntimeError):
    """Training stopped on a NaN/inf loss; the message names the step and the checkpoint to resume from."""


class NonFiniteGuardMixin:
    """--nan_policy for a Trainer (see module doc). Goes after SafeCheckpointMixin, which holds the resume point."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.nan_policy = getattr(self.args, "nan_policy", "stop")
        check_nan_policy(self.nan_policy, self.is_deepspeed_enabled)
        # A resumed run continues the count of its checkpoint (resume.ResumePoint, set by SafeCheckpointMixin).
        self.skipped_steps = self.resume_point.skipped_nonfinite_steps if self.resume_point else 0
        self._step_loss = None  # this optimizer step's micro-batch losses summed, on the device
        self._finite = None  # [sum, count] of the finite micro-batch losses since the last log (skip only)
        self._verdict = None  # (step, DeferredRead) of an optimizer step not read yet

    def train(self, *args, **kwargs):
        result = super().train(*args, **kwargs)
        self.read_verdict()  # the last step's, unless a log or a save read it already
        if self.optimizer is not None:
            vars(self.torch_optimizer()).pop("found_inf", None)
        return result

    def torch_optimizer(self):
        return getattr(self.optimizer, "optimizer", self.optimizer)  # accelerate wraps it

    def skips_on_device(self):
        """Whether the optimizer's fused kernel honours `found_inf` (torch's contract with GradScaler)."""
        return (getattr(self.torch_optimizer(), "_step_supports_amp_scaling", False) and not self.args.fp16
                and not self.is_deepspeed_enabled)

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        self.read_verdict()  # the previous step's, now that this step's forward and backward are queued
        detached = loss.detach().float()
        self._step_loss = detached if self._step_loss is None else self._step_loss + detached
        if self.nan_policy != "skip":
            return loss
        finite = torch.isfinite(detached)
        if self._finite is None:
            self._finite = torch.zeros(2, device=detached.device)
        self._finite += torch.stack([torch.where(finite, detached, 0.0), finite.float()])
        # What Trainer adds to its logged loss: the window's finite mean in place of a non-finite loss (the loss
        # itself while the window has no finite one: a log line of skipped steps only shows their nan/inf).
        total, count = self._finite
        return torch.where(finite | (count == 0), loss, total / count.clamp(min=1))

    def _get_grad_norm(self, model, grad_norm=None):
        """HF's pre-clip gradient norm (computed even without clipping); the verdict is taken here, just before
        the optimizer step."""
        grad_norm = super()._get_grad_norm(model, grad_norm)
        verdict = self.step_verdict(grad_norm)
        self._verdict = (self.state.global_step + 1, DeferredRead(verdict))
        if self.skips_on_device():
            self.torch_optimizer().found_inf = verdict[:2].amax()  # 1.0: the fused kernel skips this update
        elif self.nan_policy == "skip" and self.read_verdict():
            model.zero_grad(set_to_none=True)  # parameters without a gradient are skipped by every optimizer
        return grad_norm

    def step_verdict(self, grad_norm):
        """[loss non-finite on any process, gradient norm non-finite, this process's loss, norm] on the device."""
        step_loss, self._step_loss = self._step_loss, None
        loss_bad = (~torch.isfinite(step_loss)).float()
        if self.accelerator.num_processes > 1:
            loss_bad = (self.accelerator.reduce(loss_bad, reduction="sum") > 0).float()
        # DeepSpeed hands a float (or None); the gradients are already all-reduced, so every process has this norm.
        # FSDP2 hands a DTensor (the norm over every shard): its full value, which every process computes.
        if hasattr(grad_norm, "full_tensor"):
            grad_norm = grad_norm.full_tensor()
        norm = torch.as_tensor(0.0 if grad_norm is None else grad_norm, dtype=torch.float32, device=step_loss.device)
        norm_bad = torch.zeros_like(loss_bad) if self.args.fp16 else (~torch.isfinite(norm)).float()
        return torch.stack([loss_bad, norm_bad, step_loss, norm])

    def read_verdict(self):
        """Acts on the pending verdict: raises (stop) or warns and counts (skip). Returns whether the step was bad."""
        if self._verdict is None:
            return False
        (step, pending), self._verdict = self._verdict, None
        loss_bad, norm_bad, loss, norm = pending.read()
        if not (loss_bad or norm_bad):
            return False
        if loss_bad:
            what = f"loss ({loss})" if not math.isfinite(loss) else "loss (on another process)"
        else:
            what = f"gradient norm ({norm}) with a finite loss"
        if self.nan_policy == "stop":
            raise NonFiniteLossError(self.stop_message(what, step))
        logger.warning("non-finite %s at step %d: skipping this step's update (--nan_policy skip)", what, step)
        self.skipped_steps += 1
        return True

    def stop_message(self, what, step):
        last = checkpointing.latest_valid_checkpoint(self.args.output_dir)
        resume = f"the last good checkpoint is {last}" if last else "no checkpoint was saved yet"
        # Read a step late, a bad update has reached the weights in memory unless a fused kernel skipped it (or
        # DeepSpeed's engine applied it inside backward); stopping still keeps it out of every checkpoint.
        stopped = "before applying it" if self.skips_on_device() else "before saving it"
        return (f"non-finite {what} at step {step}; training stopped {stopped}, {resume}. Lower --learning_rate, "
                "prefer --bf16 to --fp16, or pass --nan_policy skip to skip such steps")

    def _maybe_log_save_evaluate(self, *args, **kwargs):
        if self.control.should_log or self.control.should_save or self.control.should_evaluate:
            self.read_verdict()  # these read host values anyway; no log line or checkpoint misses a bad step
        return super()._maybe_log_save_evaluate(*args, **kwargs)

    def log(self, logs, *args, **kwargs):
        if self.nan_policy == "skip" and "loss" in logs:
            logs[SKIP_LOG_KEY] = self.skipped_steps
            self._finite = None  # Trainer starts a new logging window
        super().log(logs, *args, **kwargs)
