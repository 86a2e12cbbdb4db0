"""What a run logs and where: the console and OUTPUT_DIR/out.log (everything the run logs, with rank and time,
appended on resume), per-process log levels, the start-up summary, secrets masked (tokens/s: train/callbacks.py).

    run_logging.setup_logging(training_args)               # step 2: console, and out.log's records held in memory
    run_logging.open_run_log(training_args, checkpoint)    # step 8, once every input has been checked
    run_logging.close_run_log()                            # the end of step 9
    run_logging.setup_console_logging()                    # scripts without a run folder (predict_t5.py)

- Rank 0 writes its INFO lines and above, every other rank its warnings and errors, all into the one file (each
  record is one append, so lines from several processes do not interleave on a local or parallel file system;
  NFS gives no such promise for appends from several nodes).
- Nothing reaches the file before step 8: a refused run leaves its folder as it was. Records logged until then
  wait in memory and are written first, in order.
- A fresh run starts the file anew (a folder reused with --overwrite_output_dir drops the old run's lines); a
  resumed run appends after a boundary line naming its checkpoint.
- Secrets are masked in every line this module formats (the console too): the values of HF_TOKEN,
  HUGGING_FACE_HUB_TOKEN, WANDB_API_KEY and of every environment variable whose name ends in _TOKEN, _KEY or
  _SECRET, and anything shaped like a Hugging Face token or a W&B API key, set or not.
"""
import logging
import os
import re
import sys
import time

from t5kit.outputs.run_folder import RUN_LOG_FILE

# A log record with this attribute set goes to out.log only: the console has the same text already (cli.py's
# `error:` line and traceback, HF's printed log lines: train/callbacks.py).
RUN_LOG_ONLY = "run_log_only"
logger = logging.getLogger(__name__)

SECRET_ENV_NAMES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY")
SECRET_ENV_SUFFIXES = ("_TOKEN", "_KEY", "_SECRET")
# Shorter values ("1", "true", "en") are settings, not secrets, and masking them would garble every line.
MIN_SECRET_LENGTH = 8
# Hugging Face user access tokens ("hf_" + 34 letters and digits) and W&B API keys (40 hex digits; a git commit id
# has the same shape and is masked too). \b keeps a sha256 (64 hex digits) whole.
TOKEN_SHAPES = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b|\b[0-9a-f]{40}\b")
MASK = "***"
FILE_FORMAT = "%(asctime)s rank {rank} %(levelname)s %(name)s: %(message)s"
FILE_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
# transformers and datasets log through their own root loggers, which do not propagate to ours (their console
# handlers stay as they are); the run log listens to them directly.
LIBRARY_LOGGERS = ("transformers", "datasets")


