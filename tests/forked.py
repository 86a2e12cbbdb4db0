"""Scripts run as processes of their own, forked from one interpreter that imported torch, transformers and the
entry scripts once (a multiprocessing fork server per test process): a real process (its exit code, signals, SIGKILL)
started in ~0.1 s instead of the ~6 s an interpreter takes to import them. For the tests that SIGKILL or signal a run,
read its exit code, or run the GPU check's commands; each script's own command-line test still starts `python X.py`.
"""
import functools
import importlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from tests.helpers import ENTRY_SCRIPTS, REPO

FORK_PRELOAD = ("torch", "transformers", "datasets", "accelerate", "pre_train_t5", "fine_tune_t5", "predict_t5",
                "tests.forked")


@functools.cache
def fork_server():
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(FORK_PRELOAD))
    return context


def _forked_main(script, argv, log_path, env, setup):
    """The forked process: stdout and stderr into log_path, `setup` (a module-level function and its arguments:
    fault injection) called, then the script's main() as `python SCRIPT.py ARGV` runs it (an entry script through
    cli.run_cli), ending as an interpreter does (atexit)."""
    import atexit

    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    for stream in (sys.stdout, sys.stderr):  # each line in the file as it is printed, as on a terminal
        stream.reconfigure(line_buffering=True)
    os.chdir(REPO)
    os.environ.update(env)
    torch.set_num_threads(1)  # two threads per process on a shared 2-core machine run ~10x slower
    if setup:
        setup[0](*setup[1:])
    from t5kit import cli

    sys.argv = [f"{script}.py", *argv]
    main = importlib.import_module(script.replace("/", ".")).main
    code = 0
    try:
        cli.run_cli(main) if script in ENTRY_SCRIPTS else main()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        if isinstance(stop.code, str):  # sys.exit("message"): the interpreter prints it and exits 1
            print(stop.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def start_forked(script, argv, log_path, env=None, setup=None):
    """Starts an entry script (ENTRY_SCRIPTS) or a bench script ("bench/NAME") in a process forked from
    fork_server(), its output into log_path; returns the multiprocessing Process (pid, join, exitcode: -9 when
    SIGKILLed)."""
    if script not in ENTRY_SCRIPTS and not script.startswith("bench/"):
        raise ValueError(f"{script} is neither an entry script ({', '.join(ENTRY_SCRIPTS)}) nor bench/NAME")
    Path(log_path).write_text("")  # there to read from the start
    process = fork_server().Process(target=_forked_main, args=(script, list(argv), str(log_path), env or {}, setup))
    process.start()
    return process


def run_forked(script, argv, env=None, setup=None, timeout=300):
    """start_forked, waited for: a CompletedProcess whose returncode is the process's and whose stdout and stderr
    both hold its interleaved output."""
    with tempfile.NamedTemporaryFile("r", suffix=".log") as log:
        process = start_forked(script, argv, log.name, env, setup)
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(f"{script}.py", timeout, output=log.read())
        output = log.read()
    return subprocess.CompletedProcess([f"{script}.py", *argv], process.exitcode, output, output)
