"""The flags fine_tune_t5.py adds to the shared ones: tasks, their data and the fine-tuning defaults."""
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import yaml

import constants
from t5kit.config import launch_checks
from t5kit.config.arguments import (
    T5_SOURCE_LENGTH,
    T5TrainingArguments,
    TaskInputArguments,
    check_data_files,
    check_positive,
)
from t5kit.config.parsing import check_choices
from t5kit.config.sni_arguments import SNI_BENCHMARK, SNI_SOURCE_LENGTH, SNIArguments
from t5kit.errors import UsageError
from t5kit.specs import TaskDataSpec, TaskSelection

_HF_FIELDS = {f.name: f for f in dataclasses.fields(T5TrainingArguments)}
FINETUNE_FILE_SUFFIXES = (".csv", ".tsv", ".json", ".jsonl")
PREDICTIONS_FORMATS = ("jsonl", "tsv")
TRAIN_SAMPLING_STRATEGIES = ("length_buckets", "random", "sequential", "group_by_length", "batch_rebalance")
PEFT_METHODS = ("lora",)
# LoRA defaults: rank 8 and alpha 16 (alpha / r = 2 scales the update), on the attention's query and value
# projections, as Hu et al. 2021 ("LoRA", sec. 7.1) found best for a fixed budget; peft's dropout default (0).
LORA_R, LORA_ALPHA, LORA_TARGET_MODULES = 8, 16.0, "q,v"


