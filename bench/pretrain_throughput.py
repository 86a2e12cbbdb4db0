"""Tokens/s of a pre_train_t5 training step (its Trainer) vs a bare PyTorch loop, and FLOP/s vs matmul peak.

    .venv/bin/python bench/pretrain_throughput.py                          # cpu, t5-small, batch 4, fp32 (+ bf16)
    .venv/bin/python bench/pretrain_throughput.py --dtype bf16 --batch_size 1 --burn_in 1 --steps 1
    python bench/pretrain_throughput.py --device cuda --model_size t5-base --dtype bf16 --batch_size 64
    python bench/pretrain_throughput.py --device cuda ... --profile 30 --profile_trace step.json   # where time goes

Both arms train the same model (building.build_model from a --model_size preset, built after the same seed) on the
same batches: (burn_in + steps) x batch_size random windows of tokens_length ids from a fixed seed, corrupted by
DataCollatorForT5SpanCorruption with the same seed. Only the collator needs the real tokenizer (its sentinels):
$T5_DATA_DIR/t5_spiece (default ../shared/data/t5_spiece); without it the bench prints what is missing and exits.

- trainer: t5kit.train.pretrain_trainer.PretrainTrainer (Seq2SeqTrainer with our checkpoint, --nan_policy and stream
  mixins) with T5TrainingArguments at their defaults (adamw_torch_fused or --optim, max_grad_norm 1.0, the linear
  schedule, the NaN guard), --bf16 and --torch_compile from our flags, the collator live as in pre_train_t5, and
  sequential sampling (the bare loop's batches). A callback reads the clock at on_step_end of step burn_in and of
  the last step (or every later step, --timing steps): whole iterations of Trainer's loop, batch fetch to the
  non-finite guard's verdict (read a step later).
- bare loop: the batches collated once up front (pinned on cuda); per step: copy to the device (non-blocking),
  autocast forward, backward, clip_grad_norm_ (as Trainer), optimizer.step(), scheduler.step(), zero_grad(). The
  optimizer is Trainer's (optimizer_classes.optimizer_cls_and_kwargs), in one parameter group instead of Trainer's
  decay/no-decay two (weight decay 0 by default: the same math).

Every clock reading sits behind torch.cuda.synchronize() on CUDA. --timing span (the default on cuda) reads the
clock at the end of burn-in and of the last step only, and reports the mean step: a GPU runs a step while the host
prepares the next one, as in training, and a sync at every step would stop that overlap (the GPU idles while the
host fetches the batch and launches the step), which is not what a run sees. --timing steps (the default on cpu,
where nothing overlaps) reads it at every step; tokens/s (encoder + decoder tokens) then come from the fastest
timed step of each arm, medians beside them (on a shared CPU, other processes slow some steps down). Mean losses
of the two arms are printed side by side: equal losses show equal model, batches and optimizer. FLOPs per step: by
torch.utils.flop_counter.FlopCounterMode over one forward+backward of the model on the meta device (matmuls only:
mm/bmm/addmm/attention, the MFU convention; optimizer and elementwise work are not counted). It is below the
6 x parameters x tokens rule (0.425 vs 0.662 TFLOP for t5-small, batch 4) because encoder weights see only the
512 input tokens and decoder weights only the 114 targets. The peak is the fastest of a few square matmuls at the
arm's dtype, measured in the same run, before and after the arms. Timings are printed, never asserted.

On CPU: without AVX512-BF16 or AMX bf16 matmuls run 5-10x slower than fp32 and an autocast step ~40x slower, so
--dtype both skips bf16 there and says so. With 2 threads on 2 cores, a step slows 2-4x whenever another process
takes a core: on a busy machine compare arms at --threads 1. --activation_dtype bfloat16 (the bf16 arms' residual
stream in bf16), --loss_chunk_tokens N and --fused_rmsnorm apply to both arms, as pre_train_t5's flags.
"""
import argparse
import gc
import json
import os
import tempfile
import time
from pathlib import Path

for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):  # before transformers is imported
    os.environ.setdefault(_var, "1")

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import PrinterCallback, TrainerCallback, get_scheduler, set_seed

