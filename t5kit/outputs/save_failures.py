"""A save the filesystem refuses (full, over quota, past a file-size limit, made read-only) ends in one error line
naming the folder, what the save needs and what is free there, and the fix, with the partial save already removed.

    with save_failures.refusing_failed_writes("--output_dir", out, "checkpoint-4", needed_bytes=lambda: n,
                                              cleanup=lambda: shutil.rmtree(staging), rerun=RESUME):
        ...  # the writes

These are the environment's failures, not bugs: a UsageError (one line, exit code 2, docs/errors.md). Anything
else raised inside keeps its traceback, after the same cleanup. Writers report a refused write three ways: Python
and CTranslate2's converter an OSError, safetensors a SafetensorError whose text ends in "(os error 28)", torch.save's
zip writer a RuntimeError with no errno at all, taken as a full disk when less than the save needs is free (as a
file-size limit when one is set).
"""
import contextlib
import errno
import os
import re
import resource
import shutil
from pathlib import Path

from t5kit.errors import UsageError

# errno -> what to do about it before rerunning
FIXES = {errno.ENOSPC: "free space", errno.EDQUOT: "free space or raise your quota",
         errno.EFBIG: "raise the file-size limit (ulimit -f)", errno.EACCES: "make it writable again",
         errno.EPERM: "make it writable again", errno.EROFS: "mount it read-write", errno.EIO: "check the disk"}
OS_ERROR_IN_TEXT = re.compile(r"\(os error (\d+)\)")  # safetensors' (Rust's) io::Error
TORCH_WRITER_MARKS = ("PytorchStreamWriter", "inline_container.cc")  # torch.save's zip writer, which has no errno
RESUME = "rerun with --resume_from_checkpoint auto"


def refused_write_errno(err, free, needed):
    """The errno of a write the filesystem refused, found in `err` or in what it was raised from, else None."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in FIXES:
            return err.errno
        match = OS_ERROR_IN_TEXT.search(str(err))
        if match and int(match.group(1)) in FIXES:
            return int(match.group(1))
        if any(mark in str(err) for mark in TORCH_WRITER_MARKS):
            if resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY:
                return errno.EFBIG
            return errno.ENOSPC if free < needed else errno.EIO
        err = err.__cause__ or err.__context__
    return None


def free_bytes(folder):
    """Free bytes on the filesystem of `folder` (or of its nearest existing parent), for this user."""
    path = Path(folder)
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def describe_bytes(count):
    return f"{count / 2**30:.1f} GiB" if count >= 2**30 else f"{count / 2**20:.1f} MiB"


def tensor_bytes(*states):
    """Bytes of every distinct tensor in nested dicts, lists and tuples (a model's or optimizer's state dict): what
    saving them writes, give or take their headers."""
    import torch

    total, seen, stack = 0, set(), list(states)
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, torch.Tensor) and (item.data_ptr(), item.numel()) not in seen:
            seen.add((item.data_ptr(), item.numel()))
            total += item.numel() * item.element_size()
    return total


def folder_bytes(folder):
    return sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file())


@contextlib.contextmanager
def refusing_failed_writes(flag, folder, what, needed_bytes, cleanup, rerun, kept=lambda: ""):
    """Runs the writes of `what` into `folder` (named by `flag`). On any exception (an interrupt too): `cleanup()` at
    once; a refused write becomes one UsageError line: the errno's text, needed_bytes() (0: unknown) against the
    free space left after the cleanup, `kept()` (what is untouched), the fix and `rerun`."""
    try:
        yield
    except BaseException as err:
        full_free = free_bytes(folder)  # before the cleanup gives the partial save's space back
        needed = needed_bytes() if isinstance(err, Exception) else 0
        cleanup()
        code = refused_write_errno(err, full_free, needed) if isinstance(err, Exception) else None
        if code is None:
            raise
        space = f"{describe_bytes(free_bytes(folder))} free there"
        space = f"it needs about {describe_bytes(needed)}, {space}" if needed else space
        raise UsageError(f"{flag} {folder}: {what} could not be saved: {os.strerror(code)} ({space}); the partial "
                         f"save is removed{kept()}; {FIXES[code]}, then {rerun}") from None
