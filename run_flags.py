"""The flag dataclasses the entry scripts parse with `flags.parse_flags` (HF names wherever HF has one).

Each field's help gives its meaning, default and interactions; `__post_init__` validates once, before any
model or data is loaded, and raises `flags.UsageError` with the fix.
"""
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from transformers import Seq2SeqTrainingArguments

import constants
import flag_checks
import launch_checks
from flags import UsageError, closest_names
from nonfinite_guard import check_nan_policy

# datasets builder for each local file suffix (".tsv" is csv with a tab delimiter).
FILE_BUILDERS = {".txt": "text", ".raw": "text", ".text": "text", ".json": "json", ".jsonl": "json",
                 ".csv": "csv", ".tsv": "csv", ".parquet": "parquet"}
SAMPLE_BY_CHOICES = ("paragraph", "line", "document")
ATTN_IMPLEMENTATIONS = ("sdpa", "eager", "t5_flex")


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
    attn_implementation: str = field(default="sdpa", metadata={
        "help": "T5 attention kernels: sdpa (PyTorch's fused kernels), eager (plain matmuls), or t5_flex "
                "(FlexAttention for unpadded encoder self-attention on an Ampere or newer GPU, SDPA elsewhere; "
                "see t5_flex_attention)."})
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
        if self.attn_implementation not in ATTN_IMPLEMENTATIONS:
            raise UsageError(f"unknown --attn_implementation {self.attn_implementation!r}; "
                             f"choices: {', '.join(ATTN_IMPLEMENTATIONS)}")


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
        for flag in ("max_train_samples", "max_eval_samples"):
            check_positive(flag, getattr(self, flag))
        if self.preprocessing_num_workers is not None and self.preprocessing_num_workers < 1:
            raise UsageError(f"--preprocessing_num_workers={self.preprocessing_num_workers} must be >= 1 (leave it "
                             "unset to tokenise in this process)")


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
    bf16: bool = field(default=None, metadata={
        "help": "bf16 mixed precision. Unset: on where the GPU supports it (Ampere or newer), off elsewhere. "
                "On CPU, --use_cpu true --bf16 true uses bf16 autocast."})
    param_group_lr: list[str] = field(default=None, metadata={
        "help": "Per-parameter-group learning rates, 'REGEX=LR' items matched against parameter names in order, "
                "first match wins: --param_group_lr 'lm_head|shared=1e-3' '.*=1e-4' (or one comma-separated "
                "string, or a YAML list). Every parameter must match some item; each item must match something."})
    nan_policy: str = field(default="stop", metadata={
        "help": "What a NaN/inf training loss (or NaN/inf gradient norm) does: stop (default; raise naming the "
                "step, before the bad update reaches any checkpoint: the last one stays the last good state) or skip "
                "(drop that optimizer step's update, count it in the logs as skipped_nonfinite_steps; not with "
                "--deepspeed). See nonfinite_guard.py."})
    logging_nan_inf_filter: bool = field(default=False, metadata={
        "help": "HF's filter of non-finite losses out of the logged loss. Off by default: it reads every step's "
                "loss on the host (a GPU sync per step), and --nan_policy stops on such a loss or, with skip, "
                "filters it on the device."})

    def __post_init__(self):
        if not self.output_dir:
            raise UsageError("--output_dir is required (where config.yaml, metrics.json and the model go)")
        if self.hub_token:
            raise UsageError("--hub_token would be recorded with the run (W&B stores the command line, Trainer "
                             "pickles its arguments); set the HF_TOKEN environment variable instead")
        if isinstance(self.report_to, str) and "," in self.report_to:
            self.report_to = [name.strip() for name in self.report_to.split(",") if name.strip()]
        flag_checks.check_report_to(self.report_to)
        flag_checks.check_training_numbers(self)
        # The Trainer checks again with accelerate's DeepSpeed config too; --deepspeed is known here already.
        check_nan_policy(self.nan_policy, deepspeed=bool(self.deepspeed))
        self.bf16 = flag_checks.check_precision(self.bf16, self.fp16, self.use_cpu)
        self.accelerator_config = flag_checks.with_non_blocking_copies(self.accelerator_config,
                                                                       self.dataloader_pin_memory)
        launch_checks.check_launch_configs(self)
        super().__post_init__()

    def trains(self):
        """Whether the entry script trains (pre-training always does; fine-tuning unless --do_train false)."""
        return True


