"""--adamw_rms_scaling: nanoT5's AdamWScale (Nawrot 2023), AdamW whose step for each tensor is multiplied by
max(1e-3, RMS of that tensor), the relative step size of Adafactor's scale_parameter.

    optimizer = AdamWScale(param_groups, lr=2e-2, betas=(0.9, 0.999), eps=1e-8)

nanoT5 found plain AdamW unstable for T5 pre-training and Adafactor slower to converge; scaling AdamW's step by the
weight's own size let it train t5-base from random init at lr 2e-2 with a cosine schedule. The math is nanoT5's
(utils/copied_utils.py): Adam moments with bias correction, the step scaled by the RMS of the weight before the
update, then decoupled weight decay lr * weight_decay on the updated weight. Only the arithmetic is ours: torch's
foreach operations over the group (a few kernels a step instead of ~10 per tensor), and no host read of the RMS.
The state is torch AdamW's layout (step, exp_avg, exp_avg_sq per parameter), so checkpoints hold nothing new.
"""
import math

import torch

RMS_FLOOR = 1e-3  # nanoT5's: a tensor of zeros (a fresh bias) still moves


class AdamWScale(torch.optim.Optimizer):
    """AdamW with each tensor's step times max(RMS_FLOOR, RMS(tensor)); see the module docstring."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0.0 <= beta < 1.0 for beta in betas):
            raise ValueError(f"AdamWScale: lr={lr}, eps={eps}, weight_decay={weight_decay} must be >= 0 and "
                             f"betas={betas} in [0, 1)")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                self.update_group(params, group)
        return loss

    def update_group(self, params, group):
        """One AdamWScale step for the group's parameters that have a gradient."""
        if any(p.grad.is_sparse for p in params):
            raise RuntimeError("AdamWScale does not support sparse gradients")
        beta1, beta2 = group["betas"]
        states = [self.state_of(p) for p in params]
        grads = [p.grad for p in params]
        exp_avgs = [state["exp_avg"] for state in states]
        exp_avg_sqs = [state["exp_avg_sq"] for state in states]
        torch._foreach_lerp_(exp_avgs, grads, 1.0 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1.0 - beta2)
        denominators = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_add_(denominators, group["eps"])
        # Per tensor: -lr * bias correction * max(floor, RMS), computed on the device from the weight before the step.
        rms = torch.stack(torch._foreach_norm(params)) / torch.tensor(
            [math.sqrt(p.numel()) for p in params], device=params[0].device)
        step_sizes = rms.clamp_(min=RMS_FLOOR).mul_(torch.tensor(
            [-group["lr"] * bias_correction(state["step"], beta1, beta2) for state in states],
            device=params[0].device))
        updates = torch._foreach_div(exp_avgs, denominators)
        torch._foreach_mul_(updates, [size.to(p.dtype) for size, p in zip(step_sizes.unbind(0), params)])
        torch._foreach_add_(params, updates)
        if group["weight_decay"] > 0:  # decoupled, on the updated weight (HF's AdamW and nanoT5 order)
            torch._foreach_add_(params, params, alpha=-group["lr"] * group["weight_decay"])

    def state_of(self, param):
        """The parameter's state, created at the first step, with its step count advanced."""
        state = self.state[param]
        if not state:
            state["step"] = 0
            state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["step"] += 1
        return state


def bias_correction(step, beta1, beta2):
    """Adam's sqrt(1 - beta2^t) / (1 - beta1^t) at step t (1-based)."""
    return math.sqrt(1.0 - beta2 ** step) / (1.0 - beta1 ** step)
