"""Tokenizer and model construction shared by the entry scripts: load, check, build from a size preset."""
import logging
import math
from pathlib import Path

import torch
import transformers
from packaging.version import Version
from safetensors import SafetensorError
from transformers import (
    MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING,
    AutoConfig,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    T5Config,
    T5TokenizerFast,
)

import constants
from t5kit.config.arguments import looks_like_a_folder
from t5kit.config.checks import apply_config_overrides
from t5kit.errors import UsageError
from t5kit.model import (  # t5_flex_attention registers --attn_implementation t5_flex
    chunked_loss,
    fused_rmsnorm,
    precision,
    t5_flex_attention,
)
from t5kit.model.tokenizer_check import check_t5_tokenizer

logger = logging.getLogger(__name__)
TOKENIZER_FILES = ("tokenizer.json", "spiece.model")  # what T5TokenizerFast reads from a bare folder
FUSED_T5_ATTENTION_SINCE = "5.20"  # the first transformers whose T5 gives SDPA a contiguous position-bias mask
# The T5 family, loaded through AutoModelForSeq2SeqLM: T5 1.0/1.1 and Flan-T5 ("t5"), mT5, UMT5 (a relative position
# bias in every layer), LongT5 (local or transient-global encoder attention).
T5_MODEL_TYPES = ("t5", "mt5", "umt5", "longt5")
RANDOM_INIT_DROPOUT_RATE = 0.0  # T5 v1.1 pre-training turned dropout off (released_checkpoints.md)
# jax's variance_scaling(..., "truncated_normal"), T5X's default kernel init, divides the std by this: the std of a
# standard normal truncated at +-2, so that the truncated draw has the std asked for.
TRUNCATED_NORMAL_STD = 0.87962566103423978


def load_tokenizer(name_or_path, cache_dir=None, trust_remote_code=False, flag="--tokenizer_name_or_path"):
    """Loads a fast tokenizer by hub name or folder and checks it has T5's special tokens; `flag` is the one
    messages name (predict_t5.py reads the tokenizer from --model_name_or_path by default)."""
    # A bare folder (spiece.model/tokenizer.json, no tokenizer_config.json) loads through AutoTokenizer
    # without T5's special tokens, so it is read as a T5 tokenizer explicitly.
    bare_folder = Path(name_or_path).is_dir() and not (Path(name_or_path) / "tokenizer_config.json").exists()
    if bare_folder and not any((Path(name_or_path) / name).is_file() for name in TOKENIZER_FILES):
        # T5TokenizerFast would build a vocabulary of only the special tokens from it: every word unknown.
        raise UsageError(f"{flag} {name_or_path} holds no tokenizer (none of tokenizer_config.json, "
                         f"{', '.join(TOKENIZER_FILES)}); pass a T5 tokenizer folder (--tokenizer_name_or_path) or "
                         "build one with train_tokenizer.py")
    loader = T5TokenizerFast if bare_folder else AutoTokenizer
    try:
        tokenizer = loader.from_pretrained(name_or_path, cache_dir=cache_dir, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot load tokenizer {name_or_path!r} ({flag}): "
                         f"{str(err).splitlines()[0]}; offline, pass a local folder") from None
    check_t5_tokenizer(tokenizer, name_or_path)
    return tokenizer


def padded_vocab_size(tokenizer):
    """len(tokenizer) rounded up to a multiple of 128, as the released T5 checkpoints do (32100 -> 32128)."""
    return math.ceil(len(tokenizer) / constants.VOCAB_PAD_MULTIPLE) * constants.VOCAB_PAD_MULTIPLE


def t5_config(architecture, vocab_size, pad_token_id, eos_token_id, dropout_rate=0.0):
    """A T5Config for an architecture (a MODEL_SIZE_PRESETS entry: T5Config arguments) and a vocabulary.

    transformers 5.x's T5Config reads `tie_word_embeddings=False` only as "do not rescale the decoder output" (the
    T5 v1.1 half of the flag) and then sets the flag back to True, which would give a T5 v1.1 shape with T5 1.0's
    shared output layer. The flag is set again here, so that new_t5_model keeps a separate lm_head and the saved
    config.json says `"tie_word_embeddings": false`, as the released T5 v1.1 configs do."""
    config = T5Config(**architecture, vocab_size=vocab_size, dropout_rate=dropout_rate, pad_token_id=pad_token_id,
                      eos_token_id=eos_token_id,
                      # T5 starts decoding from the pad id; transformers 5.x's T5Config leaves it unset.
                      decoder_start_token_id=pad_token_id)
    config.tie_word_embeddings = architecture.get("tie_word_embeddings", True)
    return config


