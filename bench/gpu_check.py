"""One prepared check for a short GPU window: everything the project needs measured on a GPU, in one command that
stays inside a time budget (8 minutes by default) and writes one JSON and one Markdown table.

    bash bench/gpu_check.sh --output_dir runs/gpu_check               # on the GPU machine (installs wheels first)
    python bench/gpu_check.py --device cpu --tiny --output_dir /tmp/c   # the CPU dry run the tests run (~2 minutes)

Each section runs as its own process (the project's scripts and benches, as a user runs them), so a crash or an
out-of-memory error in one leaves the others their figures, and GPU memory is free between them. A section starts
only if its estimate fits in what is left of the budget, and it is stopped when the budget runs out; either way
the JSON says why it has no figures. The dry run (--tiny) has no budget unless --budget_s gives one: it checks that
every section runs to the end, however fast the CPU is. Sections (bench/gpu_sections.py; they run in SECTIONS' order,
the Trainer's throughput targets first; --tiny shrinks each to seconds on a CPU):

- environment: the device, torch / transformers / accelerate / deepspeed versions, bf16 support.
- throughput_*: bench/pretrain_throughput.py (Trainer vs bare loop, tokens/s, MFU against the card's bf16 spec) for
  t5-v1_1-base, bf16, input 512 / target 114, batch 64: compiled sdpa with pre_train_t5's defaults, compiled t5_flex
  with the Trainer's batches collated by 2 loader workers (also at batch 128, the nanoT5-budget recipes', and there
  with --activation_dtype bfloat16, alone and with --loss_chunk_tokens or --fused_rmsnorm), and both eager.
- trainer_profile: where the Trainer arm's step goes (torch.profiler over a few steps of the compiled t5_flex arm).
- attention_bias: bench/attention_bias.py, the biased self-attention alone, FlexAttention and its variants.
- fp16_correctness: pre_train_t5.py, 200 steps of t5-v1_1-small in fp32 and in --fp16 (the fp32 feed-forward outputs
  of model/precision.py); throughput_compiled_sdpa_fp16: the throughput arms in fp16, for GPUs without bf16.
- bf16_correctness: pre_train_t5.py, 200 steps of a small model on ../shared/data text in fp32, bf16, bf16 with
  --z_loss and bf16 with --activation_dtype bfloat16 where the flags exist; no non-finite loss, and the bf16 loss
  curve within LOSS_TOLERANCE of fp32's.
- ul2_packing: real tokens/s and padding of --objective ul2 with and without --packing (bench/packing.py's reading).
- packed_equivalence: packed rows against their examples unpacked, per attention implementation, t5_flex included
  (bench/packed_equivalence.py).
- zero2, fsdp: a few steps under DeepSpeed ZeRO-2 (torchrun, one process) and under FSDP (accelerate, one process).
- inference: bench/predict.py (predict_t5.py's batching vs the generate loop; CTranslate2 arms where installed).
- quality: bench/quality.py's arms with GPU-sized pre-training, when the budget still allows.
"""
import argparse
import json
import math
import os
import shlex
import subprocess
import time
from pathlib import Path

from bench.gpu_sections import (
    SectionSkipped,
    attention_bias,
    bf16_correctness,
    environment,
    fp16_correctness,
    fsdp,
    inference,
    packed_equivalence,
    quality,
    throughput,
    trainer_profile,
    ul2_packing,
    zero2,
)
from bench.paths import ROOT


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True, help="gpu_check.json, gpu_check.md and logs/ go here")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny models and few steps: the CPU dry run")
    parser.add_argument("--budget_s", type=float, default=None,
                        help="total seconds (default 480; --tiny: none, so that the dry run runs every section)")
    parser.add_argument("--batch_size", type=int, default=64, help="throughput batch for t5-v1_1-base at 512")
    parser.add_argument("--skip", nargs="*", default=[], help="section names to leave out")
    parser.add_argument("--only", nargs="*", default=None,
                        help="run these sections alone (say, those a window left without figures)")
    parser.add_argument("--plan", choices=tuple(PLANS), default=None,
                        help="one call of a 15-minute GPU window (docs/benchmarks.md): its sections in order, "
                             "within its seconds; replaces --only and --budget_s")
    args = parser.parse_args(argv)
    if args.plan:
        args.only, args.budget_s = list(PLANS[args.plan][0]), PLANS[args.plan][1]
    unknown = [name for name in [*args.skip, *(args.only or [])] if name not in {row[0] for row in SECTIONS}]
    if unknown:  # a misspelt name would otherwise skip or run nothing, and a GPU window would be spent on it
        parser.error(f"unknown section(s) {', '.join(unknown)}; the sections: {', '.join(row[0] for row in SECTIONS)}")
    return args