from bench.paths import SHARED_DATA
from bench.step_profile import ProfileTimedSteps, profile_arm
from data_collator import DataCollatorForT5SpanCorruption, compute_input_and_target_lengths
from t5kit.config.arguments import ACTIVATION_DTYPES, ATTN_IMPLEMENTATIONS, ModelArguments, T5TrainingArguments
from t5kit.config.pretrain_arguments import SpanCorruptionArguments
from t5kit.model import building
from t5kit.optim import optimizer_classes
from t5kit.train.pretrain_trainer import PretrainTrainer

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# Square matmul for the peak: big enough to reach the BLAS/cuBLAS plateau, small enough to time in seconds.
MATMUL_PEAK_SIZE = {"cpu": 2048, "cuda": 8192}
MATMUL_PEAK_SECONDS = 2.0  # time products for at least this long per dtype (warm-up included), keep the fastest
MATMUL_PEAK_MIN_REPEATS = 3
# Dense (no sparsity) bf16 tensor-core peak from NVIDIA's datasheets (SXM parts), TFLOP/s.
SPEC_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}
SETTINGS = ("model_size", "batch_size", "input_length", "compile", "attn_implementation", "activation_dtype",
            "loss_chunk_tokens", "fused_rmsnorm", "optim", "steps")  # what --json_out records of the flags


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--model_size", default="t5-small", help="a key of constants.MODEL_SIZE_PRESETS")
    parser.add_argument("--batch_size", type=int, default=4, help="examples per step (per_device_train_batch_size)")
    parser.add_argument("--input_length", type=int, default=512, help="encoder tokens; targets follow (512 -> 114)")
    parser.add_argument("--burn_in", type=int, default=2, help="untimed steps per arm (>= 1; compile happens here)")
    parser.add_argument("--steps", type=int, default=4, help="timed steps per arm")
    parser.add_argument("--dtype", choices=("fp32", "bf16", "fp16", "both"), default="both",
                        help="bf16/fp16: autocast as --bf16/--fp16 (fp16: loss scaling, model/precision.py). 'both': "
                             "fp32 and bf16, bf16 skipped (said so) where its matmuls trail fp32's; bf16 forces it")
    parser.add_argument("--compile", action="store_true", help="torch.compile both arms (Trainer's --torch_compile)")
    parser.add_argument("--compile_mode", default=None,
                        choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
                        help="torch.compile mode for both arms (Trainer's --torch_compile_mode); implies --compile")
    parser.add_argument("--tf32", action="store_true",
                        help="CUDA: TF32 for fp32 matmuls in both arms (Trainer's --tf32), incl. those autocast leaves")
    parser.add_argument("--attn_implementation", choices=ATTN_IMPLEMENTATIONS, default="sdpa",
                        help="T5 attention kernels, as pre_train_t5's --attn_implementation")
    parser.add_argument("--activation_dtype", choices=ACTIVATION_DTYPES, default="float32",
                        help="bf16 arms' residual stream, as pre_train_t5's --activation_dtype (fp32 arms: float32)")
    parser.add_argument("--loss_chunk_tokens", type=int, default=0, help="both arms, as pre_train_t5's flag")
    parser.add_argument("--fused_rmsnorm", action="store_true", help="both arms, as pre_train_t5's flag (true)")
    parser.add_argument("--optim", choices=("adamw_torch_fused", "adafactor"), default="adamw_torch_fused",
                        help="both arms' optimizer (Trainer's --optim; adafactor: T5's settings, grouped_adafactor.py)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads on CPU (default: torch's)")
    parser.add_argument("--dataloader_num_workers", type=int, default=0,
                        help="Trainer's loader workers; > 0 moves collation off the clock but draws other masks")
    parser.add_argument("--profile", type=int, default=0, metavar="ROWS",
                        help="after the timed arms, profile the bare loop's timed steps once more (torch.profiler) and "
                             "print the ROWS ops that take the most self time on the device: where a step's time goes")
    parser.add_argument("--profile_trace", metavar="FILE.json", help="with --profile: the Chrome/Perfetto trace too")
    parser.add_argument("--timing", choices=("span", "steps"), default=None,
                        help="span: synchronize only where the clock starts and stops, report the mean step (what "
                             "training sees: steps overlap on the GPU); steps: synchronize at every step, report the "
                             "fastest. Default: span on cuda, steps on cpu (no overlap there; the fastest step "
                             "filters out other processes)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--profile_arm", choices=("bare", "trainer", "both"), default="bare",
                        help="which arm --profile profiles (both: the Trainer's extra ops name its gap)")
    parser.add_argument("--json_out", default=None, metavar="FILE.json",
                        help="also write each arm's figures to this file (bench/gpu_check.py reads it)")
    args = parser.parse_args(argv)
    args.timing = args.timing or ("span" if args.device == "cuda" else "steps")
    if args.burn_in < 1 or args.steps < 1:
        parser.error(f"--burn_in={args.burn_in} and --steps={args.steps} must be >= 1: the clock starts at the end "
                     "of the last burn-in step")
    args.compile = args.compile or args.compile_mode is not None
    if args.profile_trace and not args.profile:
        parser.error("--profile_trace needs --profile ROWS (the number of ops to print)")
    if args.tf32 and args.device != "cuda":
        parser.error("--tf32 needs --device cuda (TF32 is an NVIDIA tensor-core format)")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but torch.cuda.is_available() is False; use --device cpu")
    return args


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def device_name(device):
    if device == "cuda":
        return torch.cuda.get_device_name()
    threads = torch.get_num_threads()
    return f"cpu, {threads} thread{'s' if threads > 1 else ''} on {os.cpu_count()} cores"