def build_t5_config(model_size, tokenizer, dropout_rate=0.0, config_overrides=None):
    """A T5Config for a size preset, with vocabulary and special ids taken from the tokenizer, and the settings of
    --config_overrides ('num_layers=4,d_model=96') on top."""
    config = t5_config(constants.MODEL_SIZE_PRESETS[model_size], padded_vocab_size(tokenizer),
                       tokenizer.pad_token_id, tokenizer.eos_token_id, dropout_rate)
    if config_overrides:
        apply_config_overrides(config, config_overrides)
    return config


def new_t5_model(config, lm_head_init="t5x"):
    """A randomly initialised model of the T5 family (T5ForConditionalGeneration for a T5Config). With
    `config.tie_word_embeddings` False (T5 v1.1: "no parameter sharing between embedding and classifier layer")
    lm_head is its own parameter, initialised by `lm_head_init` (--lm_head_init): "hf", transformers' rule for an
    untied T5 head (T5PreTrainedModel._init_weights: normal, std = initializer_factor), or "t5x"
    (init_lm_head_t5x); the encoder and decoder still read the one shared input embedding, as in T5 v1.1."""
    # The class is called directly, not through from_config: under ZeRO-3 from_config builds inside
    # deepspeed.zero.Init, which reads the DeepSpeed config before DeepSpeed's process group exists, sees a world
    # size of 1 and refuses the global batch. Built whole, the model is partitioned when the Trainer starts.
    model_class = MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING[type(config)]  # T5ForConditionalGeneration for T5
    model = share_input_embedding(model_class(config))
    if lm_head_init == "t5x" and has_untied_output_layer(model):
        init_lm_head_t5x(model)
    return model


def init_lm_head_t5x(model):
    """Mesh TF's and T5X's init of an untied output layer: variance scaling with scale 1 over the fan-in (d_model),
    truncated normal (T5X's DenseGeneral default, variance_scaling(1.0, "fan_in", "truncated_normal")): a normal
    of std initializer_factor * d_model^-0.5 / TRUNCATED_NORMAL_STD cut at +-2 of that std, whose std is then
    initializer_factor * d_model^-0.5 (0.044 at d_model 512; transformers draws std 1.0). Returns that std."""
    weight = model.get_output_embeddings().weight  # (vocab, d_model): each logit sums d_model products
    std = model.config.initializer_factor * weight.shape[1] ** -0.5
    untruncated = std / TRUNCATED_NORMAL_STD
    with torch.no_grad():
        torch.nn.init.trunc_normal_(weight, mean=0.0, std=untruncated, a=-2 * untruncated, b=2 * untruncated)
    logger.info("lm_head: T5X init (truncated normal, std %.4g = d_model^-0.5), not transformers' std %s", std,
                model.config.initializer_factor)
    return std


def share_input_embedding(model):
    """The encoder and decoder read the model's one input embedding module (`shared`), not modules of their own
    that hold its weight. Untied, transformers ties nothing, so each stack would get an embedding of its own; tied,
    the stacks hold their own modules around the shared weight, which FSDP2 refuses (accelerate's
    fsdp2_prepare_model shards the input embedding as one unit, and fully_shard rejects a parameter that another
    module of another unit also holds)."""
    model.set_input_embeddings(model.get_input_embeddings())
    return model


def has_untied_output_layer(model) -> bool:
    return model.get_output_embeddings().weight is not model.get_input_embeddings().weight


