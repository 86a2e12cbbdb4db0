"""Packed rows' attention, computed band by band: each block of queries against only the keys its examples hold.

    kwargs["segment_bands"] = stack_bands(...)      # model/packed_attention.py's hooks, once per stack and step
    attention_forward(module, query, key, value, mask, ..., segment_bands=...)   # registered as "sdpa"

A packed row holds a dozen examples of ~40 inputs (UL2's default windows; GLUE sentences are as short), and each
token sees only its own example: of a 512 x 512 self-attention, a thin block diagonal. transformers' SDPA path
computes the whole square anyway and masks it (the scores, the float mask of T5's position bias, its softmax and
their gradients, all at [batch, heads, query, key]): on 2 CPU cores that was a third of a t5-small step. Here the
queries are cut into blocks of QUERY_BLOCK, and each block attends to the keys from the first to the last one any
of its queries may see, in any row of the batch (a band: one SDPA call a block, the whole batch at once). Keys
outside a block's band are masked for all its queries, so leaving them out is exact: softmax gives them weight 0.
- Encoder self-attention: a query sees its segment. Decoder self-attention: its segment, up to itself.
- Cross-attention: decoder segment k sees encoder segment k. Decoder padding sees every input in the dense mask
  (so that no row of it is empty), and whatever its block's band holds here: padding carries no loss and no real
  token attends to it, so what it computes changes nothing (the equivalence tests compare real tokens). A block of
  padding only gets the last input.
- The bias: T5 hands every layer the first layer's [1, heads, query, key] position bias; its slices and the mask
  merged into each band are built once per stack and step and reused by the other layers (the dense path merges
  them at [batch, heads, query, key] in every layer). Cross-attention's bias is all zeros (T5 gives it none of its
  own) and is left out, as t5_flex does.
Bands are used where they cover at most BAND_SHARE of the square (one long example a row would not gain), on CPU
only: they are read on the host, which on a GPU would sync every stack's forward with the device (unmeasured there,
so a GPU keeps the dense masks, and t5_flex's FlexAttention skips the encoder's empty blocks), and never while
compiling. Everything else, every unpacked batch included, goes to transformers' SDPA function unchanged:
registering this under "sdpa" changes nothing for a call without bands.
"""
import dataclasses

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

BANDS_KEY = "segment_bands"
QUERY_BLOCK = 64  # queries a band: bench/packed_attention.py, t5-small UL2 rows of 512 on 2 CPU cores
BAND_SHARE = 0.75  # bands are used where they hold at most this share of the [query, key] square


def key_ranges(query_segments, key_segments, causal):
    """(first, last + 1) key a query may see, each (B, Lq): the keys of its own segment, up to itself if causal.
    Segments are numbered 1, 2, ... in each row, 0 on padding, each one contiguous."""
    batch, key_length = key_segments.shape
    count = int(max(query_segments.max(), key_segments.max())) + 1
    positions = torch.arange(key_length, device=key_segments.device).expand(batch, key_length)
    first = torch.full((batch, count), key_length, device=key_segments.device)
    first = first.scatter_reduce(1, key_segments, positions, "amin")
    last = torch.zeros((batch, count), dtype=torch.long, device=key_segments.device)
    last = last.scatter_reduce(1, key_segments, positions + 1, "amax")
    lo, hi = first.gather(1, query_segments), last.gather(1, query_segments)
    if causal:
        hi = torch.minimum(hi, torch.arange(1, query_segments.shape[1] + 1, device=hi.device))
    return lo, hi


