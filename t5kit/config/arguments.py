"""The flag groups entry scripts share (HF names wherever HF has one): where the model comes from (every script that
reads one) and its tokenizer (pre-training, fine-tuning and predict_t5.py), the hub upload, how task inputs are cut and
predicted (fine-tuning and prediction), the model and the training run; the folder a script writes and whether it may
overwrite it are output_arguments.py's. A shared flag is declared once, in its group, with one help text true for every
script that takes it; a script's own group inherits the shared ones (the training groups ahead of HF's
TrainingArguments, so that their text replaces HF's). pretrain_arguments.py, finetune_arguments.py and
predict_arguments.py hold each script's own groups; script_flags.py says which script takes which.

Each field's help gives its meaning, default and interactions; a field with a fixed set of values declares it once,
as `choices` in its metadata: argparse, the YAML checks, --help and `check_choices` all read it there.
`__post_init__` validates once, before any model or data is loaded, and raises UsageError with the fix.
"""
from dataclasses import dataclass, field
from pathlib import Path

from transformers import Seq2SeqTrainingArguments

import constants
from t5kit.config import checks, launch_checks
from t5kit.config.output_arguments import OutputDirArguments, OverwriteOutputDirArguments
from t5kit.config.parsing import check_choices
from t5kit.errors import UsageError, one_line
from t5kit.specs import FILE_BUILDERS

ATTN_IMPLEMENTATIONS = ("sdpa", "eager", "t5_flex")
NAN_POLICIES = ("stop", "skip")
ACTIVATION_DTYPES = ("float32", "bfloat16")
LABEL_SCORING_CHOICES = ("generate", "rank")
MIN_SOURCE_LENGTH = 2  # one token of text and EOS
T5_SOURCE_LENGTH = 512  # input tokens T5 was fine-tuned with: fine-tuning's --max_source_length when unset
LM_HEAD_INITS = ("t5x", "hf")


def check_positive(flag, value):
    """Refuses a count flag below 1 (None means unset)."""
    if value is not None and value < 1:
        raise UsageError(f"--{flag}={value} must be >= 1 (leave it unset for no limit)")


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


def looks_like_a_folder(name_or_path) -> bool:
    """Whether a --model_name_or_path can only be a local folder: it starts with '.', '/' or '~', or holds more path
    separators than a hub name's one ('namespace/name'). One that does not exist is refused as a missing folder
    when the model is loaded (model/building.load_model_config), never sent to the hub."""
    text = str(name_or_path)
    return text.startswith((".", "/", "~")) or text.count("/") > 1


@dataclass
class ModelPathArguments:
    """Where the model comes from: ModelSourceArguments (training, prediction) and ExportArguments inherit it."""

    model_name_or_path: str = field(default=None, metadata={
        "help": "Hub name or local folder of a T5-family model: T5, Flan-T5, mT5, UMT5 or LongT5 (loaded with "
                "AutoModelForSeq2SeqLM), e.g. a run's output folder, whose model card names its task and input "
                "length, or a LoRA run's merged/ folder. Training continues from it (unset: random init from "
                "--model_size); predict_t5.py and export_t5.py need it."})


@dataclass
class ModelSourceArguments(ModelPathArguments):
    """Where the model and its tokenizer come from: ModelArguments (pre-training, fine-tuning) and PredictArguments
    inherit these two flags."""

    tokenizer_name_or_path: str = field(default=None, metadata={
        "help": "Hub name or local folder of the tokenizer (needs T5's <extra_id_N> sentinels). Unset: the one "
                "saved with --model_name_or_path; a random init needs one (see train_tokenizer.py)."})

    def __post_init__(self):
        if self.tokenizer_name_or_path is None:
            self.tokenizer_name_or_path = self.model_name_or_path


@dataclass
class HubArguments:
    """The hub upload once everything is saved: the training scripts and export_t5.py inherit it."""

    push_to_hub: bool = field(default=False, metadata={
        "help": "Upload to --hub_model_id once everything is saved (the token from HF_TOKEN): a training run's "
                "model, card and record at the end of training (--hub_strategy adds checkpoints), export_t5.py's "
                "export as ctranslate2/. A failed upload is one error line; nothing saved is lost."})
    hub_model_id: str = field(default=None, metadata={
        "help": "The hub repo --push_to_hub uploads to (user/name or org/name): named, never guessed, so the model "
                "card can say where the model lives."})
    hub_private_repo: bool = field(default=None, metadata={
        "help": "Create the --hub_model_id repo private if it does not exist yet (unset: public, or the "
                "organisation's default)."})