# Fine-tuning choices. (Restored by the lead after an edit collision; see FineTuneDataArguments.)
_HF_FIELDS = {f.name: f for f in dataclasses.fields(Seq2SeqTrainingArguments)}
FINETUNE_FILE_SUFFIXES = (".csv", ".tsv", ".json", ".jsonl")
LABEL_SCORING_CHOICES = ("generate", "rank")
PREDICTIONS_FORMATS = ("jsonl", "tsv")
TRAIN_SAMPLING_STRATEGIES = ("length_buckets", "random", "sequential", "group_by_length", "batch_rebalance")


def check_positive(flag, value):
    """Refuses a count flag below 1 (None means unset)."""
    if value is not None and value < 1:
        raise UsageError(f"--{flag}={value} must be >= 1 (leave it unset for no limit)")


@dataclass
class FineTuneDataArguments:
    benchmark: str = field(default="glue", metadata={
        "help": "Benchmark of --dataset_name in constants.DATASET_VALS: " + ", ".join(constants.DATASET_VALS)
                + ". Also the default benchmark of --tasks entries written without one."})
    dataset_name: str = field(default=None, metadata={
        "help": "Task within --benchmark, e.g. sst2 or rte; with --custom_task, the new task's name."})
    tasks: str = field(default=None, metadata={
        "help": "Multi-task: comma-separated benchmark/task names, e.g. glue/sst2,glue/rte. One model trains on their "
                "mixture (--mixture_cap, --mixture_temperature) and is evaluated per task. Replaces --dataset_name."})
    custom_task: dict | str | None = field(default=None, metadata={
        "help": "A new task declared in YAML alone: a mapping with prefix, text_column_name, label_column_name, "
                "labels (label value: word) or task_type, metric_names, optional metric_to_optimize "
                "(see configs/custom_task_example.yaml). Needs --dataset_name and --train_file/--validation_file."})
    data_dir: list[str] = field(default=None, metadata={
        "help": "Folder(s) in the official GLUE/SuperGLUE layout: a task folder (../shared/data/glue/SST-2 with "
                "train.tsv/dev.tsv/test.tsv, or train/val/test.jsonl) or a benchmark folder holding one per task "
                "(../shared/data/glue for --tasks). Unset and no --train_file: the hub dataset of the registry."})
    train_file: str = field(default=None, metadata={
        "help": "Local training rows (.csv, .tsv, .json, .jsonl) with the task's columns; labels as ids or words."})
    validation_file: str = field(default=None, metadata={
        "help": "Local validation rows (needs the label column: evaluation compares predictions with it)."})
    test_file: str = field(default=None, metadata={
        "help": "Local rows to predict with --do_predict; the label column is optional."})
    max_source_length: int = field(default=512, metadata={
        "help": "Input tokens per example (EOS included); longer inputs are truncated and counted in the log "
                "(T5 fine-tuned with 512)."})
    max_target_length: int = field(default=None, metadata={
        "help": "Target tokens per example (EOS included) and the generation limit. Unset: the longest label word "
                "(classification), the longest score string (regression) or 128 (generation)."})
    label_scoring: str = field(default="generate", metadata={
        "help": "How classification tasks are predicted at evaluation: generate (decode; a text that is no label "
                "word counts as wrong) or rank (score every label word, pick the likeliest; never invalid)."})
    mixture_cap: int = field(default=2 ** 19, metadata={
        "help": "Multi-task: examples-proportional mixing counts at most this many examples per task (K in the T5 "
                "paper, sec. 3.5.2; 2^19 scored best there). Also the cap applied before temperature scaling."})
    mixture_temperature: float = field(default=1.0, metadata={
        "help": "Multi-task: raise each capped rate to 1/T and renormalise (T5 paper, sec. 3.5.2). 1 = "
                "examples-proportional; larger T moves towards equal mixing."})
    max_train_samples: int = field(default=None, metadata={"help": "Keep only the first N training rows (debug)."})
    max_eval_samples: int = field(default=None, metadata={
        "help": "Keep only the first N rows of each validation split."})
    max_predict_samples: int = field(default=None, metadata={"help": "Keep only the first N rows of each test split."})
    predictions_format: str = field(default="jsonl", metadata={
        "help": "Format of the per-split predictions files (input, target, prediction, correct): jsonl or tsv."})

    def __post_init__(self):
        # YAML may give a list of tasks or a single folder; the parser only splits command-line values.
        if isinstance(self.tasks, (list, tuple)):
            self.tasks = ",".join(self.tasks)
        if isinstance(self.data_dir, str):
            self.data_dir = [self.data_dir]
        if self.tasks and (self.dataset_name or self.custom_task):
            raise UsageError("--tasks replaces --dataset_name/--custom_task; pass one or the other")
        if not self.tasks and not self.dataset_name:
            raise UsageError("no task: pass --dataset_name TASK (with --benchmark) or --tasks glue/sst2,glue/rte")
        files = {"--train_file": self.train_file, "--validation_file": self.validation_file,
                 "--test_file": self.test_file}
        given = [flag for flag, path in files.items() if path]
        if given and (self.tasks or self.data_dir):
            raise UsageError(f"{given[0]} reads one task's rows from local files; it cannot be combined with "
                             f"{'--tasks' if self.tasks else '--data_dir'}")
        if self.custom_task is not None and not given:
            raise UsageError("--custom_task needs its rows in --train_file/--validation_file "
                             "(.jsonl, .json, .csv, .tsv)")
        for flag, path in files.items():
            if path and Path(path).suffix.lower() not in FINETUNE_FILE_SUFFIXES:
                raise UsageError(f"{flag} {path}: fine-tuning reads {', '.join(FINETUNE_FILE_SUFFIXES)} files")
            check_data_files(flag, [path] if path else None)
        for folder in self.data_dir or []:
            if not Path(folder).is_dir():
                raise UsageError(f"--data_dir {folder} is not a folder; pass e.g. ../shared/data/glue/RTE")
        if self.label_scoring not in LABEL_SCORING_CHOICES:
            raise UsageError(f"--label_scoring={self.label_scoring!r}; choices: {', '.join(LABEL_SCORING_CHOICES)}")
        if self.predictions_format not in PREDICTIONS_FORMATS:
            raise UsageError(f"--predictions_format={self.predictions_format!r}; "
                             f"choices: {', '.join(PREDICTIONS_FORMATS)}")
        for flag in ("mixture_cap", "max_target_length", "max_train_samples", "max_eval_samples",
                     "max_predict_samples"):
            check_positive(flag, getattr(self, flag))
        if self.max_source_length < 2:
            raise UsageError(f"--max_source_length={self.max_source_length} leaves no room for text and EOS; use >= 2")
        if not self.mixture_temperature > 0:
            raise UsageError(f"--mixture_temperature={self.mixture_temperature} must be > 0 (1 = "
                             "examples-proportional)")


