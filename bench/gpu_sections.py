"""The GPU check's sections (bench/gpu_check.py runs them in its SECTIONS' order): each takes the Check (its
arguments, output folder and budgeted command runner) and returns its figures, or raises SectionSkipped with the
reason it cannot run here. Each runs the project's scripts and benches as commands, as a user runs them."""
import functools
import json
import sys
from pathlib import Path

from bench.paths import SHARED_DATA
from t5kit.config.checks import cpu_has_native_bf16

# bf16 vs fp32 over the last 50 logged steps: mean absolute difference of the training loss. Rounding noise moves a
# small model's loss by a few hundredths; a broken bf16 path (overflow, a lost scale) moves it by tenths or more.
LOSS_TOLERANCE = 0.1
TEXT_FILES = ("austen-emma.txt", "melville-moby_dick.txt", "shakespeare-hamlet.txt")


class SectionSkipped(Exception):
    """A section that cannot run here (a flag or a package this tree lacks): a note, not a failure."""


def environment(check):
    import torch
    import transformers

    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    for package in ("accelerate", "deepspeed", "ctranslate2"):
        try:
            versions[package] = __import__(package).__version__
        except Exception:  # absent or broken: recorded as such
            versions[package] = None
    cuda = check.args.device == "cuda" and torch.cuda.is_available()
    if check.args.device == "cuda" and not cuda:
        raise RuntimeError("--device cuda but torch sees no GPU")
    return {"device": torch.cuda.get_device_name() if cuda else "cpu", "versions": versions,
            "bf16": torch.cuda.is_bf16_supported() if cuda else None, "python": sys.version.split()[0]}


def throughput_argv(check, batch_size=None, dtype="bf16"):
    """bench/pretrain_throughput.py on the check's model and shape (t5-v1_1-base, `dtype`, input 512; --tiny:
    t5-tiny, fp32, 64): the start of the throughput and profile sections' commands."""
    tiny = check.args.tiny
    return [sys.executable, "bench/pretrain_throughput.py", "--device", check.args.device,
            "--model_size", "t5-tiny" if tiny else "t5-v1_1-base", "--dtype", "fp32" if tiny else dtype,
            "--batch_size", 2 if tiny else (batch_size or check.args.batch_size),
            "--input_length", 64 if tiny else 512]


def throughput(compile_, attention, workers=0, batch_size=None, activation_dtype="float32", dtype="bf16",
               loss_chunk_tokens=0, fused_rmsnorm=False):
    """bench/pretrain_throughput.py's two arms; workers: the Trainer's --dataloader_num_workers (0, pre_train_t5's
    default, collates each batch inside the timed step; the bare loop collates up front either way); batch_size:
    other than --batch_size (128: the nanoT5-budget recipes' per-device batch, whose step their hours project);
    activation_dtype: bfloat16 runs the residual stream in bf16 (--activation_dtype), in both arms; dtype: fp16 runs
    both arms in fp16 autocast with loss scaling (--fp16, GPUs without bf16); loss_chunk_tokens, fused_rmsnorm: the
    chunked loss and the fused norm (--loss_chunk_tokens, --fused_rmsnorm), in both arms."""
    def section(check):
        tiny = check.args.tiny
        if tiny and compile_:
            raise SectionSkipped("--tiny: torch.compile takes minutes on a CPU; the eager arms run the same script")
        if tiny and attention == "t5_flex":
            raise SectionSkipped("--tiny: on a CPU t5_flex runs SDPA, the sdpa arm's kernels")
        name = (f"throughput_{'compiled' if compile_ else 'eager'}_{attention}{f'_workers{workers}' if workers else ''}"
                f"{f'_batch{batch_size}' if batch_size else ''}"
                f"{'_bf16_activations' if activation_dtype == 'bfloat16' else ''}{'_fp16' if dtype == 'fp16' else ''}"
                f"{'_loss_chunks' if loss_chunk_tokens else ''}{'_fused_rmsnorm' if fused_rmsnorm else ''}")
        json_out = check.out / "logs" / f"{name}.json"
        argv = [*throughput_argv(check, batch_size, dtype), "--burn_in", 1 if tiny else 3, "--steps", 2 if tiny else 10,
                "--attn_implementation", attention, "--json_out", json_out, "--dataloader_num_workers", workers,
                "--activation_dtype", activation_dtype, "--loss_chunk_tokens", loss_chunk_tokens,
                *(["--fused_rmsnorm"] if fused_rmsnorm else []), *(["--compile"] if compile_ else [])]
        check.command(json_out.stem, argv)
        return json.loads(json_out.read_text())
    return section