@dataclass
class TaskInputArguments:
    """How task inputs are cut and predicted: FineTuneDataArguments and PredictArguments inherit these flags."""

    max_source_length: int = field(default=None, metadata={
        "help": "Input tokens per example (EOS included); longer inputs are cut, keeping EOS, and counted in the log. "
                f"Unset: {T5_SOURCE_LENGTH} when fine-tuning (T5 fine-tuned with {T5_SOURCE_LENGTH}; 1024 with "
                "--benchmark sni, as nanoT5); predict_t5.py takes the model card's (the length the model was trained "
                f"with), else {constants.INPUT_LENGTH}."})
    label_scoring: str = field(default=None, metadata={
        "help": "How a classification task's labels are predicted: generate (decode, greedy or with beams; a text "
                "that is no label word exactly counts as wrong and as invalid) or rank (score every label word by "
                "log-likelihood, the likeliest wins; never an invalid prediction; FLAN's COPA and ReCoRD rank each "
                "row's own options). Fine-tuning applies it to its "
                "evaluation and test predictions; unset, it ranks the held-out tasks (--eval_tasks) of a run in "
                "FLAN's templates (--instruction_templates), as FLAN scores held-out tasks by ranking their options, "
                "and generates every other task (config.yaml's derived.evaluation records each split's). "
                "predict_t5.py: unset is generate.", "choices": LABEL_SCORING_CHOICES})
    max_predict_samples: int = field(default=None, metadata={
        "help": "Predict only the first N examples (debug): of each test split when fine-tuning, of --input_file "
                "in predict_t5.py."})
    compile: bool = field(default=False, metadata={
        "help": "Generate with a static cache and the decoding step compiled (torch.compile; CUDA graphs on a GPU), "
                "batches padded to a few shapes so that a run compiles a handful of times (model/"
                "compiled_generation.py): predict_t5.py's generation and fine-tuning's generated evaluation and test "
                "predictions (SNI included), greedy or beams, the same outputs as eager. Each new shape costs a "
                "compile (seconds on a GPU, tens of seconds on a CPU), so it pays on long runs of generation; "
                "sampling, LoRA adapters and ZeRO-3 generate eagerly (logged). Not the training forward: that is "
                "--torch_compile. See docs/inference.md#compiled-generation."})

    def __post_init__(self):
        check_positive("max_predict_samples", self.max_predict_samples)
        if self.max_source_length is not None and self.max_source_length < MIN_SOURCE_LENGTH:
            raise UsageError(f"--max_source_length={self.max_source_length} leaves no room for text and EOS; use >= "
                             f"{MIN_SOURCE_LENGTH}")