def secret_values(environ=None) -> list:
    """The values to mask, longest first (so that a secret containing another is masked whole)."""
    environ = os.environ if environ is None else environ
    values = {value for name, value in environ.items()
              if (name in SECRET_ENV_NAMES or name.endswith(SECRET_ENV_SUFFIXES)) and len(value) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def mask_secrets(text, secrets) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    return TOKEN_SHAPES.sub(MASK, text)


class MaskingFormatter(logging.Formatter):
    """A Formatter whose whole output (message, arguments and traceback) has its secrets masked."""

    def __init__(self, fmt, datefmt=None):
        super().__init__(fmt, datefmt)
        self.secrets = secret_values()  # read once: a run's environment does not change

    def format(self, record):
        return mask_secrets(super().format(record), self.secrets)


def console_only(record) -> bool:
    """Filter for console handlers: records meant for out.log alone (RUN_LOG_ONLY) stay off the console."""
    return not getattr(record, RUN_LOG_ONLY, False)


class RunLogHandler(logging.Handler):
    """out.log of this process: records are held in memory until open(), then appended and flushed one by one."""

    def __init__(self, process_index):
        # Rank 0 writes INFO and above, the others their warnings and errors (multi-node runs log INFO on each
        # node's first process: HF's log_on_each_node; out.log keeps rank 0's alone).
        super().__init__(logging.NOTSET if process_index == 0 else logging.WARNING)
        self.setFormatter(MaskingFormatter(FILE_FORMAT.format(rank=process_index), FILE_DATE_FORMAT))
        self.pending, self.stream = [], None

    def emit(self, record):
        if self.stream is None:
            self.pending.append(record)
            return
        try:
            self.stream.write(self.format(record) + "\n")  # one write: one append of a whole line
            self.stream.flush()
        except Exception:  # logging must never stop the run; logging.Handler reports the failure on stderr
            self.handleError(record)

    def open(self, path, mode, first_line=None):
        """Starts writing to `path` ("w" for a new file, "a" to append), first_line first, then the held records."""
        with self.lock:
            self.stream = open(path, mode, encoding="utf-8")
            if first_line:
                self.stream.write(first_line + "\n")
            pending, self.pending = self.pending, []
        for record in pending:
            self.emit(record)

    def close(self):
        with self.lock:
            if self.stream is not None:
                self.stream.close()
                self.stream = None
            self.pending = []
        super().close()


def attach(handler):
    """Adds the run log to the root logger and to the library loggers that do not propagate to it; a previous run's
    handler in this process (tests, sweeps in one interpreter) is closed and removed first."""
    close_run_log()
    for logger in (logging.getLogger(), *map(logging.getLogger, LIBRARY_LOGGERS)):
        if logger is logging.getLogger() or not logger.propagate:
            logger.addHandler(handler)


def close_run_log():
    """The end of step 9: out.log is complete, and whatever this process logs next (another run in the same
    interpreter) is not the run's. A run that ends in an exception keeps it open, for run_cli's last line."""
    for logger in (logging.getLogger(), *map(logging.getLogger, LIBRARY_LOGGERS)):
        for handler in [h for h in logger.handlers if isinstance(h, RunLogHandler)]:
            logger.removeHandler(handler)
            handler.close()


def current_handler():
    return next((h for h in logging.getLogger().handlers if isinstance(h, RunLogHandler)), None)


def resume_boundary(checkpoint) -> str:
    """The line out.log gets where a resumed run starts appending."""
    return f"===== resumed from {checkpoint} at {time.strftime(FILE_DATE_FORMAT)} ====="


def open_run_log(training_args, checkpoint):
    """Step 8: starts writing OUTPUT_DIR/out.log. Rank 0 opens it first (anew, or appending after the boundary when
    resuming from `checkpoint`), then the other ranks append, so that no rank writes into a file rank 0 then
    truncates. Returns the path."""
    path = os.path.join(training_args.output_dir, RUN_LOG_FILE)
    handler = current_handler()
    with training_args.main_process_first(desc="opening out.log", local=False):
        if handler is not None:
            os.makedirs(training_args.output_dir, exist_ok=True)
            if training_args.process_index == 0:
                handler.open(path, "a" if checkpoint else "w", resume_boundary(checkpoint) if checkpoint else None)
            else:
                handler.open(path, "a")
    return path


CONSOLE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CONSOLE_DATE_FORMAT = "%H:%M:%S"


def console_handler():
    """stdout, secrets masked, without the records meant for out.log alone."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(MaskingFormatter(CONSOLE_FORMAT, CONSOLE_DATE_FORMAT))
    handler.addFilter(console_only)
    return handler


def setup_console_logging(level=logging.INFO):
    """For commands that write no run folder (predict_t5.py): the console alone."""
    logging.basicConfig(handlers=[console_handler()], level=level, force=True)
    logging.captureWarnings(True)


def setup_logging(training_args):
    """One format for every module; replicas log warnings only, as HF examples do. out.log (py) collects
    the same records, held in memory until step 8 opens the file."""
    logging.basicConfig(handlers=[console_handler()], force=True)
    attach(RunLogHandler(training_args.process_index))
    logging.captureWarnings(True)  # warnings.warn from any library: into the log, and so into out.log
    # HF's default log_level "passive" would leave the main process at WARNING and hide the start-up summary.
    level = training_args.get_process_log_level()
    if training_args.should_log and training_args.log_level == "passive":
        level = logging.INFO
    logging.getLogger().setLevel(level)
    import datasets  # here, not at the top: t5kit.cli (so sweep.py) reads this module without a training stack
    import transformers

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