def trainer_profile(check):
    """Where the fastest arm's step goes: compiled t5_flex, the Trainer's batches from 2 loader workers (the first H100
    run profiled compiled sdpa, where SDPA's memory-efficient kernel for the biased self-attentions took 28 %)."""
    tiny = check.args.tiny
    argv = [*throughput_argv(check), "--burn_in", 1, "--steps", 1 if tiny else 5, "--profile", 25,
            "--profile_arm", "both",
            *([] if tiny else ["--compile", "--attn_implementation", "t5_flex", "--dataloader_num_workers", 2])]
    text = check.command("trainer_profile", argv)
    tables = text.split("profile, ")[1:]  # the bare loop's table, then the Trainer's
    figures = {arm: [line for line in table.splitlines() if "%" in line and not line.startswith("device time")][:25]
               for arm, table in zip(("bare_loop", "trainer"), tables)}
    # on a GPU, step_profile's sum of the kernels' time by what they compute (matmul, attention, norms, ...)
    for arm, table in zip(("bare_loop", "trainer"), tables):
        figures[f"{arm}_by_kind"] = next((line for line in table.splitlines() if line.startswith("device time")), None)
    return figures


def attention_bias(check):
    """bench/attention_bias.py: one t5-base encoder self-attention with its learned bias, forward + backward, SDPA's
    memory-efficient kernel against FlexAttention and its variants (bias copies per batch group, no bias gradient,
    flash without a bias): what the step's largest cost after the matmuls (FlexAttention, 20 %) could lose. On a CPU
    the script only says it needs a GPU, which the dry run records."""
    text = check.command("attention_bias", [sys.executable, "bench/attention_bias.py"])
    return {"lines": [line for line in text.splitlines()
                      if line.startswith(("batch ", "SDPA", "FlexAttention", "skipped"))]}


def pretrain_command(check, output_dir, steps, extra):
    tiny = check.args.tiny
    # --tiny: Hamlet alone (180 KB): tokenizing all three books costs each of the dry run's runs ~10 s
    files = [str(SHARED_DATA / "gutenberg" / name) for name in (TEXT_FILES[2:] if tiny else TEXT_FILES)]
    return [sys.executable, "pre_train_t5.py", "--output_dir", output_dir, "--overwrite_output_dir", "true",
            "--model_size", "t5-tiny" if tiny else "t5-mini", "--tokenizer_name_or_path", SHARED_DATA / "t5_spiece",
            "--train_files", *files, "--validation_split_percentage", 1, "--input_length", 64 if tiny else 128,
            "--per_device_train_batch_size", 4 if tiny else 32, "--max_steps", steps, "--logging_steps", 1,
            "--learning_rate", 3e-3, "--warmup_steps", 10, "--eval_strategy", "no", "--save_strategy", "no",
            "--report_to", "none", "--seed", 42, *(["--use_cpu", "true"] if check.args.device == "cpu" else []),
            *extra]


def logged_losses(output_dir):
    """The training loss at every logged step (trainer_state.json's log history, in the final model folder)."""
    state = json.loads((Path(output_dir) / "trainer_state.json").read_text())
    return [entry["loss"] for entry in state["log_history"] if "loss" in entry]


def has_flag(check, script, flag):
    return flag in help_text(check, script)


@functools.cache
def help_text(check, script):
    """A script's --help, read once a check (logs/help_SCRIPT.log): each reading starts an interpreter and imports
    transformers."""
    return check.command(f"help_{Path(script).stem}", [sys.executable, script, "--help"])


