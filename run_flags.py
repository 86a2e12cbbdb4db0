"""The flag dataclasses the entry scripts parse with `flags.parse_flags` (HF names wherever HF has one).

Each field's help gives its meaning, default and interactions; `__post_init__` validates once, before any
model or data is loaded, and raises `flags.UsageError` with the fix.
"""
from dataclasses import dataclass, field
from pathlib import Path

from transformers import Seq2SeqTrainingArguments

import constants
from flags import UsageError, closest_names

# datasets builder for each local file suffix (".tsv" is csv with a tab delimiter).
FILE_BUILDERS = {".txt": "text", ".raw": "text", ".text": "text", ".json": "json", ".jsonl": "json",
                 ".csv": "csv", ".tsv": "csv", ".parquet": "parquet"}
SAMPLE_BY_CHOICES = ("paragraph", "line", "document")


@dataclass
class ModelArguments:
    model_name_or_path: str = field(default=None, metadata={
        "help": "Hub name or local folder of a T5 model to continue from. Unset: random init from --model_size."})
    model_size: str = field(default="t5-small", metadata={
        "help": "Architecture preset for random init (ignored with --model_name_or_path): "
                + ", ".join(constants.MODEL_SIZE_PRESETS)})
    tokenizer_name_or_path: str = field(default=None, metadata={
        "help": "Hub name or local folder of the tokenizer (needs T5's <extra_id_N> sentinels). "
                "Defaults to --model_name_or_path; required for random init (see train_tokenizer.py)."})
    dropout_rate: float = field(default=0.0, metadata={
        "help": "Dropout for random init. 0.0 as in T5 v1.1 pre-training; fine-tuning from a model keeps its own."})
    cache_dir: str = field(default=None, metadata={"help": "Where hub downloads are stored (HF default if unset)."})
    trust_remote_code: bool = field(default=False, metadata={
        "help": "Allow a hub model/dataset to run its own code. Off: only turn it on for repos you trust."})

    def __post_init__(self):
        if self.model_name_or_path is None and self.model_size not in constants.MODEL_SIZE_PRESETS:
            hint = closest_names(self.model_size, constants.MODEL_SIZE_PRESETS)
            raise UsageError(f"unknown --model_size {self.model_size!r}"
                             + (f"; did you mean {hint[0]!r}?" if hint else "")
                             + f" choices: {', '.join(constants.MODEL_SIZE_PRESETS)}")
        if self.tokenizer_name_or_path is None:
            if self.model_name_or_path is None:
                raise UsageError("--tokenizer_name_or_path is required for random init; train one with "
                                 "train_tokenizer.py or pass a T5 tokenizer name/folder")
            self.tokenizer_name_or_path = self.model_name_or_path
        if not 0.0 <= self.dropout_rate < 1.0:
            raise UsageError(f"--dropout_rate={self.dropout_rate} must be in [0, 1)")


def check_data_files(flag, paths):
    """Refuses missing, empty or unsupported local data files, naming the flag."""
    for path in paths or []:
        path = Path(path)
        if not path.is_file():
            raise UsageError(f"{flag}: file {path} not found")
        if path.stat().st_size == 0:
            raise UsageError(f"{flag}: file {path} is empty")
        if path.suffix.lower() not in FILE_BUILDERS:
            raise UsageError(f"{flag}: unsupported file type {path.suffix!r} for {path}; "
                             f"use one of {', '.join(FILE_BUILDERS)}")