@dataclass
class FineTuneTrainingArguments(T5TrainingArguments):
    """Defaults for fine-tuning: train, evaluate each epoch by generation, keep the best checkpoint by the task's
    metric_to_optimize (filled by fine_tune_t5.py when --metric_for_best_model is unset), length-grouped batches."""

    do_train: bool = field(default=True, metadata={"help": "Fine-tune. --do_train false: evaluate/predict only."})
    do_eval: bool = field(default=True, metadata={"help": "Evaluate on the validation split(s) at the end."})
    predict_with_generate: bool = field(default=True, metadata={
        "help": "Evaluate by generating (or ranking, --label_scoring rank), so task metrics are computed."})
    eval_strategy: _HF_FIELDS["eval_strategy"].type = field(default="epoch", metadata={
        "help": "When to evaluate during training: no, steps (--eval_steps) or epoch. Must match --save_strategy "
                "with --load_best_model_at_end."})
    save_strategy: _HF_FIELDS["save_strategy"].type = field(default="epoch", metadata={
        "help": "When to save checkpoints: no, steps, epoch or best."})
    load_best_model_at_end: bool = field(default=True, metadata={
        "help": "Keep and finally load the checkpoint with the best --metric_for_best_model (default: the task's "
                "metric_to_optimize; multi-task: the average)."})
    save_total_limit: int | None = field(default=1, metadata={
        "help": "Checkpoints kept; with --load_best_model_at_end the best is kept too (1: the best, plus the last "
                "while training, for resuming)."})
    train_sampling_strategy: str = field(default="length_buckets", metadata={
        "help": "length_buckets (ours: batches of equal input and target length, in random order; least padding), "
                "or HF's random, sequential, group_by_length (sorted within mega-batches), batch_rebalance. "
                "Evaluation always keeps file order."})

    def __post_init__(self):
        # Remembered before HF fills "loss": fine_tune_t5.py then picks the task's metric instead.
        self.metric_for_best_model_from_task = self.metric_for_best_model is None
        if self.train_sampling_strategy not in TRAIN_SAMPLING_STRATEGIES:
            raise UsageError(f"--train_sampling_strategy={self.train_sampling_strategy!r}; choices: "
                             f"{', '.join(TRAIN_SAMPLING_STRATEGIES)}")
        super().__post_init__()

    def trains(self):
        return self.do_train