def bf16_correctness(check):
    steps = 20 if check.args.tiny else 200
    # "--bf16 false" spelled out: on a GPU that computes bf16, pre_train_t5 turns bf16 on by default (the first H100
    # run of this check compared bf16 with itself for want of it)
    arms = {"fp32": ["--bf16", "false"], "bf16": ["--bf16", "true"]}
    if has_flag(check, "pre_train_t5.py", "--z_loss"):
        arms["bf16_z_loss"] = ["--bf16", "true", "--z_loss", "1e-4"]
    if has_flag(check, "pre_train_t5.py", "--activation_dtype"):  # T5X's bf16 residual stream
        arms["bf16_activations"] = ["--bf16", "true", "--activation_dtype", "bfloat16"]
    if check.args.device == "cpu" and not cpu_has_native_bf16():
        arms = {"fp32": arms["fp32"]}  # emulated bf16 runs ~40x slower on such a CPU: nothing to learn from it
    curves, precisions = {}, {}
    for name, extra in arms.items():
        folder = check.out / "runs" / f"bf16_{name}"
        check.command(f"bf16_{name}", pretrain_command(check, folder, steps, extra))
        precisions[name] = ran_bf16(folder)
        if precisions[name] != (name != "fp32"):
            raise RuntimeError(f"the {name} arm ran with bf16={precisions[name]} ({folder}/config.yaml)")
        curves[name] = logged_losses(folder)
    figures = {"steps": steps, "tolerance": LOSS_TOLERANCE, "arms": {}}
    for name, losses in curves.items():
        finite = all(value == value and abs(value) != float("inf") for value in losses)
        gap = mean_gap(losses, curves["fp32"])
        figures["arms"][name] = {"final_loss": losses[-1], "all_finite": finite, "mean_gap_to_fp32_last_50": gap,
                                 "within_tolerance": gap <= LOSS_TOLERANCE, "bf16": precisions[name]}
    return figures


def fp16_correctness(check):
    """--fp16 against fp32 (model/precision.py's fp32 feed-forward outputs, the loss scaler): t5-v1_1-small, the
    gated v1.1 feed-forward whose outputs overflow fp16 unprotected, 200 steps (--tiny: t5-tiny, 20); every loss
    finite and the curve within LOSS_TOLERANCE of fp32's."""
    steps = 20 if check.args.tiny else 200
    model = ["--model_size", "t5-tiny" if check.args.tiny else "t5-v1_1-small"]
    curves, finite = {}, {}
    for name, extra in (("fp32", ["--bf16", "false"]), ("fp16", ["--bf16", "false", "--fp16", "true"])):
        folder = check.out / "runs" / f"fp16_{name}"
        check.command(f"fp16_{name}", pretrain_command(check, folder, steps, [*model, *extra]))
        curves[name] = logged_losses(folder)
        finite[name] = all(value == value and abs(value) != float("inf") for value in curves[name])
    gap = mean_gap(curves["fp16"], curves["fp32"])
    return {"steps": steps, "tolerance": LOSS_TOLERANCE, "all_finite": finite["fp16"],
            "final_loss": {name: curve[-1] for name, curve in curves.items()}, "mean_gap_to_fp32_last_50": gap,
            "within_tolerance": gap <= LOSS_TOLERANCE}


def ran_bf16(output_dir):
    """Whether the run in output_dir trained in bf16, as its config.yaml records the resolved flags."""
    import yaml

    return bool(yaml.safe_load((Path(output_dir) / "config.yaml").read_text())["bf16"])


def mean_gap(losses, reference, last=50):
    pairs = list(zip(losses, reference))[-last:]
    return sum(abs(a - b) for a, b in pairs) / len(pairs)


def ul2_packing(check):
    """bench/packing.py's UL2 row: padded vs --packing true (rows of --input_length, windows a tenth of it), the
    padding shares and real (non-padding) tokens/s as each run reports them. On a GPU: t5-v1_1-base with t5_flex (whose
    FlexAttention block mask skips what packed rows' segments hide, the GPU's counterpart of the CPU's bands) and
    batches collated by 2 loader workers; the first H100 run used t5-mini, whose steps the host paced (60-80 ms for
    what the GPU computes in a few), so it measured the host: 1.05x."""
    if not has_flag(check, "pre_train_t5.py", "--packing"):
        raise SectionSkipped("pre_train_t5.py has no --packing flag in this tree")
    from bench.packing import read_run

    figures = {}
    gpu_scale = [] if check.args.device == "cpu" else [
        "--model_size", "t5-v1_1-base", "--attn_implementation", "t5_flex", "--dataloader_num_workers", 2]
    for packing in ("false", "true"):
        folder = check.out / "runs" / f"ul2_packing_{packing}"
        check.command(f"ul2_packing_{packing}", pretrain_command(
            check, folder, 6 if check.args.tiny else 30,
            ["--objective", "ul2", "--packing", packing, "--input_length", 64 if check.args.tiny else 512, *gpu_scale]))
        encoder, decoder, seconds, real, examples = read_run(Path(folder), warmup_steps=2)
        figures[f"packing_{packing}"] = {"encoder_padding": encoder, "decoder_padding": decoder,
                                         "examples_per_step": examples, "real_tokens_per_s": real / seconds}
    figures["packed_over_padded"] = (figures["packing_true"]["real_tokens_per_s"]
                                     / figures["packing_false"]["real_tokens_per_s"])
    return figures