def measure_matmul_peak(device, dtype, size):
    """FLOP/s of the fastest square (size x size) product at `dtype`, after one warm-up product.

    The product is F.linear(x, w) = x @ w.T, the layout of every nn.Linear: on CPUs without bf16 instructions
    torch's fallback bf16 GEMM runs x @ w.T tens of times faster than x @ w, so a plain `a @ b` would understate
    the peak the model can reach."""
    generator = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(size, size, device=device, dtype=dtype, generator=generator)
    w = torch.randn(size, size, device=device, dtype=dtype, generator=generator)
    synchronize(device)
    start = time.perf_counter()
    torch.nn.functional.linear(x, w)
    synchronize(device)
    seconds = [time.perf_counter() - start]
    while sum(seconds) < MATMUL_PEAK_SECONDS or len(seconds) < MATMUL_PEAK_MIN_REPEATS:
        start = time.perf_counter()
        torch.nn.functional.linear(x, w)
        synchronize(device)
        seconds.append(time.perf_counter() - start)
    return 2 * size ** 3 / min(seconds[1:])


def count_step_flops(config, batch_size, input_length, target_length):
    """Matmul FLOPs of one forward+backward, counted on the meta device (no memory, no compute)."""
    with torch.device("meta"):
        model = building.new_t5_model(config)
        batch = {"input_ids": torch.zeros(batch_size, input_length, dtype=torch.long),
                 "decoder_input_ids": torch.zeros(batch_size, target_length, dtype=torch.long),
                 "labels": torch.zeros(batch_size, target_length, dtype=torch.long)}
    with FlopCounterMode(display=False) as counter:
        model(**batch).loss.backward()
    return counter.get_total_flops()


def make_windows(num_windows, tokens_length, vocab_size, seed):
    """Random token windows (the collator's input), from a fixed seed: token values do not change the cost."""
    ids = np.random.default_rng(seed).integers(0, vocab_size, size=(num_windows, tokens_length), dtype=np.int64)
    return [{"input_ids": row} for row in ids]


def make_collator(tokenizer, span_args, target_length, seed):
    return DataCollatorForT5SpanCorruption(
        tokenizer, noise_density=span_args.noise_density, mean_noise_span_length=span_args.mean_noise_span_length,
        input_length=span_args.input_length, target_length=target_length, seed=seed)


