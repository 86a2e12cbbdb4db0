"""Packing: several whole examples in each fixed-length row, kept apart by segment ids (--packing true).

    placement = assign_rows(input_lengths, target_lengths, (512, 251), rows_per_batch=8)
    batch = pack_examples(examples_of_one_batch, 8, (512, 251), pad_id=0, decoder_start_token_id=0)
    padding_fractions(batch)                       # (encoder, decoder) share of the slots that hold padding

The layout is seqio's EncDecFeatureConverter with pack=True (t5x's pre-training, UL2 and fine-tuning): a row of
`input_length` encoder slots and `target_length` decoder slots holds examples 1, 2, ... one after the other, each
example's input in the encoder slots and its target in the decoder slots of the same row; segment ids say which
example a slot belongs to (0: padding), positions count from 0 within each example, and the decoder input restarts
with the decoder start token at every example. An example lives wholly in one row: the caller truncates an example
longer than a row (as unpacked batches do), packing never splits one.

Placement fills a batch's B = `rows_per_batch` rows one at a time from a pool of the next 1 + LOOKAHEAD examples in
the order they come: a row opens with the oldest waiting example, then takes, of the pool examples that fit both its
free inputs and its free targets, the one that leaves it most balanced and fullest (choose_example), until none
fits. Measured on the rows bench/packing.py packs (docs/objectives.md): greedy placement in arrival order over the
batch's open rows (first-fit, a lookahead, a balanced row) leaves 5 % / 7 % of the input / target slots of a GLUE
mixture padded, this 2-3 %; on UL2's windows both leave 4-5 %. An example waits at most a few batches (a row opens
with the oldest). A batch's rows follow from its examples in placement order alone (next_fit_rows: the collators
recompute them), and a keyed order (seed, epoch, example ids) gives keyed rows.
"""
import math
from dataclasses import dataclass

import numpy as np

from data_collator import LABEL_PAD_ID  # targets' padding, ignored by the loss

LOOKAHEAD = 64  # a row chooses among the next 1 + LOOKAHEAD waiting examples
FILL_WEIGHT = 0.5  # choose_example: a fuller row against a more balanced one (measured: docs/objectives.md)
FIT_SAMPLE = 4096  # fitted_target_length places this many examples per candidate length (~0.2 s each)
SEGMENT_KEYS = ("encoder_segment_ids", "decoder_segment_ids", "encoder_positions", "decoder_positions")


@dataclass
class Placement:
    """Where examples went: batch and row (n,) per example, -1 for an example left out because `max_batches`
    batches were full; `order` the placed examples in placement order (batch by batch, row by row); `num_batches`
    the batches opened; `exhausted` whether the last batch closed because the examples ran out (not because its
    rows were full)."""

    batch: np.ndarray
    row: np.ndarray
    order: np.ndarray
    num_batches: int
    exhausted: bool

    def batches(self):
        """[array of example positions, ...] per batch, each in placement order."""
        if not len(self.order):
            return []
        return np.split(self.order, np.flatnonzero(np.diff(self.batch[self.order])) + 1)


def matched_target_length(input_length, mean_input, mean_target, longest_target):
    """Target slots for rows of `input_length` input slots: the inputs' share scaled by the examples' mean
    target/input ratio, so that a row's inputs and targets fill up together (more leaves targets padded, fewer
    leaves inputs padded); at least the longest target, so that every example fits a row."""
    return max(int(longest_target), math.ceil(input_length * mean_target / mean_input))


def fitted_target_length(input_lengths, target_lengths, input_length, rows_per_batch, longest_target):
    """Target slots for rows of `input_length` inputs where the examples' lengths are known (fine-tuning): of the
    lengths within 2 of matched_target_length's ratio, the one whose placement of a sample (up to FIT_SAMPLE
    examples in a fixed random order) pads least, in the worse of inputs and targets. With short targets (GLUE's
    label words: 2 to 6 ids in rows of ~44) one slot more or less moves several points of padding from one side
    to the other, more than the ratio alone can place."""
    inputs, targets = np.asarray(input_lengths, np.int64), np.asarray(target_lengths, np.int64)
    ratio = input_length * targets.mean() / inputs.mean()
    sample = np.random.default_rng(0).permutation(len(inputs))[:FIT_SAMPLE]
    shortest = max(int(longest_target), math.floor(ratio) - 2)
    padding = {}
    for target_length in range(shortest, max(shortest, math.ceil(ratio) + 2) + 1):
        placement = assign_rows(inputs[sample], targets[sample], (input_length, target_length), rows_per_batch)
        full = placement.batches()[:-1]  # the last batch is partial
        if not full:
            return matched_target_length(input_length, inputs.mean(), targets.mean(), longest_target)
        placed, slots = sample[np.concatenate(full)], len(full) * rows_per_batch
        padding[target_length] = max(1 - inputs[placed].sum() / (slots * input_length),
                                     1 - targets[placed].sum() / (slots * target_length))
    return min(padding, key=lambda length: (padding[length], length))


