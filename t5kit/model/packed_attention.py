"""Packed batches reach T5 as segment masks: several examples per row, none attending to another.

    packed_attention.install(model)          # once, on the model before any wrapper (trainers do it)
    model(**packed_batch)                    # input_ids, labels, decoder_input_ids, *_segment_ids, *_positions

A packed batch (seqio's EncDecFeatureConverter with pack=True) numbers the examples of each row 1, 2, ... in
`encoder_segment_ids` (B, inputs) and `decoder_segment_ids` (B, targets), 0 on padding, and restarts
`encoder_positions` / `decoder_positions` at each example. install() registers one forward pre-hook on each of the
model's two stacks. T5ForConditionalGeneration.forward hands the keyword arguments it does not know to both stacks
(`self.encoder(..., **kwargs)`, `self.decoder(..., **kwargs)`, transformers 5.23), so the batch's segment keys ride
along, and each stack's hook takes them out and replaces the masks the stack would build:
- encoder self-attention: the same segment (bidirectional);
- decoder self-attention: the same segment and causal;
- cross-attention: decoder segment k to encoder segment k. The model would build this mask from the encoder's
  attention_mask, and a 4-D encoder mask (B, 1, inputs, inputs) has the wrong shape for it (B, 1, targets, inputs),
  which is why the decoder's hook sets `encoder_attention_mask` itself.
T5Stack passes a 4-D mask on as it is (masking_utils._preprocess_mask_arguments returns it unchanged). The masks
are built by transformers' mask function for the model's attention implementation (eager: an additive float mask;
sdpa and t5_flex: a boolean one), from index functions of the segment ids, as transformers builds its own masks
for packed decoder-only rows. Padding slots are segment 0: they attend to padding (decoder padding to every input,
so that no row is empty), no real slot attends to them, and they carry no loss.

Positions need nothing: T5's relative position bias is computed from slot distances, which inside one contiguous
segment are those of the example in a row of its own; the position keys are taken out and not used.

DDP and DeepSpeed: the hooks sit on submodules, so the training forward still enters through the wrapper
(DistributedDataParallel's forward, the DeepSpeed engine's), which is what keeps gradients synchronised; nothing
calls model.encoder or model.decoder directly. A batch without segment ids leaves the hooks with nothing to do:
unpacked training, evaluation and generate (beam search, the KV cache) run exactly as without them.
"""
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, and_masks, causal_mask_function, or_masks

from t5kit.errors import UsageError
from t5kit.model import banded_attention, t5_flex_attention

ENCODER_SEGMENTS, DECODER_SEGMENTS = "encoder_segment_ids", "decoder_segment_ids"
SEGMENT_KEYS = (ENCODER_SEGMENTS, DECODER_SEGMENTS, "encoder_positions", "decoder_positions")
# Attention implementations whose mask function builds a dense per-token mask from an index function. Flash
# attention's (transformers' flash_attention_mask) keeps only a 2-D padding mask, which cannot keep segments apart.
PACKED_ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "t5_flex")
# Their stacks build masks as T5Stack does and take a 4-D one as given; LongT5's local and transient-global encoder
# attention builds blocked masks of its own from a 2-D one.
PACKED_MODEL_TYPES = ("t5", "mt5", "umt5")


def is_packed(batch) -> bool:
    """Whether a batch (a mapping of model inputs) is packed: it carries segment ids."""
    return ENCODER_SEGMENTS in batch


def check_packable(model):
    """Raises UsageError where the model cannot take packed batches (its family, its attention implementation)."""
    config = model.config
    if config.model_type not in PACKED_MODEL_TYPES:
        raise UsageError(f"packed batches need a T5, mT5 or UMT5 model, not {config.model_type} (its attention takes "
                         "no segment masks); use --packing false")
    if config._attn_implementation not in PACKED_ATTN_IMPLEMENTATIONS:
        raise UsageError(f"--attn_implementation {config._attn_implementation} cannot keep packed examples apart; "
                         f"use one of {', '.join(PACKED_ATTN_IMPLEMENTATIONS)}, or --packing false")