def bands(lo, hi, key_length):
    """[(q0, q1, k0, k1)]: per block of QUERY_BLOCK queries, the keys from the first to the last that any of them
    sees in any row; None where the bands would cover more than BAND_SHARE of the square."""
    batch, query_length = lo.shape
    blocks = -(-query_length // QUERY_BLOCK)
    padded = blocks * QUERY_BLOCK - query_length  # ragged last block: padded with ranges that widen nothing
    lo = F.pad(lo, (0, padded), value=key_length).view(batch, blocks, QUERY_BLOCK).amin(dim=(0, 2))
    hi = F.pad(hi, (0, padded), value=0).view(batch, blocks, QUERY_BLOCK).amax(dim=(0, 2))
    result, area = [], 0
    for block, (k0, k1) in enumerate(zip(lo.tolist(), hi.tolist())):
        q0, q1 = block * QUERY_BLOCK, min((block + 1) * QUERY_BLOCK, query_length)
        if k0 >= k1:  # padding queries only (cross-attention): any one key
            k0, k1 = key_length - 1, key_length
        result.append((q0, q1, k0, k1))
        area += (q1 - q0) * (k1 - k0)
    return result if area <= BAND_SHARE * query_length * key_length else None


@dataclasses.dataclass
class StackBands:
    """One stack's bands for one forward: [(q0, q1, k0, k1)] or None (dense) for its self-attention and, in the
    decoder, its cross-attention; and the band masks its layers share (band_masks' cache, filled by the first)."""
    self_attention: list | None
    cross_attention: list | None = None
    merged: dict = dataclasses.field(default_factory=dict)


def stack_bands(encoder_segments, decoder_segments=None):
    """The segment_bands keyword of one stack's forward: the encoder's self-attention bands, or (decoder_segments
    given) the decoder's self- and cross-attention bands. None off the CPU and while compiling (module doc)."""
    if encoder_segments.device.type != "cpu" or torch.compiler.is_compiling():
        return None
    if decoder_segments is None:
        return StackBands(bands(*key_ranges(encoder_segments, encoder_segments, False), encoder_segments.shape[1]))
    lo, hi = key_ranges(decoder_segments, encoder_segments, False)
    padding = decoder_segments == 0  # sees every input in the dense mask: takes no part in the bands (module doc)
    lo, hi = lo.masked_fill(padding, encoder_segments.shape[1]), hi.masked_fill(padding, 0)
    return StackBands(bands(*key_ranges(decoder_segments, decoder_segments, True), decoder_segments.shape[1]),
                      bands(lo, hi, encoder_segments.shape[1]))


def is_cross_attention(module):
    """T5's decoder cross-attention: no learned bias of its own, so T5 hands it zeros."""
    return module.is_decoder and not module.is_causal and not module.has_relative_attention_bias


def band_masks(blocks, attention_mask, position_bias, dtype, cache):
    """Per band, the float mask SDPA adds to its scores, as transformers merges it (create_position_bias_mask): the
    position bias where the mask allows, the minimum of the keys' dtype elsewhere; without a bias, zero where the
    mask allows. Built once per (mask, bias) pair and kept in `cache` for the stack's other layers."""
    key = (id(attention_mask), id(position_bias))
    if key not in cache:
        minimum = torch.finfo(dtype).min
        masks = []
        for q0, q1, k0, k1 in blocks:
            allowed = attention_mask[:, :, q0:q1, k0:k1]
            if position_bias is None:
                masks.append(torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
                             .masked_fill_(~allowed, minimum))
            else:
                masks.append(torch.where(allowed, position_bias[:, :, q0:q1, k0:k1], minimum))
        cache[key] = (attention_mask, position_bias, masks)  # holding both keeps their ids from being reused
    return cache[key][2]


class KeyBands(torch.autograd.Function):
    """The key ranges of the bands, sliced along dim 2: bands overlap, and autograd's slice backward would add a
    zero-filled [batch, heads, key, head_dim] gradient per band; this adds each band's gradient into one."""

    @staticmethod
    def forward(ctx, tensor, ranges):
        ctx.shape, ctx.ranges = tensor.shape, ranges
        return tuple(tensor[:, :, k0:k1] for k0, k1 in ranges)

    @staticmethod
    def backward(ctx, *grads):
        total = grads[0].new_zeros(ctx.shape)
        for (k0, k1), grad in zip(ctx.ranges, grads):
            if grad is not None:
                total[:, :, k0:k1] += grad
        return total, None


def banded_attention(query, key, value, blocks, masks, dropout, scaling):
    """SDPA band by band, the outputs laid back in query order: [batch, query, heads, head_dim]."""
    queries = query.split([q1 - q0 for q0, q1, _, _ in blocks], dim=2)  # blocks tile the queries
    ranges = [(k0, k1) for _, _, k0, k1 in blocks]
    keys, values = KeyBands.apply(key, ranges), KeyBands.apply(value, ranges)
    outputs = [F.scaled_dot_product_attention(*inputs, attn_mask=mask, dropout_p=dropout, scale=scaling)
               for *inputs, mask in zip(queries, keys, values, masks)]
    return torch.cat(outputs, dim=2).transpose(1, 2).contiguous()


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, position_bias=None,
                      segment_bands=None, **kwargs):
    """transformers' sdpa_attention_forward, band by band for a packed T5 batch's dense boolean masks."""
    cross = segment_bands is not None and is_cross_attention(module)
    blocks = segment_bands and (segment_bands.cross_attention if cross else segment_bands.self_attention)
    if not blocks or not isinstance(attention_mask, torch.Tensor) or attention_mask.dtype != torch.bool:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      position_bias=position_bias, **kwargs)
    masks = band_masks(blocks, attention_mask, None if cross else position_bias, key.dtype, segment_bands.merged)
    return banded_attention(query, key, value, blocks, masks, dropout, scaling), None


AttentionInterface.register("sdpa", attention_forward)
