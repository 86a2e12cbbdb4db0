"""Checkpoints that survive a kill at any moment, for any Seq2SeqTrainer: how a checkpoint folder is committed,
which folders count, and rotation.

    class PretrainTrainer(SafeCheckpointMixin, Seq2SeqTrainer): ...   # the mixin goes first
    find_problem("out/checkpoint-500")            # None, or why the folder cannot be resumed from
    resolve_checkpoint("out", "auto")             # newest valid checkpoint-N, warning about each one skipped

Atomic save. HF writes checkpoint-N in place, so a kill mid-save leaves a folder that looks resumable. Here HF's
own `_save_checkpoint` runs unchanged but into OUTPUT_DIR/.saving/ (by pointing `_get_output_dir` there for the
duration of the call); then manifest.json (size + sha256 of every file) is written last and the finished folder
is renamed to OUTPUT_DIR/checkpoint-N. A rename is atomic on one filesystem, so checkpoint-N is either absent or
complete; the manifest additionally catches later truncation or bit rot: a checkpoint folder is valid only once its
manifest.json lists every file with its size and sha256 and every listed file matches. HF's best-model tracking
sees the staged path during the call; it is rewritten to the final path (in memory and in the staged
trainer_state.json) before the rename. HF's rotation inside the call only sees the staging folder (one checkpoint:
nothing to delete); this mixin rotates afterwards, by step, never deleting the newest, the best
(`state.best_model_checkpoint`) nor the checkpoint this run resumed from, and only once the new checkpoint is
committed.

A save the disk refuses (full, quota, file-size limit, permission) removes the staging folder at once and ends in
one error line (outputs/save_failures.py): the last committed checkpoint is untouched and `auto` resumes from it.
The final model is staged the same way (OUTPUT_DIR/.saving/model), its files then moved into OUTPUT_DIR.

What a run resumes from is found once, at step 3 of the entry scripts (resume.py), and handed to the trainer as
`resume_point=`; the NaN guard (--nan_policy) lives in nonfinite_guard.py, the pre-emption callback that the entry
scripts list, in preemption.py.
"""
import json
import logging
import os
import shutil
from pathlib import Path

from transformers.trainer import TRAINER_STATE_NAME

from t5kit.digests import file_sha256
from t5kit.errors import UsageError
from t5kit.outputs import save_failures
from t5kit.outputs.atomic_files import give_weights_default_modes, write_json
from t5kit.outputs.run_folder import asks_to_resume, list_checkpoints

logger = logging.getLogger(__name__)

STAGING_DIR = ".saving"  # starts with a dot: HF's and our checkpoint-N globs never see it
FULL_STATE_DICT = "FULL_STATE_DICT"  # torch's StateDictType name, which accelerate's FSDP plugin takes
MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = 1
FINAL_MODEL_STAGING = "model"  # OUTPUT_DIR/.saving/model: the final model, before its files move into OUTPUT_DIR


def list_files(folder):
    """Relative paths of every file under folder except the manifest itself, sorted."""
    folder = Path(folder)
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and p.name != MANIFEST_FILE)


def write_manifest(folder):
    """Hashes every file (after fsync, so the hash is of what is on disk) and writes manifest.json atomically."""
    folder = Path(folder)
    files = {}
    for name in list_files(folder):
        path = folder / name
        fsync_path(path)
        files[name] = {"size": path.stat().st_size, "sha256": file_sha256(path)}
    write_json(folder / MANIFEST_FILE, {"format": MANIFEST_FORMAT, "files": files})
    return folder / MANIFEST_FILE


