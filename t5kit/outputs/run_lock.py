"""One writer per run folder: a run holds an exclusive lock on OUTPUT_DIR/.lock from step 3 to its end, and a second
run on the folder (a double submission, a requeue while the first still runs) is refused in one line naming the
holder, before it reads or writes anything there.

    @run_lock.released_at_end
    def main(argv=None):
        ...
        # 3. Output dir, resume point (train/resume.claim_output_dir)
        lock = run_lock.hold(training_args)
        resume_point = resume.find_resume_point(training_args)
        if resume_point.finished:
            run_lock.release_untouched(lock)   # nothing written: the folder keeps its times

The lock is the kernel's (fcntl.flock on the open file), so it goes with the process: a run that is killed (SIGKILL,
the OOM killer, a cancelled SLURM job) leaves no stale lock, and the next run takes it at once. The file's content
(host, pid, start time, SLURM job id) only names the holder in the refusal. A run that ends in any other way
(finished, refused, crashed) deletes the file, and the folder too where it made the folder for the lock and nothing
else came into it, so a refused run leaves nothing behind. Under torchrun, accelerate or deepspeed, rank 0 takes
the lock and the other ranks wait for its verdict. Processes forked by the run (DataLoader workers) do not share
the lock, so they cannot keep it after the run dies.
"""
import dataclasses
import datetime
import errno
import fcntl
import functools
import itertools
import json
import logging
import os
import socket
import time
from pathlib import Path

from t5kit.errors import UsageError
from t5kit.outputs.run_folder import LOCK_FILE, check_folder_path, creating_output_dir

logger = logging.getLogger(__name__)

SLURM_JOB_ENV = "SLURM_JOB_ID"
# The holder writes its name just after it takes the lock, so a run refused in between may read an empty file.
HOLDER_READ_TRIES, HOLDER_READ_WAIT_S = 20, 0.05
TAKE_TRIES = 5  # a holder that ends deletes the file: a run that opened it just before locks the new one instead
# flock errors of file systems that do not lock (Lustre mounted without -o flock, NFS without a lock daemon).
NO_LOCKING = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


@dataclasses.dataclass
class RunLock:
    path: Path  # OUTPUT_DIR/.lock
    fd: int  # open and flock'ed for the whole run
    made_folders: list  # folders made for the lock, deepest first: removed at release where still empty
    folder_times: tuple | None = None  # the folder's (atime, mtime) in ns before the lock file came in


_held = []  # the RunLocks this process holds


def hold(training_args):
    """Step 3 of the training entry scripts: rank 0 locks --output_dir, the other ranks wait for its verdict; every
    rank raises the same UsageError where another run holds the folder. Returns rank 0's RunLock (None elsewhere)."""
    lock, refusal = None, None
    if training_args.process_index == 0:
        try:
            lock = take(training_args.output_dir)
        except UsageError as err:
            refusal = str(err)
    if training_args.world_size > 1:
        refusal = broadcast_from_rank_0(refusal)
    if refusal:
        raise UsageError(refusal)
    return lock


def take(output_dir):
    """Locks OUTPUT_DIR/.lock for this process (making the folder where needed) and records the holder in it.
    Raises UsageError naming the holder where another process has it; nothing is written then."""
    folder = Path(output_dir)
    check_folder_path(folder)
    made = list(itertools.takewhile(lambda p: not p.exists(), (folder, *folder.parents)))  # deepest first
    path = folder / LOCK_FILE
    times = None if made or path.exists() else (folder.stat().st_atime_ns, folder.stat().st_mtime_ns)
    try:
        with creating_output_dir(folder):
            folder.mkdir(parents=True, exist_ok=True)
        fd = lock_file(path)
    except BaseException:
        remove_empty_folders(made)
        raise
    if fd is None:
        remove_empty_folders(made)
        return None
    write_holder(fd)
    lock = RunLock(path, fd, made, times)
    _held.append(lock)
    logger.info("%s: this run holds the folder's lock (%s)", folder, path)
    return lock


