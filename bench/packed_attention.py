"""Forward + backward time of packed rows (segment masks) vs padded rows holding the same real examples.

    .venv/bin/python bench/packed_attention.py                          # t5-small, UL2 rows of 512, CPU
    .venv/bin/python bench/packed_attention.py --model_size t5-tiny --input_length 128

The examples are UL2 rows of real text (WikiText-2, the real T5 vocabulary, data/ul2.py's collator with UL2's
mixture at --example_length): the padded arm trains on them as the collator gives them, one per row padded to the
mixture's fixed shapes; the packed arm lays the same examples greedily into rows of --input_length inputs and the
mixture's target length there, with segment ids (model/packed_attention.py's masks, built each step, inside the
packed time). Both arms run the same random fp32 model over the same real tokens: the figure is real
(non-padding) input and target tokens per second, and its ratio. The packed rows run once more with the padding
mask only (wrong maths, the same shapes), which prices the segment masks alone: computed in bands
(model/banded_attention.py), they make rows of many short examples faster than the padding mask does
(`--example_length 50 --examples 104`: 0.87x its time, docs/benchmarks.md).
"""
import argparse
import itertools
import time

import numpy as np
import torch

import constants
from bench.paths import SHARED_DATA
from t5kit.config.pretrain_arguments import check_denoisers
from t5kit.data import ul2
from t5kit.model import building, packed_attention

DENOISERS = check_denoisers(constants.UL2_DENOISERS, "ul2")


def ul2_examples(tokenizer, input_length, count):
    """(input ids, target ids) of `count` UL2 rows of WikiText-2 at input_length, padding cut off; the rows'
    (inputs, targets) shape."""
    collator = ul2.DataCollatorForUL2(tokenizer, DENOISERS, input_length=input_length, seed=0, return_tensors="np")
    lines = [line for line in (SHARED_DATA / "wikitext-2-raw/wiki.test.raw").read_text().splitlines() if line.strip()]
    ids = list(itertools.chain.from_iterable(tokenizer(lines, add_special_tokens=False).input_ids))
    length = collator.tokens_length
    batch = collator([{"input_ids": ids[i * length:(i + 1) * length]} for i in range(count)])
    examples = [(batch["input_ids"][r][batch["attention_mask"][r] == 1].tolist(),
                 batch["labels"][r][batch["labels"][r] != -100].tolist()) for r in range(count)]
    return examples, (input_length, collator.target_length)


def rows_of(groups, shape, pad, packed):
    """A batch of rows of `shape` from groups of examples (one group per row), with segment ids when packed."""
    (input_length, target_length), size = shape, len(groups)
    batch = {"input_ids": np.full((size, input_length), pad), "attention_mask": np.zeros((size, input_length)),
             "labels": np.full((size, target_length), -100), "decoder_input_ids": np.full((size, target_length), pad)}
    if packed:
        batch.update(encoder_segment_ids=np.zeros((size, input_length)),
                     decoder_segment_ids=np.zeros((size, target_length)))
    for r, group in enumerate(groups):
        at_in = at_out = 0
        for segment, (inputs, targets) in enumerate(group, start=1):
            enc, dec = slice(at_in, at_in + len(inputs)), slice(at_out, at_out + len(targets))
            batch["input_ids"][r, enc], batch["attention_mask"][r, enc] = inputs, 1
            batch["labels"][r, dec], batch["decoder_input_ids"][r, dec] = targets, [pad, *targets[:-1]]
            if packed:
                batch["encoder_segment_ids"][r, enc], batch["decoder_segment_ids"][r, dec] = segment, segment
            at_in, at_out = at_in + len(inputs), at_out + len(targets)
    return {key: torch.as_tensor(value, dtype=torch.int64) for key, value in batch.items()}


def greedy_groups(examples, shape):
    groups, used = [[]], (0, 0)
    for inputs, targets in examples:
        if groups[-1] and (used[0] + len(inputs) > shape[0] or used[1] + len(targets) > shape[1]):
            groups.append([])
            used = (0, 0)
        groups[-1].append((inputs, targets))
        used = (used[0] + len(inputs), used[1] + len(targets))
    return groups


def seconds_per_pass(model, batches, repeats):
    """Wall seconds of forward + backward over every batch once (the best of `repeats`, after one warm-up)."""
    best = float("inf")
    for attempt in range(repeats + 1):
        start = time.perf_counter()
        for batch in batches:
            model(**batch).loss.backward()
        if attempt:
            best = min(best, time.perf_counter() - start)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_size", default="t5-small", choices=tuple(constants.MODEL_SIZE_PRESETS))
    parser.add_argument("--input_length", type=int, default=512, help="inputs per packed row")
    parser.add_argument("--example_length", type=int, default=None,
                        help="--input_length of the UL2 examples (default: half of --input_length)")
    parser.add_argument("--batch_size", type=int, default=8, help="rows per step")
    parser.add_argument("--examples", type=int, default=32, help="UL2 rows packed and padded")
    parser.add_argument("--attn_implementation", default="sdpa", choices=packed_attention.PACKED_ATTN_IMPLEMENTATIONS)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    tokenizer = building.load_tokenizer(str(SHARED_DATA / "t5_spiece"))
    building.add_mode_tokens(tokenizer, ul2.mode_tokens(DENOISERS))
    examples, padded_shape = ul2_examples(tokenizer, args.example_length or args.input_length // 2, args.examples)
    packed_shape = (args.input_length, ul2.mixture_lengths(args.input_length, DENOISERS)[1])
    torch.manual_seed(0)
    model = building.new_t5_model(building.build_t5_config(args.model_size, tokenizer))
    model.set_attn_implementation(args.attn_implementation)
    packed_attention.install(model).train()
    arms = {"padded": ([[example] for example in examples], padded_shape),
            "packed": (greedy_groups(examples, packed_shape), packed_shape)}
    real = sum(len(i) + len(t) for i, t in examples)
    result = {}
    for name, (groups, shape) in arms.items():
        batches = [rows_of(groups[s:s + args.batch_size], shape, tokenizer.pad_token_id, name == "packed")
                   for s in range(0, len(groups), args.batch_size)]
        seconds = seconds_per_pass(model, batches, args.repeats)
        slots = len(groups) * sum(shape)
        result[name] = real / seconds
        print(f"{name}: {len(groups)} rows of {shape[0]}+{shape[1]} slots, padding {100 * (1 - real / slots):.1f} %, "
              f"{1000 * seconds / len(batches):.0f} ms/step (batch {args.batch_size}), "
              f"{real / seconds:.0f} real tokens/s")
        if name == "packed":  # the same rows with the padding mask only: what the segment masks cost
            plain = [{k: v for k, v in batch.items() if k not in packed_attention.SEGMENT_KEYS} for batch in batches]
            result["masks"] = seconds / seconds_per_pass(model, plain, args.repeats)
    print(f"packed/padded real tokens per second: {result['packed'] / result['padded']:.2f}x; the segment masks "
          f"take {result['masks']:.2f}x the time of the same rows with a padding mask ({args.model_size}, "
          f"{args.attn_implementation}, {torch.get_num_threads()} threads, {len(examples)} UL2 examples)")


if __name__ == "__main__":
    main()
