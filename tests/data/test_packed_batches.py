"""data/packed_batches.py, the data loader's side of --packing: the batch sampler (a fixed number of batches per
epoch, keyed by (seed, epoch), shardable and skippable as accelerate does, its padding estimate) and the collator
that packs what it hands out; the lengths each sampler reads, padding stripped from an unpacked collator's rows,
and a sampler and collator built to agree on the rows."""
import logging

import numpy as np
import torch
from absl.testing import absltest, parameterized
from accelerate.data_loader import BatchSamplerShard, SkipBatchSampler

from t5kit.data import packed_batches, packing
from tests.helpers import example_lengths, random_examples

PAD, START = 0, 0


def features_of(examples):
    return [{"input_ids": inputs.tolist(), "labels": targets.tolist()} for inputs, targets in examples]


class PackedBatchSamplerTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.examples = random_examples(300, seed=3)
        lengths = example_lengths(self.examples)
        self.sampler = packed_batches.PackedBatchSampler(lambda epoch: lengths, (64, 24), 4, seed=5)

    def test_every_epoch_has_the_same_number_of_batches_and_each_fits(self):
        sizes = set()
        for epoch in range(4):
            self.sampler.set_epoch(epoch)
            batches = list(self.sampler)
            self.assertLen(batches, len(self.sampler))
            for indices in batches:
                packing.pack_examples([self.examples[i] for i in indices], 4, (64, 24), PAD, START)  # fits 4 rows
            sizes.add(sum(len(indices) for indices in batches))
        self.assertGreater(len(sizes), 1)  # examples per epoch vary: the batch count is what is fixed

    def test_keyed_by_seed_and_epoch(self):
        lengths = example_lengths(self.examples)
        twin = packed_batches.PackedBatchSampler(lambda epoch: lengths, (64, 24), 4, seed=5)
        self.assertEqual(self.sampler.batches(2), twin.batches(2))
        self.assertNotEqual(self.sampler.batches(1), self.sampler.batches(2))
        other_seed = packed_batches.PackedBatchSampler(lambda epoch: lengths, (64, 24), 4, seed=6)
        self.assertNotEqual(self.sampler.batches(1), other_seed.batches(1))

    def test_the_first_epoch_holds_every_example(self):
        seen = np.concatenate(self.sampler.batches(0))
        self.assertContainsSubset(set(range(300)), set(seen.tolist()))

    def test_accelerate_sharding_and_skipping(self):
        """Two processes take alternate batches (BatchSamplerShard); a resumed run skips the first ones
        (SkipBatchSampler): both see exactly the batches of the plain sampler."""
        self.sampler.set_epoch(1)
        batches = list(self.sampler)
        shards = [list(BatchSamplerShard(self.sampler, num_processes=2, process_index=i)) for i in range(2)]
        self.assertEqual(shards[0][:len(batches[0::2])], batches[0::2])
        self.assertEqual(shards[1][:len(batches[1::2])], batches[1::2])
        self.assertEqual(list(SkipBatchSampler(self.sampler, skip_batches=3)), batches[3:])

    def test_data_loader_gives_fixed_shapes(self):
        collator = packed_batches.PackingCollator(packed_batches.examples_of_task_features, 4, (64, 24), PAD, START)
        loader = torch.utils.data.DataLoader(features_of(self.examples), batch_sampler=self.sampler,
                                             collate_fn=collator)
        for indices, batch in zip(self.sampler, loader):
            self.assertEqual(tuple(batch["input_ids"].shape), (4, 64))
            self.assertEqual(tuple(batch["labels"].shape), (4, 24))
            self.assertEqual(batch["input_ids"].dtype, torch.int64)
            self.assertEqual(packing.examples_in(batch), len(indices))

    def test_expected_padding_of_the_first_epoch(self):
        encoder, decoder = self.sampler.expected_padding()
        inputs, targets = example_lengths(self.examples)
        placed = np.concatenate(self.sampler.batches(0))
        slots = len(self.sampler) * 4
        self.assertAlmostEqual(encoder, 1 - inputs[placed].sum() / (slots * 64))
        self.assertAlmostEqual(decoder, 1 - targets[placed].sum() / (slots * 24))

    def test_packed_task_examples_match_the_row_to_the_targets(self):
        """Row targets: packing.fitted_target_length's, at least --max_target_length."""
        inputs, targets = example_lengths(self.examples)
        sampler, collator = packed_batches.packed_task_examples(features_dataset(self.examples), 64, 4, 4, 5, PAD,
                                                                START)
        self.assertEqual(sampler.row_shape, (64, packing.fitted_target_length(inputs, targets, 64, 4, 12)))
        self.assertEqual(collator.row_shape, sampler.row_shape)


def features_dataset(examples):
    import datasets

    return datasets.Dataset.from_dict({"input_ids": [i.tolist() for i, _ in examples],
                                       "labels": [t.tolist() for _, t in examples]})


class EpochCollator:
    """An unpacked collator's stand-in: fixed-shape rows (inputs padded with 0 and an attention mask, targets
    padded with -100) and the epoch it was last set to."""

    def __init__(self):
        self.epoch = None

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __call__(self, features):
        inputs = [[5] * n + [0] * (6 - n) for n in (feature["inputs"] for feature in features)]
        labels = [[7] * n + [-100] * (4 - n) for n in (feature["targets"] for feature in features)]
        return {"input_ids": inputs, "attention_mask": [[int(i != 0) for i in row] for row in inputs],
                "labels": labels}


