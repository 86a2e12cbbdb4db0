"""What a run logs: the console and out.log handlers, per-process log levels and the start-up summary (tokens/s:
train/callbacks.py; out.log itself: out_log.py)."""
import logging
import sys

import datasets
import transformers

from t5kit.outputs import out_log

logger = logging.getLogger(__name__)
CONSOLE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CONSOLE_DATE_FORMAT = "%H:%M:%S"


def console_handler():
    """stdout, secrets masked, without the records meant for out.log alone."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(out_log.MaskingFormatter(CONSOLE_FORMAT, CONSOLE_DATE_FORMAT))
    handler.addFilter(out_log.console_only)
    return handler


def setup_console_logging(level=logging.INFO):
    """For commands that write no run folder (predict_t5.py): the console alone."""
    logging.basicConfig(handlers=[console_handler()], level=level, force=True)
    logging.captureWarnings(True)


def setup_logging(training_args):
    """One format for every module; replicas log warnings only, as HF examples do. out.log (out_log.py) collects
    the same records, held in memory until step 8 opens the file."""
    logging.basicConfig(handlers=[console_handler()], force=True)
    out_log.attach(out_log.RunLogHandler(training_args.process_index))
    logging.captureWarnings(True)  # warnings.warn from any library: into the log, and so into out.log
    # HF's default log_level "passive" would leave the main process at WARNING and hide the start-up summary.
    level = training_args.get_process_log_level()
    if training_args.should_log and training_args.log_level == "passive":
        level = logging.INFO
    logging.getLogger().setLevel(level)
    datasets.utils.logging.set_verbosity(level)
    transformers.utils.logging.set_verbosity(level)
    logger.warning("process rank %d of %d, device %s, bf16 %s, fp16 %s", training_args.process_index,
                   training_args.world_size, training_args.device, training_args.bf16, training_args.fp16)


def log_run_summary(record, derived):
    """Start-up lines that let you trust a run: flags, model size, batch and tokens per optimizer step."""
    logger.info("resolved flags: %s", record)
    logger.info("parameters: %.2fM | global batch %d = %d per device x %d accumulation x %d processes | "
                "%d tokens per optimizer step | %s", derived["parameters"] / 1e6, derived["global_batch_size"],
                record["per_device_train_batch_size"], record["gradient_accumulation_steps"], derived["world_size"],
                derived["tokens_per_optimizer_step"], derived["precision"])