def make_training_args(args, output_dir, dtype_name):
    """T5TrainingArguments at their defaults except what this bench sets: batch, steps, precision, compile, optim."""
    extra = {}
    if "train_sampling_strategy" in T5TrainingArguments.__dataclass_fields__:  # absent from transformers 4.x
        extra["train_sampling_strategy"] = "sequential"  # the bare loop's batch order; same cost as random
    return T5TrainingArguments(
        output_dir=output_dir, per_device_train_batch_size=args.batch_size, max_steps=args.burn_in + args.steps,
        bf16=dtype_name == "bf16", fp16=dtype_name == "fp16", activation_dtype=args.activation_dtype
        if dtype_name == "bf16" else "float32",
        tf32=args.tf32 or None, torch_compile=args.compile,
        torch_compile_mode=args.compile_mode, optim=args.optim,
        use_cpu=args.device == "cpu", seed=args.seed, dataloader_num_workers=args.dataloader_num_workers,
        save_strategy="no", report_to="none", disable_tqdm=True, **extra)


def build_model(args, tokenizer, training_args):
    """The model pre_train_t5 trains, from the same seed each time so that both arms start equal."""
    set_seed(training_args.seed)
    model_args = ModelArguments(model_size=args.model_size, tokenizer_name_or_path=str(SHARED_DATA / "t5_spiece"),
                                attn_implementation=args.attn_implementation,
                                loss_chunk_tokens=args.loss_chunk_tokens, fused_rmsnorm=args.fused_rmsnorm)
    return building.build_model(model_args, tokenizer, args.device == "cpu", training_args.activation_dtype,
                                training_args.fp16)


def reads_clock(step, burn_in, last_step, timing):
    """Whether the clock is read (behind a device sync) at the end of `step` (1-based): at the end of burn-in and of
    the last step (`span`), or of every step from burn-in on (`steps`)."""
    return step == burn_in or step == last_step or (timing == "steps" and step > burn_in)


def step_seconds(times, steps):
    """Seconds of each timed step: the differences of per-step readings, or a span's mean repeated `steps` times."""
    spans = np.diff(times)
    return spans if len(spans) == steps else np.full(steps, spans.sum() / steps)


class StepClock(TrainerCallback):
    """Clock readings at on_step_end of step `burn_in` and of the later steps `timing` reads."""

    def __init__(self, burn_in, steps, timing, device):
        self.burn_in, self.last_step, self.timing = burn_in, burn_in + steps, timing
        self.device, self.times = device, []

    def on_step_end(self, args, state, control, **kwargs):
        if reads_clock(state.global_step, self.burn_in, self.last_step, self.timing):
            synchronize(self.device)
            self.times.append(time.perf_counter())


def time_trainer(args, tokenizer, windows, collator, dtype_name, profiler=None):
    """Seconds of each Trainer step after burn-in, and the mean training loss over all steps. A torch.profiler given
    here records the timed steps only."""
    with tempfile.TemporaryDirectory() as output_dir:
        training_args = make_training_args(args, output_dir, dtype_name)
        clock = StepClock(args.burn_in, args.steps, args.timing, args.device)
        callbacks = [clock] + ([ProfileTimedSteps(profiler, args.burn_in)] if profiler is not None else [])
        trainer = PretrainTrainer(model=build_model(args, tokenizer, training_args), args=training_args,
                                  train_dataset=windows, data_collator=collator, processing_class=tokenizer,
                                  callbacks=callbacks)
        trainer.remove_callback(PrinterCallback)  # its end-of-train metrics dict would interleave our lines
        result = trainer.train()
        del trainer
    return step_seconds(clock.times, args.steps), result.training_loss


