"""One Adafactor step with T5's settings over a T5 model's parameters: transformers' Adafactor vs GroupedAdafactor.

    python bench/adafactor_step.py                          # cpu, t5-base shapes
    python bench/adafactor_step.py --device cuda --model_size t5-large

Why: `--optim adafactor` (the T5 recipe, configs/pretrain_c4_t5_base.yaml and configs/glue/) steps each parameter
with ~20 small operations; grouped_adafactor.py steps stacks of same-shaped parameters. Both optimizers get the same
model (random init from the preset, random gradients, a first step to create their state); printed: the median of
--repeats timed steps (behind a device sync), the aten operations of one step (each is one or more GPU kernels),
and the largest difference between the two models' weights afterwards (the same math: ~1e-7 relative). On CPU
the stacked update is timed too, although training keeps transformers' loop there (grouped_adafactor.STACK_DEVICES).
"""
import argparse
import statistics
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers.optimization import Adafactor

import constants
from t5kit.model import building
from t5kit.optim import grouped_adafactor
from t5kit.optim.grouped_adafactor import GroupedAdafactor


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--model_size", default="t5-base", help="a key of constants.MODEL_SIZE_PRESETS")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per optimizer")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads on CPU")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but torch.cuda.is_available() is False; use --device cpu")
    return args


class OperationCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def time_steps(model, optimizer_cls, args):
    """Median seconds of a step, aten operations of a step; the model's weights end `repeats + 2` steps on."""
    optimizer = optimizer_cls(model.parameters(), lr=1e-3, scale_parameter=False, relative_step=False)
    optimizer.step()  # creates the state
    seconds = []
    for _ in range(args.repeats):
        synchronize(args.device)
        start = time.perf_counter()
        optimizer.step()
        synchronize(args.device)
        seconds.append(time.perf_counter() - start)
    with OperationCounter() as counter:
        optimizer.step()
    return statistics.median(seconds), counter.count


def model_with_gradients(config, device):
    """The same random model and gradients on every call (the gradients stay fixed over the steps)."""
    torch.manual_seed(0)
    model = building.new_t5_model(config).to(device)  # T5 v1.1 presets keep their own lm_head
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-3
    return model


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    grouped_adafactor.STACK_DEVICES = (args.device,)  # training stacks on a GPU only; here both devices are timed
    config = building.t5_config(constants.MODEL_SIZE_PRESETS[args.model_size], 32128, pad_token_id=0, eos_token_id=1)
    model, reference = (model_with_gradients(config, args.device) for _ in range(2))
    tensors, values = len(list(model.parameters())), sum(p.numel() for p in model.parameters())
    ours, our_ops = time_steps(model, GroupedAdafactor, args)
    theirs, their_ops = time_steps(reference, Adafactor, args)
    difference = max((p - q).abs().max().item() / q.abs().max().item()
                     for p, q in zip(model.parameters(), reference.parameters()))
    device = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    print(f"{args.model_size} ({tensors} tensors, {values / 1e6:.0f}M values), {device}: transformers Adafactor "
          f"{theirs * 1e3:.1f} ms, {their_ops} ops vs grouped {ours * 1e3:.1f} ms, {our_ops} ops -> "
          f"{theirs / ours:.2f}x | weights after {args.repeats + 2} steps differ by {difference:.1e} (relative)")


if __name__ == "__main__":
    main()
