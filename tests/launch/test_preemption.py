"""train/preemption.py and slurm/requeue.sh: SIGTERM/SIGUSR1 to a real pre-training process saves a checkpoint and
exits cleanly; the requeue script requeues only a run the signal stopped, and the requeued job resumes and finishes."""
import os
import signal
import subprocess
import sys
import time

import pytest
from absl.testing import absltest, parameterized

from t5kit.outputs import run_folder
from t5kit.train import checkpointing
from tests.forked import start_forked
from tests.helpers import REPO, OneThreadTestCase

pytestmark = pytest.mark.kill  # signals to real training processes (tens of seconds each)


class PreemptionSignalTest(OneThreadTestCase):

    @parameterized.parameters("SIGTERM", "SIGUSR1")
    def test_signal_saves_a_checkpoint_and_exits_zero(self, name):
        out = self.dir / "run"
        argv = self.run_flags(out, max_steps=500, save_strategy="no")
        output = self.dir / "process.log"
        process = start_forked("pre_train_t5", argv, output)  # a process of its own (tests/forked.py)
        deadline = time.monotonic() + 300
        while "\n{'loss'" not in output.read_text():  # the first logged step: training is under way
            self.assertIsNone(process.exitcode, output.read_text()[-3000:])
            self.assertLess(time.monotonic(), deadline, "no step was logged in 300 s")
            time.sleep(0.05)
        os.kill(process.pid, getattr(signal, name))
        process.join(300)
        log = output.read_text()
        self.assertEqual(process.exitcode, 0, log[-3000:])
        self.assertIn(f"received {name}: saving checkpoint-", log)
        checkpoints = run_folder.list_checkpoints(out)
        self.assertLen(checkpoints, 1)
        self.assertLess(run_folder.checkpoint_step(checkpoints[0]), 500)
        self.assertIsNone(checkpointing.find_problem(checkpoints[0]))
        self.assertFalse((out / "model.safetensors").exists())  # stopped, not finished: no final model

    def test_requeue_script_requeues_only_a_run_the_signal_stopped(self):
        """slurm/requeue.sh around a real run, with stand-ins for scancel (forwards USR1 to the training process,
        as SLURM does) and scontrol (records the requeue): USR1 to the batch shell stops the run with a checkpoint
        and requeues the job; the requeued job (SLURM_RESTART_COUNT=1) resumes and finishes without requeueing.
        A command that finishes on its own while the signal is handled is not requeued."""
        out = self.dir / "run"
        fake_bin, requeues = self.dir / "bin", self.dir / "requeues.log"
        fake_bin.mkdir()
        for name, body in (("scancel", f'pkill -USR1 -f -- "^{sys.executable} .*{out}" || true'),
                           ("scontrol", f'echo "$*" >> {requeues}')):
            (fake_bin / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
            (fake_bin / name).chmod(0o755)
        env = dict(os.environ, PATH=f"{fake_bin}:{os.environ['PATH']}", SLURM_JOB_ID="4242",
                   SLURM_SUBMIT_DIR=str(self.dir), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
        harness = ('source slurm/requeue.sh; run() { "$@"; }; '
                   'run_requeueable "$@" ${RESUME_FLAGS[@]+"${RESUME_FLAGS[@]}"}')

        def batch_job(*command, restart=0):
            return subprocess.Popen(["bash", "-c", harness, "job", *command], cwd=REPO,
                                    env=dict(env, SLURM_RESTART_COUNT=str(restart)), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)

        training = [sys.executable, str(REPO / "pre_train_t5.py"),
                    *self.run_flags(out, max_steps=40, save_steps=100, save_total_limit=1)]
        job = batch_job(*training)
        lines = []
        for line in job.stdout:  # the first logged step: training is under way, its handlers installed
            lines.append(line)
            if line.startswith("{'loss'"):
                job.send_signal(signal.SIGUSR1)  # what SLURM sends the batch shell 300 s before the limit
                break
        lines += job.stdout.readlines()
        self.assertEqual(job.wait(timeout=300), 0, "".join(lines[-30:]))
        self.assertIn("requeueing job 4242", "".join(lines))
        self.assertEqual(requeues.read_text(), "requeue 4242\n")
        self.assertFalse((self.dir / ".t5-preempted-4242").exists())  # the marker is the script's to remove
        [stopped] = run_folder.list_checkpoints(out)

        requeued = batch_job(*training, restart=1)
        log = requeued.communicate(timeout=300)[0]
        self.assertEqual(requeued.returncode, 0, log[-3000:])
        self.assertRegex(log, rf"--resume_from_checkpoint auto: \S*{stopped.name}\b")
        self.assertTrue((out / "model.safetensors").is_file())  # finished
        self.assertEqual(requeues.read_text(), "requeue 4242\n")  # and not requeued again

        # The command says when it runs (the trap is installed by then): signalled then, not after a guessed delay.
        finishing = batch_job("bash", "-c", "echo command started; sleep 1")
        started = finishing.stdout.readline()
        self.assertEqual(started.strip(), "command started")
        finishing.send_signal(signal.SIGUSR1)
        log = started + finishing.communicate(timeout=60)[0]
        self.assertEqual(finishing.returncode, 0, log)
        self.assertIn("finished before the pre-emption signal stopped it: not requeueing", log)
        self.assertEqual(requeues.read_text(), "requeue 4242\n")


if __name__ == "__main__":
    absltest.main()