def packed_equivalence(check):
    """bench/packed_equivalence.py: packed rows against their examples unpacked, eager, sdpa and t5_flex (whose packed
    rows' attentions run FlexAttention with a segment block mask only on a GPU)."""
    if check.args.tiny:
        raise SectionSkipped("--tiny: tests/bench/test_packed_equivalence.py runs it on CPU, where t5_flex is SDPA")
    text = check.command("packed_equivalence", [sys.executable, "bench/packed_equivalence.py", "--device",
                                                check.args.device])
    return json.loads(next(line for line in reversed(text.splitlines()) if line.startswith("{")))


def zero2(check):
    folder = check.out / "runs" / "zero2"
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 1,
            *pretrain_command(check, folder, 5, ["--deepspeed", "zero_stage2_config.json"])[1:]]
    check.command("zero2", argv)
    return {"losses": logged_losses(folder)}


def fsdp(check):
    folder = check.out / "runs" / "fsdp"
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", 1,
              *(["--cpu"] if check.args.device == "cpu" else []), "--config_file", "configs/accelerate/fsdp.yaml"]
    check.command("fsdp", [*launch, *pretrain_command(check, folder, 5, [])[1:]])
    return {"losses": logged_losses(folder)}


def ctranslate2_runs(device):
    """Whether CTranslate2 imports and can compute on `device`. Its wheels link CUDA 12: on a CUDA 13 image (the
    H100's) a copy that is installed may fail to load its libraries or see no GPU."""
    try:
        import ctranslate2
        return device == "cpu" or ctranslate2.get_cuda_device_count() > 0
    except Exception:  # absent, or its libraries fail to load
        return False


def inference(check):
    # without CTranslate2 (ctranslate2_runs) the torch arms still count
    has_ctranslate2 = ctranslate2_runs(check.args.device)
    # The compiled arms (predict_t5.py --compile) compile each shape bucket once, off the clock: fewer examples than
    # the eager arms alone would need keep their shapes few.
    argv = [sys.executable, "bench/predict.py", "--device", check.args.device,
            "--model_size", "t5-tiny" if check.args.tiny else "t5-small", "--tasks", "sst2",
            "--max_examples", 32 if check.args.tiny else 256, "--repeats", 1 if check.args.tiny else 3,
            "--translation_examples", 16 if check.args.tiny else 64,
            "--translation_new_tokens", 8 if check.args.tiny else 64,
            # --tiny: dynamo traces the compiled arms' graphs without Inductor's kernels (minutes on a CPU), which
            # tests/model/test_compiled_generation.py compiles
            *(["--compile_backend", "eager"] if check.args.tiny else []),
            *([] if has_ctranslate2 else ["--no_ctranslate2"])]
    text = check.command("inference", argv)
    return {"ctranslate2": "arms run" if has_ctranslate2 else "left out: absent, or it cannot use the device",
            "lines": [line for line in text.splitlines() if "x" in line and ("/s" in line or "examples" in line)]}


def quality(check):
    """Quality at GPU scale in about 4 minutes: the CPU recipe (bench/quality.py: the books, WikiText-2 and the tasks'
    training inputs; word-vector embeddings, then span corruption) at t5-small, input 128, batch 128, bf16,
    compiled, 2,000 steps (about 150 s of the H100's measured throughput, 33 M tokens), then SST-2, MRPC and RTE
    fine-tuned from the three starts of one shape (pre-trained, word vectors alone, random init), one seed, the 9
    runs at once. The data travels with the tree: $T5_DATA_DIR (bench/gpu_check.sh)."""
    if check.args.tiny:
        raise SectionSkipped("--tiny: bench/quality.py's arms need minutes even at GPU speed")
    argv = [sys.executable, "bench/quality.py", "--work_dir", check.out / "runs" / "quality", "--task_adaptive",
            "--tasks", "sst2", "mrpc", "rte", "--seeds", 1, "--parallel", 9,
            "--curve_steps",  # no curve: its checkpoints would add fine-tuning runs
            "--pretrain_overrides",
            "--model_size t5-small --input_length 128 --max_steps 2000 --per_device_train_batch_size 128 "
            "--warmup_steps 200 --eval_steps 1000 --save_steps 1000 --bf16 true --torch_compile true --use_cpu false",
            "--finetune_overrides", "--bf16 true --use_cpu false"]
    return {"lines": check.command("quality", argv).strip().splitlines()[-12:]}