@dataclass
class ModelArguments(ModelSourceArguments):
    """The model a training run builds (random init) or continues from; the source flags are ModelSourceArguments'."""

    model_size: str = field(default="t5-small", metadata={
        "help": "Architecture preset for random init (ignored with --model_name_or_path).",
        "choices": tuple(constants.MODEL_SIZE_PRESETS)})
    dropout_rate: float = field(default=None, metadata={
        "help": "Dropout rate of the model, in [0, 1). Unset: 0.0 for random init (T5 v1.1 pre-training), and a "
                "loaded model (--model_name_or_path) keeps its own. Given: applies to a loaded model too (T5 "
                "fine-tuned with 0.1). The value used is in config.yaml under derived."})
    config_overrides: str = field(default=None, metadata={
        "help": "Random init only: T5Config settings that replace the --model_size preset's, as HF's run_mlm.py "
                "takes them: 'num_layers=4,num_decoder_layers=4,d_model=96'. Checked against T5Config's keys."})
    attn_implementation: str = field(default="sdpa", metadata={
        "help": "T5 attention kernels: sdpa (PyTorch's fused kernels), eager (plain matmuls), or t5_flex "
                "(FlexAttention for unpadded encoder self-attention on an Ampere or newer GPU, SDPA elsewhere; "
                "see model/t5_flex_attention.py).", "choices": ATTN_IMPLEMENTATIONS})
    lm_head_init: str = field(default="t5x", metadata={
        "help": "Random init of an untied output layer (lm_head of the T5 v1.1 presets, or tie_word_embeddings=False "
                "in --config_overrides): t5x (default; Mesh TF's and T5X's variance scaling, fan-in, truncated "
                "normal: std d_model^-0.5, 0.044 for d_model 512) or hf (transformers' normal with std 1.0, 22.6x "
                "larger at d_model 512). Ignored for tied presets and for --model_name_or_path (a loaded model keeps "
                "its weights). See model/building.py.", "choices": LM_HEAD_INITS})
    loss_chunk_tokens: int = field(default=0, metadata={
        "help": "Compute the training loss in chunks of this many target tokens (lm_head and cross-entropy of one "
                "chunk at a time, recomputed in the backward), so that no step holds the full tokens x vocabulary "
                "logits; T5's loss to fp32 rounding. 0 (default): off. Evaluation, prediction and generation keep "
                "the full logits; refused with --z_loss or --label_smoothing_factor, which read them. See "
                "model/chunked_loss.py and docs/performance.md."})
    fused_rmsnorm: bool = field(default=False, metadata={
        "help": "Run T5's layer norms through torch's fused F.rms_norm with T5LayerNorm's numerics (outputs "
                "bit-identical on CPU; a saved model is unchanged). Off by default until a GPU measures it. See "
                "model/fused_rmsnorm.py."})
    cache_dir: str = field(default=None, metadata={"help": "Where hub downloads are stored (HF default if unset)."})
    trust_remote_code: bool = field(default=False, metadata={
        "help": "Allow a hub model/dataset to run its own code. Off: only turn it on for repos you trust."})

    def __post_init__(self):
        check_choices(self)
        if self.tokenizer_name_or_path is None and self.model_name_or_path is None:
            raise UsageError("--tokenizer_name_or_path is required for random init; train one with "
                             "train_tokenizer.py or pass a T5 tokenizer name/folder")
        ModelSourceArguments.__post_init__(self)
        if self.loss_chunk_tokens < 0:
            raise UsageError(f"--loss_chunk_tokens={self.loss_chunk_tokens} must be >= 0 (0: off)")
        if self.dropout_rate is not None and not 0.0 <= self.dropout_rate < 1.0:
            raise UsageError(f"--dropout_rate={self.dropout_rate} must be in [0, 1)")
        if self.config_overrides and self.model_name_or_path:
            raise UsageError("--config_overrides shapes a random init; a model from --model_name_or_path keeps its "
                             "own config: drop one of the two")
        if self.config_overrides:  # keys and value types checked now, before any output is written
            from transformers import T5Config

            checks.apply_config_overrides(T5Config(), self.config_overrides)


