"""One sweep trial: the sweep's `command` with W&B's macros expanded, run as a subprocess, watched for evaluations.

The program writes OUTPUT_DIR/eval_log.jsonl as it evaluates (train/callbacks.py) and metrics.json at the end. While it
runs, each new value of the sweep metric is handed to `report` (Optuna's trial.report/should_prune); when that
says prune, the program's whole process group is stopped (accelerate launch has children).
"""
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from t5kit.outputs.run_folder import EVAL_LOG_FILE, METRICS_FILE

ARGS_MACROS = ("${args}", "${args_no_hyphens}", "${args_no_boolean_flags}", "${args_json}", "${args_json_file}")
POLL_S = 0.1  # how often the program is checked and its eval log read (a poll and a read of new lines)
STOP_GRACE_S = 10  # SIGTERM, then SIGKILL after this long
STDERR_TAIL_CHARS = 2000  # what a failed trial records of its stderr


@dataclass
class TrialOutcome:
    state: str  # "complete" | "pruned" | "fail"
    value: float | None = None
    detail: str = ""  # the stderr tail of a failed run
    reported: tuple = ()  # metric names the program wrote, for a missing-metric message


def flag_text(value):
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def expand_command(command, program, flag_values, json_file):
    """W&B agent's macros: ${env}, ${interpreter} (this Python), ${program}, ${args} (--k=v), ${args_no_hyphens}
    (k=v), ${args_no_boolean_flags} (--k for true, nothing for false), ${args_json}, ${args_json_file}."""
    present = {k: v for k, v in flag_values.items() if v is not None}  # None: leave the flag at its default
    expansions = {
        "${env}": ["/usr/bin/env"], "${interpreter}": [sys.executable], "${program}": [program],
        "${args}": [f"--{k}={flag_text(v)}" for k, v in present.items()],
        "${args_no_hyphens}": [f"{k}={flag_text(v)}" for k, v in present.items()],
        "${args_no_boolean_flags}": [f"--{k}" if v is True else f"--{k}={flag_text(v)}"
                                     for k, v in present.items() if v is not False],
        "${args_json}": [json.dumps(present)], "${args_json_file}": [str(json_file)],
    }
    if "${args_json_file}" in command:
        Path(json_file).write_text(json.dumps(present))
    return [part for token in command for part in expansions.get(token, [token])]


def wandb_agent_command(command, program, flag_values, run_id):
    """The command `wandb agent` runs for the W&B run `run_id` (macros expanded as it expands them), and the
    environment it runs it in: the agent sets WANDB_RUN_ID per run, which a sweep YAML's
    `--output_dir=runs/sweeps/NAME/${WANDB_RUN_ID}` turns into one folder per run (T5TrainingArguments expands it).
    For dry runs and tests: what concurrent agents would do, without a W&B server."""
    argv = expand_command(list(command), program, flag_values, json_file=f"wandb/config-{run_id}.json")
    return argv, {"WANDB_RUN_ID": run_id}


def base_config_files(command):
    """YAML configs the command passes to the program before its flags (e.g. configs/glue/sst2.yaml)."""
    start = command.index("${program}") + 1
    return [token for token in command[start:] if token.endswith((".yaml", ".yml")) and "${" not in token]


def trial_env(study_name, trial_number):
    """The trial sees this sweep's Python first on PATH (for `accelerate`), and W&B (if the program reports to it)
    logs offline, grouped by sweep: no W&B server is involved here."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("WANDB_MODE", "offline")
    env.setdefault("WANDB_RUN_GROUP", study_name)
    env.setdefault("WANDB_NAME", f"{study_name}-trial-{trial_number}")
    # One W&B run per trial, as `wandb agent` gives each run its id (a sweep YAML's --output_dir may name it).
    env["WANDB_RUN_ID"] = re.sub(r"[^A-Za-z0-9_-]", "-", f"{study_name}-trial-{trial_number}")[:64]
    return env


class EvalLogReader:
    """New values of one metric from a growing eval_log.jsonl; a line still being written is left for later."""

    def __init__(self, path, metric):
        self.path, self.metric, self.offset, self.names = Path(path), metric, 0, set()

    def new_values(self):
        if not self.path.is_file():
            return []
        with open(self.path) as handle:
            handle.seek(self.offset)
            text = handle.read()
        complete = text[:text.rfind("\n") + 1]
        self.offset += len(complete.encode())
        values = []
        for line in complete.splitlines():
            record = json.loads(line)
            self.names.update(record)
            if isinstance(record.get(self.metric), (int, float)):
                values.append(float(record[self.metric]))
        return values


def stop_process_group(proc):
    """SIGTERM to the program and its children, SIGKILL if they outlive the grace period."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def log_paths(log_prefix):
    """Where a trial's program writes its stdout and stderr: SWEEP_DIR/logs/trial_NNNN.{stdout,stderr}.log."""
    return Path(f"{log_prefix}.stdout.log"), Path(f"{log_prefix}.stderr.log")


def error_line(stderr_path, limit=STDERR_TAIL_CHARS):
    """What a failed program said last: its last `error:` line (a refusal), else its last line (a traceback's
    exception); None without a log."""
    if not Path(stderr_path).is_file():
        return None
    lines = [line.strip() for line in Path(stderr_path).read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    return (errors or lines or ["(nothing on stderr)"])[-1][:limit]


def run_trial(argv, trial_dir, log_prefix, env, metric, report, heartbeat, heartbeat_interval):
    """Runs the program to the end, or until `report(value)` returns True (prune). Returns a TrialOutcome."""
    reader = EvalLogReader(Path(trial_dir) / EVAL_LOG_FILE, metric)
    stdout_path, stderr_path = log_paths(log_prefix)
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    with open(stdout_path, "w") as out, open(stderr_path, "w") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, start_new_session=True)
        try:
            last_beat = time.monotonic()
            while proc.poll() is None:
                if any(report(value) for value in reader.new_values()):
                    stop_process_group(proc)
                    return TrialOutcome("pruned")
                if time.monotonic() - last_beat > heartbeat_interval:
                    heartbeat()
                    last_beat = time.monotonic()
                time.sleep(POLL_S)
        except BaseException:  # the agent is interrupted: its program must not outlive it
            stop_process_group(proc)
            raise
    for value in reader.new_values():
        report(value)  # evaluations written just before exit still belong to the learning curve
    if proc.returncode != 0:
        tail = stderr_path.read_text(errors="replace")[-STDERR_TAIL_CHARS:].strip()
        return TrialOutcome("fail", detail=f"exit code {proc.returncode}; stderr: ...{tail}")
    return final_outcome(Path(trial_dir), metric, reader)


def final_outcome(trial_dir, metric, reader):
    """The metric from metrics.json (top level, else its last log_history entry), else the last eval log value."""
    metrics_path = trial_dir / METRICS_FILE
    summary = json.loads(metrics_path.read_text()) if metrics_path.is_file() else {}
    history = summary.get("log_history", [])
    names = set(reader.names) | {k for k, v in summary.items() if isinstance(v, (int, float))} \
        | {k for entry in history for k in entry}
    value = summary.get(metric)
    if value is None:
        value = next((entry[metric] for entry in reversed(history) if metric in entry), None)
    if value is None:
        values = [record for record in read_eval_log(trial_dir) if metric in record]
        value = values[-1][metric] if values else None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        names.discard("step")
        return TrialOutcome("fail", reported=tuple(sorted(names)),
                            detail=f"metric {metric!r} missing or not a number in {metrics_path}")
    return TrialOutcome("complete", value=float(value))


def read_eval_log(trial_dir):
    path = Path(trial_dir) / EVAL_LOG_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
