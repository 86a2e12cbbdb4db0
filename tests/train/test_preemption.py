"""train/preemption.py's PreemptionCallback: SIGTERM or SIGUSR1 during training becomes a save and a stop at the next
step's end, every process stopping at the same step; the handlers are put back after training (a late SIGUSR1 then
only warns), and a pre-empted run writes the requeue marker (rank 0) and exits with PREEMPTED_EXIT_CODE. (Real
processes signalled and requeued: tests/launch/test_preemption.py.)"""
import json
import logging
import os
import signal
import threading
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import torch
from absl.testing import absltest, parameterized

from t5kit.train import preemption


def control():
    return SimpleNamespace(should_save=False, should_training_stop=False)


class PreemptionCallbackTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        for signum in preemption.PREEMPTION_SIGNALS:
            self.addCleanup(signal.signal, signum, signal.getsignal(signum))
        self.args = SimpleNamespace(device=torch.device("cpu"), output_dir=self.create_tempdir().full_path)
        self.state = SimpleNamespace(global_step=12, is_world_process_zero=True)

    def test_a_signal_during_training_saves_and_stops_at_the_steps_end(self):
        callback = preemption.PreemptionCallback()
        callback.on_train_begin(self.args, self.state, control())
        self.assertEqual(signal.getsignal(signal.SIGUSR1), callback.note_signal)
        quiet = control()
        callback.on_step_end(self.args, self.state, quiet)
        self.assertEqual((quiet.should_save, quiet.should_training_stop), (False, False))
        os.kill(os.getpid(), signal.SIGUSR1)  # SLURM's early warning, handled in this (the main) thread
        self.assertEqual(callback.received, signal.SIGUSR1)
        stopped = control()
        with self.assertLogs("t5kit.train.preemption", logging.WARNING) as logs:
            callback.on_step_end(self.args, self.state, stopped)
        self.assertEqual((stopped.should_save, stopped.should_training_stop, callback.stopping), (True, True, True))
        self.assertIn("received SIGUSR1: saving checkpoint-12 and stopping (resume with --resume_from_checkpoint "
                      "auto)", logs.output[0])

    def test_after_training_the_handlers_are_put_back_and_a_late_warning_is_ignored(self):
        before = signal.getsignal(signal.SIGTERM)
        callback = preemption.PreemptionCallback()
        callback.on_train_begin(self.args, self.state, control())
        callback.on_train_end(self.args, self.state, control())  # a finished run: no exit here
        self.assertEqual(signal.getsignal(signal.SIGTERM), before)
        self.assertIs(signal.getsignal(signal.SIGUSR1), preemption.ignore_late_warning)
        with self.assertLogs("t5kit.train.preemption", logging.WARNING) as logs:
            os.kill(os.getpid(), signal.SIGUSR1)
        self.assertIn("received SIGUSR1 after training finished", logs.output[0])

    def test_outside_the_main_thread_no_handler_is_installed(self):
        before = signal.getsignal(signal.SIGTERM)
        callback = preemption.PreemptionCallback()
        thread = threading.Thread(target=callback.on_train_begin, args=(self.args, self.state, control()))
        thread.start()
        thread.join()
        self.assertEqual((callback.previous_handlers, signal.getsignal(signal.SIGTERM)), ({}, before))

    @parameterized.named_parameters(("rank_0", True, True), ("other_rank", False, False))
    def test_a_pre_empted_run_writes_the_marker_and_exits_0(self, rank_zero, written):
        marker = Path(self.args.output_dir) / "preempted.json"
        callback = preemption.PreemptionCallback()
        callback.on_train_begin(self.args, self.state, control())
        callback.received, callback.stopping = signal.SIGTERM, True
        state = SimpleNamespace(global_step=12, is_world_process_zero=rank_zero)
        with mock.patch.dict(os.environ, {preemption.PREEMPTED_MARKER_ENV: str(marker)}), \
                self.assertRaises(SystemExit) as exit_info:
            callback.on_train_end(self.args, state, control())
        self.assertEqual(exit_info.exception.code, preemption.PREEMPTED_EXIT_CODE)
        self.assertEqual(preemption.PREEMPTED_EXIT_CODE, 0)
        self.assertEqual(marker.is_file(), written)
        if written:
            self.assertEqual(json.loads(marker.read_text()), {"step": 12, "output_dir": self.args.output_dir})

    def test_one_process_decides_alone(self):
        callback = preemption.PreemptionCallback()
        self.assertFalse(callback.any_process_received(self.args))
        callback.received = signal.SIGTERM
        self.assertTrue(callback.any_process_received(self.args))


class PreemptionFlagTest(absltest.TestCase):
    """In a distributed run every process stops one step after the all-reduce that saw a signal."""

    def test_all_processes_stop_one_step_after_the_signal(self):
        callback = preemption.PreemptionCallback()
        args = mock.Mock(device=torch.device("cpu"))
        summed = []
        with mock.patch.object(torch.distributed, "is_initialized", return_value=True), \
                mock.patch.object(torch.distributed, "all_reduce", side_effect=lambda t: summed.append(t.clone())):
            decisions = [callback.any_process_received(args)]
            callback.received = 15  # SIGTERM arrives during step 2
            decisions += [callback.any_process_received(args), callback.any_process_received(args)]
        self.assertEqual(decisions, [False, False, True])
        self.assertEqual([t.tolist() for t in summed], [[0.0], [1.0], [1.0]])


if __name__ == "__main__":
    absltest.main()