def fsync_path(path):
    """fsync a file or a folder (a folder's fsync makes renames inside it durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def find_problem(folder):
    """None if folder is a complete checkpoint, else a short reason (missing manifest, size or hash mismatch)."""
    folder = Path(folder)
    manifest_path = folder / MANIFEST_FILE
    if not manifest_path.is_file():
        return f"no {MANIFEST_FILE} (the save did not finish)"
    try:
        files = json.loads(manifest_path.read_text())["files"]
    except (ValueError, KeyError, TypeError) as err:
        return f"unreadable {MANIFEST_FILE} ({err})"
    for name, expected in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != expected["size"]:
            return f"{name} has {path.stat().st_size} bytes, the manifest says {expected['size']}"
        if file_sha256(path) != expected["sha256"]:
            return f"{name} does not match its sha256 in the manifest"
    return None


def latest_valid_checkpoint(output_dir):
    """The newest checkpoint that passes find_problem; each newer broken one is named in a warning."""
    for folder in reversed(list_checkpoints(output_dir)):
        problem = find_problem(folder)
        if problem is None:
            return str(folder)
        logger.warning("skipping checkpoint %s: %s; trying the previous one", folder, problem)
    return None


def resolve_checkpoint(output_dir, resume_from_checkpoint):
    """Maps --resume_from_checkpoint (None, 'auto' or a path) to a valid checkpoint folder or None."""
    if not asks_to_resume(resume_from_checkpoint):
        return None
    if resume_from_checkpoint == "auto":
        last = latest_valid_checkpoint(output_dir)
        logger.info("--resume_from_checkpoint auto: %s", last or "no valid checkpoint yet, starting from scratch")
        return last
    if not Path(resume_from_checkpoint).is_dir():
        raise UsageError(f"--resume_from_checkpoint {resume_from_checkpoint} is not a checkpoint folder; "
                         "pass 'auto' or a path like OUTPUT_DIR/checkpoint-500")
    problem = find_problem(resume_from_checkpoint)
    if problem is not None:
        raise UsageError(f"--resume_from_checkpoint {resume_from_checkpoint} is not a complete checkpoint: "
                         f"{problem}; pass 'auto' to use the newest valid one, or an older checkpoint-N")
    return str(resume_from_checkpoint)


class SafeCheckpointMixin:
    """Atomic, validated checkpoints and protected rotation (see module doc). `resume_point` (resume.ResumePoint,
    None for a fresh start) is what this run continues from; the mixins after this one read their part of it."""

    def __init__(self, *args, resume_point=None, **kwargs):
        # Set before the other mixins' __init__ (inside super().__init__), which read it.
        self.resume_point = resume_point
        self.resumed_from = getattr(resume_point, "checkpoint", None)  # rotation keeps it
        self._staging = False
        super().__init__(*args, **kwargs)

    # ---- the final model ----
    def save_model(self, output_dir=None, _internal_call=False):
        """Saves the model (the final one, or a checkpoint's: HF's _save_checkpoint calls this too), its weights
        readable as the umask allows: safetensors writes them 0600 through a temporary file of its own. The final
        model is staged in OUTPUT_DIR/.saving/model and its files then moved into place, so that a save the disk
        refuses leaves no partial file (one error line, save_failures.py)."""
        output_dir = output_dir or self.args.output_dir
        if _internal_call:
            self.write_model(output_dir, _internal_call)
            if self.args.should_save:
                give_weights_default_modes(output_dir)
            return
        staging = Path(output_dir) / STAGING_DIR
        staged = staging / FINAL_MODEL_STAGING
        with save_failures.refusing_failed_writes(
                "--output_dir", output_dir, "the final model",
                lambda: save_failures.tensor_bytes(self.model.state_dict()),
                cleanup=lambda: shutil.rmtree(staging, ignore_errors=True), rerun=save_failures.RESUME,
                kept=lambda: untouched_checkpoint(output_dir)):
            if self.args.should_save:
                shutil.rmtree(staging, ignore_errors=True)
            self.accelerator.wait_for_everyone()
            self.write_model(str(staged), _internal_call)
            self.accelerator.wait_for_everyone()  # every rank has written its part (DeepSpeed ZeRO-3)
            if self.args.should_save:
                give_weights_default_modes(staged)
                for entry in sorted(staged.iterdir()):
                    os.replace(entry, Path(output_dir) / entry.name)
                shutil.rmtree(staging, ignore_errors=True)

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
        with save_failures.refusing_failed_writes(
                "--output_dir", run_dir, name, lambda: self.checkpoint_bytes(run_dir),
                cleanup=lambda: shutil.rmtree(staging, ignore_errors=True), rerun=save_failures.RESUME,
                kept=lambda: untouched_checkpoint(run_dir)):
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
                write_manifest(staged)
                commit(staged, run_dir / name)
                logger.info("checkpoint %s committed (manifest.json written)", run_dir / name)
        if self.args.should_save:
            self.rotate(run_dir, run_dir / name)
            shutil.rmtree(staging, ignore_errors=True)  # the output folder keeps only committed checkpoints
        self.accelerator.wait_for_everyone()

    def checkpoint_bytes(self, run_dir):
        """What a checkpoint of this run takes: the newest committed one's size, else its weights and optimizer
        state (the bulk of the first)."""
        checkpoints = list_checkpoints(run_dir)
        if checkpoints:
            return save_failures.folder_bytes(checkpoints[-1])
        optimizer = self.optimizer.state_dict() if self.optimizer is not None else {}
        return save_failures.tensor_bytes(self.model.state_dict(), optimizer)

    def rotate(self, run_dir, saved):
        """Deletes the oldest checkpoints beyond --save_total_limit, keeping the new, best and resumed-from ones."""
        limit = self.args.save_total_limit
        if not limit or limit <= 0:
            return
        keep = {Path(p).resolve() for p in (saved, self.state.best_model_checkpoint, self.resumed_from) if p}
        checkpoints = list_checkpoints(run_dir)
        excess = len(checkpoints) - limit
        for folder in checkpoints:
            if excess <= 0:
                break
            if folder.resolve() in keep:
                continue
            logger.info("deleting %s (--save_total_limit %d)", folder, limit)
            delete_checkpoint(folder, run_dir / STAGING_DIR)
            excess -= 1


def untouched_checkpoint(run_dir):
    """What a failed save names as left whole: the newest committed checkpoint (a committed one is complete)."""
    checkpoints = list_checkpoints(run_dir)
    return f" and {checkpoints[-1]}, the last complete checkpoint, is untouched" if checkpoints else ""


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
    fsync_path(target.parent)  # so the rename itself survives a power cut
    shutil.rmtree(aside, ignore_errors=True)


def delete_checkpoint(folder, staging):
    """Renames first, so a kill mid-delete never leaves a half-deleted checkpoint-N that still has its manifest."""
    staging.mkdir(exist_ok=True)
    doomed = staging / f"deleting-{folder.name}"
    shutil.rmtree(doomed, ignore_errors=True)
    os.replace(folder, doomed)
    shutil.rmtree(doomed)
