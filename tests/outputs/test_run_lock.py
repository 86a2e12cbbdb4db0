"""One writer per run folder: while another process holds OUTPUT_DIR/.lock, a run on the folder (resuming or
overwriting it) is refused with one line naming the holder, exit code 2, every file left byte for byte; a
SIGKILLed holder's folder is usable at once; under torchrun every rank refuses, without a hang."""
import contextlib
import errno
import io
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from absl.testing import absltest, parameterized

from t5kit import cli
from t5kit.errors import UsageError
from t5kit.outputs import run_lock
from t5kit.outputs.run_folder import LOCK_FILE
from tests.helpers import REPO, OneThreadTestCase, entry_main, snapshot, tiny_flags

# A process that takes a folder's lock through run_lock.take (what step 3 calls) and keeps it; with "fork" it
# also forks a child that outlives it (as a DataLoader worker could). It prints "held <child pid or 0>" once the
# child runs Python code, so after the child's at-fork hooks (however slow the machine schedules the child).
HOLDER = """
import os, sys, time
from t5kit.outputs import run_lock
run_lock.take(sys.argv[1])
started, tell = os.pipe()
child = os.fork() if sys.argv[2:] == ["fork"] else 0
if child == 0 and sys.argv[2:] == ["fork"]:
    os.write(tell, b"x")
    time.sleep(600)
    os._exit(0)
if child:
    os.read(started, 1)
print("held", child, flush=True)
time.sleep(600)
"""
SLURM_JOB = "4242"


def start_holder(test, folder, fork=False):
    """A holder process of `folder` (SLURM_JOB_ID set, as under sbatch); killed at the end of the test."""
    env = dict(os.environ, SLURM_JOB_ID=SLURM_JOB)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(repo=str(REPO)), str(folder),
                               *(["fork"] if fork else [])], stdout=subprocess.PIPE, text=True, env=env)
    test.addCleanup(holder.wait)
    test.addCleanup(holder.kill)
    words = holder.stdout.readline().split()
    test.assertEqual(words[:1], ["held"], "the holder did not take the lock")
    child = int(words[1])
    if child:
        test.addCleanup(lambda: os.kill(child, signal.SIGKILL))
    return holder, child


