"""predict_t5.py's flags: the model, the input file and how to read it, the task, generation, the output file.
Everything here is checked before the model is loaded; a refused run writes nothing."""
from dataclasses import dataclass, field
from pathlib import Path

from constants import NO_TASK
from t5kit.config import checks
from t5kit.config.arguments import (
    LABEL_SCORING_CHOICES,
    ModelSourceArguments,
    TaskInputArguments,
    check_positive,
)
from t5kit.config.parsing import check_choices
from t5kit.errors import UsageError

INPUT_SUFFIXES = (".txt", ".jsonl", ".json", ".csv", ".tsv")
OUTPUT_SUFFIXES = (".jsonl", ".tsv")
BACKENDS = ("torch", "ctranslate2")  # model/predictors.py's LOADERS
CT2_COMPUTE_TYPES = ("default", "auto", "float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16",
                     "int16", "float16", "bfloat16")


@dataclass
class PredictArguments(TaskInputArguments, ModelSourceArguments):
    """The input and output files, the task and generation; the model and tokenizer flags come from
    ModelSourceArguments and --max_source_length, --label_scoring and --max_predict_samples from TaskInputArguments,
    as fine-tuning's do.
    --model_name_or_path is required here."""

    input_file: str = field(default=None, metadata={
        "help": "Required. Examples to predict: .txt (one a line), .jsonl/.json/.csv/.tsv (a row each; the task's "
                "columns, or --text_column), or a task's official file (e.g. glue/RTE/dev.tsv with --task rte)."})
    output_file: str = field(default=None, metadata={
        "help": "Required. Where predictions go, one per example in input order: .jsonl (line, input, "
                "prediction[, filled]) or .tsv with the same columns. An existing file is refused without "
                "--overwrite."})
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing --output_file."})
    task: str = field(default=None, metadata={
        "help": "The registry task whose text-to-text format the inputs get (glue/rte, rte, super_glue/boolq, "
                "cnn_dailymail...; a name two benchmarks share needs its benchmark). Unset: the model card's task; "
                f"none there, or --task {NO_TASK}: inputs as they are (span filling keeps the sentinels)."})
    text_column: str = field(default=None, metadata={
        "help": "The column holding the input text in a jsonl/csv/tsv file: needed without a task, or to feed "
                "another column to a task with one text column (sst2's sentence)."})
    num_beams: int = field(default=1, metadata={"help": "Beams for generation; 1 is greedy decoding."})
    max_new_tokens: int = field(default=None, metadata={
        "help": "Generated tokens at most (EOS included). Unset: the task's longest label word or score, the "
                "model card's --max_target_length for generation tasks, else 128."})
    batch_size: int = field(default=32, metadata={
        "help": "Examples per batch. Batches hold inputs of similar length (sorted longest first), each padded to "
                "its own longest."})
    use_cpu: bool = field(default=False, metadata={"help": "Stay on the CPU even where a GPU is visible."})
    bf16: bool = field(default=None, metadata={
        "help": "Predict with the model's weights cast to bf16. Not the training scripts' --bf16, which is autocast "
                "(fp32 weights, bf16 matmuls): casting the weights once is faster for decoding. Unset: on where the "
                "hardware computes bf16 (a GPU of Ampere or newer, a CPU with AVX512-BF16 or AMX), off elsewhere; "
                "false keeps fp32 (predictions as fine-tuning evaluated them)."})
    fp16: bool = field(default=False, metadata={
        "help": "Predict with the model's weights cast to fp16, the feed-forward output projections kept and computed "
                "in fp32 so that T5's activations cannot overflow (model/precision.py): for GPUs without bf16 (V100, "
                "T4). Not the training scripts' --fp16 (autocast with loss scaling). Not with --bf16."})
    disable_tqdm: bool = field(default=False, metadata={"help": "No progress bar."})
    backend: str = field(default="torch", metadata={
        "help": "torch (transformers' generate) or ctranslate2 (the C++ engine: a run's fresh MODEL/ctranslate2 "
                "export, an export folder, else converted on the fly; export_t5.py). Same inputs, batches, columns.",
        "choices": BACKENDS})
    compute_type: str = field(default="default", metadata={
        "help": "--backend ctranslate2: the type it computes in; default: the export's own (float32 unless "
                "exported quantized), or int8, int8_float32, bfloat16, float16, auto (the fastest here).",
        "choices": CT2_COMPUTE_TYPES})
    threads: int = field(default=None, metadata={
        "help": "--backend ctranslate2: CPU cores, one single-thread worker each, each translating its own batch "
                "(unset: the cores this process may use)."})

    def __post_init__(self):
        check_choices(self)
        for flag in ("model_name_or_path", "input_file", "output_file"):
            if not getattr(self, flag):
                raise UsageError(f"--{flag} is required; see --help")
        ModelSourceArguments.__post_init__(self)
        TaskInputArguments.__post_init__(self)
        check_input_file(Path(self.input_file))
        check_output_file(Path(self.output_file), self.overwrite)
        for flag in ("num_beams", "max_new_tokens", "batch_size"):
            check_positive(flag, getattr(self, flag))
        self.label_scoring = self.label_scoring or LABEL_SCORING_CHOICES[0]  # unset: generate (no held-out tasks)
        if self.label_scoring == "rank" and self.num_beams > 1:
            raise UsageError("--num_beams applies to generation; --label_scoring rank scores every label word")
        if self.fp16 and self.bf16:
            raise UsageError("--fp16 and --bf16 are both set; pick one (bf16 where the hardware has it)")
        self.bf16 = False if self.fp16 else checks.inference_precision(self.bf16, self.use_cpu)
        check_positive("threads", self.threads)
        if self.compile and (self.backend != "torch" or self.label_scoring == "rank"):
            raise UsageError("--compile compiles the torch backend's generation; --backend ctranslate2 and "
                             "--label_scoring rank do not generate with it")
        if self.backend == "ctranslate2" and self.fp16:
            raise UsageError("--fp16 casts the torch model's weights; CTranslate2 takes --compute_type float16 "
                             "(or int8_float16)")
        if self.backend == "torch" and (self.compute_type != "default" or self.threads is not None):
            raise UsageError("--compute_type and --threads apply to --backend ctranslate2; the torch backend takes "
                             "--bf16 and --use_cpu")


def check_input_file(path):
    if not path.is_file():
        raise UsageError(f"--input_file {path} not found; check the path")
    if path.suffix.lower() not in INPUT_SUFFIXES:
        raise UsageError(f"--input_file {path}: predict_t5.py reads {', '.join(INPUT_SUFFIXES)} files")
    if path.stat().st_size == 0:
        raise UsageError(f"--input_file {path} is empty; give one example a line (.txt) or a row a line (.jsonl)")


def check_output_file(path, overwrite):
    if path.suffix.lower() not in OUTPUT_SUFFIXES:
        raise UsageError(f"--output_file {path}: write .jsonl or .tsv")
    if path.is_dir():
        raise UsageError(f"--output_file {path} is a folder; name a file in it")
    if path.exists() and not overwrite:
        raise UsageError(f"--output_file {path} exists; pass --overwrite true to replace it, or choose another path")
    existing = next(folder for folder in path.parents if folder.exists())
    if not existing.is_dir():
        raise UsageError(f"--output_file {path} cannot be created: {existing} is a file; choose another path")