class LengthsAndExamplesTest(parameterized.TestCase):

    def test_task_lengths_are_the_same_every_epoch(self):
        lengths = packed_batches.lengths_of_examples({"input_ids": [[1, 2, 3], [4]], "labels": [[5, 1], [6, 7, 1]]})
        for epoch in (0, 5):
            inputs, targets = lengths(epoch)
            np.testing.assert_array_equal(inputs, [3, 1])
            np.testing.assert_array_equal(targets, [2, 3])
            self.assertEqual(inputs.dtype, np.int64)

    def test_task_features_are_their_input_and_target_ids(self):
        features = [{"input_ids": [1, 2], "labels": [3], "other": 0}]
        self.assertEqual(packed_batches.examples_of_task_features(features), [([1, 2], [3])])

    def test_unpadded_examples_strip_the_collators_padding_and_pass_the_epoch_on(self):
        collator = EpochCollator()
        unpadded = packed_batches.UnpaddedExamples(collator)
        examples = unpadded([{"inputs": 6, "targets": 1}, {"inputs": 2, "targets": 4}])
        self.assertEqual([(i.tolist(), t.tolist()) for i, t in examples],
                         [([5] * 6, [7]), ([5, 5], [7] * 4)])
        unpadded.set_epoch(3)
        self.assertEqual(collator.epoch, 3)

    def test_the_collator_passes_the_epoch_only_to_what_takes_one(self):
        collator = EpochCollator()
        packer = packed_batches.PackingCollator(packed_batches.UnpaddedExamples(collator), 2, (8, 6), PAD, START)
        packer.set_epoch(4)
        self.assertEqual(collator.epoch, 4)
        packed_batches.PackingCollator(packed_batches.examples_of_task_features, 2, (8, 6), PAD, START).set_epoch(4)

    def test_the_collator_gives_numpy_rows_when_asked(self):
        features = [{"input_ids": [4, 1], "labels": [5, 1]}, {"input_ids": [6, 6, 1], "labels": [1]}]
        packer = packed_batches.PackingCollator(packed_batches.examples_of_task_features, 1, (8, 4), PAD, START,
                                                return_tensors="np")
        batch = packer(features)
        self.assertIsInstance(batch["input_ids"], np.ndarray)
        self.assertEqual(batch["input_ids"][0].tolist(), [4, 1, 6, 6, 1, 0, 0, 0])  # both examples in one row
        self.assertEqual(batch["encoder_segment_ids"][0].tolist(), [1, 1, 2, 2, 2, 0, 0, 0])


class SamplerFiguresTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.examples = random_examples(200, seed=7)
        self.sampler, self.collator = packed_batches.packed(lambda epoch: example_lengths(self.examples),
                                                            packed_batches.examples_of_task_features, (64, 24), 4,
                                                            seed=1, pad_id=PAD, decoder_start_token_id=START)

    def test_sampler_and_collator_agree_on_the_rows(self):
        self.assertEqual((self.sampler.row_shape, self.sampler.rows_per_batch), ((64, 24), 4))
        self.assertEqual((self.collator.row_shape, self.collator.rows_per_batch), ((64, 24), 4))
        self.assertEqual((self.collator.pad_id, self.collator.decoder_start_token_id), (PAD, START))

    def test_real_tokens_per_row_is_the_rows_minus_their_padding(self):
        encoder, decoder = self.sampler.expected_padding()
        self.assertAlmostEqual(packed_batches.real_tokens_per_row(self.sampler),
                               (1 - encoder) * 64 + (1 - decoder) * 24)
        inputs, targets = example_lengths(self.examples)
        placed = np.concatenate(self.sampler.batches(0))
        self.assertAlmostEqual(packed_batches.real_tokens_per_row(self.sampler),
                               (inputs[placed].sum() + targets[placed].sum()) / (len(self.sampler) * 4))

    def test_the_permutation_is_keyed_by_seed_epoch_and_pass(self):
        orders = {(epoch, number): tuple(self.sampler.order(epoch, number, 50))
                  for epoch in (0, 1) for number in (0, 1)}
        self.assertLen(set(orders.values()), 4)
        self.assertEqual(sorted(orders[(1, 1)]), list(range(50)))
        self.assertEqual(tuple(self.sampler.order(1, 1, 50)), orders[(1, 1)])

    def test_the_log_line_states_shape_batches_and_padding(self):
        encoder, decoder = self.sampler.expected_padding()
        with self.assertLogs("t5kit.data.packed_batches", logging.INFO) as logs:
            packed_batches.log_packing(self.sampler, "task examples")
        self.assertIn(f"packing: task examples in 4 rows of 64 inputs and 24 targets per batch, {len(self.sampler)} "
                      f"batches per epoch; padding (epoch 0) {100 * encoder:.1f} % of input slots, "
                      f"{100 * decoder:.1f} % of target slots", logs.output[0])


if __name__ == "__main__":
    absltest.main()
