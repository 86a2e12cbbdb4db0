"""What a run logs: per-process log levels, the start-up summary, and tokens/s during training."""
import logging
import sys
import time

import datasets
import transformers
from transformers import TrainerCallback

logger = logging.getLogger(__name__)


def setup_logging(training_args):
    """One format for every module; replicas log warnings only, as HF examples do."""
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S",
                        handlers=[logging.StreamHandler(sys.stdout)], force=True)
    # HF's default log_level "passive" would leave the main process at WARNING and hide the start-up summary.
    level = training_args.get_process_log_level()
    if training_args.should_log and training_args.log_level == "passive":
        level = logging.INFO
    logging.getLogger().setLevel(level)
    datasets.utils.logging.set_verbosity(level)
    transformers.utils.logging.set_verbosity(level)
    logger.warning("process rank %d of %d, device %s, bf16 %s, fp16 %s", training_args.process_index,
                   training_args.world_size, training_args.device, training_args.bf16, training_args.fp16)


def global_batch_size(training_args):
    """Examples per optimizer step: per-device batch x gradient accumulation x world size."""
    return (training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
            * training_args.world_size)


def log_run_summary(flags, num_parameters, tokens_per_example, training_args):
    """Start-up lines that let you trust a run: flags, model size, batch and tokens per optimizer step."""
    logger.info("resolved flags: %s", flags)
    batch = global_batch_size(training_args)
    precision = "bf16" if training_args.bf16 else "fp16" if training_args.fp16 else "fp32"
    logger.info("parameters: %.2fM | global batch %d = %d per device x %d accumulation x %d processes | "
                "%d tokens per optimizer step | %s", num_parameters / 1e6, batch,
                training_args.per_device_train_batch_size, training_args.gradient_accumulation_steps,
                training_args.world_size, batch * tokens_per_example, precision)


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
    """Puts every resolved flag (ours too, not only HF's) into the W&B run config; HF's WandbCallback logs only
    the TrainingArguments. resolved_flags never holds secrets (flags.UNSAVED_KEYS)."""

    def __init__(self, resolved):
        self.resolved = resolved

    def on_train_begin(self, args, state, control, **kwargs):
        run = getattr(sys.modules.get("wandb"), "run", None)
        if run is not None and state.is_world_process_zero:
            run.config.update({"flags": self.resolved}, allow_val_change=True)
