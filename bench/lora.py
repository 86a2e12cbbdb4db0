"""LoRA vs full fine-tuning: peak memory and step time of the same model on the same batches.

    python bench/lora.py                                   # cpu, t5-small shapes, 1 thread
    python bench/lora.py --device cuda --model_size t5-base --batch_size 32

Why: --peft lora (model/lora.py) trains adapters on q and v and freezes the rest, so AdamW keeps state for ~0.5 %
of the parameters and backward skips the frozen weights' gradients. Each arm (full: every parameter trains; lora:
r 8, alpha 16 on q,v, as fine_tune_t5.py's defaults) runs in a child process of this script, so that one arm's
allocations cannot raise the other's peak: a bare loop of forward, backward and AdamW step (the Trainer's default
optimizer) on one fixed batch, --burn_in steps first, then --steps timed (behind a device sync). Peak memory: the
process's peak resident set size on CPU (ru_maxrss, which counts the model, batch, activations, gradients and
optimizer state, plus the interpreter and libraries: the same baseline for both arms), torch.cuda's peak allocation
on a GPU.
"""
import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

ARMS = ("full", "lora")
VOCAB_SIZE = 32128  # T5's padded vocabulary


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--model_size", default="t5-small", help="a key of constants.MODEL_SIZE_PRESETS")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--input_length", type=int, default=128)
    parser.add_argument("--target_length", type=int, default=16)
    parser.add_argument("--burn_in", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads on CPU")
    parser.add_argument("--arm", choices=ARMS, help="run one arm in this process and print its JSON (internal)")
    return parser.parse_args(argv)


def run_arm(args):
    """{"step_s": median seconds a step, "peak_mb": peak memory, "trainable": parameters that train}."""
    import torch

    import constants
    from t5kit.model import building, lora

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = building.t5_config(constants.MODEL_SIZE_PRESETS[args.model_size], VOCAB_SIZE, constants.PAD_ID,
                                constants.EOS_ID)
    model = building.new_t5_model(config).to(args.device)
    if args.arm == "lora":
        model = lora.apply_lora(model, 8, 16.0, 0.0, ["q", "v"])
    model.train()
    generator = torch.Generator().manual_seed(1)  # the same batch in both arms
    batch = {"input_ids": torch.randint(3, VOCAB_SIZE, (args.batch_size, args.input_length), generator=generator),
             "labels": torch.randint(3, VOCAB_SIZE, (args.batch_size, args.target_length), generator=generator)}
    batch = {key: value.to(args.device) for key, value in batch.items()}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)

    def step():
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(args.burn_in):
        step()
    seconds = []
    for _ in range(args.steps):
        if args.device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        if args.device == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    if args.device == "cuda":
        peak_mb = torch.cuda.max_memory_allocated() / 2 ** 20
    else:
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    return {"step_s": statistics.median(seconds), "peak_mb": peak_mb,
            "trainable": lora.trainable_parameters(model)}


def main(argv=None):
    args = parse_args(argv)
    if args.arm:
        print(json.dumps(run_arm(args)))
        return
    results = {}
    for arm in ARMS:
        child = subprocess.run([sys.executable, __file__, *(argv if argv is not None else sys.argv[1:]), "--arm", arm],
                               capture_output=True, text=True, check=True)
        results[arm] = json.loads(child.stdout.strip().splitlines()[-1])
    full, adapted = results["full"], results["lora"]
    where = f"{args.device}, {args.threads} thread(s)" if args.device == "cpu" else args.device
    print(f"{args.model_size} batch {args.batch_size}x{args.input_length}->{args.target_length}: "
          f"lora {adapted['step_s'] * 1e3:.0f} ms/step, peak {adapted['peak_mb']:.0f} MB, "
          f"{adapted['trainable']:,} trainable vs full {full['step_s'] * 1e3:.0f} ms/step, peak "
          f"{full['peak_mb']:.0f} MB, {full['trainable']:,} trainable -> step "
          f"{full['step_s'] / adapted['step_s']:.2f}x faster, peak memory "
          f"{adapted['peak_mb'] / full['peak_mb']:.2f}x ({where})")


if __name__ == "__main__":
    main()
