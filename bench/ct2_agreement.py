"""Does a quantized CTranslate2 export, bf16 or fp16 give a fine-tuned model's labels? predict_t5.py on a GLUE dev set
with the torch backend (fp32; bf16 weights where the hardware computes bf16, predict_t5.py's default there; fp16
weights with --fp16, the GPUs without bf16) and the ctranslate2 backend (float32, int8), generation and rank scoring:
agreement and accuracy.

    .venv/bin/python bench/ct2_agreement.py --model_name_or_path runs/bench_quality/finetune/sst2_pretrained_seed1
    .venv/bin/python bench/ct2_agreement.py --model_name_or_path RUN --task rte --compute_types float32,int8
    .venv/bin/python bench/ct2_agreement.py --model_name_or_path RUN --fp16 --compute_types ""   # torch fp16 only

Every arm runs predict_t5.py as a command, as a user would, on the whole dev file; the torch fp32 arm is the
reference. A fine-tuned model is the point: a random model's logits are rarely near a decision between label words,
and its generations are not labels. `make bench-quality` (or `python bench/quality.py --quick --task_adaptive`)
leaves fine-tuned SST-2 models under its work folder's finetune/ (each run folder keeps its final model).
"""
import argparse
import json
import subprocess
import sys
import tempfile

import torch

from bench.paths import ROOT, SHARED_DATA
from bench.predict import has_bf16
from t5kit.data import predict_inputs
from t5kit.data.task_format import find_task
from t5kit.data.task_sources import label_id


def predict(model, task, input_file, output_file, backend, compute_type, label_scoring, max_examples):
    """Runs predict_t5.py once; returns its predictions in input order. compute_type: CTranslate2's, or for the torch
    backend fp32, bf16 or fp16."""
    argv = ["--model_name_or_path", str(model), "--task", task, "--input_file", str(input_file), "--output_file",
            str(output_file), "--label_scoring", label_scoring, "--backend", backend, "--disable_tqdm", "true",
            "--max_predict_samples", str(max_examples)]
    if backend == "torch":
        argv += ["--bf16", str(compute_type == "bf16").lower(), "--fp16", str(compute_type == "fp16").lower()]
    else:
        argv += ["--compute_type", compute_type]
    result = run_predict_t5(argv)
    if result.returncode != 0:
        sys.exit(f"predict_t5.py {' '.join(argv)} failed:\n{result.stderr[-2000:]}")
    with open(output_file, encoding="utf-8") as rows:
        return [json.loads(line)["prediction"] for line in rows]


def run_predict_t5(argv):
    """`python predict_t5.py ARGV` from the repository root (tests start the same script in a forked process)."""
    return subprocess.run([sys.executable, "predict_t5.py", *argv], cwd=ROOT, capture_output=True, text=True)


def gold_labels(task_vals, input_file, max_examples):
    """The dev file's first max_examples label words, read as predict_t5.py reads the file (an official file with
    the task's own column names: CoLA's has no header) and mapped as the task's files map labels."""
    rows, _ = predict_inputs.read_rows(input_file, task_vals)
    column = task_vals["label_column_name"]
    return [task_vals["labels"][label_id(task_vals, row[column])] for _, row in rows[:max_examples]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_name_or_path", required=True, help="a fine-tuned run folder (or its model)")
    parser.add_argument("--task", default="glue/sst2", help="a GLUE task whose dev file ../shared/data holds")
    parser.add_argument("--compute_types", default="float32,int8", help="CTranslate2 compute types, one arm each")
    parser.add_argument("--label_scorings", default="generate,rank", help="predict_t5.py --label_scoring values")
    parser.add_argument("--max_examples", type=int, default=100_000, help="the first N examples of the dev file")
    parser.add_argument("--fp16", action="store_true", help="a torch fp16 arm too (predict_t5.py --fp16)")
    args = parser.parse_args(argv)
    task_vals = find_task(args.task)
    input_file = SHARED_DATA / "glue" / task_vals["data_dir_name"] / task_vals["data_files"]["validation"]
    gold = gold_labels(task_vals, input_file, args.max_examples)
    print(f"{args.task} dev ({len(gold)} examples), model {args.model_name_or_path}")
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for scoring in args.label_scorings.split(","):
            reference = predict(args.model_name_or_path, args.task, input_file, f"{folder}/{scoring}_torch.jsonl",
                                "torch", "fp32", scoring, args.max_examples)
            line = f"{scoring}: torch fp32 accuracy {accuracy(reference, gold):.1%}"
            if has_bf16("cuda" if torch.cuda.is_available() else "cpu"):  # where predict_t5.py defaults to bf16
                predictions = predict(args.model_name_or_path, args.task, input_file,
                                      f"{folder}/{scoring}_torch_bf16.jsonl", "torch", "bf16", scoring,
                                      args.max_examples)
                line += (f" | torch bf16: agrees with torch fp32 on {accuracy(predictions, reference):.1%}"
                         f", accuracy {accuracy(predictions, gold):.1%}")
            if args.fp16:
                predictions = predict(args.model_name_or_path, args.task, input_file,
                                      f"{folder}/{scoring}_torch_fp16.jsonl", "torch", "fp16", scoring,
                                      args.max_examples)
                line += (f" | torch fp16: agrees with torch fp32 on {accuracy(predictions, reference):.1%}"
                         f", accuracy {accuracy(predictions, gold):.1%}")
            for compute_type in filter(None, args.compute_types.split(",")):
                predictions = predict(args.model_name_or_path, args.task, input_file,
                                      f"{folder}/{scoring}_ct2_{compute_type}.jsonl", "ctranslate2", compute_type,
                                      scoring, args.max_examples)
                line += (f" | ct2 {compute_type}: agrees with torch fp32 on {accuracy(predictions, reference):.1%}"
                         f", accuracy {accuracy(predictions, gold):.1%}")
            print(line, flush=True)
            results[scoring] = line
    return results


def accuracy(predictions, references) -> float:
    return sum(p == r for p, r in zip(predictions, references)) / len(references)


if __name__ == "__main__":
    main()