@dataclass
class FineTuneDataArguments(TaskInputArguments, SNIArguments):
    """The tasks, their data and how they are mixed; --max_source_length, --label_scoring and
    --max_predict_samples come from TaskInputArguments, which predict_t5.py shares, the --sni_* flags from
    SNIArguments."""

    benchmark: str = field(default="glue", metadata={
        "help": "Benchmark of --dataset_name in constants.DATASET_VALS: " + ", ".join(constants.DATASET_VALS)
                + ". Also the default benchmark of --tasks entries written without one.",
        "choices": tuple(constants.DATASET_VALS)})
    dataset_name: str = field(default=None, metadata={
        "help": "Task within --benchmark, e.g. sst2 or rte; with --custom_task, the new task's name."})
    tasks: str = field(default=None, metadata={
        "help": "Multi-task: comma-separated benchmark/task names, e.g. glue/sst2,glue/rte. One model trains on their "
                "mixture (--mixture_cap, --mixture_temperature) and is evaluated per task. Replaces --dataset_name."})
    eval_tasks: str = field(default=None, metadata={
        "help": "Held-out tasks: comma-separated benchmark/task names evaluated (--do_eval) and predicted "
                "(--do_predict) but never trained on, e.g. --tasks glue/sst2,glue/mrpc --eval_tasks glue/rte: "
                "zero-shot evaluation on a task outside the training mixture, as FLAN's held-out clusters."})
    instruction_templates: str = field(default="none", metadata={
        "help": "none: T5's task prefixes. flan: every example in one of FLAN's instruction templates for its task "
                "(google-research/FLAN flan/templates.py), drawn by --seed and the example's position; label words "
                "become FLAN's answers. flan_dialog: the same inside FLAN v1's dialog markers '0 ... X 1 FLAN'.",
        "choices": constants.INSTRUCTION_FORMATS})
    instruction_options: bool = field(default=None, metadata={
        "help": "With --instruction_templates: fill in FLAN's 'OPTIONS:' list of answers in the templates that have "
                "one, as FLAN trains and evaluates. Unset: true with --instruction_templates, else false. false: "
                "FLAN's templates without it (FLAN's *_score_flan_no_options tasks)."})
    few_shot: int = field(default=0, metadata={
        "help": "With --instruction_templates: put this many exemplars from the task's training rows (never the "
                "example itself; drawn by --seed) before each input, in FLAN's few-shot format."})
    custom_task: dict | str | None = field(default=None, metadata={
        "help": "A new task declared in YAML alone: a mapping with prefix, text_column_name, label_column_name, "
                "labels (label value: word) or task_type, metric_names, optional metric_to_optimize "
                "(see configs/custom_task_example.yaml). Needs --dataset_name and --train_file/--validation_file."})
    data_dir: list[str] = field(default=None, metadata={
        "help": "Folder(s) in the official GLUE/SuperGLUE layout: a task folder (../shared/data/glue/SST-2 with "
                "train.tsv/dev.tsv/test.tsv, or train/val/test.jsonl) or a benchmark folder holding one per task "
                "(../shared/data/glue for --tasks), or with --benchmark sni the root of a natural-instructions "
                "checkout (tasks/, splits/default/). Unset and no --train_file: the hub dataset of the registry."})
    train_file: str = field(default=None, metadata={
        "help": "Local training rows (.csv, .tsv, .json, .jsonl) with the task's columns; labels as ids or words."})
    validation_file: str = field(default=None, metadata={
        "help": "Local validation rows (needs the label column: evaluation compares predictions with it)."})
    test_file: str = field(default=None, metadata={
        "help": "Local rows to predict with --do_predict; the label column is optional."})
    max_target_length: int = field(default=None, metadata={
        "help": "Target tokens per example (EOS included) and the generation limit. Unset: the longest label word "
                "(classification), the longest score string (regression) or 128 (generation)."})
    mixture_cap: int = field(default=2 ** 19, metadata={
        "help": "Multi-task: examples-proportional mixing counts at most this many examples per task (K in the T5 "
                "paper, sec. 3.5.2; 2^19 scored best there). Also the cap applied before temperature scaling."})
    mixture_temperature: float = field(default=1.0, metadata={
        "help": "Multi-task: raise each capped rate to 1/T and renormalise (T5 paper, sec. 3.5.2). 1 = "
                "examples-proportional; larger T moves towards equal mixing."})
    max_train_samples: int = field(default=None, metadata={"help": "Keep only the first N training rows (debug)."})
    max_eval_samples: int = field(default=None, metadata={
        "help": "Keep only the first N rows of each validation split."})
    wnli_format: str = field(default="glue", metadata={
        "help": "How glue/wnli is read: glue (T5's glue_wnli_v002: 'wnli sentence1: ... sentence2: ...' -> "
                "entailment/not_entailment) or wsc_simple (as T5 evaluated WNLI, glue_wnli_v002_simple_eval: the "
                "pronoun marked, the candidate referent as target, scored like WSC; evaluation and prediction "
                "only, with a model fine-tuned on super_glue/wsc).", "choices": constants.WNLI_FORMATS})
    leaderboard_files: bool = field(default=True, metadata={
        "help": "With --do_predict, write the GLUE (glue_submission/<Task>.tsv) and SuperGLUE "
                "(superglue_submission/<Task>.jsonl) server files for test splits of their tasks; every predicted "
                "row then needs its idx. false: predictions files only."})
    predictions_format: str = field(default="jsonl", metadata={
        "help": "Format of the per-split predictions files (input, target, prediction, correct): jsonl or tsv.",
        "choices": PREDICTIONS_FORMATS})

    def __post_init__(self):
        check_choices(self)
        TaskInputArguments.__post_init__(self)
        self.check_sni_flags()
        sni = self.benchmark == SNI_BENCHMARK and not self.tasks
        if sni and not self.dataset_name:  # the benchmark is its one task
            self.dataset_name = SNI_BENCHMARK
        if self.max_source_length is None:
            self.max_source_length = SNI_SOURCE_LENGTH if sni else T5_SOURCE_LENGTH
        # YAML may give a list of tasks or a single folder; the parser only splits command-line values.
        if isinstance(self.tasks, (list, tuple)):
            self.tasks = ",".join(self.tasks)
        if isinstance(self.eval_tasks, (list, tuple)):
            self.eval_tasks = ",".join(self.eval_tasks)
        if isinstance(self.custom_task, str):  # given on the command line as YAML/JSON text
            self.custom_task = parse_custom_task(self.custom_task)
        if self.instruction_options is None:  # FLAN's templates carry their options, as FLAN trains on them
            self.instruction_options = self.instruction_templates != constants.INSTRUCTION_FORMATS[0]
        check_instruction_flags(self)
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
        for flag in ("mixture_cap", "max_target_length", "max_train_samples", "max_eval_samples"):
            check_positive(flag, getattr(self, flag))
        if not self.mixture_temperature > 0:
            raise UsageError(f"--mixture_temperature={self.mixture_temperature} must be > 0 (1 = "
                             "examples-proportional)")


    def task_selection(self) -> TaskSelection:
        """The tasks' spec (data/task_splits.resolve_run_tasks reads it)."""
        return TaskSelection(
            benchmark=self.benchmark, dataset_name=self.dataset_name, tasks=split_names(self.tasks),
            eval_tasks=split_names(self.eval_tasks), custom_task=self.custom_task, wnli_format=self.wnli_format,
            instruction_templates=self.instruction_templates, instruction_options=self.instruction_options,
            few_shot=self.few_shot)

    def task_data(self, cache_dir=None) -> TaskDataSpec:
        """The task data's spec (data/task_splits.py, task_sources.py and sni.py read it)."""
        return TaskDataSpec(
            data_dir=tuple(self.data_dir or ()), train_file=self.train_file, validation_file=self.validation_file,
            test_file=self.test_file, max_source_length=self.max_source_length,
            max_target_length=self.max_target_length, max_train_samples=self.max_train_samples,
            max_eval_samples=self.max_eval_samples, max_predict_samples=self.max_predict_samples,
            leaderboard_files=self.leaderboard_files, cache_dir=cache_dir, sni=self.sni_spec())


def split_names(text) -> tuple:
    """"glue/sst2, glue/rte" -> ("glue/sst2", "glue/rte")."""
    return tuple(name.strip() for name in text.split(",") if name.strip()) if text else ()


def parse_custom_task(text) -> dict:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        raise UsageError("--custom_task is not valid YAML/JSON; pass a mapping like "
                         "'{prefix: \"review:\", text_column_name: text, ...}'") from None