def lock_file(path):
    """An fd of `path` holding its exclusive flock, or None where the file system cannot lock (a warning)."""
    for _ in range(TAKE_TRIES):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)  # no O_TRUNC: the holder's record stays
        except OSError as err:
            raise UsageError(f"--output_dir {path.parent}: cannot open its lock file {path.name} ({err.strerror}); "
                             "pass a folder you can write to") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UsageError(refusal_message(path.parent, read_holder(path))) from None
        except OSError as err:
            os.close(fd)
            if err.errno not in NO_LOCKING:
                raise
            logger.warning("--output_dir %s: the file system cannot lock %s (%s), so nothing stops a second run from "
                           "writing into this folder", path.parent, path.name, err.strerror)
            return None
        if is_same_file(fd, path):
            return fd
        os.close(fd)  # the holder deleted the file we opened as it ended: lock the one there now
    raise RuntimeError(f"{path} was replaced {TAKE_TRIES} times while this run tried to lock it")


def is_same_file(fd, path):
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino)


def holder_record():
    record = {"host": socket.gethostname(), "pid": os.getpid(),
              "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if os.environ.get(SLURM_JOB_ENV):
        record["slurm_job_id"] = os.environ[SLURM_JOB_ENV]
    return record


def write_holder(fd):
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(holder_record()) + "\n").encode(), 0)


def read_holder(path):
    """The holder's record, or {} where it cannot be read (a holder that has not written it yet, after retries)."""
    for _ in range(HOLDER_READ_TRIES):
        try:
            return json.loads(Path(path).read_text())
        except (OSError, ValueError):
            time.sleep(HOLDER_READ_WAIT_S)
    return {}


def describe_holder(holder):
    if not holder:
        return "its holder is not recorded"
    parts = [f"host {holder.get('host')}", f"pid {holder.get('pid')}", f"started {holder.get('started')}"]
    if holder.get("slurm_job_id"):
        parts.append(f"SLURM job {holder['slurm_job_id']}")
    return ", ".join(parts)


def refusal_message(folder, holder):
    return (f"--output_dir {folder} is in use by another run ({describe_holder(holder)}); wait for it to end or stop "
            "it, or pass another --output_dir")


def release(lock):
    """Ends the hold: the file goes first (a run that opened it just before locks the next file instead), then the
    lock, then the folders made for it where nothing else came into them."""
    if lock in _held:
        _held.remove(lock)
    try:
        os.unlink(lock.path)
    except FileNotFoundError:
        pass
    os.close(lock.fd)
    remove_empty_folders(lock.made_folders)


def release_untouched(lock):
    """Ends the hold of a run that wrote nothing (a finished run resumed with auto: resume.ResumePoint.finished), and
    gives the folder back its times as they were before the lock file came and went: the folder is as it was found,
    its own mtime included. None (ranks other than 0) does nothing."""
    if lock is None:
        return
    release(lock)
    if lock.folder_times:
        os.utime(lock.path.parent, ns=lock.folder_times)


def remove_empty_folders(folders):
    for folder in folders:  # deepest first
        try:
            folder.rmdir()
        except OSError:
            return


def released_at_end(main):
    """Wraps an entry script's main(): the locks it took are released when it returns or raises, so a refused run
    leaves no lock file and the same process can run again on the folder (the tests do)."""
    @functools.wraps(main)
    def run(*args, **kwargs):
        held_before = len(_held)
        try:
            return main(*args, **kwargs)
        finally:
            while len(_held) > held_before:
                release(_held[-1])
    return run


def broadcast_from_rank_0(value):
    """Rank 0's `value` on every rank (torch.distributed is set up: the training arguments started it)."""
    import torch.distributed

    box = [value]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def forget_locks_in_child():
    """A forked child (a DataLoader worker) closes its copies of the lock fds: the lock stays the parent's alone,
    released when the parent dies, and the child never deletes the file."""
    for lock in _held:
        os.close(lock.fd)
    _held.clear()


os.register_at_fork(after_in_child=forget_locks_in_child)
