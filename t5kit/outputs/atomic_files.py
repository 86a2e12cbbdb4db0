"""Atomic file writes: a temporary file beside the target, fsync, rename. Readers see the old file or the whole
new one, never half of it (a crash mid-write leaves the old file in place). Files get the mode open() would give
them (0666 less the umask: 0644 under umask 022), not mkstemp's private 0600, so a run folder on a shared cluster
is as readable as HF's own files in it."""
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import yaml


@contextmanager
def atomic_write(path, mode="w"):
    """Writes to a temporary file beside `path`, then renames it over `path`: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, default_file_mode())
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def current_umask():
    """The process umask. Linux shows it in /proc/self/status; elsewhere it can only be read by setting it, which
    is set back at once."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def default_file_mode():
    """The mode open() gives a new file: 0666 less the umask."""
    return 0o666 & ~current_umask()


def give_weights_default_modes(folder):
    """Gives the *.safetensors files in `folder` the mode open() would have given them: safetensors writes through
    a private temporary file of its own, 0600 whatever the umask."""
    mode = default_file_mode()
    for path in Path(folder).glob("*.safetensors"):
        os.chmod(path, mode)


def write_json(path, data):
    with atomic_write(path) as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")


def write_yaml(path, data):
    with atomic_write(path) as handle:
        yaml.safe_dump(data, handle, sort_keys=False)


def publish_folder(new, out):
    """Moves the finished folder `new` to `out`; an existing `out` is moved aside first, then deleted, so `out`
    is always either the old folder or the whole new one."""
    new, out = Path(new), Path(out)
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.replace(out, old / out.name)
    os.replace(new, out)
    if old is not None:
        shutil.rmtree(old)
