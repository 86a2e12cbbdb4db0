"""Checkpoints that survive a kill at any moment, and a guard against non-finite losses, for any Seq2SeqTrainer.

    class PretrainTrainer(SafeCheckpointMixin, Seq2SeqTrainer): ...   # the mixin goes first
    python pre_train_t5.py CONFIG.yaml --resume_from_checkpoint auto --nan_policy skip

Atomic save. HF writes checkpoint-N in place, so a kill mid-save leaves a folder that looks resumable. Here HF's
own `_save_checkpoint` runs unchanged but into OUTPUT_DIR/.saving/ (by pointing `_get_output_dir` there for the
duration of the call); then manifest.json (size + sha256 of every file) is written last and the finished folder
is renamed to OUTPUT_DIR/checkpoint-N. A rename is atomic on one filesystem, so checkpoint-N is either absent or
complete; the manifest additionally catches later truncation or bit rot. HF's best-model tracking sees the staged
path during the call; it is rewritten to the final path (in memory and in the staged trainer_state.json) before
the rename. HF's rotation inside the call only sees the staging folder (one checkpoint: nothing to delete); this
mixin rotates afterwards, by step, never deleting the newest, the best (`state.best_model_checkpoint`) nor the
checkpoint this run resumed from, and only once the new checkpoint is committed.

Non-finite loss (--nan_policy). `stop`: raise NonFiniteLossError before the optimizer applies the step, so no
checkpoint of the bad state is ever written. `skip`: drop the gradients of the whole optimizer step (all its
micro-batches), so AdamW leaves every parameter and moment untouched; the step still counts (data and the
learning-rate schedule move on) and `skipped_nonfinite_steps` is added to every training log. All processes agree
(one all-reduce of a flag per micro-batch), so they stop or skip together. A finite loss can still give inf/NaN
gradients (an overflow inside backward), and clipping then turns every gradient into NaN: so HF's pre-clip
gradient norm is checked too, before the optimizer step, with the same policy (the gradients are already
all-reduced, so every process sees the same norm); not under fp16 loss scaling, whose scaler skips steps with inf
gradients and lowers the scale, as it should. Under DeepSpeed the engine steps inside backward, before
these checks: `skip` is refused there, and `stop` stops before the bad state is saved.
"""
import json
import logging
import math
import os
import shutil
from pathlib import Path

import torch
from transformers.trainer import TRAINER_STATE_NAME

import checkpoint_manifest
from flags import UsageError
from signals import PreemptionCallback

logger = logging.getLogger(__name__)

STAGING_DIR = ".saving"  # starts with a dot: HF's and our checkpoint-N globs never see it
NAN_POLICIES = ("stop", "skip")
SKIP_LOG_KEY = "skipped_nonfinite_steps"


class NonFiniteLossError(RuntimeError):
    """Training stopped on a NaN/inf loss; the message names the step and the checkpoint to resume from."""


