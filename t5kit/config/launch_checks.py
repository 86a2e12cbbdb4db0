"""One source of truth: DeepSpeed JSON and accelerate settings (FSDP's included) may say "auto", never a value our
flags contradict.

Batch size, gradient accumulation, clipping, learning rate, optimizer and schedule values and precision are set
once, in our flags. HF's DeepSpeed integration fills "auto" from them; a concrete value that disagrees would
otherwise win silently in some places and lose in others, so it is refused before training starts.
"""
import importlib.util
import os

from t5kit.config.mapping_file import read_mapping
from t5kit.errors import UsageError

ZERO_STAGES = (0, 1, 2, 3)
AUTO = "auto"
ACCELERATE_DEEPSPEED_FILE = "the accelerate deepspeed_config_file"


def load_deepspeed_config(source, what="--deepspeed file"):
    """The DeepSpeed config as a dict, from a JSON path (or an already-parsed dict); `what` names the file in
    messages (--deepspeed's, or the accelerate config's deepspeed_config_file)."""
    if isinstance(source, dict):
        return source
    return read_mapping(source, what, "DeepSpeed settings (a JSON object)", syntax="JSON",
                        missing_hint="pass a DeepSpeed JSON such as zero_stage2_config.json")


def check_zero_stage(config, where):
    stage = config.get("zero_optimization", {}).get("stage", 0)
    if stage not in ZERO_STAGES:
        raise UsageError(f"{where}: unknown ZeRO stage {stage!r} in zero_optimization.stage; use one of 0, 1, 2, 3")
    return stage


def launched_world_size():
    """Processes in this job as every launcher (torchrun, accelerate, deepspeed, srun wrappers) exports it."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def flag_values(args):
    """{DeepSpeed JSON key path: (our flag, its value)} for every value both may set."""
    betas = [args.adam_beta1, args.adam_beta2]
    values = {
        "train_micro_batch_size_per_gpu": ("--per_device_train_batch_size", args.per_device_train_batch_size),
        "gradient_accumulation_steps": ("--gradient_accumulation_steps", args.gradient_accumulation_steps),
        "train_batch_size": ("per-device batch x accumulation x world size",
                             args.per_device_train_batch_size * args.gradient_accumulation_steps
                             * launched_world_size()),
        "gradient_clipping": ("--max_grad_norm", args.max_grad_norm),
        "bf16.enabled": ("--bf16", bool(args.bf16)),
        "fp16.enabled": ("--fp16", bool(args.fp16)),
        "optimizer.params.lr": ("--learning_rate", args.learning_rate),
        "optimizer.params.betas": ("--adam_beta1/--adam_beta2", betas),
        "optimizer.params.eps": ("--adam_epsilon", args.adam_epsilon),
        "optimizer.params.weight_decay": ("--weight_decay", args.weight_decay),
        "scheduler.params.warmup_max_lr": ("--learning_rate", args.learning_rate),
        "scheduler.params.warmup_num_steps": ("--warmup_steps", args.warmup_steps),
    }
    if args.max_steps > 0:
        values["scheduler.params.total_num_steps"] = ("--max_steps", args.max_steps)
    return values


def lookup(config, dotted_key):
    """config["a"]["b"] for "a.b", or AUTO when any part is absent (absent means the flag decides)."""
    node = config
    for part in dotted_key.split("."):
        if not isinstance(node, dict) or part not in node:
            return AUTO
        node = node[part]
    return node


def same_value(json_value, flag_value):
    if isinstance(flag_value, list):
        return isinstance(json_value, list) and len(json_value) == len(flag_value) and all(
            same_value(a, b) for a, b in zip(json_value, flag_value))
    if isinstance(flag_value, bool) or isinstance(json_value, bool):
        return bool(json_value) == bool(flag_value)
    try:
        return float(json_value) == float(flag_value)
    except (TypeError, ValueError):
        return False


def check_deepspeed_agrees(config, args, where):
    """Refuses the first concrete DeepSpeed value that disagrees with our flags, naming both places."""
    for key, (flag, value) in flag_values(args).items():
        json_value = lookup(config, key)
        if json_value != AUTO and not same_value(json_value, value):
            raise UsageError(f"{where} sets {key}={json_value!r} but {flag} is {value!r}; set it to \"auto\" in "
                             "the JSON (our flags are the one source of truth) or change the flag")
    for flag in ("param_group_lr", "adamw_rms_scaling"):
        if getattr(args, flag) and "optimizer" in config:
            raise UsageError(f"{where} defines an optimizer, which would ignore --{flag}; remove its "
                             "\"optimizer\" section")


def check_accelerate_env(args):
    """`accelerate launch` exports its config as ACCELERATE_* variables; refuse ones that contradict our flags.
    Mixed precision 'no' is accelerate's default and cannot be told apart from unset, so only bf16/fp16 count."""
    precision = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
    wanted = "bf16" if args.bf16 else "fp16" if args.fp16 else "no"
    if precision in ("bf16", "fp16") and precision != wanted:
        raise UsageError(f"the accelerate config sets mixed_precision: {precision} but our flags ask for "
                         f"{wanted} (--bf16/--fp16); set mixed_precision: 'no' there and choose precision with "
                         "--bf16 true or --fp16 true")
    for env, flag, value in (("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "--gradient_accumulation_steps",
                              args.gradient_accumulation_steps),
                             ("ACCELERATE_GRADIENT_CLIPPING", "--max_grad_norm", args.max_grad_norm)):
        if env in os.environ and os.environ[env] != AUTO and not same_value(os.environ[env], value):
            raise UsageError(f"the accelerate config sets {env.removeprefix('ACCELERATE_').lower()}="
                             f"{os.environ[env]} but {flag} is {value}; remove it from the accelerate config")


