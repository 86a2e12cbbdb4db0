"""Compiled, static-cache generation (--compile in predict_t5.py and fine_tune_t5.py): transformers' generate with a
static cache, its decoding step compiled, and every batch padded to one of a few shapes so that a run compiles a
handful of times, not once a batch.

    compiled_generation.install(model, batch_size=32, max_source_length=512)   # model.generate is now the compiled one
    ids = model.generate(input_ids=ids, attention_mask=mask, max_length=9, num_beams=1)   # same call, same outputs

How: the encoder runs eagerly on the batch as it is; its output and mask are padded to a shape bucket, rows to the
next of BATCH_BUCKETS (or the run's batch size; padding rows copy row 0 and are dropped) and source positions with
masked zeros to the next power of two from MIN_SOURCE_BUCKET (or --max_source_length), which cross-attention masks
out, so a row's predictions do not change. generate then runs with cache_implementation="static": the decoder's
self-attention cache has the generation length, the cross-attention keys and values are computed once, at the
first step, and every step runs the model's forward compiled (torch.compile, fullgraph, static shapes; CUDA graphs
on a GPU). Greedy and beam search, max_length/max_new_tokens and EOS behave as in eager generate.

What it cannot take falls back to eager generate with one log line saying why: sampling or another decoding mode,
a model that does not declare a static cache (T5's own classes do), LoRA adapters, ZeRO-3's partitioned weights,
or a compile that fails.
"""
import contextlib
import logging

import torch
from transformers.modeling_outputs import BaseModelOutput

logger = logging.getLogger(__name__)

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MIN_SOURCE_BUCKET = 16
# Each (rows, source length, generation length) compiles its own graph; torch's default of 8 recompiles per function
# would send a run with many buckets back to eager without a word.
RECOMPILE_LIMIT = 64
UNSUPPORTED_OPTIONS = {"do_sample": "sampling", "num_beam_groups": "group beam search",
                       "penalty_alpha": "contrastive search", "assistant_model": "assisted decoding",
                       "prompt_lookup_num_tokens": "prompt lookup decoding"}


def buckets_up_to(largest, buckets):
    """The buckets below `largest`, then `largest` itself (a run's batch size or source length is always one)."""
    return tuple(bucket for bucket in buckets if bucket < largest) + (largest,)


def source_buckets(max_source_length):
    """Powers of two from MIN_SOURCE_BUCKET below max_source_length, then max_source_length."""
    powers = []
    bucket = MIN_SOURCE_BUCKET
    while bucket < max_source_length:
        powers.append(bucket)
        bucket *= 2
    return buckets_up_to(max_source_length, powers)


def bucket_for(size, buckets):
    """The smallest bucket that holds `size`; past the largest, `size` itself (a new shape, compiled once)."""
    return next((bucket for bucket in buckets if bucket >= size), size)


def unsupported_reason(generation_config, options) -> str:
    """Why the compiled path cannot run this generate call, or '' when it can."""
    for option, name in UNSUPPORTED_OPTIONS.items():
        value = options.get(option, getattr(generation_config, option, None))
        if value and not (option == "num_beam_groups" and value == 1):
            return f"{name} ({option}={value!r}) runs eagerly"
    if options.get("encoder_outputs") is not None or options.get("inputs_embeds") is not None:
        return "generate was given encoder_outputs or inputs_embeds, not input_ids"
    return ""


def model_reason(model) -> str:
    """Why this model cannot take the compiled path at all, or ''."""
    from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled
    if not getattr(model, "_can_compile_fullgraph", False):
        return f"{type(model).__name__} does not declare a static cache (_can_compile_fullgraph)"
    if hasattr(model, "peft_config"):
        return "LoRA adapters are not compiled"
    if is_deepspeed_zero3_enabled():
        return "ZeRO-3 gathers each layer's partitioned weights as it runs"
    return ""