def t5_model(model):
    """The T5ForConditionalGeneration inside a peft wrapper, or the model itself."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def installed(model) -> bool:
    return encoder_hook in t5_model(model).encoder._forward_pre_hooks.values()


def install(model):
    """Registers the two stack hooks once (a second call, or a copy of a hooked model, keeps the ones it has);
    returns the model."""
    base = t5_model(model)
    if not installed(base):
        base.encoder.register_forward_pre_hook(encoder_hook, with_kwargs=True)
        base.decoder.register_forward_pre_hook(decoder_hook, with_kwargs=True)
    return model


def take_segments(kwargs):
    """(encoder segment ids, decoder segment ids) taken out of a stack's keyword arguments with the positions, or
    None for an unpacked batch."""
    found = {key: kwargs.pop(key) for key in SEGMENT_KEYS if key in kwargs}
    if not found:
        return None
    missing = [key for key in (ENCODER_SEGMENTS, DECODER_SEGMENTS) if found.get(key) is None]
    if missing:
        raise ValueError(f"a packed batch needs both segment id tensors; it lacks {', '.join(missing)}")
    return found[ENCODER_SEGMENTS], found[DECODER_SEGMENTS]


def encoder_hook(stack, args, kwargs):
    segments = take_segments(kwargs)
    if segments is None:
        return None
    encoder_segments, _ = segments
    kwargs["attention_mask"] = segment_mask(stack, same_segment(encoder_segments, encoder_segments),
                                            encoder_segments, encoder_segments, kwargs)
    kwargs[banded_attention.BANDS_KEY] = banded_attention.stack_bands(encoder_segments)
    return args, kwargs


def decoder_hook(stack, args, kwargs):
    segments = take_segments(kwargs)
    if segments is None:
        return None
    encoder_segments, decoder_segments = segments
    self_attention = and_masks(causal_mask_function, same_segment(decoder_segments, decoder_segments))
    # A decoder padding slot sees every input, so that its row is never empty (it carries no loss).
    cross_attention = or_masks(same_segment(decoder_segments, encoder_segments), is_padding(decoder_segments))
    kwargs["attention_mask"] = segment_mask(stack, self_attention, decoder_segments, decoder_segments, kwargs)
    kwargs["encoder_attention_mask"] = segment_mask(stack, cross_attention, decoder_segments, encoder_segments,
                                                    kwargs)
    kwargs[banded_attention.BANDS_KEY] = banded_attention.stack_bands(encoder_segments, decoder_segments)
    return args, kwargs


def same_segment(query_segments, key_segments):
    """Mask function: the query slot and the key slot hold the same example of the row (or both padding)."""

    def inner(batch_idx, head_idx, q_idx, kv_idx):
        return query_segments[batch_idx, q_idx] == key_segments[batch_idx, kv_idx]

    return inner


def is_padding(query_segments):
    def inner(batch_idx, head_idx, q_idx, kv_idx):
        return query_segments[batch_idx, q_idx] == 0

    return inner


def segment_mask(stack, mask_function, query_segments, key_segments, kwargs):
    """The 4-D mask of `mask_function` in the form the stack's attention implementation takes, as its own masks are
    built (the dtype of its embeddings: eager adds the mask to the scores)."""
    check_packable(stack)
    embeds = kwargs.get("inputs_embeds")
    dtype = embeds.dtype if embeds is not None else stack.embed_tokens.weight.dtype
    (batch_size, q_length), kv_length = query_segments.shape, key_segments.shape[1]
    if t5_flex_attention.takes_block_mask(stack, q_length, kv_length, query_segments.device):
        return t5_flex_attention.segment_block_mask(mask_function, batch_size, q_length, kv_length,
                                                    query_segments.device)
    build = ALL_MASK_ATTENTION_FUNCTIONS[stack.config._attn_implementation]
    return build(batch_size=batch_size, q_length=q_length, kv_length=kv_length, mask_function=mask_function,
                 attention_mask=None, allow_is_causal_skip=False, allow_is_bidirectional_skip=False, dtype=dtype,
                 config=stack.config, use_vmap=False, device=query_segments.device)
