"""T5 self-attention with a learned position bias, forward + backward: SDPA's memory-efficient kernel vs FlexAttention.

    python bench/attention_bias.py                      # needs a CUDA GPU; prints a skip line elsewhere
    python bench/attention_bias.py --batch_size 64 --length 512

Why: in a t5-base bf16 step on an H100 (torch.compile, batch 64) the encoder's self-attention is the largest cost
after the linear layers (docs/benchmarks.md). T5 adds a learned relative-position bias to the scores, so SDPA's
flash and cuDNN kernels are out (no bias gradient) and it runs the memory-efficient kernel, which writes the bias
gradient at full [batch, heads, length, length] size. FlexAttention adds the bias in its score_mod and accumulates
the gradient into the [heads, length, length] bias directly. This bench times one attention call at the model's
shape both ways, from the same fp32 bias (T5's embedding is fp32), and checks each against an fp32 reference
(relative error of the output and of the q/k/v and bias gradients). Figures: median milliseconds of forward +
backward (triton.testing.do_bench) and TFLOP/s counted as 3.5x the forward's two matmuls.

Where FlexAttention's time goes (in a compiled t5-v1_1-base step on an H100 it ran at ~110 TFLOP/s, 20 % of the
step: docs/performance.md), three more arms, timed in the same run:
- FlexAttention, bias copies per batch group (--bias_groups G): the bias repeated G times, batch row b reading copy
  b mod G, so G times fewer rows add into each bias element with atomics; autograd sums the copies. The same maths.
- FlexAttention, no bias gradient: the bias detached, so no atomics at all. Not T5's training maths: what the bias
  gradient costs.
- SDPA flash, no bias: the attention without any bias, on the fastest fused kernel. Not T5's maths: the ceiling a
  biased attention could approach.
"""
import argparse

import torch
import torch.nn.functional as F


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--heads", type=int, default=12, help="t5-base: 12")
    parser.add_argument("--length", type=int, default=512, help="encoder tokens (pre-training input length)")
    parser.add_argument("--head_dim", type=int, default=64, help="d_kv")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bias_groups", type=int, default=8, help="bias copies of the grouped FlexAttention arm")
    return parser.parse_args(argv)


def make_inputs(args):
    """bf16 q/k/v and output gradient, and the fp32 bias shared by all batch rows, all on the GPU."""
    generator = torch.Generator(device="cuda").manual_seed(args.seed)
    shape = (args.batch_size, args.heads, args.length, args.head_dim)

    def randn(*size, dtype=torch.bfloat16):
        return torch.randn(*size, device="cuda", dtype=dtype, generator=generator)
    q, k, v = (randn(*shape).requires_grad_() for _ in range(3))
    bias = randn(args.heads, args.length, args.length, dtype=torch.float32).requires_grad_()
    return q, k, v, bias, randn(*shape)


def reference(q, k, v, bias, grad_out):
    scores = q.float() @ k.float().transpose(-1, -2) + bias  # T5 does not scale the scores
    out = torch.softmax(scores, dim=-1) @ v.float()
    out.backward(grad_out.float())
    return out


def sdpa_memory_efficient(q, k, v, bias, grad_out):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):  # what SDPA picks for a bias that needs a gradient
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype).unsqueeze(0), scale=1.0)
    out.backward(grad_out)
    return out


def make_flex_attention(groups=1, bias_gradient=True):
    """FlexAttention with the bias in its score_mod; groups > 1: batch row b reads bias copy b mod groups (fewer
    atomic adds into each element of the bias gradient); bias_gradient=False: the bias detached."""
    from torch.nn.attention.flex_attention import flex_attention
    compiled = torch.compile(flex_attention)  # FlexAttention is fast only compiled

    def flex(q, k, v, bias, grad_out):
        table = bias if bias_gradient else bias.detach()
        copies = table.unsqueeze(0).repeat(groups, 1, 1, 1) if groups > 1 else None

        def add_bias(score, batch, head, q_index, kv_index):
            if copies is None:  # the plain arm reads the bias as t5_flex does
                return score + table[head, q_index, kv_index]
            return score + copies[batch % groups, head, q_index, kv_index]
        out = compiled(q, k, v, score_mod=add_bias, scale=1.0)
        out.backward(grad_out)
        return out
    return flex


def sdpa_flash_without_bias(q, k, v, bias, grad_out):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION]):
        out = F.scaled_dot_product_attention(q, k, v, scale=1.0)
    out.backward(grad_out)
    return out


def relative_error(value, expected):
    return float((value.detach().float() - expected).norm() / expected.norm())


def measure(name, attention, inputs, expected, expected_grads, flops, exact=True):
    """Median ms of forward + backward; exact arms also print their relative errors against the fp32 reference."""
    from triton.testing import do_bench
    *tensors, grad_out = inputs

    def step():
        for tensor in tensors:
            tensor.grad = None
        return attention(*tensors, grad_out)
    out = step()
    milliseconds = do_bench(step, warmup=25, rep=200, return_mode="median")
    if exact:
        errors = [relative_error(out, expected)] + [relative_error(t.grad, g) for t, g in zip(tensors, expected_grads)]
        shown = (f"relative error vs fp32: output {errors[0]:.1e}, q/k/v grads {max(errors[1:4]):.1e}, bias grad "
                 f"{errors[4]:.1e}")
    else:
        shown = "not T5's training maths: a bound, not an option"
    print(f"{name}: {milliseconds:.3f} ms forward+backward, {flops / milliseconds / 1e9:.0f} TFLOP/s | {shown}",
          flush=True)
    return milliseconds


def main(argv=None):
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("skipped: needs a CUDA GPU (the memory-efficient kernel and compiled FlexAttention are GPU kernels)")
        return
    inputs = make_inputs(args)
    q, k, v, bias, grad_out = inputs
    expected = reference(q, k, v, bias, grad_out).detach()
    expected_grads = [t.grad.clone() for t in (q, k, v, bias)]
    flops = 3.5 * 4 * args.batch_size * args.heads * args.length ** 2 * args.head_dim
    print(f"batch {args.batch_size} x {args.heads} heads x {args.length}^2 x d {args.head_dim}, fp32 bias "
          f"[{args.heads}, {args.length}, {args.length}] ({torch.cuda.get_device_name()}, torch {torch.__version__})",
          flush=True)
    sdpa_ms = measure("SDPA memory-efficient", sdpa_memory_efficient, inputs, expected, expected_grads, flops)
    flex_ms = measure("FlexAttention", make_flex_attention(), inputs, expected, expected_grads, flops)
    print(f"FlexAttention vs SDPA memory-efficient: {sdpa_ms / flex_ms:.2f}x", flush=True)
    groups = args.bias_groups
    grouped_ms = measure(f"FlexAttention, {groups} bias copies", make_flex_attention(groups=groups), inputs, expected,
                         expected_grads, flops)
    detached_ms = measure("FlexAttention, no bias gradient", make_flex_attention(bias_gradient=False), inputs,
                          expected, expected_grads, flops, exact=False)
    flash_ms = measure("SDPA flash, no bias", sdpa_flash_without_bias, inputs, expected, expected_grads, flops,
                       exact=False)
    print(f"FlexAttention: {groups} bias copies {flex_ms / grouped_ms:.2f}x; without the bias gradient "
          f"{flex_ms / detached_ms:.2f}x; flash without a bias {flex_ms / flash_ms:.2f}x", flush=True)


if __name__ == "__main__":
    main()
