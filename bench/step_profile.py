"""torch.profiler over the timed steps of bench/pretrain_throughput.py's arms (--profile ROWS, --profile_arm): the ops
with the most self time, each arm in a pass of its own so that profiling never touches the timed figures. With both
arms profiled, the ops the Trainer's table has and the bare loop's lacks name the Trainer's gap."""
import torch
from transformers import TrainerCallback


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
    if args.profile_trace:
        profiler.export_chrome_trace(args.profile_trace)
        print(f"trace written to {args.profile_trace} (open in https://ui.perfetto.dev)", flush=True)