def time_bare_loop(args, tokenizer, batches, dtype_name, profiler=None):
    """Seconds of each bare PyTorch step after burn-in, and the mean loss over all steps. A torch.profiler given
    here records the timed steps only (burn-in, where compilation happens, stays out of the table)."""
    with tempfile.TemporaryDirectory() as output_dir:
        training_args = make_training_args(args, output_dir, dtype_name)
    model = build_model(args, tokenizer, training_args).to(args.device)
    optimizer_cls, optimizer_kwargs = optimizer_classes.optimizer_cls_and_kwargs(training_args, model)
    optimizer = optimizer_cls(model.parameters(), **optimizer_kwargs)
    scheduler = get_scheduler(training_args.lr_scheduler_type, optimizer, training_args.get_warmup_steps(len(batches)),
                              len(batches))
    step_model = torch.compile(model, mode=args.compile_mode) if args.compile else model
    scaler = torch.amp.GradScaler(args.device, enabled=dtype_name == "fp16")  # as the Trainer's fp16 arm steps
    model.train()
    total_loss, times = torch.zeros((), device=args.device), []
    for step, batch in enumerate(batches):  # step steps are done: the clock reads as StepClock's at their end
        if reads_clock(step, args.burn_in, len(batches), args.timing):
            synchronize(args.device)
            times.append(time.perf_counter())
            if profiler is not None and step == args.burn_in:
                profiler.start()
        batch = {key: value.to(args.device, non_blocking=True) for key, value in batch.items()}
        with torch.autocast(args.device, dtype=DTYPES[dtype_name], enabled=dtype_name != "fp32"):
            loss = step_model(**batch).loss
        scaler.scale(loss).backward()
        if training_args.max_grad_norm > 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), training_args.max_grad_norm)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        total_loss += loss.detach()
    synchronize(args.device)
    times.append(time.perf_counter())
    if profiler is not None:
        profiler.stop()
    return step_seconds(times, args.steps), total_loss.item() / len(batches)


def free_memory(device):
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def format_flops(value):
    return f"{value / 1e12:.1f} TFLOP/s" if value >= 1e12 else f"{value / 1e9:.1f} GFLOP/s"


def run_arm(args, tokenizer, span_args, target_length, windows, dtype_name, peak, flops_per_step):
    """Both arms at one precision; prints the summary line. The peak measured before the arms is re-measured after
    them and the higher kept: a 2-second sample that another process slowed down would flatter the fraction."""
    tokens_per_step = args.batch_size * (args.input_length + target_length)  # encoder + decoder tokens
    batches_collator = make_collator(tokenizer, span_args, target_length, args.seed)
    batches = [batches_collator(windows[i:i + args.batch_size]) for i in range(0, len(windows), args.batch_size)]
    if args.device == "cuda":  # pinned, as Trainer's loader (dataloader_pin_memory) hands them: copies can overlap
        batches = [{key: value.pin_memory() for key, value in batch.items()} for batch in batches]
    bare_seconds, bare_loss = time_bare_loop(args, tokenizer, batches, dtype_name)
    free_memory(args.device)
    trainer_seconds, trainer_loss = time_trainer(
        args, tokenizer, windows, make_collator(tokenizer, span_args, target_length, args.seed), dtype_name)
    free_memory(args.device)
    peak = max(peak, measure_matmul_peak(args.device, DTYPES[dtype_name], MATMUL_PEAK_SIZE[args.device]))
    # The fastest timed step of each arm, as bench/collator.py does: other processes share a CPU machine's cores,
    # and a step they slowed down says nothing about either arm. Medians are printed too.
    trainer_tps, bare_tps = (tokens_per_step / min(seconds) for seconds in (trainer_seconds, bare_seconds))
    achieved = flops_per_step / min(trainer_seconds)
    line = (f"{args.model_size} {dtype_name} {args.device}: trainer {trainer_tps:,.0f} tok/s vs bare loop "
            f"{bare_tps:,.0f} tok/s -> {trainer_tps / bare_tps:.2f}x | {format_flops(achieved)} = "
            f"{100 * achieved / peak:.0f}% of {format_flops(peak)} matmul peak")
    chip = next((chip for chip in SPEC_BF16_TFLOPS if chip in device_name(args.device)), None)
    if args.device == "cuda" and chip and dtype_name == "bf16":
        line += f", {100 * achieved / (SPEC_BF16_TFLOPS[chip] * 1e12):.0f}% of {SPEC_BF16_TFLOPS[chip]:.0f} " \
                f"TFLOP/s {chip} spec"
    if args.timing == "steps":
        timing = (f"best of {args.steps} steps, median {np.median(trainer_seconds):.3g} vs "
                  f"{np.median(bare_seconds):.3g} s")
    else:
        timing = f"mean of {args.steps} steps timed as one span: {trainer_seconds[0]:.3g} vs {bare_seconds[0]:.3g} s"
    line += f" ({device_name(args.device)}) | {timing} | mean loss {trainer_loss:.4f} vs {bare_loss:.4f}"
    print(line, flush=True)
    if args.profile and args.profile_arm in ("bare", "both"):
        profile_arm(args, "bare loop", lambda profiler: time_bare_loop(args, tokenizer, batches, dtype_name, profiler),
                    dtype_name)
        free_memory(args.device)
    if args.profile and args.profile_arm in ("trainer", "both"):
        profile_arm(args, "trainer", lambda profiler: time_trainer(
            args, tokenizer, windows, make_collator(tokenizer, span_args, target_length, args.seed), dtype_name,
            profiler), dtype_name)
        free_memory(args.device)
    spec = SPEC_BF16_TFLOPS.get(chip) if args.device == "cuda" and dtype_name == "bf16" else None
    return {"dtype": dtype_name, "trainer_tokens_per_s": trainer_tps, "bare_tokens_per_s": bare_tps,
            "trainer_vs_bare": trainer_tps / bare_tps, "trainer_flops_per_s": achieved,
            "matmul_peak_flops_per_s": peak, "trainer_mfu_vs_spec": achieved / (spec * 1e12) if spec else None,
            "bare_mfu_vs_spec": flops_per_step / min(bare_seconds) / (spec * 1e12) if spec else None,
            "trainer_loss": trainer_loss, "bare_loss": bare_loss, "device_name": device_name(args.device)}


