"""The flags pre_train_t5.py adds to the shared ones: the corpus and span corruption."""
import codecs
from dataclasses import dataclass, field
from pathlib import Path

import constants
from t5kit.config.arguments import check_choices, check_data_files, check_positive
from t5kit.errors import UsageError

SAMPLE_BY_CHOICES = ("paragraph", "line", "document")
DOCUMENT_SEPARATORS = ("eos", "none")


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
                "(whole file). Documents are then concatenated into windows (see --document_separator).",
        "choices": SAMPLE_BY_CHOICES})
    document_separator: str = field(default="eos", metadata={
        "help": "What goes between documents when they are concatenated into windows: eos (EOS after each "
                "document, as HF's run_t5_mlm_flax.py tokenises) or none (documents joined directly, as T5's C4 "
                "span-corruption task does: reduce_concat_tokens, EOS only at the end of each window).",
        "choices": DOCUMENT_SEPARATORS})
    encoding: str = field(default="utf-8", metadata={
        "help": "Text encoding of local corpus files (e.g. latin-1: Project Gutenberg ships some books so)."})
    streaming: bool = field(default=False, metadata={
        "help": "Stream the corpus instead of downloading/tokenising it all first (needs --max_steps > 0)."})
    max_train_samples: int = field(default=None, metadata={"help": "Keep only this many training documents (debug)."})
    max_eval_samples: int = field(default=None, metadata={
        "help": "Keep only this many validation windows. With --streaming and no validation split, this many "
                "windows are held out from the start of the stream."})
    preprocessing_num_workers: int = field(default=None, metadata={"help": "Processes for tokenisation."})
    overwrite_cache: bool = field(default=False, metadata={"help": "Re-tokenise even if a cached result exists."})

    def __post_init__(self):
        check_choices(self)
        if self.dataset_name is None and not self.train_files:
            raise UsageError("no training data: pass --train_files FILE [FILE ...] or --dataset_name NAME")
        if self.dataset_name is not None and self.train_files:
            raise UsageError("--dataset_name and --train_files both set; pass one source of training data")
        check_data_files("--train_files", self.train_files)
        check_data_files("--validation_files", self.validation_files)
        for group in (self.train_files, self.validation_files):
            if group and len({constants.FILE_BUILDERS[Path(p).suffix.lower()] for p in group}) > 1:
                raise UsageError(f"files {group} mix types; give files of one type per flag")
        overlap = {Path(p).resolve() for p in self.train_files or []} & \
                  {Path(p).resolve() for p in self.validation_files or []}
        if overlap:
            raise UsageError(f"--validation_files {sorted(map(str, overlap))[0]} is also a training file; "
                             "validation must be held-out data")
        check_encoding(self.encoding)
        if not 0 < self.validation_split_percentage < 100:
            raise UsageError(f"--validation_split_percentage={self.validation_split_percentage} must be in (0, 100)")
        for flag in ("max_train_samples", "max_eval_samples"):
            check_positive(flag, getattr(self, flag))
        if self.preprocessing_num_workers is not None and self.preprocessing_num_workers < 1:
            raise UsageError(f"--preprocessing_num_workers={self.preprocessing_num_workers} must be >= 1 (leave it "
                             "unset to tokenise in this process)")


def check_encoding(encoding):
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise UsageError(f"--encoding {encoding!r} is not a text encoding Python knows; e.g. utf-8 or "
                         "latin-1") from None


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
