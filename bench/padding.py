"""Padding efficiency of fine-tuning batches: random batches vs ours (length-grouped, dynamic padding).

    .venv/bin/python bench/padding.py                    # batch 32, every GLUE training set in ../shared/data
    .venv/bin/python bench/padding.py --batch_size 128

The rows are the real GLUE training sets in ../shared/data (CoLA, SST-2, MRPC, STS-B, RTE, WNLI), formatted and
tokenised by task_splits.py with the T5 vocabulary and mixed examples-proportionally by task_mixture.py, as a
multi-task run trains on them. Both arms pad each batch to its own longest input and target (dynamic padding, what
the collator does); they differ only in the order: Trainer's RandomSampler vs the LengthGroupedSampler that HF's
`--train_sampling_strategy group_by_length` uses (our default, length_buckets, pads least). The figure is padded
tokens / all tokens of the padded batches, inputs and targets together; the last figure adds pad_to_multiple_of=8
(used under bf16/fp16).
"""
import argparse
import logging

import numpy as np
import torch
from torch.utils.data import RandomSampler
from transformers.trainer_pt_utils import LengthGroupedSampler

from bench.paths import SHARED_DATA
from t5kit.config.finetune_arguments import FineTuneDataArguments
from t5kit.data import task_splits
from t5kit.data.task_format import get_task_vals
from t5kit.data.task_mixture import mix_task_datasets
from t5kit.model import building
from t5kit.train.task_trainer import length_bucket_indices

GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "rte", "wnli")  # the GLUE tasks with a train.tsv in ../shared/data
MAX_SOURCE_LENGTH = 512
SEED = 42


def load_mixture(tokenizer):
    """(input lengths, target lengths) of the examples-proportional mixture of the GLUE training sets."""
    glue_dir = SHARED_DATA / "glue"
    data_args = FineTuneDataArguments(tasks=",".join(f"glue/{task}" for task in GLUE_TASKS),
                                      data_dir=[str(glue_dir)], max_source_length=MAX_SOURCE_LENGTH)
    splits = [task_splits.build_task_split(task_splits.SplitPlan(get_task_vals("glue", task), "train",
                                                                       "train", task), data_args, tokenizer)
              for task in GLUE_TASKS]
    mixture, _ = mix_task_datasets([split.dataset for split in splits], list(GLUE_TASKS), data_args.mixture_cap,
                                   data_args.mixture_temperature, SEED)
    inputs = np.array([len(ids) for ids in mixture["input_ids"]])
    targets = np.array([len(ids) for ids in mixture["labels"]])
    return inputs, targets


def padded_fraction(order, inputs, targets, batch_size, multiple=1):
    """Pad tokens / all tokens when rows are batched in `order`, each batch padded to its longest row."""
    padded = real = 0
    for start in range(0, len(order), batch_size):
        batch = order[start:start + batch_size]
        for lengths in (inputs[batch], targets[batch]):
            width = -(-lengths.max() // multiple) * multiple
            padded += width * len(batch)
            real += lengths.sum()
    return (padded - real) / padded


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch_size", type=int, default=32, help="rows per batch (per device x accumulation)")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # the per-task data lines would bury the one result line
    tokenizer = building.load_tokenizer(str(SHARED_DATA / "t5_spiece"))
    inputs, targets = load_mixture(tokenizer)
    generator = torch.Generator().manual_seed(SEED)
    random_order = np.array(list(RandomSampler(range(len(inputs)), generator=generator)))
    hf_order = np.array(list(LengthGroupedSampler(args.batch_size, lengths=inputs.tolist(),
                                                  generator=torch.Generator().manual_seed(SEED))))
    our_order = np.array(length_bucket_indices(inputs, targets, args.batch_size,
                                               torch.Generator().manual_seed(SEED)))
    naive = padded_fraction(random_order, inputs, targets, args.batch_size)
    hf = padded_fraction(hf_order, inputs, targets, args.batch_size)
    ours = padded_fraction(our_order, inputs, targets, args.batch_size)
    ours_multiple = padded_fraction(our_order, inputs, targets, args.batch_size, multiple=8)
    print(f"padded tokens: random batches {100 * naive:.1f} % vs length buckets {100 * ours:.2f} % -> "
          f"{naive / ours:.0f}x fewer ({len(inputs)} GLUE rows: {', '.join(GLUE_TASKS)}; batch {args.batch_size}; "
          f"HF group_by_length {100 * hf:.1f} %; ours with pad_to_multiple_of=8 {100 * ours_multiple:.1f} %)")


if __name__ == "__main__":
    main()
