"""The run's output folder: the names of the files and checkpoint folders in it, the one rule for writing into a
folder that holds a run, and the refusal to start where it cannot be created (train/resume.py finds the checkpoint
to resume from)."""
import contextlib
import logging
import os
import re
import tempfile
from pathlib import Path

from t5kit.errors import UsageError

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.json"
LOSS_CURVE_FILE = "loss_curve.png"
EVAL_LOG_FILE = "eval_log.jsonl"  # one line per evaluation, as it happens (train/callbacks.py)
RUN_LOG_FILE = "out.log"  # everything the run logged (run_logging.py)
MODEL_CARD_FILE = "README.md"  # the model card (model_card.py), the name the hub shows
ADAPTER_CONFIG_FILE = "adapter_config.json"  # peft's, beside adapter_model.safetensors (--peft lora)
MERGED_MODEL_DIR = "merged"  # --merge_adapters: the base model with the adapters merged in (model/lora.py)
# The running run's lock (run_lock.py): not part of the run, so it never makes a folder "not empty", and whatever
# clears a folder for --overwrite_output_dir must leave it in place.
LOCK_FILE = ".lock"
CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")  # HF's PREFIX_CHECKPOINT_DIR naming: checkpoint-<step>


def checkpoint_step(path):
    """N of a checkpoint-N folder's path, or None for any other name."""
    match = CHECKPOINT_PATTERN.match(Path(path).name)
    return int(match.group(1)) if match else None


def list_checkpoints(output_dir):
    """checkpoint-N folders of output_dir, oldest step first (complete or not)."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    found = [p for p in output_dir.iterdir() if p.is_dir() and checkpoint_step(p) is not None]
    return sorted(found, key=checkpoint_step)


def check_output_dir(output_dir, overwrite_output_dir, resume_from_checkpoint, checkpoint=None):
    """The one rule for writing into an --output_dir that holds a run, checked once the complete checkpoint to
    resume from (or None) is known: refused unless --overwrite_output_dir says it may be written into, or
    --resume_from_checkpoint continues its run; continuing, a folder whose run finished (metrics.json) with no
    complete checkpoint to continue from is refused too, since starting afresh would replace that run."""
    path = Path(output_dir)
    check_folder_path(path)
    if not path.is_dir() or overwrite_output_dir:
        return
    if not asks_to_resume(resume_from_checkpoint):
        if holds_a_run(path):
            raise UsageError(f"--output_dir {path} is not empty; pass --overwrite_output_dir to write into it, "
                             "--resume_from_checkpoint auto to continue its run, or choose another --output_dir")
        return
    if checkpoint is None and (path / METRICS_FILE).exists():
        raise UsageError(f"--resume_from_checkpoint {resume_from_checkpoint}: --output_dir {path} holds a finished "
                         f"run ({METRICS_FILE}) and no complete checkpoint to continue from; pass "
                         "--overwrite_output_dir true to replace it, or choose another --output_dir")


def check_folder_path(path):
    """--output_dir must be a folder, or a path where one can be made."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"--output_dir {path} is a file; pass a folder path")
    check_can_create(path)


def holds_a_run(path):
    """Whether the folder holds anything besides the lock of the run now starting."""
    return any(entry.name != LOCK_FILE for entry in path.iterdir())


def asks_to_resume(resume_from_checkpoint):
    """Whether --resume_from_checkpoint asks for a checkpoint at all ('false' and empty say no)."""
    return resume_from_checkpoint not in (None, "", "false", "False")


def nearest_existing(path):
    """`path` itself or its closest ancestor that exists ('.' or '/' at worst)."""
    return next(folder for folder in (path, *path.parents) if folder.exists())


def refuse_a_file_in_the_way(path):
    """For the scripts that create --output_dir themselves: it must not be a file, nor lie under one."""
    existing = nearest_existing(path)
    if not existing.is_dir():
        where = "" if existing == path else f": {existing}"
        raise UsageError(f"--output_dir {path}{where} is a file; pass a folder")


def check_new_output_dir(output_dir, overwrite_output_dir):
    """For the scripts that build a whole folder and publish it at once (train_tokenizer.py): --output_dir must not
    be a file, lie under one, or hold files unless --overwrite_output_dir says they may be replaced."""
    out = Path(output_dir)
    refuse_a_file_in_the_way(out)
    if out.is_dir() and any(out.iterdir()) and not overwrite_output_dir:
        raise UsageError(f"--output_dir {out} is not empty; use --overwrite_output_dir to replace it")


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


def make_work_dir(out):
    """Creates --output_dir's parent and a temporary folder in it, to build the output in and then publish
    (atomic_files.publish_folder); failing there (under /proc, read-only) is bad input."""
    out = Path(out)
    with creating_output_dir(out):
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
