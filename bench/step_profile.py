"""torch.profiler over the timed steps of bench/pretrain_throughput.py's arms (--profile ROWS, --profile_arm): the ops
with the most self time, each arm in a pass of its own so that profiling never touches the timed figures. With both
arms profiled, the ops the Trainer's table has and the bare loop's lacks name the Trainer's gap."""
import re

import torch
from transformers import TrainerCallback

# Device kernels by what they compute, first match wins (the embedding's backward is an Inductor reduction, SDPA's
# memory-efficient kernels are CUTLASS ones, and FlexAttention's are Inductor templates, triton_tem_*, in a step
# compiled without max-autotune, where every matmul goes to cuBLAS).
KERNEL_KINDS = (
    ("embedding backward", r"embedding_dense_backward"),
    ("attention, SDPA memory-efficient", r"fmha_cutlass|efficient_attention"),
    ("attention, cuDNN / flash", r"cudnn|flash_(fwd|bwd)|flash::"),
    ("attention, FlexAttention (Inductor templates)", r"triton_tem_|flex_attention"),
    ("optimizer", r"multi_tensor_apply|fused_adam|adamw"),
    ("matmul", r"nvjet|gemm|xmma|sm90_|sm80_|ampere_|cutlass"),
    ("reductions: norms, losses, sums (Inductor)", r"triton_red_|triton_per_"),
    ("elementwise (Inductor)", r"triton_poi_"),
    ("copies and fills", r"memcpy|memset|copy|fill"),
)


class ProfileTimedSteps(TrainerCallback):
    """Runs a torch.profiler over the Trainer's timed steps: from the end of burn-in to the end of training."""

    def __init__(self, profiler, burn_in):
        self.profiler, self.burn_in = profiler, burn_in

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.burn_in:
            self.profiler.start()

    def on_train_end(self, args, state, control, **kwargs):
        self.profiler.stop()


def profile_arm(args, arm, time_arm, dtype_name):
    """Prints the ops with the most self time on the device over one arm's timed steps (a separate pass, so
    profiling overhead never touches the figures above), and writes the trace if asked. time_arm(profiler) runs
    the arm. With both arms profiled, the ops the Trainer's table has and the bare loop's lacks name its gap."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if args.device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    profiler = torch.profiler.profile(activities=activities)
    seconds, _ = time_arm(profiler)
    sort_by = "self_cuda_time_total" if args.device == "cuda" else "self_cpu_time_total"
    print(f"profile, {dtype_name} {arm}, {args.steps} timed steps ({seconds.sum():.3g} s under the profiler), "
          f"sorted by {sort_by}:", flush=True)
    print(profiler.key_averages().table(sort_by=sort_by, row_limit=args.profile, max_name_column_width=60),
          flush=True)
    if args.device == "cuda":
        print(kinds_line(device_time_by_kind(profiler.key_averages()), args.steps), flush=True)
    if args.profile_trace:
        profiler.export_chrome_trace(args.profile_trace)
        print(f"trace written to {args.profile_trace} (open in https://ui.perfetto.dev)", flush=True)


def kernel_kind(name):
    return next((kind for kind, pattern in KERNEL_KINDS if re.search(pattern, name, re.IGNORECASE)), "other")


def device_time_by_kind(averages):
    """{kind: device microseconds} over the device's own kernel rows (an aten op's row repeats its kernels' time,
    so only kernels are summed), largest first."""
    totals = {}
    for row in averages:
        if row.device_type == torch.autograd.DeviceType.CUDA and not getattr(row, "is_user_annotation", False):
            kind = kernel_kind(row.key)
            totals[kind] = totals.get(kind, 0) + row.self_device_time_total
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def kinds_line(totals, steps):
    """'device time by kind, per step: matmul 37.1 ms (40.2 %), ...' (gpu_check.py reads this line)."""
    whole = sum(totals.values()) or 1
    parts = [f"{kind} {micros / steps / 1000:.1f} ms ({100 * micros / whole:.1f} %)" for kind, micros in totals.items()]
    return f"device time by kind, per step: {', '.join(parts)}; all kernels {whole / steps / 1000:.1f} ms"