@dataclass
class T5TrainingArguments(OutputDirArguments, OverwriteOutputDirArguments, HubArguments, Seq2SeqTrainingArguments):
    """Seq2SeqTrainingArguments plus what transformers 5.x dropped and our runs need; the output folder and hub flags
    are the shared groups' (the same text in every script that takes them)."""

    bf16: bool = field(default=None, metadata={
        "help": "bf16 mixed precision: autocast, with fp32 weights, gradients and optimizer states (predict_t5.py's "
                "--bf16 casts the weights instead). Unset: on where the GPU supports it (Ampere or newer), off "
                "elsewhere. On CPU, --use_cpu true --bf16 true uses bf16 autocast."})
    param_group_lr: list[str] = field(default=None, metadata={
        "help": "Per-parameter-group learning rates, 'REGEX=LR' items matched against parameter names in order, "
                "first match wins: --param_group_lr 'lm_head|shared=1e-3' '.*=1e-4' (or one comma-separated "
                "string, or a YAML list). Every parameter must match some item; each item must match something."})
    adamw_rms_scaling: bool = field(default=False, metadata={
        "help": "nanoT5's AdamWScale: AdamW (--optim adamw_torch or adamw_torch_fused) with each tensor's step times "
                "max(1e-3, RMS of the tensor), so --learning_rate is relative to the weights' size (nanoT5 pre-trains "
                "at 2e-2 with a cosine schedule). See optim/adamw_scale.py."})
    nan_policy: str = field(default="stop", metadata={
        "help": "What a NaN/inf training loss (or NaN/inf gradient norm) does: stop (default; raise naming the "
                "step, before the bad update reaches any checkpoint: the last one stays the last good state) or skip "
                "(drop that optimizer step's update, count it in the logs as skipped_nonfinite_steps; not with "
                "--deepspeed). See train/nonfinite_guard.py.", "choices": NAN_POLICIES})
    z_loss: float = field(default=0.0, metadata={
        "help": "T5X's auxiliary z-loss: adds z_loss * (log Z)^2, log Z the logsumexp of a target token's logits, "
                "averaged over the target tokens as the cross-entropy is, to the training loss (T5X pre-trains with "
                "1e-4; it keeps the logits from drifting, which bf16 cannot hold well). Logged as z_loss (the logged "
                "loss includes it; eval_loss does not). 0 (default): off. See train/z_loss.py."})
    activation_dtype: str = field(default="float32", metadata={
        "help": "The residual stream's dtype under --bf16: float32 (default; autocast runs only the matmuls in bf16, "
                "as HF does) or bfloat16 (T5X's activation_dtype: the embeddings' outputs are cast, so the residual "
                "adds, dropouts and norms read and write bf16; parameters, gradients, optimizer states and the loss "
                "stay fp32). Needs --bf16. See docs/performance.md (bf16 activations).", "choices": ACTIVATION_DTYPES})
    packing: bool = field(default=False, metadata={
        "help": "Pack several whole examples into each training row, kept apart by segment ids (T5X/seqio's "
                "packing), instead of padding each: rows of --input_length inputs (fine-tuning: "
                "--max_source_length) and a matched number of targets (the examples' mean target/input ratio), "
                "filled in a random order keyed by --seed and the epoch. Pre-training: --objective ul2 or prefix_lm "
                "(span corruption has no padding to fill), windows shortened to --packing_window_input_length, not "
                "with --streaming. Fine-tuning: the training split (it replaces --train_sampling_strategy); "
                "evaluation and prediction stay unpacked. See docs/data.md#packing."})
    logging_nan_inf_filter: bool = field(default=False, metadata={
        "help": "HF's filter of non-finite losses out of the logged loss. Off by default: it reads every step's "
                "loss on the host (a GPU sync per step), and --nan_policy stops on such a loss or, with skip, "
                "filters it on the device."})

    def __post_init__(self):
        check_choices(self)
        if not self.output_dir:
            raise UsageError("--output_dir is required (where config.yaml, metrics.json and the model go)")
        # $VAR in --output_dir: one folder per W&B sweep run (runs/sweeps/NAME/${WANDB_RUN_ID}).
        self.output_dir = checks.expand_environment("--output_dir", self.output_dir)
        if self.hub_token:
            raise UsageError("--hub_token would be recorded with the run (W&B stores the command line, Trainer "
                             "pickles its arguments); set the HF_TOKEN environment variable instead")
        checks.check_push_to_hub(self)
        if isinstance(self.report_to, str) and "," in self.report_to:
            self.report_to = [name.strip() for name in self.report_to.split(",") if name.strip()]
        checks.check_report_to(self.report_to)
        checks.check_training_numbers(self)
        checks.check_adamw_rms_scaling(self)
        if not self.z_loss >= 0:  # NaN too
            raise UsageError(f"--z_loss={self.z_loss} must be >= 0 (T5X uses 1e-4; 0 turns it off)")
        # The Trainer checks again with accelerate's DeepSpeed config too; --deepspeed is known here already.
        checks.check_nan_policy(self.nan_policy, deepspeed=bool(self.deepspeed))
        self.bf16 = checks.check_precision(self.bf16, self.fp16, self.use_cpu)
        if self.activation_dtype == "bfloat16" and self.fp16:
            raise UsageError("--activation_dtype bfloat16 with --fp16: the bf16 residual stream runs under bf16 "
                             "autocast; under fp16 the stream stays fp32 (model/precision.py); drop "
                             "--activation_dtype, or use --bf16 true")
        if self.activation_dtype == "bfloat16" and not self.bf16:
            raise UsageError("--activation_dtype bfloat16 casts the residual stream under bf16 autocast, which is off; "
                             "add --bf16 true (a GPU with bf16, or --use_cpu true) or keep --activation_dtype float32")
        self.accelerator_config = checks.with_non_blocking_copies(self.accelerator_config,
                                                                  self.dataloader_pin_memory)
        launch_checks.check_launch_configs(self)
        try:
            super().__post_init__()
        except ValueError as err:  # HF's own validation of flag combinations: bad input, on one line
            raise UsageError(one_line(err)) from None

    def trains(self):
        """Whether the entry script trains (pre-training always does; fine-tuning unless --do_train false)."""
        return True
