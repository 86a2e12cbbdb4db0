"""Which parts of a pre-trained T5 help fine-tuning, and which hurt? SST-2 dev accuracy fine-tuned from the whole
model, from parts of it (the rest a random init of the same shape), and from random init; plus a linear probe.

    python bench/transfer_parts.py --model runs/bench_quality/pretrain --seeds 1 2 3
    python bench/transfer_parts.py --model runs/bench_quality/pretrain --seeds 1 --parts whole none --no_probe

Why: when a pre-trained model fine-tunes worse than random init (docs/quality-diagnostics.md), this says where the
harm is.
1. Models: for each of --parts, a model folder in --work_dir/models whose tensors come from --model where the part
   says so and from one random init (seed 0) elsewhere; tokenizer copied from --model.
2. Linear probe (seconds): logistic regression on the mean-pooled token embeddings, and on the mean-pooled encoder
   outputs, of 6,000 SST-2 training sentences; dev accuracy, the pre-trained model against random init.
3. Fine-tuning: bench/quality.py's fine-tuning (--finetune_config, fine_tune_t5.py as a command) per part and seed.
4. Report: per part, mean +- sample std over seeds; transfer.json in --work_dir.
"""
import argparse
import csv
import json
import shlex

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from transformers import T5ForConditionalGeneration

from bench.paths import ROOT, SHARED_DATA
from bench.quality import finetune, mean_std
from t5kit.data.task_format import format_input, get_task_vals
from t5kit.data.task_sources import read_delimited
from t5kit.model.building import load_tokenizer, new_t5_model

EMBEDDINGS = ("shared.", "encoder.embed_tokens.", "decoder.embed_tokens.", "lm_head.")
# part -> the state-dict prefixes taken from the pre-trained model (the rest: random init)
PARTS = {"whole": ("",), "embeddings": EMBEDDINGS, "encoder": (*EMBEDDINGS, "encoder."),
         "decoder": (*EMBEDDINGS, "decoder."), "none": ()}
PROBE_TRAIN_ROWS = 6000


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="A pre-trained model folder (model and tokenizer).")
    parser.add_argument("--work_dir", default="runs/bench_transfer_parts", help="Everything the run writes goes here.")
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=list(PARTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--finetune_config", default="configs/finetune_cpu.yaml")
    parser.add_argument("--finetune_overrides", type=shlex.split, default=[],
                        help="Extra fine_tune_t5.py flags, one string: --finetune_overrides='--max_steps 300'.")
    parser.add_argument("--no_probe", action="store_true", help="Skip the linear probe.")
    parser.add_argument("--reuse", action="store_true", help="Keep finished fine-tunes in --work_dir.")
    return parser.parse_args(argv)


def mixed_state_dict(pretrained, fresh, part) -> dict:
    """The pre-trained tensor where its name starts with one of the part's prefixes, the fresh one elsewhere."""
    prefixes = PARTS[part]
    return {name: (tensor if prefixes and name.startswith(prefixes) else fresh[name])
            for name, tensor in pretrained.items()}


def write_part_models(source, models_dir, parts):
    """models_dir/PART for each part: the model mixed from `source` and one random init (seed 0), and the tokenizer."""
    source_model = T5ForConditionalGeneration.from_pretrained(source)
    pretrained, tokenizer = source_model.state_dict(), load_tokenizer(str(source))
    torch.manual_seed(0)
    model = new_t5_model(source_model.config)
    fresh = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    for part in parts:
        model.load_state_dict(mixed_state_dict(pretrained, fresh, part))  # every tensor: nothing left from before
        model.save_pretrained(models_dir / part)
        tokenizer.save_pretrained(models_dir / part)


def sst2_rows(name, limit=None):
    """SST-2 inputs in T5's format ("sst2 sentence: ...") and labels, from the GLUE TSV in ../shared/data."""
    rows, _ = read_delimited(SHARED_DATA / "glue" / "SST-2" / name, "\t", csv.QUOTE_NONE)
    rows = [row for _, row in rows][:limit]
    task_vals = get_task_vals("glue", "sst2")
    return [format_input(task_vals, row) for row in rows], [int(row["label"]) for row in rows]


def pooled_features(model, tokenizer, texts, where):
    """Mean over each sentence's tokens of the embeddings (where='embeddings') or the encoder outputs."""
    batches = []
    with torch.no_grad():
        for start in range(0, len(texts), 256):
            batch = tokenizer(texts[start:start + 256], return_tensors="pt", padding=True, truncation=True,
                              max_length=128)
            hidden = (model.shared(batch["input_ids"]) if where == "embeddings"
                      else model.encoder(**batch).last_hidden_state)
            mask = batch["attention_mask"].unsqueeze(-1).float()
            batches.append(((hidden * mask).sum(1) / mask.sum(1)).numpy())
    return np.concatenate(batches)


def linear_probe(work) -> dict:
    """Dev accuracy (%) of logistic regression on pooled features: {(model, where): accuracy}."""
    train_x, train_y = sst2_rows("train.tsv", PROBE_TRAIN_ROWS)
    dev_x, dev_y = sst2_rows("dev.tsv")
    results = {}
    for name, part in (("pre-trained", "whole"), ("random init", "none")):
        folder = work / "models" / part
        model, tokenizer = T5ForConditionalGeneration.from_pretrained(folder).eval(), load_tokenizer(str(folder))
        for where in ("embeddings", "encoder"):
            features = pooled_features(model, tokenizer, train_x, where)
            scaler = StandardScaler().fit(features)
            classifier = LogisticRegression(max_iter=2000).fit(scaler.transform(features), train_y)
            dev = scaler.transform(pooled_features(model, tokenizer, dev_x, where))
            results[f"{name}, {where}"] = 100 * classifier.score(dev, dev_y)
    return results


def main(argv=None):
    args = parse_args(argv)
    work = (ROOT / args.work_dir).resolve()
    (work / "logs").mkdir(parents=True, exist_ok=True)

    # 1. A model folder per part (the probe needs whole and none).
    write_part_models(args.model, work / "models", {*args.parts, *(() if args.no_probe else ("whole", "none"))})

    # 2. Linear probe.
    probe = {} if args.no_probe else linear_probe(work)

    # 3. Fine-tuning, every part and seed.
    accuracy = {part: [finetune(args, work, "sst2", seed, part, ["--model_name_or_path", str(work / "models" / part)])
                       for seed in args.seeds] for part in args.parts}

    # 4. Report.
    for name, value in probe.items():
        print(f"linear probe, SST-2 dev ({name}): {value:.1f}")
    for part, values in accuracy.items():
        mean, std = mean_std(values)
        print(f"SST-2 dev, fine-tuned from {part}: {mean:.1f} +- {std:.1f} "
              f"(per seed: {', '.join(f'{v:.1f}' for v in values)})")
    (work / "transfer.json").write_text(json.dumps({"model": args.model, "probe": probe, "accuracy": accuracy,
                                                    "seeds": args.seeds, "finetune_config": args.finetune_config,
                                                    "finetune_overrides": args.finetune_overrides}, indent=2))
    print(f"wrote {work / 'transfer.json'}")


if __name__ == "__main__":
    main()
