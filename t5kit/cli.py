"""How an entry script's `__main__` runs main(): a UsageError becomes one `error:` line and exit code 2, and a
distributed run leaves its process group without the interpreter's teardown.

    if __name__ == "__main__":
        cli.run_cli(main)
"""
import atexit
import logging
import os
import sys
import threading

from t5kit.errors import UsageError
from t5kit.outputs.run_logging import RUN_LOG_ONLY

logger = logging.getLogger(__name__)


def run_cli(main):
    """Runs main() for `__main__`: a UsageError becomes one `error:` line and exit code 2; a run that finished,
    or stopped cleanly for pre-emption (SystemExit 0, train/preemption.py), leaves its process group. A process
    that was in a group then ends without the interpreter's teardown (exit_before_teardown). Any other exception
    is a bug and keeps its traceback (exit code 1)."""
    try:
        main()
    except UsageError as err:
        log_to_run_log_only(logging.ERROR, "error: %s", err)
        # one write of the whole line: print() writes the text and its newline apart, and under a launcher every
        # refusing rank shares the pipe, so two ranks' lines ran together on one line now and then
        sys.stderr.write(f"error: {err}\n")
        sys.stderr.flush()
        if in_process_group():  # refused after the launcher's group was formed: the group is not left (see below)
            exit_before_teardown(2)
        sys.exit(2)
    except SystemExit as stop:
        if stop.code not in (0, None):
            raise
    except BaseException:
        log_to_run_log_only(logging.CRITICAL, "the run ended with an exception", exc_info=True)
        raise
    if in_process_group():
        leave_process_group()
        exit_before_teardown(0)


def log_to_run_log_only(level, message, *args, exc_info=False):
    """Puts how the run ended into out.log, where a run log is set up. A process that set up no logging has no run
    log, and Python's last-resort handler would print the record on stderr a second time: nothing is logged then."""
    if logging.getLogger().handlers:
        logger.log(level, message, *args, exc_info=exc_info, extra={RUN_LOG_ONLY: True})


def in_process_group():
    """Whether this process is in a torch.distributed group; imports no torch if nothing has (flag parsing)."""
    distributed = sys.modules.get("torch.distributed")
    return bool(distributed and distributed.is_available() and distributed.is_initialized())


def leave_process_group():
    """Destroys the distributed process group. Only after success: a rank leaving while another is still inside a
    collective could hang it."""
    import torch.distributed

    torch.distributed.destroy_process_group()


def exit_before_teardown(code):
    """Ends a distributed process with `code` as Python's own exit does (threads joined, atexit handlers run: logs,
    W&B, read-ahead threads, streams flushed) but without tearing the interpreter down.

    Why: a gloo worker thread may still be releasing the tensors of the last collective. destroy_process_group does
    not stop it while DeepSpeed or accelerate still hold the group, and if it takes the GIL once the teardown has
    begun, the rank aborts ("terminate called without an active exception", SIGABRT, a failed launch; PyTorch
    checks Py_IsInitialized but not finalization, pytorch/pytorch#190489)."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # private, but the only way to run the handlers without the teardown that follows
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
