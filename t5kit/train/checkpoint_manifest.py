"""Which checkpoints count: a checkpoint folder is valid only once its manifest.json, written last, lists every
file with its size and sha256 and every listed file matches.

    write_manifest("out/checkpoint-500")          # the commit marker, written atomically after everything else
    find_problem("out/checkpoint-500")            # None, or why the folder cannot be resumed from
    resolve_checkpoint("out", "auto")             # newest valid checkpoint-N, warning about each one skipped
"""
import hashlib
import json
import logging
import os
import re
from pathlib import Path

from t5kit.errors import UsageError
from t5kit.outputs.atomic_files import write_json
from t5kit.outputs.run_folder import asks_to_resume

logger = logging.getLogger(__name__)

MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = 1
CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")  # HF's PREFIX_CHECKPOINT_DIR naming
HASH_CHUNK_BYTES = 1 << 22


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(HASH_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


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


def checkpoint_step(path):
    match = CHECKPOINT_PATTERN.match(Path(path).name)
    return int(match.group(1)) if match else None


def list_checkpoints(output_dir):
    """checkpoint-N folders of output_dir, oldest step first (valid or not)."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    found = [p for p in output_dir.iterdir() if p.is_dir() and checkpoint_step(p) is not None]
    return sorted(found, key=checkpoint_step)


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
