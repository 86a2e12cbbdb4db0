"""Checks of training flags that take more than a line, run by T5TrainingArguments.__post_init__ (arguments.py)
before any model or data is loaded; each raises UsageError with the fix."""
import json
import logging
import os
import re
from pathlib import Path

from t5kit.errors import UsageError, did_you_mean

logger = logging.getLogger(__name__)

ADAMW_OPTIMS = ("adamw_torch_fused", "adamw_torch")  # Trainer's torch.optim.AdamW: what --adamw_rms_scaling replaces
# Each interval flag and the strategy that reads it: with strategy 'steps', HF takes 0 as "unset" (a save only at
# the end, an evaluation every --logging_steps) and a negative number as never.
STEP_INTERVALS = (("save_steps", "save_strategy"), ("eval_steps", "eval_strategy"),
                  ("logging_steps", "logging_strategy"))


def check_report_to(report_to):
    """Refuses an unknown --report_to name now, not when the Trainer is built (after config.yaml is written)."""
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    names = [report_to] if isinstance(report_to, str) else report_to or []
    for name in names:
        if name not in (*INTEGRATION_TO_CALLBACK, "all", "none"):
            raise UsageError(f"--report_to {name!r} is not a tracker transformers knows; choices: "
                             f"{', '.join(INTEGRATION_TO_CALLBACK)}, all, none")


def check_training_numbers(args):
    """Refuses batch sizes, accumulation, beams and lengths below 1, a negative learning rate, and a training run
    of no steps: HF would fail later (a ZeroDivisionError, an optimizer error) or 'finish' without training."""
    for flag in ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps",
                 "generation_num_beams", "generation_max_length"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise UsageError(f"--{flag}={value} must be >= 1")
    if args.learning_rate < 0:
        raise UsageError(f"--learning_rate={args.learning_rate} must be >= 0")
    if args.max_steps == 0 or args.max_steps < -1:
        raise UsageError(f"--max_steps={args.max_steps}: pass a number of optimizer steps > 0, or -1 to train "
                         "for --num_train_epochs")
    if args.trains() and args.max_steps == -1 and not args.num_train_epochs > 0:
        raise UsageError(f"--num_train_epochs={args.num_train_epochs} trains nothing; pass a number of epochs > 0 "
                         "or --max_steps N")
    check_step_intervals(args)


def check_step_intervals(args):
    """Refuses --save_steps, --eval_steps or --logging_steps <= 0 where its strategy is 'steps' (eval_steps unset
    follows --logging_steps, as in HF)."""
    for flag, strategy_flag in STEP_INTERVALS:
        value, strategy = getattr(args, flag), getattr(args, strategy_flag)
        if getattr(strategy, "value", strategy) == "steps" and value is not None and value <= 0:
            raise UsageError(f"--{flag}={value:g} with --{strategy_flag} steps is no interval; pass a number of "
                             f"steps >= 1 (or a fraction of the run's steps in (0, 1)), or --{strategy_flag} no")


def check_adamw_rms_scaling(args):
    """--adamw_rms_scaling changes AdamW's step (optim/adamw_scale.py); with another --optim it would do nothing."""
    optim = getattr(args.optim, "value", args.optim)
    if args.adamw_rms_scaling and optim not in ADAMW_OPTIMS:
        raise UsageError(f"--adamw_rms_scaling true scales AdamW's step but --optim is {optim}; pass --optim "
                         f"{ADAMW_OPTIMS[0]} (or drop --adamw_rms_scaling)")


def check_push_to_hub(args):
    """--push_to_hub uploads the trained model to --hub_model_id (outputs/hub_upload.py): the repo is named, not
    guessed from the folder name as HF would, so the model card can say where the model lives."""
    if not args.push_to_hub:
        return
    if not args.hub_model_id:
        raise UsageError("--push_to_hub true needs --hub_model_id NAME (user/model or org/model), the repo to "
                         "upload to")
    if not args.trains():
        raise UsageError("--push_to_hub true with --do_train false: an evaluation run saves no model to upload; "
                         "drop --push_to_hub")


