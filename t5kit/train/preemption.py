"""Clean pre-emption: on SIGTERM or SIGUSR1 (what SLURM sends before it kills or requeues a job, e.g. with
`#SBATCH --signal=B:USR1@300`), save a checkpoint at the next optimizer-step boundary and exit with
PREEMPTED_EXIT_CODE, so the job can be requeued and resumed with `--resume_from_checkpoint auto`.

The handler only sets a flag: saving inside a signal handler could interrupt a half-done optimizer step or a
save in progress. Signals that arrive before training starts (data loading) keep their usual meaning (terminate).
After training has finished, SIGUSR1 (SLURM's early warning) is ignored so the final save and evaluation
complete; SIGTERM still terminates.

A stop for pre-emption and a finished run both exit 0 (launchers such as torchrun report any other code as a
failure). So that slurm/requeue.sh requeues only the former, rank 0 writes the file named by $T5_PREEMPTED_MARKER
(set by that script) when it stops for pre-emption.
"""
import logging
import os
import signal
import threading

import torch
from transformers import TrainerCallback

from t5kit.outputs.atomic_files import write_json
from t5kit.train.deferred_read import DeferredRead

logger = logging.getLogger(__name__)

PREEMPTION_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
PREEMPTED_EXIT_CODE = 0  # a clean stop: the checkpoint is committed; the sbatch trap decides to requeue
PREEMPTED_MARKER_ENV = "T5_PREEMPTED_MARKER"


class PreemptionCallback(TrainerCallback):
    """Turns a pre-emption signal into: save at the end of this step, stop training, exit PREEMPTED_EXIT_CODE."""

    def __init__(self):
        self.received = None  # the signal number, once one arrived
        self.stopping = False
        self.previous_handlers = {}
        self.reduced = None  # DeferredRead of the last step's all-reduced flag (distributed runs)

    def on_train_begin(self, args, state, control, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            return  # Python only lets the main thread install handlers
        for signum in PREEMPTION_SIGNALS:
            self.previous_handlers[signum] = signal.signal(signum, self.note_signal)

    def note_signal(self, signum, frame):
        self.received = signum

    def on_step_end(self, args, state, control, **kwargs):
        if self.any_process_received(args):
            logger.warning("received %s: saving checkpoint-%d and stopping (resume with --resume_from_checkpoint "
                           "auto)", signal.Signals(self.received or signal.SIGTERM).name, state.global_step)
            control.should_save = True
            control.should_training_stop = True
            self.stopping = True

    def any_process_received(self, args):
        """All processes must stop at the same step (the save is collective): one all-reduce of a flag per step,
        read at the next step (deferred_read.py: no GPU sync), so every process stops one step after the step
        whose all-reduce saw the signal."""
        flag = self.received is not None
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            return flag
        previous, self.reduced = self.reduced, None
        tensor = torch.full((1,), float(flag), device=args.device)  # filled on the device: no host-to-GPU copy
        torch.distributed.all_reduce(tensor)
        self.reduced = DeferredRead(tensor)
        return previous is not None and previous.read()[0] > 0

    def on_train_end(self, args, state, control, **kwargs):
        for signum, handler in self.previous_handlers.items():
            signal.signal(signum, handler)
        if self.previous_handlers and not self.stopping:
            signal.signal(signal.SIGUSR1, ignore_late_warning)  # only the final save/evaluate remain
        self.previous_handlers = {}
        if self.stopping:
            marker = os.environ.get(PREEMPTED_MARKER_ENV)
            if marker and state.is_world_process_zero:
                write_json(marker, {"step": state.global_step, "output_dir": args.output_dir})
            # Skip the entry script's final save/evaluate: the job has minutes left and the run is not finished.
            logger.warning("pre-empted at step %d; checkpoint saved, exiting with code %d", state.global_step,
                           PREEMPTED_EXIT_CODE)
            raise SystemExit(PREEMPTED_EXIT_CODE)


def ignore_late_warning(signum, frame):
    logger.warning("received SIGUSR1 after training finished: completing the final save and evaluation")