def main(argv=None):
    args = parse_args(argv)
    tokenizer_dir = SHARED_DATA / "t5_spiece"
    if not tokenizer_dir.is_dir():
        print(f"skipped: the collator needs the T5 tokenizer at {tokenizer_dir} (set T5_DATA_DIR to the folder "
              "holding t5_spiece/)")
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.tf32:  # process-wide, so the bare loop gets what Trainer's tf32=True sets
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    tokenizer = building.load_tokenizer(str(tokenizer_dir))
    span_args = SpanCorruptionArguments(input_length=args.input_length)
    tokens_length, target_length = compute_input_and_target_lengths(
        args.input_length, span_args.noise_density, span_args.mean_noise_span_length)
    windows = make_windows((args.burn_in + args.steps) * args.batch_size, tokens_length, len(tokenizer), args.seed)
    config = building.build_t5_config(args.model_size, tokenizer, dropout_rate=0.0)
    flops_per_step = count_step_flops(config, args.batch_size, args.input_length, target_length)
    print(f"{args.model_size}: batch {args.batch_size} x (input {args.input_length} + target {target_length}) "
          f"tokens, {flops_per_step / 1e12:.3f} TFLOP per step (FlopCounterMode, forward+backward), "
          f"burn-in {args.burn_in} + {args.steps} timed steps per arm | load average {os.getloadavg()[0]:.1f}",
          flush=True)

    dtype_names = ["fp32", "bf16"] if args.dtype == "both" else [args.dtype]
    size = MATMUL_PEAK_SIZE[args.device]
    peaks = {name: measure_matmul_peak(args.device, DTYPES[name], size) for name in dtype_names}
    print("matmul peak " + ", ".join(f"{name} {format_flops(peak)}" for name, peak in peaks.items())
          + f" ({size}^3, {device_name(args.device)})", flush=True)
    arms = []
    for dtype_name in dtype_names:
        if args.dtype == "both" and dtype_name == "bf16" and peaks["bf16"] < peaks["fp32"]:
            print(f"{args.model_size} bf16 {args.device}: skipped, bf16 matmuls run slower than fp32 here "
                  f"({format_flops(peaks['bf16'])} vs {format_flops(peaks['fp32'])}); --dtype bf16 runs it anyway")
            continue
        arms.append(run_arm(args, tokenizer, span_args, target_length, windows, dtype_name, peaks[dtype_name],
                            flops_per_step))
    if args.json_out:
        settings = {name: getattr(args, name) for name in SETTINGS}
        Path(args.json_out).write_text(json.dumps({**settings, "target_length": target_length,
                                                   "flops_per_step": flops_per_step, "arms": arms}, indent=2))


if __name__ == "__main__":
    main()
