"""T5 attention on the fastest exact kernel for each of its three kinds (--attn_implementation t5_flex).

transformers' SDPA path adds T5's learned position bias to every attention as a float mask, and the only fused SDPA
kernel that gives such a mask a gradient (memory-efficient) writes that gradient at [batch, heads, query, key] size
and sums it over the batch afterwards. This implementation, registered with transformers' AttentionInterface, picks
per call:
- unpadded encoder self-attention (packed pre-training; lengths multiples of 128) on a GPU: FlexAttention, which
  adds the bias in its score_mod and accumulates the gradient straight into the [heads, query, key] bias: 1.86x
  faster forward + backward at t5-base on an H100 (bench/attention_bias.py);
- packed rows' attentions on a GPU (several examples per row, model/packed_attention.py), the encoder's
  self-attention, the decoder's causal self-attention and the cross-attention, wherever both lengths are whole
  blocks: FlexAttention with a block mask of the row's segments, which skips the blocks that hold no pair of the same
  example (the cross-attention without a bias, T5's being all zeros there);
- unpadded cross-attention: T5 adds an all-zero bias there, so leaving it out is exact, and without any mask SDPA
  may run its flash or cuDNN kernel;
- everything else (padding masks, the causal decoder, dropout, CPU): transformers' own SDPA function, unchanged.
Its mask function builds no mask where nothing is masked (see t5_flex_mask). A compiled t5-base bf16 step, batch 64,
on an H100: 88.7 ms against 101-103 ms with sdpa, the same losses (docs/benchmarks.md).
FlexAttention is kept to lengths that fill its 128-wide blocks (the decoder's 114-long attention stays on SDPA: a
length that is no block multiple is not supported here, cf. pytorch/pytorch#159247), and it has no backward on CPU.
Its Triton kernels need an Ampere or newer GPU (sm80+): check_gpu_generation refuses older GPUs when the model is
built, before any step (on V100/T4 use sdpa).
"""
import functools

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
from transformers import AttentionInterface
from transformers.masking_utils import (
    AttentionMaskInterface,
    bidirectional_mask_function,
    causal_mask_function,
    sdpa_mask,
)

from t5kit.errors import UsageError
from t5kit.model import banded_attention

NAME = "t5_flex"
FLEX_BLOCK = 128  # FlexAttention's default query and key block
MIN_COMPUTE_CAPABILITY = (8, 0)  # Ampere: FlexAttention's Triton kernels need it


def visible_gpus():
    """[(name, (major, minor) compute capability)] of every GPU this process sees; [] without CUDA."""
    if not torch.cuda.is_available():
        return []
    return [(torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i))
            for i in range(torch.cuda.device_count())]


def check_gpu_generation(use_cpu):
    """Raises UsageError where training would run on a GPU older than Ampere (on CPU every attention takes
    transformers' SDPA path). All visible GPUs are checked: ranks pick theirs only later."""
    for index, (name, capability) in enumerate([] if use_cpu else visible_gpus()):
        if tuple(capability) < MIN_COMPUTE_CAPABILITY:
            raise UsageError(f"--attn_implementation {NAME} needs an Ampere or newer GPU (compute capability 8.0+) "
                             f"but GPU {index}, {name}, is {capability[0]}.{capability[1]}; use "
                             "--attn_implementation sdpa")


def flex_attention_kernel():
    """FlexAttention is only fast compiled. Inside a torch.compile'd model the plain function is traced and Inductor
    lowers it to its fused kernel (seen in an H100 profile); outside a trace, one compiled copy, built once."""
    if torch.compiler.is_compiling():
        return flex_attention
    return compiled_flex_attention()


@functools.cache
def compiled_flex_attention():
    return torch.compile(flex_attention, dynamic=False)


def flex_biased_attention(query, key, value, bias, scaling, attention=None, block_mask=None):
    """softmax(q k^T * scaling + bias) v with bias [1, heads, query, key] (None: no bias); returns [batch, query,
    heads, head_dim].

    The bias goes in as fp32 (its gradient is accumulated over batch rows inside the kernel, and T5's bias embedding
    is an fp32 weight anyway) and contiguous: T5 builds it by permuting [query, key, heads], and the kernel's loads
    and gradient atomics along the key axis at that stride made the layer 4x slower on an H100."""
    score_mod = None
    if bias is not None:
        bias = bias.float().contiguous()

        def score_mod(score, batch, head, query_index, key_index):
            return score + bias[0, head, query_index, key_index]

    out = (attention or flex_attention_kernel())(query, key, value, score_mod=score_mod, block_mask=block_mask,
                                                 scale=scaling)
    return out.transpose(1, 2).contiguous()