def check_fits(input_lengths, target_lengths, row_shape):
    """ValueError when an example is longer than a row (packing never splits an example: truncate it first)."""
    input_length, target_length = row_shape
    too_long = np.flatnonzero((input_lengths > input_length) | (target_lengths > target_length))
    if len(too_long):
        first = too_long[0]
        raise ValueError(f"example {first} has {input_lengths[first]} input and {target_lengths[first]} target ids, "
                         f"more than a packed row's {input_length} and {target_length}: truncate examples to the row "
                         "first (packing never splits an example)")
    if np.any(input_lengths < 1) or np.any(target_lengths < 0):
        raise ValueError("an example to pack has no input ids (or a negative target length)")


def choose_example(pool_needs, free_inputs, free_targets, row_shape):
    """Position in the pool of the example a row takes next, or None when none fits: of the examples whose inputs
    and targets both fit, the one that leaves the row's free inputs and free targets (as shares of the row's) closest
    to each other, plus FILL_WEIGHT x their sum; the earliest on a tie. Balance keeps both lengths usable (a row with
    full inputs and half its targets free can take nothing more); the fill term prefers the example that fills the
    row most, leaving small examples to close the gaps."""
    best, best_score = None, None
    for position, (need_input, need_target) in enumerate(pool_needs):
        if need_input <= free_inputs and need_target <= free_targets:
            inputs_left = (free_inputs - need_input) / row_shape[0]
            targets_left = (free_targets - need_target) / row_shape[1]
            score = abs(inputs_left - targets_left) + FILL_WEIGHT * (inputs_left + targets_left)
            if best is None or score < best_score:
                best, best_score = position, score
    return best


def assign_rows(input_lengths, target_lengths, row_shape, rows_per_batch, lookahead=LOOKAHEAD, max_batches=None,
                pass_starts=()):
    """Placement of examples (lengths in the order they come) into batches of `rows_per_batch` rows of
    `row_shape` = (input slots, target slots), see module doc: rows are filled one at a time from a pool of the
    next 1 + `lookahead` waiting examples; a row opens with the oldest of them (it fits an empty row, so none waits
    for ever) and then takes choose_example's pick until none fits. With `max_batches`, placement stops when that
    many batches are closed; the examples not placed get -1. `pass_starts`: positions where the order starts another
    pass over the same examples (the sampler's); an example of a later pass joins the pool only when none of an
    earlier one waits, so that a pass is placed whole before the next one fills the gaps after it."""
    input_lengths = np.asarray(input_lengths, dtype=np.int64)
    target_lengths = np.asarray(target_lengths, dtype=np.int64)
    check_fits(input_lengths, target_lengths, row_shape)
    needs = list(zip(input_lengths.tolist(), target_lengths.tolist()))  # plain ints: one example at a time
    batch_of, row_of = np.full(len(needs), -1, np.int64), np.full(len(needs), -1, np.int64)
    pass_of = np.searchsorted(np.asarray(pass_starts, np.int64), np.arange(len(needs)), side="right").tolist()
    order, pool, upcoming = [], [], 0
    batch, ran_out = 0, False

    def refill():  # the pool holds the next 1 + lookahead waiting examples, oldest first, of one pass at a time
        nonlocal upcoming
        while len(pool) <= lookahead and upcoming < len(needs) and (not pool or pass_of[upcoming] == pass_of[pool[0]]):
            pool.append(upcoming)
            upcoming += 1
        return bool(pool)

    while (max_batches is None or batch < max_batches) and refill():
        for row in range(rows_per_batch):
            free_inputs, free_targets, position = row_shape[0], row_shape[1], 0  # the oldest opens the row
            while position is not None:
                example = pool.pop(position)
                free_inputs, free_targets = free_inputs - needs[example][0], free_targets - needs[example][1]
                batch_of[example], row_of[example] = batch, row
                order.append(example)
                ran_out = not refill()
                position = None if ran_out else choose_example([needs[e] for e in pool], free_inputs,
                                                               free_targets, row_shape)
            if ran_out:
                break
        batch += 1
    return Placement(batch_of, row_of, np.asarray(order, np.int64), batch, ran_out)


def next_fit_rows(input_lengths, target_lengths, row_shape):
    """(n,) the row of each example of one batch given in placement order: a new row where the next example does not
    fit the current one. assign_rows closes a row only when no waiting example fits it, and opens the next with
    one of those, so this recovers its rows from a batch's examples alone (the collators do)."""
    rows, row, free_inputs, free_targets = [], 0, row_shape[0], row_shape[1]
    for need_input, need_target in zip(input_lengths, target_lengths):
        if rows and (need_input > free_inputs or need_target > free_targets):
            row, free_inputs, free_targets = row + 1, row_shape[0], row_shape[1]
        rows.append(row)
        free_inputs, free_targets = free_inputs - need_input, free_targets - need_target
    return np.asarray(rows, np.int64)