def deepspeed_zero_stage(args):
    """The ZeRO stage this run will use (from --deepspeed, accelerate's deepspeed_config_file or its
    ACCELERATE_DEEPSPEED_ZERO_STAGE), or None without DeepSpeed."""
    if args.deepspeed:
        return check_zero_stage(load_deepspeed_config(args.deepspeed), "--deepspeed")
    accelerate_file = os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE")
    if accelerate_file and accelerate_file != "none":
        return check_zero_stage(load_deepspeed_config(accelerate_file, ACCELERATE_DEEPSPEED_FILE), accelerate_file)
    stage = os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE")
    return int(stage) if stage and stage.isdigit() else None


FSDP_STATE_DICT_TYPES = ("SHARDED_STATE_DICT", "FULL_STATE_DICT")  # what resume and the final full save read


def fsdp_requested(args):
    """Whether this run asks for FSDP: an accelerate FSDP config (accelerate launch exports ACCELERATE_USE_FSDP and
    its fsdp_config as FSDP_* variables), or HF's own --fsdp flag."""
    return os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true" or bool(args.fsdp)


def check_fsdp_config(args):
    """An FSDP config may not contradict our flags or run where it would silently do something else."""
    from_accelerate = os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
    if not fsdp_requested(args):
        return
    if from_accelerate and args.fsdp:
        raise UsageError("FSDP is set twice: by the accelerate config (distributed_type: FSDP) and by --fsdp; keep "
                         "the accelerate config (configs/accelerate/fsdp.yaml) and drop --fsdp/--fsdp_config")
    if args.deepspeed or os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        raise UsageError("FSDP and DeepSpeed both set; shard with one of them (configs/accelerate/fsdp.yaml or a "
                         "zero_stage*_config.json)")
    check_fsdp_device(args)
    state_dict_type = os.environ.get("FSDP_STATE_DICT_TYPE", "SHARDED_STATE_DICT").upper()
    if state_dict_type not in FSDP_STATE_DICT_TYPES:
        raise UsageError(f"the FSDP config sets fsdp_state_dict_type: {state_dict_type}, which resume cannot read on "
                         f"another process count; use {' or '.join(FSDP_STATE_DICT_TYPES)}")
    if os.environ.get("FSDP_ACTIVATION_CHECKPOINTING", "false").lower() == "true" and (
            args.gradient_checkpointing or getattr(args, "activation_checkpointing", False)):
        raise UsageError("the FSDP config sets fsdp_activation_checkpointing: true and --gradient_checkpointing is "
                         "true too; checkpoint activations once: set it false in the FSDP config, or drop the flag")


def check_fsdp_device(args):
    """accelerate (1.15, state.py) turns only GPU-like process groups into FSDP: on CPU processes (gloo) it keeps
    MULTI_CPU, so an FSDP config there would train plain DDP and save unsharded checkpoints without a word."""
    import torch  # here: the other checks need no torch

    if args.use_cpu or not torch.cuda.is_available():
        raise UsageError("the FSDP config needs GPUs: on CPU processes (--use_cpu true, or no GPU) accelerate "
                         "trains plain DDP instead, without a word (it turns only GPU-like process groups into FSDP); "
                         "drop the FSDP config for CPU runs (configs/accelerate/multi_gpu.yaml with --use_cpu true "
                         "runs DDP over gloo)")


def check_launch_configs(args):
    """All launcher checks; T5TrainingArguments runs them before transformers reads the DeepSpeed config."""
    check_accelerate_env(args)
    check_fsdp_config(args)
    sources = [("--deepspeed", args.deepspeed, "--deepspeed file")]  # (setting, its value, the file's name)
    accelerate_file = os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE")
    if accelerate_file and accelerate_file != "none":
        sources.append((ACCELERATE_DEEPSPEED_FILE, accelerate_file, ACCELERATE_DEEPSPEED_FILE))
    for setting, source, what in sources:
        if source:
            where = f"{setting} {source}" if isinstance(source, str) else setting
            config = load_deepspeed_config(source, what)
            check_zero_stage(config, where)
            check_deepspeed_agrees(config, args, where)
    check_deepspeed_launcher(args)


def check_deepspeed_launcher(args):
    """DeepSpeed learns its process group from a launcher's environment (LOCAL_RANK); under plain python it falls
    back to MPI discovery, which fails on a missing mpi4py only once the Trainer is built, after config.yaml."""
    launched = "LOCAL_RANK" in os.environ or args.local_rank != -1
    if args.deepspeed and not launched and importlib.util.find_spec("mpi4py") is None:
        raise UsageError("--deepspeed needs a launcher: run `deepspeed --num_gpus N ENTRY.py ...`, `torchrun "
                         "--nproc_per_node N ENTRY.py ...` or `accelerate launch`, not plain python (DeepSpeed would "
                         "look for mpi4py)")
