"""The folder a script writes and whether it may overwrite what it holds: the groups every script that writes a
folder inherits. Plain dataclasses, free of transformers, so that sweep.py's flags (sweep_arguments.py) load in
a fraction of the seconds the training arguments take."""
from dataclasses import dataclass, field


@dataclass
class OutputDirArguments:
    """The folder a script writes: the training scripts, train_tokenizer.py, export_t5.py and sweep.py inherit it."""

    output_dir: str = field(default=None, metadata={
        "help": "The folder this script writes: a training run's folder (config.yaml, out.log, checkpoints, the "
                "model; required; $VAR in it is expanded, e.g. one folder per W&B sweep run), the tokenizer "
                "(train_tokenizer.py; required), the export (export_t5.py; unset: MODEL/ctranslate2 for a local "
                "model folder) or the sweep (sweep.py; unset: runs/sweeps/<study name>)."})


@dataclass
class OverwriteOutputDirArguments:
    """Whether an --output_dir that holds files may be written: the training scripts, train_tokenizer.py and
    export_t5.py inherit it."""

    overwrite_output_dir: bool = field(default=False, metadata={
        "help": "Allow an --output_dir that already holds files: a training run writes into it (its own resume is "
                "--resume_from_checkpoint auto), train_tokenizer.py and export_t5.py replace it whole, atomically. "
                "Without it such a folder is refused."})