@dataclass
class PretrainDataArguments:
    dataset_name: str = field(default=None, metadata={
        "help": "Hub corpus name, e.g. allenai/c4 (with --dataset_config_name en). Or give --train_files."})
    dataset_config_name: str = field(default=None, metadata={"help": "Hub corpus configuration, e.g. en for C4."})
    train_files: list[str] = field(default=None, metadata={
        "help": "Local training files (.txt/.raw, .json/.jsonl, .csv/.tsv, .parquet), all of one type."})
    validation_files: list[str] = field(default=None, metadata={
        "help": "Local validation files. Unset: --validation_split_percentage of the training documents."})
    validation_split_percentage: float = field(default=5.0, metadata={
        "help": "Percent of training documents held out for validation when there is no validation split."})
    text_column: str = field(default="text", metadata={"help": "Column holding the raw text (json/csv/parquet/hub)."})
    sample_by: str = field(default="paragraph", metadata={
        "help": "How a .txt file splits into documents: paragraph (blank-line separated), line, or document "
                "(whole file). Each document ends with EOS before documents are concatenated into windows."})
    streaming: bool = field(default=False, metadata={
        "help": "Stream the corpus instead of downloading/tokenising it all first (needs --max_steps > 0)."})
    max_train_samples: int = field(default=None, metadata={"help": "Keep only this many training documents (debug)."})
    max_eval_samples: int = field(default=None, metadata={
        "help": "Keep only this many validation windows. With --streaming and no validation split, this many "
                "windows are held out from the start of the stream."})
    preprocessing_num_workers: int = field(default=None, metadata={"help": "Processes for tokenisation."})
    overwrite_cache: bool = field(default=False, metadata={"help": "Re-tokenise even if a cached result exists."})

    def __post_init__(self):
        if self.dataset_name is None and not self.train_files:
            raise UsageError("no training data: pass --train_files FILE [FILE ...] or --dataset_name NAME")
        if self.dataset_name is not None and self.train_files:
            raise UsageError("--dataset_name and --train_files both set; pass one source of training data")
        check_data_files("--train_files", self.train_files)
        check_data_files("--validation_files", self.validation_files)
        for group in (self.train_files, self.validation_files):
            if group and len({FILE_BUILDERS[Path(p).suffix.lower()] for p in group}) > 1:
                raise UsageError(f"files {group} mix types; give files of one type per flag")
        overlap = {Path(p).resolve() for p in self.train_files or []} & \
                  {Path(p).resolve() for p in self.validation_files or []}
        if overlap:
            raise UsageError(f"--validation_files {sorted(map(str, overlap))[0]} is also a training file; "
                             "validation must be held-out data")
        if self.sample_by not in SAMPLE_BY_CHOICES:
            raise UsageError(f"--sample_by={self.sample_by!r}; choices: {', '.join(SAMPLE_BY_CHOICES)}")
        if not 0 < self.validation_split_percentage < 100:
            raise UsageError(f"--validation_split_percentage={self.validation_split_percentage} must be in (0, 100)")


@dataclass
class SpanCorruptionArguments:
    input_length: int = field(default=constants.INPUT_LENGTH, metadata={
        "help": "Encoder tokens per example after corruption (T5: 512). The raw window is longer: "
                "tokens_length from compute_input_and_target_lengths."})
    noise_density: float = field(default=constants.NOISE_DENSITY, metadata={
        "help": "Fraction of tokens corrupted, in (0, 1) (T5 paper: 0.15)."})
    mean_noise_span_length: float = field(default=constants.MEAN_NOISE_SPAN_LENGTH, metadata={
        "help": "Mean length of a corrupted span, >= 1 (T5 paper: 3)."})

    def __post_init__(self):
        if not 0.0 < self.noise_density < 1.0:
            raise UsageError(f"--noise_density={self.noise_density} must be in (0, 1); the T5 paper uses 0.15")
        if self.mean_noise_span_length < 1.0:
            raise UsageError(f"--mean_noise_span_length={self.mean_noise_span_length} must be >= 1; T5 uses 3")
        if self.input_length < 8:
            raise UsageError(f"--input_length={self.input_length} is too short for span corruption; use >= 8")


@dataclass
class T5TrainingArguments(Seq2SeqTrainingArguments):
    """Seq2SeqTrainingArguments plus what transformers 5.x dropped and our runs need."""

    overwrite_output_dir: bool = field(default=False, metadata={
        "help": "Allow writing into a non-empty --output_dir. Without it a non-empty folder is refused."})

    def __post_init__(self):
        if not self.output_dir:
            raise UsageError("--output_dir is required (where config.yaml, metrics.json and the model go)")
        super().__post_init__()
