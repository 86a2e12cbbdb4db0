"""What a run logs: per-process log levels and the start-up summary (tokens/s: train/callbacks.py)."""
import logging
import sys

import datasets
import transformers

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


def log_run_summary(record, derived):
    """Start-up lines that let you trust a run: flags, model size, batch and tokens per optimizer step."""
    logger.info("resolved flags: %s", record)
    logger.info("parameters: %.2fM | global batch %d = %d per device x %d accumulation x %d processes | "
                "%d tokens per optimizer step | %s", derived["parameters"] / 1e6, derived["global_batch_size"],
                record["per_device_train_batch_size"], record["gradient_accumulation_steps"], derived["world_size"],
                derived["tokens_per_optimizer_step"], derived["precision"])
