"""Span-corruption collator vs a one-example-at-a-time pure-Python reference of the same T5 algorithm.

    .venv/bin/python bench/collator.py               # rows as numpy arrays, as corpus.pack_windows yields them
    .venv/bin/python bench/collator.py --list_rows   # rows as lists of Python ints (a dataset without format)

128 real windows of 568 ids (wikitext-2 test through the T5 tokenizer, both from ../shared/data) corrupted to
input_length 512. The reference draws T5's mask per window (shuffle, span lengths, per-token mask) and replaces
spans token by token, as t5/data/preprocessors.py describes; both arms return the same torch tensors. Before
timing, the reference's sentinel replacement is checked against our batch on the same masks.
"""
import argparse
import os
import random
import sys
import time

import numpy as np
import torch

import constants
from bench.paths import SHARED_DATA
from data_collator import DataCollatorForT5SpanCorruption, compute_input_and_target_lengths, random_spans_noise_mask

BATCH_SIZE = 128
BURN_IN, REPEATS = 3, 15  # best of 15 per arm: other processes share these 2 cores


def reference_noise_mask(length, rng, noise_density, mean_noise_span_length):
    """T5's random_spans_noise_mask for one window, step by step in plain Python (its counts in float32, as TF)."""
    num_noise = min(max(round(float(np.float32(length) * np.float32(noise_density))), 1), length - 1)
    num_spans = max(round(float(np.float32(num_noise) / np.float32(mean_noise_span_length))), 1)

    def segment_lengths(num_items, num_segments):
        marks = [i < num_segments - 1 for i in range(num_items - 1)]
        rng.shuffle(marks)
        lengths = [1]
        for new_segment in marks:
            if new_segment:
                lengths.append(0)
            lengths[-1] += 1
        return lengths

    noise_lengths = segment_lengths(num_noise, num_spans)
    kept_lengths = segment_lengths(length - num_noise, num_spans)
    mask = []
    for kept, noise in zip(kept_lengths, noise_lengths):
        mask += [False] * kept + [True] * noise
    return mask


def reference_replace(ids, mask, sentinel_ids, eos_id):
    """T5's noise_span_to_unique_sentinel: each run of masked tokens becomes the next sentinel, then EOS."""
    out, previous, run = [], False, 0
    for token, masked in zip(ids, mask):
        if not masked:
            out.append(token)
        elif not previous:
            out.append(sentinel_ids[run])
            run += 1
        previous = masked
    return out + [eos_id]


def reference_collate(features, rng, collator):
    sentinel_ids, rows = collator.sentinel_ids.tolist(), []
    for feature in features:
        ids = feature["input_ids"]
        ids = ids.tolist() if isinstance(ids, np.ndarray) else ids  # plain Python works on lists of ints
        mask = reference_noise_mask(len(ids), rng, collator.noise_density, collator.mean_noise_span_length)
        rows.append((reference_replace(ids, mask, sentinel_ids, collator.eos_id),
                     reference_replace(ids, [not m for m in mask], sentinel_ids, collator.eos_id)))
    labels = [row[1] for row in rows]
    decoder_input_ids = [[collator.decoder_start_token_id] + row[:-1] for row in labels]
    # np.array then from_numpy: torch.tensor on nested lists is several times slower and would flatter our ratio.
    return {"input_ids": torch.from_numpy(np.array([row[0] for row in rows], dtype=np.int64)),
            "labels": torch.from_numpy(np.array(labels, dtype=np.int64)),
            "decoder_input_ids": torch.from_numpy(np.array(decoder_input_ids, dtype=np.int64))}


def load_tokenizer_and_ids(count):
    """The real T5 tokenizer and `count` ids of real text (wrapping round if short), or exit 2 naming what is
    missing from ../shared/data."""
    import transformers

    tokenizer_dir, text_file = SHARED_DATA / "t5_spiece", SHARED_DATA / "wikitext-2-raw" / "wiki.test.raw"
    for path in (tokenizer_dir, text_file):
        if not path.exists():
            sys.exit(f"error: {path} is absent; set T5_DATA_DIR to the data folder")
    tokenizer = transformers.T5TokenizerFast.from_pretrained(str(tokenizer_dir))
    lines = text_file.read_text(encoding="utf-8").splitlines()[:4000]
    ids = [token for row in tokenizer(lines)["input_ids"] for token in row]
    return tokenizer, np.resize(np.asarray(ids, dtype=np.int64), count)


def best_seconds(*arms):
    """Best-of-REPEATS seconds per arm after BURN_IN calls; arms alternate so that load from other processes
    on this shared machine hits both alike."""
    for _ in range(BURN_IN):
        for arm in arms:
            arm()
    best = [float("inf")] * len(arms)
    for _ in range(REPEATS):
        for i, arm in enumerate(arms):
            start = time.perf_counter()
            arm()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def format_seconds(seconds):
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def check_same_output(features, collator):
    """Both arms must agree: given our noise masks, the reference's sentinel replacement matches our batch."""
    batch = collator(features, rng=np.random.default_rng(0))
    mask = random_spans_noise_mask(np.random.default_rng(0), len(features), collator.tokens_length,
                                   collator.noise_density, collator.mean_noise_span_length)
    sentinel_ids = collator.sentinel_ids.tolist()
    for ids, row, inputs, labels in zip(np.array([f["input_ids"] for f in features]).tolist(), mask.tolist(),
                                        batch["input_ids"], batch["labels"]):
        assert reference_replace(ids, row, sentinel_ids, collator.eos_id) == inputs.tolist()
        assert reference_replace(ids, [not m for m in row], sentinel_ids, collator.eos_id) == labels.tolist()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list_rows", action="store_true",
                        help="hand rows over as lists of ints instead of numpy arrays (a dataset without format)")
    args = parser.parse_args(argv)
    tokens_length, target_length = compute_input_and_target_lengths(
        constants.INPUT_LENGTH, constants.NOISE_DENSITY, constants.MEAN_NOISE_SPAN_LENGTH)
    tokenizer, ids = load_tokenizer_and_ids(BATCH_SIZE * tokens_length)
    rows = ids.reshape(BATCH_SIZE, tokens_length)
    features = [{"input_ids": row.tolist() if args.list_rows else row} for row in rows]
    collator = DataCollatorForT5SpanCorruption(tokenizer, target_length=target_length, seed=0)
    check_same_output(features, collator)
    rng = random.Random(0)
    ours, reference = best_seconds(lambda: collator(features), lambda: reference_collate(features, rng, collator))
    print(f"collator {format_seconds(ours)} vs reference {format_seconds(reference)} per {BATCH_SIZE} rows -> "
          f"{reference / ours:.1f}x (cpu, {os.cpu_count()} cores, rows as {'lists' if args.list_rows else 'numpy'})")


if __name__ == "__main__":
    main()
