"""Scripts run as processes of their own, forked from one interpreter that imported torch, transformers and the
entry scripts once (a multiprocessing fork server per test process): a real process (its exit code, signals, SIGKILL)
started in ~0.1 s instead of the ~6 s an interpreter takes to import them. For the tests that SIGKILL or signal a run,
read its exit code, or run the GPU check's commands; each script's own command-line test still starts `python X.py`.
run_ranks starts the processes of a two-process run the same way, in torchrun's place (the real launchers have tests
of their own in tests/launch/test_distributed.py).
"""
import functools
import gc
import importlib
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
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
    cli.run_cli; script "-c": argv[0] is Python code, run as `python -c CODE ARGV...` runs it), ending as an
    interpreter does (atexit)."""
    import atexit

    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    for stream in (sys.stdout, sys.stderr):  # each line in the file as it is printed, as on a terminal
        stream.reconfigure(line_buffering=True)
    os.chdir(REPO)
    os.environ.update(env)
    torch.set_num_threads(1)  # two threads per process on a shared 2-core machine run ~10x slower
    gc.freeze()  # what the fork server imported stays out of each full collection (tests/conftest.py says why)
    if setup:
        setup[0](*setup[1:])
    from t5kit import cli

    if script == "-c":
        sys.argv = ["-c", *argv[1:]]
        main = functools.partial(exec, compile(argv[0], "<string>", "exec"), {"__name__": "__main__"})
    else:
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
    """Starts an entry script (ENTRY_SCRIPTS), a bench script ("bench/NAME") or Python code ("-c", the code first in
    argv) in a process forked from fork_server(), its output into log_path; returns the multiprocessing Process (pid,
    join, exitcode: -9 when SIGKILLed)."""
    if script not in ENTRY_SCRIPTS and not script.startswith("bench/") and script != "-c":
        raise ValueError(f"{script} is neither an entry script ({', '.join(ENTRY_SCRIPTS)}), bench/NAME nor -c")
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


def accelerate_launch_args(argv):
    """`accelerate launch ARGV`'s arguments as accelerate's own parser and checks leave them, with the one field its
    launch_command adds (the DeepSpeed keys of an accelerate config file): what its prepare_*_env functions read to
    make the environment of the processes it would start."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    args, defaults, _ = _validate_launch_command(launch_command_parser().parse_args(argv))
    args.deepspeed_fields_from_accelerate_config = list(defaults.deepspeed_config.keys()) if defaults else []
    return args


CAUSE_MARKERS = re.compile(r"Error|error:|terminate called|Traceback|Signal \d+|exitcode")


def rank_environment(rank, nproc, port):
    """What torchrun's agent exports to each process of a one-node run (torch.distributed.elastic's
    LocalElasticAgent), the store being the agent's (TORCHELASTIC_USE_AGENT_STORE)."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "GROUP_RANK": "0", "ROLE_RANK": str(rank),
            "ROLE_NAME": "default", "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc), "GROUP_WORLD_SIZE": "1",
            "ROLE_WORLD_SIZE": str(nproc), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": "forked",
            "TORCHELASTIC_USE_AGENT_STORE": "True", "OMP_NUM_THREADS": "1"}


def first_failure(ranks):
    return next((f"rank {n} exited {rank.exitcode}" for n, rank in enumerate(ranks) if rank.exitcode), None)


def run_ranks(script, argv, nproc=2, env=None, timeout=480):
    """`torchrun --nproc_per_node NPROC SCRIPT.py ARGV` (script as start_forked takes it), each process forked from
    fork_server() with torchrun's environment (rank_environment, plus `env`), joining the TCPStore this process hosts,
    as torchrun's agent does. When a process fails the others are stopped, as torchrun stops them, and an
    AssertionError names the lines that say why; a run past `timeout` seconds fails too. Returns a CompletedProcess
    whose stdout and stderr hold every process's output, rank 0's first."""
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=timeout))
    with tempfile.TemporaryDirectory(prefix="ranks-") as folder:
        logs = [Path(folder) / f"rank{rank}.log" for rank in range(nproc)]
        ranks = [start_forked(script, argv, log, {**(env or {}), **rank_environment(rank, nproc, store.port)})
                 for rank, log in enumerate(logs)]
        deadline = time.monotonic() + timeout
        while not (failed := first_failure(ranks)) and any(rank.exitcode is None for rank in ranks):
            if time.monotonic() > deadline:
                failed = f"not done in {timeout} s"
                break
            time.sleep(0.05)
        for rank in ranks:  # after a failure the others may wait for the failed one forever
            if rank.exitcode is None:
                rank.kill()
            rank.join()
        output = "".join(log.read_text() for log in logs)
    del store
    if failed:
        causes = [line for line in output.splitlines() if CAUSE_MARKERS.search(line)]
        raise AssertionError(f"{script} on {nproc} forked ranks: {failed}; lines naming the cause:\n"
                             + "\n".join(causes[-20:]) + f"\n... output tail:\n{output[-3000:]}")
    return subprocess.CompletedProcess([f"{script}.py", *argv], 0, output, output)
