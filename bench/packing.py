"""--packing true vs padded rows: the padding share of input and target slots and the real (non-padding) tokens
trained on per second, for UL2, prefix-LM and a temperature mixture of GLUE tasks.

    .venv/bin/python bench/packing.py                                    # t5-small, input 512, 2 CPU cores: ~10 min
    .venv/bin/python bench/packing.py --rows ul2 --steps 20 --batch_size 16

Each arm runs the entry script as a command, as a user would (random init, fp32, --logging_steps 1), on the same
data, from the same seed, for --steps optimizer steps, and the figures are read from what the run reports:
- padding: the run's own `encoder_padding` / `decoder_padding` (metrics.json's `data`: the share of the input and
  target slots of its training batches that hold padding);
- seconds a step: each log line's `tokens_per_second` against config.yaml's `tokens_per_optimizer_step` (the clock of
  callbacks.ThroughputCallback), the median over the steps after the first --warmup_steps (allocation, first-touch);
- real tokens a step: rows x (input slots x (1 - encoder padding) + target slots x (1 - decoder padding)) where the
  rows have fixed shapes (pre-training, and packed fine-tuning); unpacked fine-tuning pads each batch to its own
  longest row, so its real tokens a step are config.yaml's tokens_per_optimizer_step (the training set's mean
  tokens per example x the batch).
Rows:
- ul2: pre_train_t5.py --objective ul2 (UL2's default mixture), --input_length 512, WikiText-2 test text;
- prefix_lm: the same with --objective prefix_lm;
- glue_mix: fine_tune_t5.py on SST-2 + RTE + CoLA mixed at temperature 2, --max_source_length 512; the padded arms
  are random batches (what a mixture trains on when its batches must be draws from the mixture) and length buckets
  (our default: batches of one length, mostly of one task).
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from bench.paths import ROOT, SHARED_DATA

ROWS = ("ul2", "prefix_lm", "glue_mix")
GLUE_MIX = "glue/sst2,glue/rte,glue/cola"  # ../shared/data/glue holds each task's folder


def common_flags(args, out):
    return ["--output_dir", str(out), "--tokenizer_name_or_path", str(SHARED_DATA / "t5_spiece"), "--model_size",
            args.model_size, "--per_device_train_batch_size", str(args.batch_size), "--max_steps", str(args.steps),
            "--logging_steps", "1", "--save_strategy", "no", "--use_cpu", "true", "--bf16", "false",
            "--report_to", "none", "--disable_tqdm", "true", "--seed", "1", "--learning_rate", "1e-3"]


def pretrain_command(args, out, objective, packing):
    return [sys.executable, "pre_train_t5.py", *common_flags(args, out), "--objective", objective,
            "--train_files", str(SHARED_DATA / "wikitext-2-raw" / "wiki.test.raw"),
            "--validation_files", str(SHARED_DATA / "gutenberg" / "blake-poems.txt"), "--max_eval_samples", "8",
            "--eval_strategy", "no", "--input_length", str(args.input_length), "--packing", str(packing).lower()]


def finetune_command(args, out, sampling):
    command = [sys.executable, "fine_tune_t5.py", *common_flags(args, out), "--tasks", GLUE_MIX,
               "--data_dir", str(SHARED_DATA / "glue"),
               "--mixture_temperature", "2", "--max_source_length", str(args.input_length), "--do_eval", "false",
               "--eval_strategy", "no", "--do_predict", "false"]
    if sampling == "packed":
        return command + ["--packing", "true"]
    return command + ["--train_sampling_strategy", sampling]


def arms(args, row, work):
    """{arm name: command} of one row."""
    if row == "glue_mix":
        return {name: finetune_command(args, work / f"{row}_{name}", sampling) for name, sampling in
                (("padded, random batches", "random"), ("padded, length buckets", "length_buckets"),
                 ("packed", "packed"))}
    return {"padded": pretrain_command(args, work / f"{row}_padded", row, False),
            "packed": pretrain_command(args, work / f"{row}_packed", row, True)}


def read_run(out, warmup_steps):
    """(encoder padding, decoder padding, seconds a step, real tokens a step, examples a step) of a finished run."""
    metrics = json.loads((out / "metrics.json").read_text())
    derived = yaml.safe_load((out / "config.yaml").read_text())["derived"]
    lines = [entry for entry in metrics["log_history"] if "tokens_per_second" in entry]
    seconds = statistics.median(derived["tokens_per_optimizer_step"] / entry["tokens_per_second"]
                                for entry in lines[warmup_steps:])
    data = metrics["data"].get("train_batches", metrics["data"])
    encoder, decoder = data["encoder_padding"], data["decoder_padding"]
    if "target_length" in derived:  # fixed row shapes
        real = derived["global_batch_size"] * (derived["input_length"] * (1 - encoder)
                                               + derived["target_length"] * (1 - decoder))
    else:
        real = derived["tokens_per_optimizer_step"]
    examples = data.get("examples_per_step", derived["global_batch_size"])
    return encoder, decoder, seconds, real, examples


def run_arm(command, out, log):
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    log.write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed (log: {log}):\n{result.stderr[-3000:]}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}")
    parser.add_argument("--model_size", default="t5-small", help="size preset (constants.MODEL_SIZE_PRESETS)")
    parser.add_argument("--input_length", type=int, default=512, help="input slots of a row (fine-tuning: "
                        "--max_source_length)")
    parser.add_argument("--batch_size", type=int, default=8, help="rows a step (per device)")
    parser.add_argument("--steps", type=int, default=12, help="optimizer steps an arm")
    parser.add_argument("--warmup_steps", type=int, default=2, help="first steps left out of the step time")
    parser.add_argument("--work_dir", default=None, help="keep the runs here (default: a temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(args.work_dir or scratch)
        work.mkdir(parents=True, exist_ok=True)
        print(f"{args.model_size}, input {args.input_length}, {args.batch_size} rows a step, {args.steps} steps an "
              f"arm (median step time after {args.warmup_steps}), fp32, CPU", flush=True)
        results = {}
        for row in args.rows.split(","):
            results[row] = {}
            for name, command in arms(args, row, work).items():
                out = Path(command[command.index("--output_dir") + 1])
                run_arm(command, out, work / f"{out.name}.log")
                results[row][name] = read_run(out, args.warmup_steps)
            print(row_line(row, results[row]), flush=True)
        (work / "packing.json").write_text(json.dumps(results, indent=1))
    return results


def row_line(row, arms_figures) -> str:
    """One line: each arm's padding, real tokens/s and examples a step, and packed against each padded arm."""
    rate = {name: real / seconds for name, (_, _, seconds, real, _) in arms_figures.items()}
    parts = [f"{name}: padding {encoder:.1%} inputs / {decoder:.1%} targets, {rate[name]:,.0f} real tokens/s, "
             f"{examples:.1f} examples a step" for name, (encoder, decoder, _, _, examples) in arms_figures.items()]
    gains = ", ".join(f"{rate['packed'] / rate[name]:.2f}x {name}" for name in rate if name != "packed")
    return f"{row}: " + " | ".join(parts) + f" -> packed {gains}"


if __name__ == "__main__":
    main()