class Check:
    """The budget, the output folder and the sections' results (written after each section, so that a call stopped
    from outside still brings back every finished section's figures)."""

    def __init__(self, args):
        self.args, self.start = args, time.time()
        self.budget = args.budget_s or (math.inf if args.tiny else 480.0)
        self.out = Path(args.output_dir)
        (self.out / "logs").mkdir(parents=True, exist_ok=True)
        self.results = {}

    def left(self):
        return self.budget - (time.time() - self.start)

    def run(self, name, estimate_s, section):
        """Runs section(check) -> figures if estimate_s fits in what is left; records status, seconds and note."""
        if name in self.args.skip or (self.args.only is not None and name not in self.args.only):
            self.results[name] = {"status": "skipped", "note": "--skip" if name in self.args.skip else "--only",
                                  "seconds": 0.0}
        elif estimate_s > 0 and estimate_s > self.left():  # 0: a section that only says why it is left out
            self.results[name] = {"status": "skipped", "seconds": 0.0,
                                  "note": f"would overrun: estimate {estimate_s:.0f} s, {self.left():.0f} s left"}
        else:
            began = time.time()
            try:
                figures = section(self)
                status, note = "ok", ""
            except SectionSkipped as skip:
                figures, status, note = {}, "skipped", str(skip)
            except BudgetSpent as stop:
                figures, status, note = {}, "stopped", str(stop)
            except Exception as err:  # one failed section must not cost the others their figures
                figures, status, note = {}, "failed", f"{type(err).__name__}: {err}"
            self.results[name] = {"status": status, "note": note, "seconds": round(time.time() - began, 1),
                                  "figures": figures}
        print(f"[gpu_check] {name}: {self.results[name]['status']} {self.results[name].get('note', '')}",
              flush=True)
        self.write_report()

    def write_report(self):
        """gpu_check.json and gpu_check.md as they stand, each replaced whole (atomic rename)."""
        budget = None if math.isinf(self.budget) else self.budget
        report = {"device": self.args.device, "tiny": self.args.tiny, "plan": self.args.plan, "budget_s": budget,
                  "seconds": round(time.time() - self.start, 1), "sections": self.results}
        for name, text in (("gpu_check.json", json.dumps(report, indent=2, default=str)),
                           ("gpu_check.md", markdown(self))):
            partial = self.out / f".{name}.partial"
            partial.write_text(text)
            os.replace(partial, self.out / name)
        return report

    def command(self, name, argv, env=None):
        """Runs one command (cwd: the repository), its output in logs/NAME.log; stopped when the budget runs out."""
        log = self.out / "logs" / f"{name}.log"
        with open(log, "w") as handle:
            handle.write(shlex.join(map(str, argv)) + "\n")
            handle.flush()
            try:
                left = self.left()
                returncode = run_command(list(map(str, argv)), handle, {**os.environ, **(env or {})},
                                         None if math.isinf(left) else max(left, 1))
            except subprocess.TimeoutExpired:
                raise BudgetSpent(f"stopped at the end of the budget (log: {log})") from None
        if returncode != 0:
            raise RuntimeError(f"exit code {returncode} (log: {log}): {tail(log)}")
        return log.read_text()


def run_command(argv, log, env, timeout):
    """Runs argv from the repository root, its output into the open file `log`; returns its exit code (the dry run's
    test starts the Python scripts among the commands in forked processes instead)."""
    return subprocess.run(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout).returncode


class BudgetSpent(Exception):
    """A section stopped because the whole check's time ran out."""


def tail(path, lines=3):
    return " | ".join(Path(path).read_text().strip().splitlines()[-lines:])