def pack_rows(examples, rows, num_rows, row_shape, pad_id, decoder_start_token_id):
    """The contract's arrays (module doc; int64 numpy) for `examples` [(input ids, target ids), ...] placed in
    `rows` (row index per example; within a row, examples follow in the order given): input_ids, attention_mask,
    labels, decoder_input_ids (B, L) plus encoder/decoder segment ids and positions."""
    input_length, target_length = row_shape
    batch = {"input_ids": np.full((num_rows, input_length), pad_id, np.int64),
             "attention_mask": np.zeros((num_rows, input_length), np.int64),
             "labels": np.full((num_rows, target_length), LABEL_PAD_ID, np.int64),
             "decoder_input_ids": np.full((num_rows, target_length), pad_id, np.int64),
             **{key: np.zeros((num_rows, input_length if key.startswith("encoder") else target_length), np.int64)
                for key in SEGMENT_KEYS}}
    input_used, target_used, segments = [0] * num_rows, [0] * num_rows, [0] * num_rows
    for (input_ids, target_ids), row in zip(examples, rows):
        row = int(row)
        input_ids, target_ids = np.asarray(input_ids, np.int64), np.asarray(target_ids, np.int64)
        start, end = input_used[row], input_used[row] + len(input_ids)
        target_start, target_end = target_used[row], target_used[row] + len(target_ids)
        if end > input_length or target_end > target_length:
            raise ValueError(f"row {row} overflows: {end} input and {target_end} target ids for a row of "
                             f"{input_length} and {target_length} (use assign_rows' placement)")
        segments[row] += 1
        batch["input_ids"][row, start:end] = input_ids
        batch["attention_mask"][row, start:end] = 1
        batch["encoder_segment_ids"][row, start:end] = segments[row]
        batch["encoder_positions"][row, start:end] = np.arange(len(input_ids))
        batch["labels"][row, target_start:target_end] = target_ids
        if len(target_ids):  # T5's teacher forcing, restarted at each example: start token, then targets but last
            batch["decoder_input_ids"][row, target_start] = decoder_start_token_id
            batch["decoder_input_ids"][row, target_start + 1:target_end] = target_ids[:-1]
        batch["decoder_segment_ids"][row, target_start:target_end] = segments[row]
        batch["decoder_positions"][row, target_start:target_end] = np.arange(len(target_ids))
        input_used[row], target_used[row] = end, target_end
    return batch


def pack_examples(examples, rows_per_batch, row_shape, pad_id, decoder_start_token_id):
    """One packed batch of `rows_per_batch` rows from examples [(input ids, target ids), ...] in the order a
    PackedBatchSampler placed them: the rows next_fit_rows recovers, which must be at most `rows_per_batch`."""
    lengths = [len(inputs) for inputs, _ in examples], [len(targets) for _, targets in examples]
    check_fits(np.asarray(lengths[0], np.int64), np.asarray(lengths[1], np.int64), row_shape)
    rows = next_fit_rows(*lengths, row_shape)
    if len(rows) and rows[-1] >= rows_per_batch:
        raise ValueError(f"{len(examples)} examples need {rows[-1] + 1} rows of {row_shape}, more than a batch's "
                         f"{rows_per_batch}: the batch sampler and the collator disagree on the row shape or batch "
                         "size")
    return pack_rows(examples, rows, rows_per_batch, row_shape, pad_id, decoder_start_token_id)


def unpack_rows(batch):
    """[(input ids, target ids), ...] per row, in segment order: the examples a packed batch holds (numpy or torch
    arrays). The inverse of pack_rows, for tests and for comparing packed with unpacked batches."""
    arrays = {key: np.asarray(batch[key]) for key in ("input_ids", "labels", "encoder_segment_ids",
                                                      "decoder_segment_ids")}
    rows = []
    for row in range(len(arrays["input_ids"])):
        encoder, decoder = arrays["encoder_segment_ids"][row], arrays["decoder_segment_ids"][row]
        rows.append([(arrays["input_ids"][row][encoder == k], arrays["labels"][row][decoder == k])
                     for k in range(1, int(encoder.max(initial=0)) + 1)])
    return rows


def padding_fractions(batch):
    """(encoder, decoder): the share of a batch's input slots and target slots that hold padding. Packed or not:
    input padding is attention_mask 0 (no attention_mask: none), target padding labels -100."""
    labels = np.asarray(batch["labels"])
    mask = batch.get("attention_mask")
    encoder = 0.0 if mask is None else 1.0 - float(np.asarray(mask).mean())
    return encoder, float((labels == LABEL_PAD_ID).mean())


def examples_in(batch):
    """How many examples a batch holds: the segments of a packed batch, else its rows."""
    segments = batch.get("encoder_segment_ids")
    return len(batch["labels"]) if segments is None else int(np.asarray(segments).max(axis=1).sum())