def with_non_blocking_copies(accelerator_config, pin_memory):
    """HF's --accelerator_config with non_blocking on by default (with --dataloader_pin_memory, HF's default). Off,
    accelerate copies each batch to the GPU with a blocking copy, which waits for every step queued before it: one
    GPU sync per step, during which the GPU idles while the host fetches (and, with no loader workers, collates)
    the next batch and launches the next step. Pinned batches copy asynchronously and safely (torch keeps a pinned
    block until its copy has run). A value the user set, or a JSON file they name, is kept as it is."""
    if isinstance(accelerator_config, str) and accelerator_config.lstrip().startswith("{"):
        try:
            accelerator_config = json.loads(accelerator_config)
        except json.JSONDecodeError as err:
            raise UsageError(f"--accelerator_config is not valid JSON ({err}); pass a JSON object or a JSON file")
    if isinstance(accelerator_config, str) and not Path(accelerator_config).is_file():
        raise UsageError(f"--accelerator_config {accelerator_config}: no such JSON file; pass a JSON file or an "
                         "object like '{\"non_blocking\": true}'")
    if accelerator_config is None:
        accelerator_config = {}
    if isinstance(accelerator_config, dict):
        accelerator_config = {"non_blocking": bool(pin_memory), **accelerator_config}
    return accelerator_config


def check_precision(bf16, fp16, use_cpu):
    """Returns the bf16 setting: refuses fp16 with bf16, and bf16 or fp16 the hardware lacks; defaults to bf16 on
    GPUs that have it (T5 was trained in bf16; fp16 needs model/precision.py's fp32 feed-forward outputs)."""
    import torch

    if bf16 and fp16:
        raise UsageError("--bf16 and --fp16 are both set; pick one (bf16 where the hardware has it, fp16 on GPUs "
                         "without it: V100, T4)")
    on_gpu = torch.cuda.is_available() and not use_cpu
    if fp16 and not on_gpu and not use_cpu:
        raise UsageError("--fp16 true needs a GPU, or --use_cpu true for fp16 autocast on the CPU")
    if fp16 and not on_gpu and not cpu_has_native_fp16():
        logger.warning("--fp16 true on a CPU without fp16 instructions (AMX-FP16): fp16 is emulated there and runs "
                       "slower than fp32; drop --fp16 unless you are testing")
    gpu_has_bf16 = on_gpu and torch.cuda.is_bf16_supported()
    if bf16 is None:
        return bool(gpu_has_bf16 and not fp16)
    if bf16 and on_gpu and not gpu_has_bf16:
        raise UsageError("--bf16 true but this GPU has no bf16 (needs Ampere or newer); use --fp16 true or fp32")
    if bf16 and not on_gpu and not use_cpu:
        raise UsageError("--bf16 true needs a GPU with bf16, or --use_cpu true for bf16 autocast on the CPU")
    if bf16 and not on_gpu and not cpu_has_native_bf16():
        logger.warning("--bf16 true on a CPU without bf16 instructions (AVX512-BF16 or AMX): bf16 is emulated there "
                       "and runs many times slower than fp32; drop --bf16 unless you are testing")
    return bool(bf16)