class CompiledGenerator:
    """model.generate's compiled replacement; install() puts it in place. `shapes` records each padded (rows,
    source length) it ran, `fallbacks` each reason it ran eagerly."""

    def __init__(self, model, batch_size, max_source_length, backend="inductor"):
        self.model, self.eager_generate = model, model.generate
        self.batch_buckets = buckets_up_to(batch_size, BATCH_BUCKETS)
        self.source_buckets = source_buckets(max_source_length)
        self.backend, self.compiled_forward, self.compiled_source = backend, None, None
        self.shapes, self.fallbacks = set(), []
        self.broken = model_reason(model)
        if self.broken:
            self.fall_back(self.broken)
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)

    def fall_back(self, reason):
        if reason not in self.fallbacks:
            self.fallbacks.append(reason)
            logger.info("compiled generation: %s; generating eagerly", reason)

    def __call__(self, input_ids=None, attention_mask=None, generation_config=None, **options):
        reason = self.broken or unsupported_reason(generation_config or self.model.generation_config, options) or \
            ("" if input_ids is not None else "generate was called without input_ids")
        if not reason:
            try:
                return self.compiled_generate(input_ids, attention_mask, generation_config, options)
            except torch._dynamo.exc.TorchDynamoException as error:  # a graph break or a failed compile: no crash
                cause = getattr(error, "inner_exception", None) or error.__cause__ or error
                self.broken = reason = f"torch.compile failed ({type(error).__name__}: {type(cause).__name__}: " \
                                       f"{str(cause).strip().splitlines()[0] if str(cause).strip() else ''})"
        self.fall_back(reason)
        return self.eager_generate(input_ids=input_ids, attention_mask=attention_mask,
                                   generation_config=generation_config, **options)

    def compiled_generate(self, input_ids, attention_mask, generation_config, options):
        """generate on the batch's padded encoding, with the static cache and the compiled forward; its rows only."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden, mask = self.padded_encoding(input_ids, attention_mask)
        with self.compiled():
            ids = self.eager_generate(encoder_outputs=BaseModelOutput(last_hidden_state=hidden), attention_mask=mask,
                                      generation_config=generation_config, cache_implementation="static",
                                      disable_compile=True, **options)
        return ids[:input_ids.shape[0]]

    @contextlib.contextmanager
    def compiled(self):
        """The model's forward compiled for the length of one generate call. transformers compiles only greedy
        decoding's steps (disable_compile=True turns that off: one compiled forward serves both): beam search
        calls the model itself; training and evaluation's loss keep the eager forward. Compiled from the forward in
        place at the first call (accelerate wraps it in autocast under mixed precision only when training starts)."""
        swapped = self.model.__dict__.get("forward")  # accelerate's autocast wrapper, under --bf16 or --fp16
        if self.compiled_forward is None or swapped is not self.compiled_source:
            # CUDA graphs on a GPU, where launching a decoding step's small kernels costs more than running them
            self.compiled_forward = torch.compile(self.model.forward, fullgraph=True, dynamic=False,
                                                  backend=self.backend, mode="reduce-overhead"
                                                  if self.model.device.type == "cuda" else None)
            self.compiled_source = swapped
        self.model.forward = self.compiled_forward
        try:
            yield
        finally:
            if swapped is None:
                del self.model.forward
            else:
                self.model.forward = swapped

    def padded_encoding(self, input_ids, attention_mask):
        """(hidden, mask): the encoder's output on the batch as it is, padded to its shape bucket. hidden: (R, S, d),
        mask: (R, S); R, S the buckets of the batch's rows and source length."""
        rows, length = input_ids.shape
        padded_rows, padded_length = bucket_for(rows, self.batch_buckets), bucket_for(length, self.source_buckets)
        self.shapes.add((padded_rows, padded_length))
        hidden = self.model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        fill = torch.zeros(padded_rows, padded_length, hidden.shape[-1], dtype=hidden.dtype, device=hidden.device)
        fill[:rows, :length] = hidden
        fill[rows:, :length] = hidden[0]  # padding rows copy row 0: a row of zeros would attend to nothing
        mask = torch.zeros(padded_rows, padded_length, dtype=attention_mask.dtype, device=attention_mask.device)
        mask[:rows, :length] = attention_mask
        mask[rows:, :length] = attention_mask[0]
        return fill, mask


def install(model, batch_size, max_source_length, backend="inductor") -> CompiledGenerator:
    """Replaces model.generate (on this instance) with a CompiledGenerator; returns it."""
    generator = CompiledGenerator(model, batch_size, max_source_length, backend)
    model.generate = generator
    return generator
