"""The data loader's side of --packing: a batch sampler that decides which examples share a batch of B packed rows,
and a collator that packs them into those rows (packing.py's maths).

    sampler = PackedBatchSampler(lengths_of_epoch, row_shape=(512, 160), rows_per_batch=8, seed=42)
    collator = PackingCollator(examples_of, rows_per_batch=8, row_shape=(512, 160), pad_id=0,
                               decoder_start_token_id=0)
    DataLoader(dataset, batch_sampler=sampler, collate_fn=collator)   # Trainer: get_train_dataloader

A packed batch is B rows of fixed shape holding a variable number of examples, so the usual sampler (a fixed number
of examples per batch) cannot build it. Each epoch the sampler orders the examples by a keyed permutation of
(seed, epoch, pass) and places them (packing.assign_rows) into batches of B rows; it yields the example indices of
each batch in placement order, and the collator recovers the same rows from the examples it is given
(packing.next_fit_rows), so nothing but indices passes between them, as with any sampler.

Fixed number of batches. Trainer sizes an epoch once, from len(dataloader), and accelerate shards a batch sampler by
position (process i takes batches i, i + n, ...), so every epoch yields exactly `len(sampler)` batches: the number
the first pass over the examples fills at epoch 0. An epoch whose order packs tighter continues into a second keyed
pass over the examples (as seqio repeats a dataset) to fill its last batches, after every example of the first pass
is placed; one that packs looser leaves its last examples for the next epoch's order. Examples are thus seen equally
often in expectation, not exactly once per epoch. Everything is a pure function of (seed, epoch, example lengths),
so every process, a resumed run (Trainer's skip_first_batches replays the sampler) and any number of loader workers
see the same batches.
"""
import logging

import numpy as np
import torch
from torch.utils.data import Sampler

from t5kit.data import packing

logger = logging.getLogger(__name__)
MAX_PASSES = 64  # an epoch never needs more than a few passes; this bounds a mis-sized sampler


class PackedBatchSampler(Sampler):
    """Batches of example indices for B packed rows (module doc). `lengths_of_epoch(epoch)` gives the (input,
    target) lengths of every example of the dataset in that epoch (UL2's corrupted lengths change with the epoch;
    fine-tuning's do not)."""

    def __init__(self, lengths_of_epoch, row_shape, rows_per_batch, seed, lookahead=packing.LOOKAHEAD):
        self.lengths_of_epoch, self.row_shape, self.rows_per_batch = lengths_of_epoch, tuple(row_shape), rows_per_batch
        self.lookahead = lookahead
        self.seed, self.epoch, self._num_batches, self._cached = int(seed), 0, None, None

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def order(self, epoch, number_of_pass, count):
        """(count,) a keyed permutation of the example indices for one pass of one epoch."""
        return np.random.default_rng([self.seed, epoch, number_of_pass]).permutation(count)

    def __len__(self):
        if self._num_batches is None:  # the batches the first pass fills at epoch 0 (module doc)
            inputs, targets = self.lengths_of_epoch(0)
            order = self.order(0, 0, len(inputs))
            self._num_batches = packing.assign_rows(inputs[order], targets[order], self.row_shape,
                                                    self.rows_per_batch, self.lookahead).num_batches
        return self._num_batches

    def batches(self, epoch):
        """[indices of batch 0, ...]: exactly len(self) batches for `epoch` (the last epoch's are kept: a resumed
        run's skip and the padding estimate ask again)."""
        if self._cached is None or self._cached[0] != epoch:
            self._cached = (epoch, self._place(epoch))
        return self._cached[1]

    def _place(self, epoch):
        num_batches = len(self)
        inputs, targets = self.lengths_of_epoch(epoch)
        orders = [self.order(epoch, 0, len(inputs))]
        for number_of_pass in range(1, MAX_PASSES):  # two passes at least: epoch 0's last batch takes from the second
            orders.append(self.order(epoch, number_of_pass, len(inputs)))
            order = np.concatenate(orders)
            placement = packing.assign_rows(inputs[order], targets[order], self.row_shape, self.rows_per_batch,
                                            self.lookahead, max_batches=num_batches,
                                            pass_starts=np.arange(1, len(orders)) * len(inputs))
            if placement.num_batches == num_batches and not placement.exhausted:  # the last batch is full
                break
        return [order[positions].tolist() for positions in placement.batches()]

    def __iter__(self):
        yield from self.batches(self.epoch) if len(self) else ()

    def expected_padding(self):
        """(encoder, decoder): the share of padding slots in epoch 0's batches, from the lengths alone; what the
        run's log lines then measure."""
        inputs, targets = self.lengths_of_epoch(0)
        slots = len(self) * self.rows_per_batch
        placed = np.concatenate(self.batches(0)) if len(self) else np.zeros(0, np.int64)
        return (float(1 - inputs[placed].sum() / max(slots * self.row_shape[0], 1)),
                float(1 - targets[placed].sum() / max(slots * self.row_shape[1], 1)))


