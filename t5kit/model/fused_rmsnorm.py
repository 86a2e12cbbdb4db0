"""--fused_rmsnorm, one owner: T5's layer norms through torch's fused F.rms_norm, with T5LayerNorm's numerics.

    fused_rmsnorm.install(model)       # building.build_model, with --fused_rmsnorm true; returns the norms swapped

T5LayerNorm (and its mT5, UMT5, LongT5 copies) is an RMSNorm written as five elementwise kernels: it computes the
variance of the input in fp32, multiplies the input by rsqrt(variance + eps) (an fp32 product whatever the input's
dtype), casts that to the weight's dtype only when the weight is fp16 or bf16, then multiplies by the weight. Under
autocast none of these ops is autocast's, so the output is fp32 beside fp32 weights (bf16 input included, as with
--activation_dtype bfloat16), and the weight's dtype beside half weights (predict_t5.py --fp16 / --bf16).

install() swaps each norm's forward for one call of F.rms_norm on the input cast to fp32 (a no-op for the fp32
residual stream), autocast off, so that no autocast policy on rms_norm can change the dtype. fp32 weights: the
weight is fused into the call; half weights: the fp32 normalised input is cast to the weight's dtype and then
multiplied, as T5 does (F.rms_norm would multiply before that cast: one rounding fewer, a different result). On CPU
(torch 2.13) outputs and weight gradients are bit-identical to T5LayerNorm's in fp32, under bf16 autocast and in
half weights. The input's gradient is bit-identical for an fp32 input; for a bf16 or fp16 input T5 rounds the two
partial gradients (through the variance, through the product) to the input's dtype and adds them, the fused norm
rounds their sum once: they differ by at most a rounding or two of the input's dtype (tests/model/
test_fused_rmsnorm.py). On a GPU torch's fused kernel may sum the variance in another order: differences of fp32
rounding, not measured. The parameters keep their names, so a saved model is T5's; a loaded one runs T5LayerNorm.
"""
import types

import torch
import torch.nn.functional as F

NORM_CLASSES = ("T5LayerNorm", "MT5LayerNorm", "UMT5LayerNorm", "LongT5LayerNorm")
HALF_DTYPES = (torch.float16, torch.bfloat16)


def t5_norms(model) -> list:
    """Every T5-family layer norm of the model (the class names transformers gives them)."""
    return [module for module in model.modules() if type(module).__name__ in NORM_CLASSES]


def install(model) -> int:
    """Each T5-family norm computes through F.rms_norm (module doc); returns how many; a second call changes
    nothing."""
    norms = t5_norms(model)
    for norm in norms:
        norm.forward = types.MethodType(fused_forward, norm)
    return len(norms)


def is_fused(norm) -> bool:
    return getattr(norm.forward, "__func__", None) is fused_forward


def fused_forward(self, hidden_states):
    weight = self.weight
    with torch.autocast(hidden_states.device.type, enabled=False):
        if weight.dtype in HALF_DTYPES:  # T5 casts the normalised input to the weight's dtype, then multiplies
            return weight * F.rms_norm(hidden_states.float(), weight.shape, None, self.variance_epsilon).to(
                weight.dtype)
        return F.rms_norm(hidden_states.float(), weight.shape, weight, self.variance_epsilon)
