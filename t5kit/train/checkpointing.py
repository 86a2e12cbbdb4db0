"""Checkpoints that survive a kill at any moment, for any Seq2SeqTrainer.

    class PretrainTrainer(SafeCheckpointMixin, Seq2SeqTrainer): ...   # the mixin goes first
    python pre_train_t5.py CONFIG.yaml --resume_from_checkpoint auto

Atomic save. HF writes checkpoint-N in place, so a kill mid-save leaves a folder that looks resumable. Here HF's
own `_save_checkpoint` runs unchanged but into OUTPUT_DIR/.saving/ (by pointing `_get_output_dir` there for the
duration of the call); then manifest.json (size + sha256 of every file) is written last and the finished folder
is renamed to OUTPUT_DIR/checkpoint-N. A rename is atomic on one filesystem, so checkpoint-N is either absent or
complete; the manifest additionally catches later truncation or bit rot. HF's best-model tracking sees the staged
path during the call; it is rewritten to the final path (in memory and in the staged trainer_state.json) before
the rename. HF's rotation inside the call only sees the staging folder (one checkpoint: nothing to delete); this
mixin rotates afterwards, by step, never deleting the newest, the best (`state.best_model_checkpoint`) nor the
checkpoint this run resumed from, and only once the new checkpoint is committed.

The NaN guard (--nan_policy) lives in nonfinite_guard.py; the pre-emption callback this mixin adds, in preemption.py.
"""
import logging
import os
import shutil
from pathlib import Path

from transformers.trainer import TRAINER_STATE_NAME

from t5kit.errors import UsageError
from t5kit.outputs.atomic_files import give_weights_default_modes
from t5kit.train import checkpoint_manifest
from t5kit.train.preemption import PreemptionCallback

logger = logging.getLogger(__name__)

STAGING_DIR = ".saving"  # starts with a dot: HF's and our checkpoint-N globs never see it
FULL_STATE_DICT = "FULL_STATE_DICT"  # torch's StateDictType name, which accelerate's FSDP plugin takes


class SafeCheckpointMixin:
    """Atomic, validated checkpoints, protected rotation and clean pre-emption (see module doc)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.resumed_from = None
        self._staging = False
        # Every run that can resume should also stop cleanly when the scheduler pre-empts it.
        self.add_callback(PreemptionCallback())

    # ---- resume ----
    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        if resume_from_checkpoint is True:  # HF's "latest in output_dir", but only a complete one counts
            resume_from_checkpoint = checkpoint_manifest.latest_valid_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise UsageError(f"no valid checkpoint in {self.args.output_dir} to resume from")
        self.resumed_from = resume_from_checkpoint
        return super().train(resume_from_checkpoint, *args, **kwargs)

    # ---- the final model ----
    def save_model(self, output_dir=None, _internal_call=False):
        """Saves the model (the final one, or a checkpoint's: HF's _save_checkpoint calls this too), its weights
        readable as the umask allows: safetensors writes them 0600 through a temporary file of its own."""
        self.write_model(output_dir, _internal_call)
        if self.args.should_save:
            give_weights_default_modes(output_dir or self.args.output_dir)

    def write_model(self, output_dir, _internal_call):
        """The entry scripts' final save writes one model that from_pretrained reads, also under FSDP with sharded
        checkpoints (fsdp_state_dict_type SHARDED_STATE_DICT, what resume reads; HF's internal calls stay so)."""
        plugin = getattr(self.accelerator.state, "fsdp_plugin", None)
        if plugin is None or _internal_call:
            return super().save_model(output_dir, _internal_call)
        if plugin.fsdp_version != 2:
            plugin.set_state_dict_type(FULL_STATE_DICT)  # FSDP1: HF's save gathers a full state dict itself
            return super().save_model(output_dir, _internal_call)
        # FSDP2: every process gathers each parameter (a collective; tied ones once), rank 0 writes. accelerate's
        # get_state_dict (torch's get_model_state_dict) hands CPU-sharded parameters back still sharded.
        state_dict = full_state_dict(self.model, keep=self.args.should_save)
        if self.args.should_save:
            self._save(output_dir or self.args.output_dir, state_dict=state_dict)

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


def full_state_dict(model, keep=True):
    """{name: full CPU tensor} of a model whose parameters may be FSDP2 DTensors; every process must call it (each
    gather is a collective), and only one that keeps it holds the result. Tied parameters are gathered once and
    stay one tensor, so that save_pretrained sees them tied."""
    gathered, state_dict = {}, {}
    for name, value in model.state_dict().items():
        if id(value) not in gathered:
            full = value.full_tensor() if hasattr(value, "full_tensor") else value
            gathered[id(value)] = full.detach().cpu() if keep else None
        if keep:
            state_dict[name] = gathered[id(value)]
    return state_dict


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
