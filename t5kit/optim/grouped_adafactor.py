"""--optim adafactor with T5's settings, updating all parameters of one shape at once: HF's numbers, few kernels.

    optimizer = GroupedAdafactor(params, lr=1e-3, scale_parameter=False, relative_step=False)  # optimizer_classes.py

transformers' Adafactor updates one parameter at a time, about 20 small kernels each (squares, row and column means,
rsqrt, the update's RMS clip, the add): 6,064 operations a step for t5-base's 257 tensors, each a kernel launch on a
GPU (microseconds each, however small the tensor); stacked, 617 (bench/adafactor_step.py; the GPU time saved is not
measured yet). T5's recipe (fixed learning rate, scale_parameter=False, relative_step=False, no first moment: what
Trainer's `--optim adafactor` sets) has no per-parameter scalar read on the host, so parameters of one shape and
step count can be stacked and updated together with the same operations along a batch dimension: the same math and
the same optimizer state, in HF's layout (per parameter: step, exp_avg_sq_row/col or exp_avg_sq, RMS), so
checkpoints load either way. Stacks are capped at BUCKET_ELEMENTS values (the temporary memory: a few times that in
fp32). Other settings, non-fp32 parameters, sparse gradients and parameters on the CPU (see STACK_DEVICES) take
transformers' own step.
"""
import math
from collections import defaultdict

import torch
from transformers.optimization import Adafactor

BUCKET_ELEMENTS = 2 ** 24  # values per stack: 64 MiB of fp32 gradients (3-4 such temporaries at a time)
# Where stacking pays: on a GPU each operation is a kernel launch (microseconds even for a small tensor). A CPU runs
# transformers' per-parameter loop faster, its tensors staying in cache between operations (bench/adafactor_step.py:
# 1.7 s vs 2.7 s a t5-base step on one core here), so CPU parameters keep that loop.
STACK_DEVICES = ("cuda",)


class GroupedAdafactor(Adafactor):
    """transformers' Adafactor; with T5's settings its step updates stacks of same-shaped parameters."""

    @torch.no_grad()
    def step(self, closure=None):
        if not all(map(groups_stack, self.param_groups)) or not all(
                stacks(p) for group in self.param_groups for p in group["params"] if p.grad is not None):
            return super().step(closure)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for (shape, step), params in self.buckets(group).items():
                for chunk in chunks(params, BUCKET_ELEMENTS // max(1, math.prod(shape))):
                    self.update_stack(chunk, group, step)
        return loss

    def buckets(self, group):
        """{(shape, step count after this step): [parameters]} of the group's parameters that have a gradient."""
        buckets = defaultdict(list)
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:
                init_state(state, p)
            state["step"] += 1
            buckets[(tuple(p.shape), state["step"])].append(p)
        return buckets

    def update_stack(self, params, group, step):
        """transformers' Adafactor.step for `params` (same shape and step), along a leading stack dimension."""
        states = [self.state[p] for p in params]
        rms = torch.stack(torch._foreach_norm(params)) / math.sqrt(params[0].numel())
        for state, value in zip(states, rms.unbind(0)):
            state["RMS"] = value
        lr = group["lr"]
        beta2t = 1.0 - math.pow(step, group["decay_rate"])
        grads = torch.stack([p.grad for p in params])
        update = grads ** 2 + group["eps"][0]
        if params[0].dim() >= 2:  # factored second moment
            rows = moving_average([s["exp_avg_sq_row"] for s in states], update.mean(dim=-1), beta2t)
            cols = moving_average([s["exp_avg_sq_col"] for s in states], update.mean(dim=-2), beta2t)
            update = Adafactor._approx_sq_grad(rows, cols).mul_(grads)
        else:
            update = moving_average([s["exp_avg_sq"] for s in states], update, beta2t).rsqrt().mul_(grads)
        update_rms = update.reshape(len(params), -1).norm(dim=1) / math.sqrt(params[0].numel())
        clip = (update_rms / group["clip_threshold"]).clamp_(min=1.0)
        update.div_(clip.view(-1, *[1] * params[0].dim())).mul_(lr)
        if group["weight_decay"] != 0:
            torch._foreach_add_(params, params, alpha=-group["weight_decay"] * lr)
        torch._foreach_sub_(params, list(update.unbind(0)))


def groups_stack(group):
    """Whether the group's settings keep every per-parameter scalar on the device (T5's recipe)."""
    return (group["lr"] is not None and not group["relative_step"] and not group["scale_parameter"]
            and not group["warmup_init"] and group["beta1"] is None)


def stacks(p):
    """Whether a parameter with a gradient is one the stacked update takes: fp32, dense, on a STACK_DEVICES device."""
    return (p.dtype == torch.float32 and p.grad.dtype == torch.float32 and not p.grad.is_sparse
            and p.device.type in STACK_DEVICES)


def init_state(state, p):
    """transformers' Adafactor state for a new parameter (no first moment)."""
    state["step"] = 0
    if p.dim() >= 2:
        state["exp_avg_sq_row"] = torch.zeros(p.shape[:-1], dtype=p.dtype, device=p.device)
        state["exp_avg_sq_col"] = torch.zeros(p.shape[:-2] + p.shape[-1:], dtype=p.dtype, device=p.device)
    else:
        state["exp_avg_sq"] = torch.zeros_like(p)
    state["RMS"] = 0


def moving_average(averages, value, beta):
    """averages[i] = beta * averages[i] + (1 - beta) * value[i], in place; returns the stacked result."""
    stacked = torch.stack(averages).mul_(beta).add_(value, alpha=1.0 - beta)
    torch._foreach_copy_(averages, list(stacked.unbind(0)))
    return stacked


def chunks(items, size):
    size = max(1, size)
    return [items[i:i + size] for i in range(0, len(items), size)]