def lengths_of_examples(dataset):
    """lengths_of_epoch for fine-tuning: each row's input_ids and labels lengths, the same every epoch."""
    inputs = np.asarray([len(ids) for ids in dataset["input_ids"]], np.int64)
    targets = np.asarray([len(ids) for ids in dataset["labels"]], np.int64)
    return lambda epoch: (inputs, targets)


def lengths_of_windows(dataset, collator, chunk=4096):
    """lengths_of_epoch for pre-training: what each window of a map-style windows dataset corrupts to in an epoch
    under a UL2 collator (ul2.DataCollatorForUL2.example_lengths), read in chunks of `chunk` windows."""
    windows = dataset.with_format("numpy")

    def lengths(epoch):
        parts = [collator.example_lengths(windows[start:start + chunk]["input_ids"], epoch)
                 for start in range(0, len(windows), chunk)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    return lengths


def examples_of_task_features(features):
    """Fine-tuning features (tokenised input_ids and labels, already truncated) as (inputs, targets) pairs."""
    return [(feature["input_ids"], feature["labels"]) for feature in features]


class UnpaddedExamples:
    """Examples from an unpacked collator that pads to fixed shapes (UL2, prefix-LM): its rows with the padding
    stripped (inputs where attention_mask is 1, targets where labels are not -100). `set_epoch` goes to it."""

    def __init__(self, collator):
        self.collator = collator  # shared with evaluation (unpacked) and the epoch callback: left as it is

    def set_epoch(self, epoch):
        self.collator.set_epoch(epoch)

    def __call__(self, features):
        batch = {key: np.asarray(value) for key, value in self.collator(features).items()}
        return [(ids[mask == 1], labels[labels != packing.LABEL_PAD_ID])
                for ids, mask, labels in zip(batch["input_ids"], batch["attention_mask"], batch["labels"])]


class PackingCollator:
    """Packs the examples of a batch (`examples_of(features)` -> [(input ids, target ids), ...], in the sampler's
    order) into `rows_per_batch` rows of `row_shape`: packing.pack_examples' arrays, as torch tensors unless
    return_tensors is 'np'."""

    def __init__(self, examples_of, rows_per_batch, row_shape, pad_id, decoder_start_token_id, return_tensors="pt"):
        self.examples_of, self.rows_per_batch, self.row_shape = examples_of, rows_per_batch, tuple(row_shape)
        self.pad_id, self.decoder_start_token_id, self.return_tensors = pad_id, decoder_start_token_id, return_tensors

    def set_epoch(self, epoch):
        if hasattr(self.examples_of, "set_epoch"):
            self.examples_of.set_epoch(epoch)

    def __call__(self, features):
        batch = packing.pack_examples(self.examples_of(features), self.rows_per_batch, self.row_shape, self.pad_id,
                                      self.decoder_start_token_id)
        if self.return_tensors == "pt":
            batch = {key: torch.from_numpy(value) for key, value in batch.items()}
        return batch


def real_tokens_per_row(sampler):
    """The input and target tokens (not padding) a packed row holds on average in epoch 0."""
    encoder, decoder = sampler.expected_padding()
    return float((1 - encoder) * sampler.row_shape[0] + (1 - decoder) * sampler.row_shape[1])


def packed_windows(dataset, collator, row_shape, rows_per_batch, seed):
    """(sampler, collator) of packed pre-training: UL2/prefix-LM windows of a map-style dataset, corrupted by
    `collator` (ul2.DataCollatorForUL2 at the window's shapes), packed into rows of `row_shape`."""
    return packed(lengths_of_windows(dataset, collator), UnpaddedExamples(collator), row_shape, rows_per_batch, seed,
                  collator.pad_id, collator.decoder_start_token_id)


def packed_task_examples(dataset, input_length, max_target_length, rows_per_batch, seed, pad_id,
                         decoder_start_token_id):
    """(sampler, collator) of packed fine-tuning: tokenised task examples (one task or a mixture, truncated to
    input_length and max_target_length) in rows of input_length inputs and packing.fitted_target_length targets."""
    lengths = lengths_of_examples(dataset)
    inputs, targets = lengths(0)
    row_shape = (input_length, packing.fitted_target_length(inputs, targets, input_length, rows_per_batch,
                                                            max(max_target_length, targets.max(initial=0))))
    return packed(lengths, examples_of_task_features, row_shape, rows_per_batch, seed, pad_id,
                  decoder_start_token_id)


def packed(lengths_of_epoch, examples_of, row_shape, rows_per_batch, seed, pad_id, decoder_start_token_id):
    """A sampler and a collator that agree on the rows: the same shape and batch size."""
    return (PackedBatchSampler(lengths_of_epoch, row_shape, rows_per_batch, seed),
            PackingCollator(examples_of, rows_per_batch, row_shape, pad_id, decoder_start_token_id))


def log_packing(sampler, what):
    """One log line: the row shape, the batches per epoch and the padding epoch 0's batches will have."""
    encoder, decoder = sampler.expected_padding()
    logger.info("packing: %s in %d rows of %d inputs and %d targets per batch, %d batches per epoch; padding "
                "(epoch 0) %.1f %% of input slots, %.1f %% of target slots", what, sampler.rows_per_batch,
                *sampler.row_shape, len(sampler), 100 * encoder, 100 * decoder)
