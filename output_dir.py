"""The run's output folder: refuse to clobber it, find the checkpoint to resume, write files atomically."""
import contextlib
import json
import logging
import os
from pathlib import Path

import checkpoint_manifest
from atomic_files import atomic_write, write_json, write_yaml  # noqa: F401 (output_dir.write_json etc.)
from flags import UsageError

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.json"
LOSS_CURVE_FILE = "loss_curve.png"
# What a checkpoint's weights must agree on with the model built now (T5Config names).
ARCHITECTURE_KEYS = ("d_model", "d_ff", "d_kv", "num_heads", "num_layers", "num_decoder_layers", "vocab_size",
                     "feed_forward_proj")


def check_output_dir(output_dir, overwrite_output_dir, resume_from_checkpoint):
    """Refuses a non-empty output folder unless the user asked to resume or to overwrite."""
    path = Path(output_dir)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--output_dir {path} is a file; pass a folder path")
    check_can_create(path)
    resuming = checkpoint_manifest.asks_to_resume(resume_from_checkpoint)
    if not path.is_dir() or not any(path.iterdir()) or overwrite_output_dir or resuming:
        return
    raise UsageError(f"--output_dir {path} is not empty; pass --overwrite_output_dir to write into it, "
                     "--resume_from_checkpoint auto to continue its run, or choose another --output_dir")


def nearest_existing(path):
    """`path` itself or its closest ancestor that exists ('.' or '/' at worst)."""
    return next(folder for folder in (path, *path.parents) if folder.exists())


def refuse_a_file_in_the_way(path):
    """For the scripts that create --output_dir themselves: it must not be a file, nor lie under one."""
    existing = nearest_existing(path)
    if not existing.is_dir():
        where = "" if existing == path else f": {existing}"
        raise UsageError(f"--output_dir {path}{where} is a file; pass a folder")


@contextlib.contextmanager
def creating_output_dir(path):
    """Turns a failure to create --output_dir (under /proc, on a read-only mount) into one line: the user's path,
    not our bug."""
    try:
        yield
    except OSError as err:
        raise UsageError(f"--output_dir {path} cannot be created ({err.strerror}); pass a folder you can write "
                         "to") from None


def check_can_create(path):
    """Refuses a folder that cannot be made, now rather than at the first save (after data and model loading): its
    nearest existing ancestor must be a folder we may write into. Checked, not tried: ranks run this at once."""
    ancestor = nearest_existing(path)
    if ancestor == path:
        return
    if not ancestor.is_dir():
        raise UsageError(f"--output_dir {path} cannot be created: {ancestor} is a file; pass a folder path")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"--output_dir {path} cannot be created: no write permission in {ancestor}; pass a folder "
                         "you can write to")


def prepare_output_dir(training_args):
    """Step 3 of every entry script: refuses to clobber a previous run, then returns the checkpoint to resume
    from (None for a fresh start)."""
    check_output_dir(training_args.output_dir, training_args.overwrite_output_dir,
                     training_args.resume_from_checkpoint)
    checkpoint = resolve_checkpoint(training_args.output_dir, training_args.resume_from_checkpoint)
    finished = Path(training_args.output_dir) / METRICS_FILE
    if checkpoint is None and finished.exists() and not training_args.overwrite_output_dir:
        # 'auto' found nothing to continue from, and starting afresh would replace a run that ended.
        raise UsageError(f"--resume_from_checkpoint {training_args.resume_from_checkpoint}: --output_dir "
                         f"{training_args.output_dir} holds a finished run ({METRICS_FILE}) and no complete "
                         "checkpoint to continue from; pass --overwrite_output_dir true to replace it, or choose "
                         "another --output_dir")
    return checkpoint


def resolve_checkpoint(output_dir, resume_from_checkpoint):
    """Maps --resume_from_checkpoint (None, 'auto' or a path) to a checkpoint folder or None. Only complete
    checkpoints (manifest.json present and matching) count: 'auto' skips broken ones with a warning, an explicit
    broken path is a UsageError."""
    return checkpoint_manifest.resolve_checkpoint(output_dir, resume_from_checkpoint)


def check_checkpoint_fits(checkpoint, model):
    """Refuses to resume from a checkpoint saved by another architecture (HF would fail mid-load with a long
    size-mismatch trace, after config.yaml is written)."""
    saved_config = Path(checkpoint or "") / "config.json"
    if not checkpoint or not saved_config.is_file():
        return
    saved = json.loads(saved_config.read_text())
    built = model.config.to_dict()
    differ = [f"{key}={saved[key]} (this run: {built.get(key)})" for key in ARCHITECTURE_KEYS
              if key in saved and saved[key] != built.get(key)]
    if differ:
        raise UsageError(f"--resume_from_checkpoint {checkpoint} holds another model: {', '.join(differ)}; resume "
                         "with that run's flags (its config.yaml) or start a new --output_dir")


def write_resolved_config(output_dir, flags):
    """Saves the fully resolved flags; `python ENTRY.py OUTPUT_DIR/config.yaml` alone reruns the run."""
    path = Path(output_dir) / CONFIG_FILE
    write_yaml(path, flags)
    return path
