"""Packing: several whole examples in each fixed-length row, kept apart by segment ids (--packing true).

    placement = assign_rows(input_lengths, target_lengths, (512, 251), rows_per_batch=8, lookahead=LOOKAHEAD)
    batch = pack_examples(examples_of_one_batch, 8, (512, 251), pad_id=0, decoder_start_token_id=0)
    padding_fractions(batch)                       # (encoder, decoder) share of the slots that hold padding

The layout is seqio's EncDecFeatureConverter with pack=True (t5x's pre-training, UL2 and fine-tuning): a row of
`input_length` encoder slots and `target_length` decoder slots holds examples 1, 2, ... one after the other, each
example's input in the encoder slots and its target in the decoder slots of the same row; segment ids say which
example a slot belongs to (0: padding), positions count from 0 within each example, and the decoder input restarts
with the decoder start token at every example. An example lives wholly in one row: the caller truncates an example
longer than a row (as unpacked batches do), packing never splits one.

Placement is greedy in the order the examples come, over the B = `rows_per_batch` open rows of the current batch:
an example goes to a row where both its inputs and its targets still fit (of those, the one left most balanced
between free inputs and free targets: choose_row); an example that fits in none waits for the next batch while up
to LOOKAHEAD later ones fill the gaps, and the batch closes when one more does not fit. Plain next-fit (one open
row, closed at the first example that does not fit) leaves about half an example of padding per row: 13 % of the
slots on the default UL2 mixture's packed windows, against 10 % for first-fit over 8 rows, 8.5 % with the lookahead
and 6 % with balance too (docs/objectives.md). Within a batch,
placement is a pure function of the lengths in placement order, so a batch's rows can be recomputed from its
examples alone (the collators do), and a keyed order (seed, epoch, example ids) gives keyed rows.
"""
import collections
import math
from dataclasses import dataclass

import numpy as np

from data_collator import LABEL_PAD_ID  # targets' padding, ignored by the loss
LOOKAHEAD = 64  # examples that may wait for the next batch while later ones fill the current one's gaps
SEGMENT_KEYS = ("encoder_segment_ids", "decoder_segment_ids", "encoder_positions", "decoder_positions")


@dataclass
class Placement:
    """Where examples went: batch and row (n,) per example, -1 for an example left out because `max_batches`
    batches were full; `order` the placed examples in placement order (batch by batch); `num_batches` the batches
    opened; `exhausted` whether the last batch closed because the examples ran out (not because it was full)."""

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


def balance_shape(input_length, mean_input, mean_target):
    """choose_row's balance: a row's inputs, and the targets the examples' mean target/input ratio gives them."""
    return input_length, input_length * mean_target / mean_input


def matched_target_length(input_length, mean_input, mean_target, longest_target):
    """Target slots for rows of `input_length` input slots: the inputs' share scaled by the examples' mean
    target/input ratio, so that a row's inputs and targets fill up together (more leaves targets padded, fewer
    leaves inputs padded); at least the longest target, so that every example fits a row."""
    return max(int(longest_target), math.ceil(balance_shape(input_length, mean_input, mean_target)[1]))


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


def choose_row(free_inputs, free_targets, need_input, need_target, balance):
    """The row an example goes to, or None when it fits in none: of the rows where both its inputs and its targets
    fit, the one left most balanced (free inputs / balance[0] closest to free targets / balance[1]), the first on a
    tie; without `balance`, the first (first-fit). Balance keeps both lengths usable: a row whose inputs are full while half its targets are free can take
    nothing more. `balance` is the row's inputs and the targets the examples' mean ratio gives them
    (matched_target_length unrounded): where targets do not bind, their share stays high and balance spreads
    nothing."""
    best, best_gap = None, None
    for row, (inputs, targets) in enumerate(zip(free_inputs, free_targets)):
        if inputs >= need_input and targets >= need_target:
            if balance is None:
                return row
            gap = abs((inputs - need_input) / balance[0] - (targets - need_target) / balance[1])
            if best is None or gap < best_gap:
                best, best_gap = row, gap
    return best


def assign_rows(input_lengths, target_lengths, row_shape, rows_per_batch, lookahead=0, max_batches=None,
                balance=None):
    """Placement of examples (lengths in the order they come) into batches of `rows_per_batch` rows of
    `row_shape` = (input slots, target slots), see module doc: each example goes to choose_row's row of the current
    batch; up to `lookahead` examples that fit in none wait for the next batch (ahead of the examples after them)
    while later ones fill the gaps; one more closes the batch. With `max_batches`, placement stops when that many
    batches are closed; the examples not placed get -1. `balance`: choose_row's (None: first-fit)."""
    input_lengths = np.asarray(input_lengths, dtype=np.int64)
    target_lengths = np.asarray(target_lengths, dtype=np.int64)
    check_fits(input_lengths, target_lengths, row_shape)
    needs = list(zip(input_lengths.tolist(), target_lengths.tolist()))  # plain ints: one example at a time
    batch_of, row_of = np.full(len(needs), -1, np.int64), np.full(len(needs), -1, np.int64)
    order, waiting, upcoming = [], collections.deque(), iter(range(len(needs)))
    batch, ran_out = 0, False
    while max_batches is None or batch < max_batches:
        free_inputs, free_targets = [row_shape[0]] * rows_per_batch, [row_shape[1]] * rows_per_batch
        deferred, ran_out = [], False
        while len(deferred) <= lookahead:
            example = waiting.popleft() if waiting else next(upcoming, None)
            if example is None:
                ran_out = True
                break
            row = choose_row(free_inputs, free_targets, *needs[example], balance)
            if row is None:
                deferred.append(example)
                continue
            free_inputs[row] -= needs[example][0]
            free_targets[row] -= needs[example][1]
            batch_of[example], row_of[example] = batch, row
            order.append(example)
        waiting.extendleft(reversed(deferred))  # the deferred examples first, in their order
        batch += 1
        if ran_out and not waiting:
            break
    return Placement(batch_of, row_of, np.asarray(order, np.int64), batch if order else 0, ran_out)


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


def pack_examples(examples, rows_per_batch, row_shape, pad_id, decoder_start_token_id, balance=None):
    """One packed batch of `rows_per_batch` rows from examples [(input ids, target ids), ...] in order: the
    placement assign_rows gives them, which must fit one batch (a sampler built the batch with it)."""
    placement = assign_rows([len(inputs) for inputs, _ in examples], [len(targets) for _, targets in examples],
                            row_shape, rows_per_batch, balance=balance)
    if placement.num_batches > 1:
        raise ValueError(f"{len(examples)} examples need {placement.num_batches} batches of {rows_per_batch} rows "
                         f"of {row_shape}: the batch sampler and the collator disagree on the row shape or batch size")
    return pack_rows(examples, placement.row, rows_per_batch, row_shape, pad_id, decoder_start_token_id)


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