def run_refused(test, entry, argv):
    """Runs an entry script through its __main__ path; returns its `error:` lines after asserting exit code 2."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), test.assertRaises(SystemExit) as exit_info:
        cli.run_cli(lambda: entry_main(entry)(argv))
    test.assertEqual(exit_info.exception.code, 2, stderr.getvalue())
    return [line for line in stderr.getvalue().splitlines() if line.startswith("error:")]


def write_a_run(folder):
    """Files of a run in progress: what a second run must leave byte for byte."""
    (folder / "checkpoint-10").mkdir(parents=True)
    (folder / "checkpoint-10" / "model.safetensors").write_bytes(b"weights")
    (folder / "config.yaml").write_text("learning_rate: 0.01\n")
    (folder / "out.log").write_text("step 10\n")


@pytest.mark.kill  # a holder process SIGKILLed, real runs refused
class SecondRunTest(OneThreadTestCase):

    @parameterized.named_parameters(
        ("pretrain_resume", "pre_train_t5", {"resume_from_checkpoint": "auto"}),
        ("pretrain_overwrite", "pre_train_t5", {"overwrite_output_dir": True}),
        ("finetune_resume", "fine_tune_t5", {"resume_from_checkpoint": "auto"}),
        ("finetune_fresh_folder", "fine_tune_t5", {}))
    def test_refused_naming_the_holder_and_nothing_changes(self, entry, flags):
        out = self.dir / "run"
        if flags:
            write_a_run(out)
        holder, _ = start_holder(self, out)
        before = snapshot(self.dir)
        argv = self.run_flags(out, **flags) if entry == "pre_train_t5" else tiny_flags(str(out), **flags)
        errors = run_refused(self, entry, argv)
        self.assertLen(errors, 1)
        self.assertIn(f"--output_dir {out} is in use by another run (host {socket.gethostname()}, pid {holder.pid}, "
                      "started ", errors[0])
        self.assertIn(f", SLURM job {SLURM_JOB}); wait for it to end or stop it, or pass another --output_dir",
                      errors[0])
        self.assertEqual(snapshot(self.dir), before)
        record = json.loads((out / LOCK_FILE).read_text())
        self.assertEqual((record["pid"], record["slurm_job_id"]), (holder.pid, SLURM_JOB))

    def test_a_sigkilled_holders_folder_is_usable_at_once(self):
        out = self.dir / "run"
        holder, _ = start_holder(self, out)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        self.assertEqual(json.loads((out / LOCK_FILE).read_text())["pid"], holder.pid)  # its record stays
        entry_main("pre_train_t5")(self.run_flags(out, max_steps=2, save_steps=2))
        self.assertTrue((out / "metrics.json").is_file())
        self.assertTrue((out / "checkpoint-2" / "manifest.json").is_file())
        self.assertFalse((out / LOCK_FILE).exists())  # a finished run leaves no lock file

    def test_a_child_the_holder_forked_does_not_keep_the_lock(self):
        out = self.dir / "run"
        holder, child = start_holder(self, out, fork=True)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        os.kill(child, 0)  # the child still runs
        lock = run_lock.take(out)
        self.addCleanup(run_lock.release, lock)
        self.assertEqual(json.loads((out / LOCK_FILE).read_text())["pid"], os.getpid())

    def test_a_run_refused_later_leaves_no_lock_and_no_folder(self):
        """Refused at step 5, after the lock: an empty folder holds no tokenizer."""
        out = self.dir / "new" / "run"
        errors = run_refused(self, "pre_train_t5", self.run_flags(out, tokenizer_name_or_path=str(self.dir)))
        self.assertLen(errors, 1)
        self.assertIn(f"--tokenizer_name_or_path {self.dir} holds no tokenizer", errors[0])
        self.assertEqual(list(self.dir.iterdir()), [])


class LockTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def test_released_at_end_on_an_error_keeps_what_was_there(self):
        (self.dir / "kept.txt").write_text("x")

        @run_lock.released_at_end
        def refused():
            run_lock.take(self.dir)
            run_lock.take(self.dir / "made" / "deeper")
            self.assertEqual(sorted(p.name for p in self.dir.iterdir()), [LOCK_FILE, "kept.txt", "made"])
            raise UsageError("later input")

        with self.assertRaisesRegex(UsageError, "later input"):
            refused()
        self.assertEqual([p.name for p in self.dir.iterdir()], ["kept.txt"])

    def test_a_file_system_that_cannot_lock_gets_a_warning_and_no_lock(self):
        out = self.dir / "run"
        no_locks = OSError(errno.ENOLCK, "No locks available")
        with mock.patch.object(run_lock.fcntl, "flock", side_effect=no_locks), \
                self.assertLogs("t5kit.outputs.run_lock", "WARNING") as logs:
            self.assertIsNone(run_lock.take(out))
        self.assertIn(f"--output_dir {out}: the file system cannot lock .lock (No locks available), so nothing stops a "
                      "second run", logs.output[0])
        self.assertEqual(run_lock._held, [])

    def test_a_second_take_in_this_process_is_refused_too(self):
        lock = run_lock.take(self.dir)
        self.addCleanup(run_lock.release, lock)
        with self.assertRaisesRegex(UsageError, f"pid {os.getpid()}, started "):
            run_lock.take(self.dir)

    def test_a_lock_file_replaced_after_the_open_is_not_the_one_locked(self):
        """A holder that ends deletes the file; a run that opened it just before must lock the new file instead."""
        path = self.dir / LOCK_FILE
        path.write_text("")
        stale = os.open(path, os.O_RDWR)
        self.addCleanup(os.close, stale)
        path.unlink()
        path.write_text("")
        self.assertFalse(run_lock.is_same_file(stale, path))
        fd = run_lock.lock_file(path)
        self.addCleanup(os.close, fd)
        self.assertTrue(run_lock.is_same_file(fd, path))


@pytest.mark.launch  # torchrun with 2 ranks
class TorchrunRefusalTest(OneThreadTestCase):

    def test_every_rank_refuses_with_exit_2_and_no_hang(self):
        out = self.dir / "run"
        write_a_run(out)
        holder, _ = start_holder(self, out)
        before = snapshot(self.dir)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = str(probe.getsockname()[1])
        torchrun = Path(sys.executable).parent / "torchrun"
        result = subprocess.run([str(torchrun), "--nproc_per_node", "2", "--master_port", port,
                                 str(REPO / "pre_train_t5.py"), *self.run_flags(out, resume_from_checkpoint="auto")],
                                cwd=REPO, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
                                timeout=240)
        self.assertNotEqual(result.returncode, 0)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        self.assertLen(errors, 2, result.stderr[-3000:])  # one per rank
        for line in errors:
            self.assertIn(f"is in use by another run (host {socket.gethostname()}, pid {holder.pid}, ", line)
        self.assertEqual(result.stderr.count("exitcode  : 2"), 2, result.stderr[-3000:])
        self.assertEqual(snapshot(self.dir), before)


if __name__ == "__main__":
    absltest.main()