class SafeCheckpointMixin:
    """Atomic, validated checkpoints, protected rotation, the NaN guard and clean pre-emption (see module doc)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.nan_policy = getattr(self.args, "nan_policy", "stop")
        check_nan_policy(self.nan_policy, self.is_deepspeed_enabled)
        self.resumed_from = None
        self.skipped_steps = 0
        self._staging = False
        self._bad_step = False  # a micro-batch of the current optimizer step had a non-finite loss
        # Every run that can resume should also stop cleanly when the scheduler pre-empts it.
        self.add_callback(PreemptionCallback())

    # ---- resume ----
    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        if resume_from_checkpoint is True:  # HF's "latest in output_dir", but only a complete one counts
            resume_from_checkpoint = checkpoint_manifest.latest_valid_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise UsageError(f"no valid checkpoint in {self.args.output_dir} to resume from")
        self.resumed_from = resume_from_checkpoint
        self.skipped_steps = skips_logged(resume_from_checkpoint)
        return super().train(resume_from_checkpoint, *args, **kwargs)

    # ---- atomic save ----
    def _get_output_dir(self, trial):
        run_dir = super()._get_output_dir(trial)
        return os.path.join(run_dir, STAGING_DIR) if self._staging else run_dir

    def _save_checkpoint(self, model, trial):
        run_dir = Path(super()._get_output_dir(trial))
        staging = run_dir / STAGING_DIR
        name = f"checkpoint-{self.state.global_step}"
        if self.args.should_save:
            shutil.rmtree(staging, ignore_errors=True)  # leftovers of a save that was killed
        self.accelerator.wait_for_everyone()  # no rank writes into staging before it is clean
        self._staging = True
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self._staging = False
        self.state.best_model_checkpoint = unstage(self.state.best_model_checkpoint, staging, run_dir)
        self.accelerator.wait_for_everyone()  # every rank's shards are written before the commit
        if self.args.should_save:
            staged = staging / name
            self.state.save_to_json(str(staged / TRAINER_STATE_NAME))  # with the final best-model path
            checkpoint_manifest.write_manifest(staged)
            commit(staged, run_dir / name)
            logger.info("checkpoint %s committed (manifest.json written)", run_dir / name)
            self.rotate(run_dir, run_dir / name)
            shutil.rmtree(staging, ignore_errors=True)  # the output folder keeps only committed checkpoints
        self.accelerator.wait_for_everyone()

    def rotate(self, run_dir, saved):
        """Deletes the oldest checkpoints beyond --save_total_limit, keeping the new, best and resumed-from ones."""
        limit = self.args.save_total_limit
        if not limit or limit <= 0:
            return
        keep = {Path(p).resolve() for p in (saved, self.state.best_model_checkpoint, self.resumed_from) if p}
        checkpoints = checkpoint_manifest.list_checkpoints(run_dir)
        excess = len(checkpoints) - limit
        for folder in checkpoints:
            if excess <= 0:
                break
            if folder.resolve() in keep:
                continue
            logger.info("deleting %s (--save_total_limit %d)", folder, limit)
            delete_checkpoint(folder, run_dir / STAGING_DIR)
            excess -= 1

    # ---- non-finite losses ----
    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        if not self.loss_is_finite(loss):
            step = self.state.global_step + 1
            if self.nan_policy == "stop":
                raise NonFiniteLossError(self.stop_message(f"loss ({loss.item()})", step))
            self._bad_step = True
            logger.warning("non-finite loss (%s) at step %d: skipping this step's update (--nan_policy skip)",
                           loss.item(), step)
        if self._bad_step:
            # Gradients set to None: the optimizer skips those parameters entirely (no moment or decay update).
            model.zero_grad(set_to_none=True)
            if self.accelerator.sync_gradients:  # last micro-batch of the optimizer step
                self.skipped_steps += 1
                self._bad_step = False
        return loss

    def _get_grad_norm(self, model, grad_norm=None):
        """HF's pre-clip gradient norm (computed even without clipping), checked before the optimizer step."""
        grad_norm = super()._get_grad_norm(model, grad_norm)
        if self.args.fp16:  # loss scaling (AMP's or DeepSpeed's): inf gradients are routine, its scaler skips them
            return grad_norm
        norm = None if grad_norm is None else float(grad_norm)
        if norm is None or math.isfinite(norm):
            return grad_norm
        step = self.state.global_step + 1
        if self.nan_policy == "stop":
            raise NonFiniteLossError(self.stop_message(f"gradient norm ({norm}) with a finite loss", step))
        logger.warning("non-finite gradient norm (%s) at step %d: skipping this step's update (--nan_policy skip)",
                       norm, step)
        model.zero_grad(set_to_none=True)
        self.skipped_steps += 1
        return grad_norm

    def stop_message(self, what, step):
        last = checkpoint_manifest.latest_valid_checkpoint(self.args.output_dir)
        resume = f"the last good checkpoint is {last}" if last else "no checkpoint was saved yet"
        # DeepSpeed's engine has applied the update already; stopping still keeps it out of every checkpoint.
        stopped = "before saving it" if self.is_deepspeed_enabled else "before applying it"
        return (f"non-finite {what} at step {step}; training stopped {stopped}, {resume}. Lower --learning_rate, "
                "prefer --bf16 to --fp16, or pass --nan_policy skip to skip such steps")

    def loss_is_finite(self, loss):
        """One flag all processes agree on, so they stop or skip the same step."""
        bad = (~torch.isfinite(loss.detach())).any().float()
        if self.accelerator.num_processes > 1:
            bad = self.accelerator.reduce(bad, reduction="sum")
        return bad.item() == 0

    def log(self, logs, *args, **kwargs):
        if self.nan_policy == "skip" and "loss" in logs:
            logs[SKIP_LOG_KEY] = self.skipped_steps
        super().log(logs, *args, **kwargs)


def check_nan_policy(policy, deepspeed):
    if policy not in NAN_POLICIES:
        raise UsageError(f"--nan_policy={policy!r}; choices: {', '.join(NAN_POLICIES)}")
    if policy == "skip" and deepspeed:
        raise UsageError("--nan_policy skip cannot undo a DeepSpeed step (the engine steps inside backward); "
                         "use --nan_policy stop")


def skips_logged(checkpoint):
    """The skip count of the last log line in the checkpoint's trainer_state.json, so a resumed run continues it."""
    state_file = Path(checkpoint or "") / TRAINER_STATE_NAME
    if not checkpoint or not state_file.is_file():
        return 0
    history = json.loads(state_file.read_text()).get("log_history", [])
    return next((entry[SKIP_LOG_KEY] for entry in reversed(history) if SKIP_LOG_KEY in entry), 0)


def unstage(path, staging, run_dir):
    """Maps a path HF recorded inside the staging folder to where the checkpoint ends up."""
    if path and Path(path).parent == staging:
        return str(run_dir / Path(path).name)
    return path


def commit(staged, target):
    """Renames the finished folder into place. A folder already there (a broken save of the same step, from
    before this mixin or copied in) is moved aside first: os.replace cannot replace a non-empty folder."""
    aside = staged.parent / f"replaced-{target.name}"
    if target.exists():
        shutil.rmtree(aside, ignore_errors=True)
        os.replace(target, aside)
    os.replace(staged, target)
    checkpoint_manifest.fsync_path(target.parent)  # so the rename itself survives a power cut
    shutil.rmtree(aside, ignore_errors=True)


def delete_checkpoint(folder, staging):
    """Renames first, so a kill mid-delete never leaves a half-deleted checkpoint-N that still has its manifest."""
    staging.mkdir(exist_ok=True)
    doomed = staging / f"deleting-{folder.name}"
    shutil.rmtree(doomed, ignore_errors=True)
    os.replace(folder, doomed)
    shutil.rmtree(doomed)
