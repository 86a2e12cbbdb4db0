"""Evaluation metrics as they happen: one JSON line per evaluation in OUTPUT_DIR/eval_log.jsonl.

metrics.json is written once, at the end of a run; sweep.py reads this file while the run trains so that an
early-terminating sweep (hyperband) can stop a poor trial after a few evaluations. Wiring, in an entry script:

    callbacks=[run_logging.ThroughputCallback(tokens_per_step), eval_log.EvalLogCallback()]
"""
import json
from pathlib import Path

from transformers import TrainerCallback

EVAL_LOG_FILE = "eval_log.jsonl"
EVAL_PREFIX = "eval_"


class EvalLogCallback(TrainerCallback):
    """Appends `{"step": global_step, "eval_...": value, ...}` for every logged evaluation (rank 0 only).

    on_log, not on_evaluate: it also sees metrics a Trainer logs after evaluating, such as the multi-task
    `eval_average`. Each line is written with one append and flushed, so a reader polling the file sees whole
    lines (it must ignore a last line without its newline).
    """

    def on_log(self, args, state, control, logs=None, **kwargs):
        evals = {key: value for key, value in (logs or {}).items() if key.startswith(EVAL_PREFIX)}
        if not evals or not state.is_world_process_zero:
            return
        path = Path(args.output_dir) / EVAL_LOG_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:
            handle.write(json.dumps({"step": state.global_step, **evals}) + "\n")
