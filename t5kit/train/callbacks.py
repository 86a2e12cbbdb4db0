"""The TrainerCallbacks both trainers use (docs/architecture.md lists them in call order):

- ThroughputCallback: `tokens_per_second` on every training log line;
- WandbConfigCallback: the run record (config.yaml's flags and derived values) into the W&B run config;
- EvalLogCallback: one JSON line per evaluation in OUTPUT_DIR/eval_log.jsonl, as it happens (sweep.py reads it
  while a trial trains, so an early-terminating sweep can stop a poor trial after a few evaluations);
- CollatorEpochCallback: new span-corruption masks each epoch (pre-training), and the packing sampler's epoch;
- RunLogCallback: every log line the Trainer prints (loss, lr, tokens/s, evaluations) into out.log too.
"""
import json
import logging
import math
import sys
import time
from pathlib import Path

from transformers import TrainerCallback

from t5kit.outputs.atomic_files import atomic_write
from t5kit.outputs.run_folder import EVAL_LOG_FILE
from t5kit.outputs.run_logging import RUN_LOG_ONLY

logger = logging.getLogger(__name__)
EVAL_PREFIX = "eval_"


class ThroughputCallback(TrainerCallback):
    """Adds `tokens_per_second` (encoder + decoder tokens, all processes) to every training log line."""

    def __init__(self, tokens_per_step):
        self.tokens_per_step = tokens_per_step
        self.last_time = self.last_step = None

    def on_step_begin(self, args, state, control, **kwargs):
        if self.last_time is None:  # start the clock at the first step, after data loading and set-up
            self.last_time, self.last_step = time.perf_counter(), state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is None or "loss" not in logs or self.last_time is None:
            return
        now = time.perf_counter()
        steps = state.global_step - self.last_step
        if steps > 0:
            rate = round(steps * self.tokens_per_step / (now - self.last_time), 1)
            logs["tokens_per_second"] = rate  # the printed line / report_to
            # Trainer appended this log to log_history before calling callbacks; metrics.json reads it there.
            if state.log_history and state.log_history[-1].get("step") == state.global_step:
                state.log_history[-1]["tokens_per_second"] = rate
        self.last_time, self.last_step = now, state.global_step


class WandbConfigCallback(TrainerCallback):
    """Puts the run record (every flag, ours too, and the derived values: what config.yaml holds) into the W&B run
    config; HF's WandbCallback logs only the TrainingArguments. The record never holds secrets."""

    def __init__(self, record):
        self.record = record

    def on_train_begin(self, args, state, control, **kwargs):
        run = getattr(sys.modules.get("wandb"), "run", None)
        if run is not None and state.is_world_process_zero:
            run.config.update(self.record, allow_val_change=True)


class EvalLogCallback(TrainerCallback):
    """Appends `{"step": global_step, "eval_...": value, ...}` for every logged evaluation (rank 0 only).

    on_log, not on_evaluate: it also sees metrics a Trainer logs after evaluating, such as the multi-task
    `eval_average`. Each line is written with one append and flushed, so a reader polling the file sees whole
    lines (it must ignore a last line without its newline).
    """

    def on_train_begin(self, args, state, control, **kwargs):
        """The log is this run's: a fresh start (into a folder --overwrite_output_dir lets it reuse) drops an earlier
        run's lines, a resumed run keeps those up to its checkpoint's step and drops any written after it."""
        path = Path(args.output_dir) / EVAL_LOG_FILE
        if not state.is_world_process_zero or not path.is_file():
            return
        kept = [line for line in path.read_text().splitlines(keepends=True)
                if line.endswith("\n") and json.loads(line)["step"] <= state.global_step]
        with atomic_write(path) as handle:
            handle.writelines(kept)

    def on_log(self, args, state, control, logs=None, **kwargs):
        evals = {key: value for key, value in (logs or {}).items() if key.startswith(EVAL_PREFIX)}
        if not evals or not state.is_world_process_zero:
            return
        path = Path(args.output_dir) / EVAL_LOG_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:
            handle.write(json.dumps({"step": state.global_step, **evals}) + "\n")


class CollatorEpochCallback(TrainerCallback):
    """New noise masks each epoch; state.epoch is restored on resume, so a resumed run draws the same ones. Any
    other object with set_epoch given (--packing's batch sampler) follows the same epoch: accelerate does not reach
    a batch sampler wrapped twice (sharded, then skipping a resumed run's batches)."""

    def __init__(self, *collators):
        self.collators = collators

    def on_epoch_begin(self, args, state, control, **kwargs):
        for collator in self.collators:
            collator.set_epoch(math.floor(state.epoch + 1e-6))  # state.epoch is a float progress counter


class RunLogCallback(TrainerCallback):
    """Logs each of the Trainer's log lines, as `step N/T: {...}`, into out.log (rank 0). The Trainer prints them
    (PrinterCallback, or tqdm's write) instead of logging them, so without this out.log would hold no loss; the
    record is marked for out.log alone because the console shows the printed line already. Listed after
    ThroughputCallback, so the line carries tokens_per_second."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and state.is_world_process_zero:
            logger.info("step %d/%d: %s", state.global_step, state.max_steps, json.dumps(logs),
                        extra={RUN_LOG_ONLY: True})