def inference_precision(bf16, use_cpu):
    """predict_t5.py's bf16: unset, on where the hardware computes bf16 (a GPU with bf16, a CPU with AVX512-BF16 or
    AMX: about 1.7x the examples/s of fp32 for t5-small, docs/inference.md), off elsewhere; given, checked as for
    training, except that a machine without a GPU needs no --use_cpu (predicting runs on the CPU there)."""
    import torch

    on_gpu = torch.cuda.is_available() and not use_cpu
    if bf16 is None:
        return torch.cuda.is_bf16_supported() if on_gpu else cpu_has_native_bf16()
    return check_precision(bf16, False, not on_gpu)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 matrix products in hardware (AVX512-BF16 or AMX), where bf16 autocast is about
    twice as fast as fp32 for a T5 (docs/benchmarks.md); elsewhere it is emulated and far slower."""
    import torch

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # torch.cpu's own CPU-feature probes
    return any(getattr(torch.cpu, probe, lambda: False)() for probe in probes)


def cpu_has_native_fp16() -> bool:
    """Whether this CPU computes fp16 matrix products in hardware (AMX-FP16, Granite Rapids and newer)."""
    import torch

    return getattr(torch.cpu, "_is_amx_fp16_supported", lambda: False)()


def check_fp16_attention(model_args, *groups):
    """A training program's cross-group check (config/script_flags.py): --fp16 with --attn_implementation eager is
    refused, since eager attention materialises the query-key logits in fp16, where they can overflow; SDPA and
    t5_flex accumulate them in fp32 (model/precision.py)."""
    training_args = groups[-1]
    if training_args.fp16 and model_args.attn_implementation == "eager":
        raise UsageError("--fp16 true with --attn_implementation eager: eager attention computes its logits in fp16, "
                         "where they can overflow; use --attn_implementation sdpa (or t5_flex on a GPU)")


def check_loss_chunks(model_args, *groups):
    """A training program's cross-group check (config/script_flags.py): --loss_chunk_tokens never holds a step's
    full logits (model/chunked_loss.py), which --z_loss and --label_smoothing_factor read."""
    training_args = groups[-1]
    for flag in ("z_loss", "label_smoothing_factor"):
        if model_args.loss_chunk_tokens and getattr(training_args, flag):
            raise UsageError(f"--loss_chunk_tokens {model_args.loss_chunk_tokens} never holds a step's full logits, "
                             f"which --{flag} reads; drop one of the two (--loss_chunk_tokens 0 is off)")


def check_nan_policy(policy, deepspeed):
    """--nan_policy skip cannot undo a DeepSpeed step (train/nonfinite_guard.py); checked at parse time with
    --deepspeed, and again by the trainer with accelerate's DeepSpeed config."""
    if policy == "skip" and deepspeed:
        raise UsageError("--nan_policy skip cannot undo a DeepSpeed step (the engine steps inside backward); "
                         "use --nan_policy stop")


ENVIRONMENT_VARIABLE = re.compile(r"\$(\w+|\{(\w+)\})")


def expand_environment(flag, value):
    """$VAR and ${VAR} replaced by their environment values, so that one config gives each W&B sweep run its own
    folder (`--output_dir runs/sweeps/NAME/${WANDB_RUN_ID}`, the id the agent sets per run). A variable that is not
    set is refused: expanding it to nothing would make concurrent runs share a folder."""
    def lookup(match):
        name = match.group(2) or match.group(1)
        if name not in os.environ:
            raise UsageError(f"{flag} {value} names ${name}, which is not set in the environment; set it, or write "
                             "the path out")
        return os.environ[name]

    return ENVIRONMENT_VARIABLE.sub(lookup, value) if isinstance(value, str) else value


def apply_config_overrides(config, overrides):
    """config.update_from_string (HF's parser: each value cast to the type the config already holds), with a key the
    config lacks or a value of the wrong type refused in one line naming the flag."""
    items = overrides.split(",")
    keys = [item.split("=", 1)[0].strip() for item in items]
    for item, key in zip(items, keys):
        if "=" not in item:
            raise UsageError(f"--config_overrides {item!r} has no value; give key=value pairs joined by commas")
        if not hasattr(config, key):
            hint = did_you_mean(key, list(config.to_dict()), list_choices=False)
            raise UsageError(f"--config_overrides {item!r}: {type(config).__name__} has no setting {key!r}{hint}")
    try:
        config.update_from_string(overrides.replace(" ", ""))
    except (ValueError, TypeError) as err:
        raise UsageError(f"--config_overrides {overrides!r}: {err}") from None
    if "num_layers" in keys and "num_decoder_layers" not in keys:
        config.num_decoder_layers = config.num_layers  # T5Config copies num_layers only when it is built