def load_model_config(name_or_path, cache_dir=None, trust_remote_code=False):
    """The config of an existing model, refusing anything that is not a T5 model: checked before the tokenizer,
    so that a folder of another architecture is reported as such, not as a tokenizer problem. A path that can only
    be a folder and does not exist is said so, not sent to the hub (whose client answers that it is no repo id);
    every script that loads a model (training, predict_t5.py's backends, export_t5.py) passes here first."""
    if looks_like_a_folder(name_or_path) and not Path(name_or_path).expanduser().exists():
        raise UsageError(f"--model_name_or_path {name_or_path}: no such folder; pass a saved model folder (one "
                         "holding config.json) or a hub name such as google-t5/t5-small")
    try:
        config = AutoConfig.from_pretrained(name_or_path, cache_dir=cache_dir, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        local = "" if Path(name_or_path).exists() else f" (nor is there a local folder {name_or_path})"
        raise UsageError(f"cannot load model {name_or_path!r} (--model_name_or_path): "
                         f"{str(err).splitlines()[0]}{local}") from None
    if not getattr(config, "is_encoder_decoder", False) or config.model_type not in T5_MODEL_TYPES:
        kind = "an encoder-decoder" if getattr(config, "is_encoder_decoder", False) else "not an encoder-decoder"
        raise UsageError(f"--model_name_or_path {name_or_path} is a {config.model_type} model ({kind}), not a T5 "
                         f"model ({', '.join(T5_MODEL_TYPES)}); pass a T5 folder or hub name")
    return config


class _ExpectedUntiedHeadWarning(logging.Filter):
    """Drops transformers' warning that lm_head and the embedding differ although the config ties them: T5Config
    always reads back as tied (see t5_config), so every untied T5 checkpoint (T5 v1.1, Flan-T5) raises it."""

    def filter(self, record):
        message = record.getMessage()
        return not ("lm_head.weight" in message and "NOT tie them" in message)


def load_pretrained_t5(name_or_path, cache_dir=None, trust_remote_code=False, **config_overrides):
    """Loads an existing model of the T5 family with the Auto class (load_model_config refuses other
    architectures). A checkpoint with its own lm_head (T5 v1.1, Flan-T5, mT5, UMT5, or a model this toolkit built
    from a v1.1 preset) loads untied, and its config says so, so that resize_token_embeddings and saving keep it
    untied. config_overrides: config values to replace (dropout_rate)."""
    config = load_model_config(name_or_path, cache_dir, trust_remote_code)
    quiet = _ExpectedUntiedHeadWarning()
    transformers_logger = logging.getLogger("transformers.modeling_utils")
    transformers_logger.addFilter(quiet)
    try:
        model = AutoModelForSeq2SeqLM.from_pretrained(name_or_path, cache_dir=cache_dir, **config_overrides)
    except (OSError, ValueError, SafetensorError) as err:  # no weights file, or an unreadable one
        raise UsageError(f"cannot load the weights of {name_or_path!r} (--model_name_or_path): "
                         f"{str(err).splitlines()[0]}") from None
    finally:
        transformers_logger.removeFilter(quiet)
    share_input_embedding(model)
    if has_untied_output_layer(model):
        model.config.tie_word_embeddings = False
        logger.info("%s has its own output layer (lm_head not tied to the embedding, as in T5 v1.1)", name_or_path)
    logger.info("%s: %s (%s)", name_or_path, type(model).__name__, describe_family(config))
    return model


def describe_family(config):
    """'t5 v1.1 (gated-gelu, untied)', 'longt5 transient-global attention', ...: what a log line says was loaded."""
    if config.model_type == "longt5":
        return f"longt5 {config.encoder_attention_type} encoder attention"
    untied = not getattr(config, "tie_word_embeddings", True) or config.model_type != "t5"
    return f"{config.model_type}, {config.feed_forward_proj} feed-forward, {'untied' if untied else 'tied'} lm_head"


def choose_attn_implementation(model, requested):
    """--attn_implementation for the loaded class: LongT5 has no SDPA kernels in transformers and runs eager
    (said in the log); t5_flex is registered for T5's own attention only."""
    if requested == t5_flex_attention.NAME and model.config.model_type != "t5":
        raise UsageError(f"--attn_implementation {requested} applies to t5 models, not {model.config.model_type}; "
                         "use sdpa or eager")
    if requested == "sdpa" and not getattr(model, "_supports_sdpa", False):
        logger.info("%s has no SDPA attention in transformers %s: it runs eager attention", type(model).__name__,
                    transformers.__version__)
        return "eager"
    return requested


def build_model(model_args, tokenizer, use_cpu=False, activation_dtype="float32", fp16=False):
    """Random init from --model_size, or the model at --model_name_or_path; resized to the tokenizer. `use_cpu`
    (--use_cpu): training stays on the CPU even where a GPU is visible; `activation_dtype` (--activation_dtype) and
    `fp16` (--fp16): what the model computes in under autocast (model/precision.py); --fused_rmsnorm and
    --loss_chunk_tokens: how it computes its norms and its training loss (model/fused_rmsnorm.py, chunked_loss.py)."""
    if model_args.attn_implementation == t5_flex_attention.NAME:
        t5_flex_attention.check_gpu_generation(use_cpu)
    if model_args.model_name_or_path:
        # --dropout_rate replaces the model's own only when given (T5 fine-tunes with 0.1; a model pre-trained
        # with 0.0 would otherwise fine-tune without dropout).
        overrides = {} if model_args.dropout_rate is None else {"dropout_rate": model_args.dropout_rate}
        model = load_pretrained_t5(model_args.model_name_or_path, model_args.cache_dir,
                                   model_args.trust_remote_code, **overrides)
        if model.get_input_embeddings().num_embeddings < len(tokenizer):
            model.resize_token_embeddings(padded_vocab_size(tokenizer))
    else:
        dropout_rate = RANDOM_INIT_DROPOUT_RATE if model_args.dropout_rate is None else model_args.dropout_rate
        model = new_t5_model(build_t5_config(model_args.model_size, tokenizer, dropout_rate,
                                             model_args.config_overrides), model_args.lm_head_init)
    logger.info("dropout_rate %s (%s)", model.config.dropout_rate, "--dropout_rate" if model_args.dropout_rate
                is not None else "the model's own" if model_args.model_name_or_path else "random init default")
    # Trainer would otherwise scale T5's mean loss by GA x world size (transformers 5.x): T5 averages itself.
    model.accepts_loss_kwargs = False
    precision.prepare_model(model, fp16, activation_dtype)
    if model_args.fused_rmsnorm:
        fused_rmsnorm.install(model)
    chunked_loss.install(model, model_args.loss_chunk_tokens)  # 0: transformers' loss
    model.set_attn_implementation(choose_attn_implementation(model, model_args.attn_implementation))
    warn_if_t5_attention_runs_unfused(transformers.__version__)
    return model


def warn_if_t5_attention_runs_unfused(version):
    """requirements.txt asks for transformers >= 5.20, but a cluster's own environment may hold an older one: its T5
    hands SDPA a permuted (non-contiguous) position-bias mask, which keeps every attention off the fused kernels."""
    if Version(version) < Version(FUSED_T5_ATTENTION_SINCE):
        logger.warning("transformers %s gives SDPA a non-contiguous T5 position-bias mask, so every attention runs "
                       "unfused (23 %% more time per step on an H100); pip install 'transformers>=%s'",
                       version, FUSED_T5_ATTENTION_SINCE)


def add_mode_tokens(tokenizer, tokens):
    """Adds UL2's paradigm tokens ([NLU], [NLG], [S2S]) the tokenizer lacks, as special tokens (never split,
    kept by decoding's skip_special_tokens=False), before the model is sized to the tokenizer. Refuses a token that
    is already one of the tokenizer's own special tokens (pad, EOS, unk, a sentinel) or that does not then encode to
    one id. Returns the tokens added."""
    reserved = {tokenizer.pad_token, tokenizer.eos_token, tokenizer.unk_token,
                *(f"<extra_id_{i}>" for i in range(constants.NUM_SENTINELS))}
    for token in tokens:
        if token in reserved:
            raise UsageError(f"--denoisers mode_token {token!r} is one of the tokenizer's own special tokens (pad, "
                             "EOS, unk or a sentinel), which the tokenizer cannot also hold as a paradigm token; "
                             "pick another, e.g. [NLU]")
    known = tokenizer.get_vocab()
    missing = [token for token in tokens if token not in known]
    if missing:
        tokenizer.add_tokens(missing, special_tokens=True)
        logger.info("added the paradigm token(s) %s to the tokenizer", ", ".join(missing))
    for token in tokens:
        ids = tokenizer(token, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise UsageError(f"--denoisers mode_token {token!r} encodes to {len(ids)} ids, not one, even once added "
                             "to the tokenizer; pick another, e.g. [NLU]")
    return missing


def load_tokenizer_and_model(model_args, use_cpu=False, mode_tokens=(), activation_dtype="float32", fp16=False):
    """Step 5 of every entry script: the checked tokenizer (with UL2's paradigm tokens where the objective has
    them), then the model sized to it."""
    if model_args.model_name_or_path:  # a folder of another architecture is a model problem, said as such
        load_model_config(model_args.model_name_or_path, model_args.cache_dir, model_args.trust_remote_code)
    tokenizer = load_tokenizer(model_args.tokenizer_name_or_path, model_args.cache_dir, model_args.trust_remote_code)
    add_mode_tokens(tokenizer, mode_tokens)
    return tokenizer, build_model(model_args, tokenizer, use_cpu, activation_dtype, fp16)


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())
