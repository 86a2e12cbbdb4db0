"""outputs/save_failures.py on a real filesystem that refuses writes: a checkpoint, the final model and an export the
disk cannot hold each end in one error line (exit 2) naming the folder, the space needed and free, and the fix; the
partial save is gone at once, the last complete checkpoint is untouched, and once space is free the same command
with --resume_from_checkpoint auto finishes the run.

The filesystem: a small tmpfs mounted on the test's folder where the test runs as root and may mount (ENOSPC, "No
space left on device"), else a file-size limit on this process (RLIMIT_FSIZE with SIGXFSZ ignored: EFBIG, "File too
large"). Never a mocked write."""
import contextlib
import errno
import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from absl.testing import absltest, parameterized
from safetensors.torch import save_file

from t5kit import cli
from t5kit.outputs import save_failures
from t5kit.train import checkpointing
from tests.helpers import OneThreadTestCase, entry_main, file_size_limit, save_tiny_t5, snapshot

MiB = 2**20
TMPFS_SIZE = "64m"  # room for a t5-tiny run (a checkpoint ~16 MiB, the final model ~8 MiB) beside the filler
FILE_SIZE_LIMIT = MiB  # below t5-tiny's 4 MiB of weights: their first write is refused


class SmallFilesystem:
    """A filesystem at `folder` that refuses writes after fill(leave): a tmpfs the test mounts, which a filler file
    then leaves `leave` bytes free; else this process's file-size limit, set to FILE_SIZE_LIMIT. release() frees the
    space again; the cleanup unmounts the tmpfs (or restores the limit)."""

    def __init__(self, test, folder):
        self.folder, self.filler, self.limit = Path(folder), Path(folder) / "filler", None
        self.folder.mkdir(parents=True, exist_ok=True)
        mounted = os.geteuid() == 0 and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(self.folder)],
            capture_output=True).returncode == 0
        self.errno = errno.ENOSPC if mounted else errno.EFBIG
        if mounted:
            # lazy: a writer that failed may hold its file open until it is collected
            test.addCleanup(subprocess.run, ["umount", "--lazy", str(self.folder)], check=True)
        test.addCleanup(self.release)

    def fill(self, leave):
        if self.errno == errno.EFBIG:
            self.limit = file_size_limit(FILE_SIZE_LIMIT)
            self.limit.__enter__()
            return
        count, chunk = shutil.disk_usage(self.folder).free - leave, b"\0" * MiB  # tmpfs: written bytes take room
        with open(self.filler, "wb") as handle:
            for _ in range(count // MiB):
                handle.write(chunk)
            handle.write(chunk[:count % MiB])

    def release(self):
        self.filler.unlink(missing_ok=True)
        if self.limit is not None:
            self.limit.__exit__(None, None, None)
            self.limit = None

    def entries(self):
        return sorted(p.name for p in self.folder.iterdir() if p != self.filler)

    @property
    def reason_and_fix(self):
        return os.strerror(self.errno), save_failures.FIXES[self.errno]


def run_as_main(entry, argv):
    """(exit code, the `error:` lines) of an entry script run in this process as its __main__ runs it."""
    stderr, code = io.StringIO(), 0
    try:
        with contextlib.redirect_stderr(stderr):
            cli.run_cli(lambda: entry_main(entry)(argv))
    except SystemExit as stop:
        code = stop.code
    return code, [line for line in stderr.getvalue().splitlines() if line.startswith("error:")]


def needed_mib(error_line):
    return float(re.search(r"it needs about ([\d.]+) MiB", error_line).group(1))


@pytest.mark.slow  # pre-training runs and exports on a filesystem the test mounts
class FailedSaveTest(OneThreadTestCase):

    def setUp(self):
        super().setUp()
        self.fs = SmallFilesystem(self, self.dir / "fs")
        self.out = self.fs.folder / "out"

    def test_a_refused_checkpoint_leaves_the_last_one_and_resumes_from_it(self):
        code, errors = run_as_main("pre_train_t5", self.run_flags(self.out, max_steps=2, save_total_limit=1))
        self.assertEqual((code, errors), (0, []))
        kept = snapshot(self.out / "checkpoint-2")
        self.fs.fill(leave=6 * MiB)  # the weights (4 MiB) fit, the optimizer state (8 MiB) does not
        argv = self.run_flags(self.out, max_steps=4, save_total_limit=1, resume_from_checkpoint="auto")
        code, errors = run_as_main("pre_train_t5", argv)

        self.assertEqual(code, 2)
        self.assertLen(errors, 1)
        reason, fix = self.fs.reason_and_fix
        self.assertRegex(errors[0], re.escape(f"error: --output_dir {self.out}: checkpoint-4 could not be saved: "
                                              f"{reason} (it needs about ") + r"[\d.]+ MiB, [\d.]+ [MG]iB free there\)"
                         + re.escape(f"; the partial save is removed and {self.out}/checkpoint-2, the last complete "
                                     f"checkpoint, is untouched; {fix}, then rerun with --resume_from_checkpoint auto"))
        self.assertAlmostEqual(needed_mib(errors[0]), save_failures.folder_bytes(self.out / "checkpoint-2") / MiB,
                               delta=0.1)
        self.assertFalse((self.out / checkpointing.STAGING_DIR).exists())  # removed at once, not at the next run
        self.assertFalse((self.out / "checkpoint-4").exists())
        self.assertEqual(snapshot(self.out / "checkpoint-2"), kept)
        self.assertIsNone(checkpointing.find_problem(self.out / "checkpoint-2"))

        self.fs.release()  # space freed: the same command continues from checkpoint-2 and finishes
        self.assertEqual(run_as_main("pre_train_t5", argv), (0, []))
        self.assertIn(f"--resume_from_checkpoint auto: {self.out}/checkpoint-2", (self.out / "out.log").read_text())
        self.assertIsNone(checkpointing.find_problem(self.out / "checkpoint-4"))
        self.assertEqual(json.loads((self.out / "checkpoint-4" / "trainer_state.json").read_text())["global_step"], 4)
        self.assertTrue((self.out / "metrics.json").is_file())
        self.assertFalse((self.out / checkpointing.STAGING_DIR).exists())

    def test_a_refused_final_model_leaves_no_partial_file(self):
        self.fs.fill(leave=2 * MiB)  # the run's record and log fit, the weights do not
        argv = self.run_flags(self.out, max_steps=2, save_strategy="no", resume_from_checkpoint="auto")
        code, errors = run_as_main("pre_train_t5", argv)

        self.assertEqual(code, 2)
        self.assertLen(errors, 1)
        reason, fix = self.fs.reason_and_fix
        self.assertRegex(errors[0], re.escape(f"error: --output_dir {self.out}: the final model could not be saved: "
                                              f"{reason} (it needs about ") + r"[\d.]+ MiB, [\d.]+ [MG]iB free there\)"
                         + re.escape(f"; the partial save is removed; {fix}, then rerun with "
                                     "--resume_from_checkpoint auto"))
        self.assertGreater(needed_mib(errors[0]), 3.9)  # t5-tiny's 1.03 M float32 parameters
        self.assertEqual(sorted(p.name for p in self.out.iterdir()), ["config.yaml", "out.log"])

        self.fs.release()
        self.assertEqual(run_as_main("pre_train_t5", argv), (0, []))
        self.assertTrue((self.out / "model.safetensors").is_file())
        self.assertTrue((self.out / "metrics.json").is_file())
        self.assertFalse((self.out / checkpointing.STAGING_DIR).exists())

    def test_a_refused_export_leaves_no_partial_folder(self):
        model = save_tiny_t5(self.dir / "model")  # on another filesystem: only the export is refused
        argv = ["--model_name_or_path", model, "--output_dir", str(self.fs.folder / "export")]
        self.fs.fill(leave=2 * MiB)
        code, errors = run_as_main("export_t5", argv)

        self.assertEqual(code, 2)
        reason, fix = self.fs.reason_and_fix
        self.assertLen(errors, 1)
        self.assertRegex(errors[0], re.escape(f"error: --output_dir {self.fs.folder}/export: the CTranslate2 export "
                                              f"could not be saved: {reason} (it needs about ")
                         + r"[\d.]+ MiB, [\d.]+ [MG]iB free there\)"
                         + re.escape(f"; the partial save is removed; {fix}, then rerun export_t5.py"))
        self.assertEqual(self.fs.entries(), [])  # no temporary export folder left

        self.fs.release()
        self.assertEqual(run_as_main("export_t5", argv), (0, []))
        self.assertTrue((self.fs.folder / "export" / "model.bin").is_file())


def write_with_open(path, tensors):
    with open(path, "wb") as handle:
        handle.write(tensors["w"].numpy().tobytes())


class RefusedWriteTest(parameterized.TestCase):
    """Each writer's way of saying the filesystem refused (an OSError, safetensors' "(os error N)", torch's zip
    writer with no errno) is recognised; anything else is a bug and keeps its traceback."""

    @parameterized.named_parameters(("open", write_with_open),
                                    ("safetensors", lambda path, tensors: save_file(tensors, path)),
                                    ("torch", lambda path, tensors: torch.save(tensors, path)))
    def test_a_refused_write_is_recognised(self, write):
        fs = SmallFilesystem(self, Path(self.create_tempdir().full_path) / "fs")
        tensors = {"w": torch.zeros(MiB)}  # 4 MiB
        fs.fill(leave=MiB // 2)
        with self.assertRaises(Exception) as caught:
            write(fs.folder / "weights", tensors)
        self.assertEqual(save_failures.refused_write_errno(caught.exception, save_failures.free_bytes(fs.folder),
                                                           4 * MiB), fs.errno, repr(caught.exception))

    def test_a_bug_is_not_taken_for_a_refused_write_and_still_cleans_up(self):
        staging = Path(self.create_tempdir().full_path) / ".saving"
        staging.mkdir()
        with self.assertRaisesRegex(ValueError, "a bug"):
            with save_failures.refusing_failed_writes("--output_dir", staging.parent, "checkpoint-2", lambda: 1,
                                                      cleanup=lambda: shutil.rmtree(staging), rerun="rerun"):
                raise ValueError("a bug")
        self.assertFalse(staging.exists())
        self.assertIsNone(save_failures.refused_write_errno(ValueError("a bug"), 0, 1))


if __name__ == "__main__":
    absltest.main()