LOSS_CHUNK_TOKENS = 4096  # batch 128 x 114 targets in 4 chunks: 4096 x 32,128 bf16 logits (263 MB) at a time
SECTIONS = (  # name, estimated seconds on one H100 (as measured 2026-11-26 where it ran) and in the dry run, function
    # In the order of issue 31's targets, so a short window measures what matters first: the Trainer's MFU, bf16,
    # packing's gain; then what names the Trainer's gap and what has never run on a GPU; the rest as time allows.
    ("environment", 10, 5, environment),
    ("throughput_compiled_sdpa", 125, 0, throughput(True, "sdpa")),
    ("bf16_correctness", 120, 35, bf16_correctness),
    ("fp16_correctness", 75, 20, fp16_correctness),  # not yet run: --fp16 with fp32 feed-forward outputs
    ("throughput_compiled_sdpa_fp16", 125, 0, throughput(True, "sdpa", dtype="fp16")),  # fp16 vs bf16 speed
    ("ul2_packing", 90, 15, ul2_packing),
    ("throughput_eager_sdpa", 45, 12, throughput(False, "sdpa")),  # compile's gain; the dry run's Trainer arm
    ("throughput_compiled_t5_flex_workers2", 145, 0, throughput(True, "t5_flex", workers=2)),
    ("throughput_compiled_t5_flex_workers2_batch128", 150, 0, throughput(True, "t5_flex", workers=2, batch_size=128)),
    ("throughput_compiled_t5_flex_workers2_batch128_bf16_activations", 150, 0,  # not yet run: T5X's bf16 stream
     throughput(True, "t5_flex", workers=2, batch_size=128, activation_dtype="bfloat16")),
    # not yet run: the arm above with the chunked loss, then with the fused norm (docs/performance.md)
    ("throughput_compiled_t5_flex_workers2_batch128_bf16_activations_loss_chunks", 150, 0,
     throughput(True, "t5_flex", workers=2, batch_size=128, activation_dtype="bfloat16",
                loss_chunk_tokens=LOSS_CHUNK_TOKENS)),
    ("throughput_compiled_t5_flex_workers2_batch128_bf16_activations_fused_rmsnorm", 150, 0,
     throughput(True, "t5_flex", workers=2, batch_size=128, activation_dtype="bfloat16", fused_rmsnorm=True)),
    ("packed_equivalence", 50, 0, packed_equivalence),
    ("trainer_profile", 140, 12, trainer_profile),
    ("attention_bias", 90, 5, attention_bias),  # not yet run: 4 compiled FlexAttention variants and 2 SDPA arms
    ("inference", 150, 40, inference),  # not yet run: the compiled arms (predict_t5.py --compile)
    ("zero2", 35, 15, zero2),
    ("fsdp", 30, 12, fsdp),
    ("throughput_eager_t5_flex", 55, 0, throughput(False, "t5_flex")),
    ("quality", 240, 0, quality),  # pre-training 150 s, then 9 fine-tuning runs at once
)


# A 15-minute GPU window, the machine's start included (minutes), is two calls: (sections in priority order, the
# call's seconds, how many of them must fit). The first call measures quality at GPU scale (it must finish), then
# the fastest Trainer arm with the bf16 stream, against batch 128's measured 0.169 s a step; the second what has
# never run on a GPU, in priority order, as far as its seconds go (a section that would overrun is skipped, noted):
# fp16's loss, compiled generation (bench/predict.py's compiled arms), then the bf16-stream arm with the chunked loss
# (its baseline: call 1's arm; each arm's device_name names the card).
# Each section's figures are written as it finishes. The dry run checks that the sections that must fit do.
PLANS = {
    "call1": (("quality", "throughput_compiled_t5_flex_workers2_batch128_bf16_activations"), 400, 2),
    "call2": (("fp16_correctness", "inference",
               "throughput_compiled_t5_flex_workers2_batch128_bf16_activations_loss_chunks",
               "throughput_compiled_t5_flex_workers2_batch128_bf16_activations_fused_rmsnorm",
               "throughput_compiled_sdpa_fp16", "ul2_packing"), 225, 2),
}
CALL_LIMITS_S = {"call1": 420, "call2": 240}  # the device tool's seconds per call the plan is sized for


def markdown(check):
    lines = ["| section | status | seconds | figures / note |", "|---|---|---|---|"]
    for name, result in check.results.items():
        shown = result.get("note") or json.dumps(result.get("figures"), default=str)[:300]
        lines.append(f"| {name} | {result['status']} | {result['seconds']} | {shown.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def plan_seconds(plan):
    """The GPU estimates of the sections a plan must fit, summed: what the dry run checks against its seconds."""
    estimates = {name: gpu_estimate_s for name, gpu_estimate_s, _, _ in SECTIONS}
    sections, _, must_fit = PLANS[plan]
    return sum(estimates[name] for name in sections[:must_fit])


def main(argv=None):
    args = parse_args(argv)
    check = Check(args)
    order = args.only if args.plan else [row[0] for row in SECTIONS]  # a plan runs its sections in its own order
    rows = {row[0]: row for row in SECTIONS}
    for name in [*order, *(row[0] for row in SECTIONS if row[0] not in order)]:
        _, gpu_estimate_s, tiny_estimate_s, section = rows[name]
        check.run(name, tiny_estimate_s if args.tiny else gpu_estimate_s, section)
    report = check.write_report()
    print(markdown(check))
    return report


if __name__ == "__main__":
    main()