@dataclass
class FineTuneTrainingArguments(T5TrainingArguments):
    """Defaults for fine-tuning: train, evaluate each epoch by generation, keep the best checkpoint by the task's
    metric_to_optimize (filled in step 1 of fine_tune_t5.py by best_model_metric.choose_best_model_metric when
    --metric_for_best_model is unset), length-grouped batches."""

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
                "Evaluation always keeps file order.", "choices": TRAIN_SAMPLING_STRATEGIES})

    peft: str = field(default=None, metadata={
        "help": "Parameter-efficient fine-tuning with the peft library: lora (low-rank adapters on "
                "--lora_target_modules; the base model stays frozen). Unset: full fine-tuning. Needs "
                "--model_name_or_path. Adapters are saved in the run folder (PeftModel.from_pretrained).",
        "choices": PEFT_METHODS})
    lora_r: int = field(default=LORA_R, metadata={"help": "LoRA rank r (--peft lora)."})
    lora_alpha: float = field(default=LORA_ALPHA, metadata={
        "help": "LoRA scaling alpha: the update is scaled by alpha / r (--peft lora)."})
    lora_dropout: float = field(default=0.0, metadata={"help": "Dropout on the LoRA branch's input, in [0, 1)."})
    lora_target_modules: list[str] = field(default=None, metadata={
        "help": "Layers LoRA adapts, by module name, comma-separated or a YAML list: T5's attention q, k, v, o; "
                f"feed-forward wi, wo (wi_0, wi_1 in T5 v1.1). Unset: {LORA_TARGET_MODULES}. Each must match some "
                "layer of the model."})
    merge_adapters: bool = field(default=False, metadata={
        "help": "With --peft lora: also write OUTPUT_DIR/merged, the base model with the adapters merged in, "
                "loadable by T5ForConditionalGeneration.from_pretrained."})

    def __post_init__(self):
        # Remembered before HF fills "loss": fine_tune_t5.py then picks the task's metric instead.
        self.metric_for_best_model_from_task = self.metric_for_best_model is None
        self.lora_target_modules = check_lora_flags(self)
        if self.peft and launch_checks.deepspeed_zero_stage(self) == 3:
            raise UsageError("--peft lora with DeepSpeed ZeRO-3 is not supported here (the base weights would be "
                             "partitioned at load, and merging and adapter checkpoints are tested only without "
                             "it); use zero_stage2_config.json or plain DDP: LoRA leaves little state to shard")
        super().__post_init__()

    def trains(self):
        return self.do_train


def check_lora_flags(args):
    """The target modules as a list; refuses LoRA settings outside their ranges and LoRA flags without --peft."""
    targets = args.lora_target_modules or LORA_TARGET_MODULES
    if isinstance(targets, str):
        targets = [targets]
    targets = [name.strip() for item in targets for name in item.split(",") if name.strip()]
    if not targets:
        raise UsageError("--lora_target_modules names no module; e.g. q,v")
    if args.merge_adapters and not args.peft:
        raise UsageError("--merge_adapters merges LoRA adapters: pass --peft lora, or drop --merge_adapters")
    if args.lora_r < 1:
        raise UsageError(f"--lora_r={args.lora_r} must be >= 1 (e.g. {LORA_R})")
    if not args.lora_alpha > 0:
        raise UsageError(f"--lora_alpha={args.lora_alpha} must be > 0 (e.g. {LORA_ALPHA:g})")
    if not 0 <= args.lora_dropout < 1:
        raise UsageError(f"--lora_dropout={args.lora_dropout} must be in [0, 1)")
    return targets


def check_instruction_flags(args):
    """Refuses --few_shot below 0, FLAN's options or exemplars without its templates, and held-out tasks read from
    local files (one task's rows)."""
    templated = args.instruction_templates != constants.INSTRUCTION_FORMATS[0]
    if args.few_shot < 0:
        raise UsageError(f"--few_shot={args.few_shot} must be >= 0 (exemplars before each input)")
    for flag, value in (("--few_shot", args.few_shot), ("--instruction_options", args.instruction_options)):
        if value and not templated:
            raise UsageError(f"{flag} is part of FLAN's format: pass --instruction_templates flan, or drop {flag}")
    if args.eval_tasks and (args.train_file or args.validation_file or args.test_file):
        raise UsageError("--eval_tasks reads its tasks from --data_dir or the hub, not from --train_file/"
                         "--validation_file; use --tasks with --data_dir")


def check_model_to_train(model_args, data_args, training_args):
    """A run that evaluates without training, or adapts with LoRA, needs an existing model: a random --model_size
    init would score chance, and adapters on it would train a frozen random network."""
    if not training_args.do_train and model_args.model_name_or_path is None:
        raise UsageError("--do_train false evaluates an existing model: pass --model_name_or_path (a folder or hub "
                         "name), or drop --do_train false to fine-tune first")
    if training_args.peft and model_args.model_name_or_path is None:
        raise UsageError(f"--peft {training_args.peft} adapts an existing model: pass --model_name_or_path (a "
                         "folder or hub name), or drop --peft for full fine-tuning")