def uses_flex(module, query, key, attention_mask, dropout):
    return (query.is_cuda and attention_mask is None and dropout == 0.0 and not module.is_decoder
            and query.shape[2] % FLEX_BLOCK == 0 and key.shape[2] % FLEX_BLOCK == 0)


def takes_block_mask(stack, q_length, kv_length, device):
    """Whether a packed batch's mask for an attention of this T5 stack (the encoder's self-attention; the decoder's
    self- or cross-attention) is a FlexAttention block mask of its segments (model/packed_attention.py): on a GPU,
    without dropout, query and key lengths whole blocks; everywhere else a dense mask for SDPA."""
    dropout = stack.training and stack.config.dropout_rate > 0
    return (stack.config._attn_implementation == NAME and device.type == "cuda"
            and not dropout and q_length % FLEX_BLOCK == 0 and kv_length % FLEX_BLOCK == 0)


def segment_block_mask(mask_function, batch_size, q_length, kv_length, device):
    """A block mask of `mask_function` (an index function, as transformers' mask functions are): blocks of 128
    queries x 128 keys that hold no pair of the same segment are skipped, not computed and masked."""
    return create_block_mask(mask_function, B=batch_size, H=None, Q_LEN=q_length, KV_LEN=kv_length, device=device,
                             _compile=device.type == "cuda")


def t5_flex_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                              position_bias=None, **kwargs):
    """Same arguments and result as transformers.integrations.sdpa_attention.sdpa_attention_forward for T5."""
    if isinstance(attention_mask, BlockMask):  # a packed row's attention (takes_block_mask)
        bias = None if banded_attention.is_cross_attention(module) else position_bias  # cross: T5's zeros
        return flex_biased_attention(query, key, value, bias, scaling, block_mask=attention_mask), None
    if attention_mask is None and banded_attention.is_cross_attention(module):
        # With a padding mask, transformers' function below merges it into a contiguous float mask, which keeps
        # SDPA fused; a boolean [batch, 1, query, key] mask as it comes would not.
        out = F.scaled_dot_product_attention(query, key, value, dropout_p=dropout, scale=scaling)
        return out.transpose(1, 2).contiguous(), None
    if position_bias is not None and uses_flex(module, query, key, attention_mask, dropout):
        return flex_biased_attention(query, key, value, position_bias, scaling), None
    return banded_attention.attention_forward(module, query, key, value, attention_mask, scaling=scaling,
                                              dropout=dropout, position_bias=position_bias, **kwargs)


def t5_flex_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=causal_mask_function,
                 attention_mask=None, local_size=None, **kwargs):
    """transformers' SDPA mask, except that no mask at all is built where nothing is masked: no padding mask given,
    and plain bidirectional attention, or causal attention without a cache offset (causality is then applied by the
    attention itself, from module.is_causal). Under torch.compile (torch 2.11) transformers otherwise materialises an
    all-True [batch, 1, query, key] mask, which keeps the encoder off FlexAttention and cross-attention off flash.
    A padding mask given is never read on the host (see below)."""
    plain = local_size is None and attention_mask is None
    if plain and mask_function is bidirectional_mask_function:
        return None
    if plain and mask_function is causal_mask_function and q_offset == kv_offset == 0 and q_length == kv_length:
        return None
    if attention_mask is not None:
        # transformers would read the padding mask on the host (`padding_mask.all()`, a GPU sync) to leave out a mask
        # that masks nothing; that lets SDPA run flash, but T5's self-attention always carries its position bias,
        # which rules flash out anyway. An all-True mask is kept instead: the same result, no sync.
        kwargs.update(allow_is_causal_skip=False, allow_is_bidirectional_skip=False)
    return sdpa_mask(batch_size, q_length, kv_length, q_offset=q_offset, kv_offset=kv_offset,
                     mask_function=mask_function, attention_mask=attention_mask, local_size=local_size, **kwargs)


AttentionInterface.register(NAME, t5_flex_attention_forward)
# Without a registered mask function transformers hands a custom attention no padding mask at all.
AttentionMaskInterface.register(NAME, t5_flex_mask)
