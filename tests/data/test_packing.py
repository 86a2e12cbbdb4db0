"""Spec of packing (t5kit/data/packing.py): first-fit placement that never splits an example and respects both row
lengths, rows that round-trip to their examples through the segment ids, decoder inputs that restart at every
example, positions, padding fractions, and UL2's windows packed (packed_batches.packed_windows) as the unpacked
collator corrupts them, with the padding docs/objectives.md states. (The batch sampler and collator:
tests/data/test_packed_batches.py.)"""
import copy
from unittest import mock

import numpy as np
from absl.testing import absltest, parameterized

import constants
from t5kit.config.pretrain_arguments import check_denoisers
from t5kit.data import packed_batches, packing, ul2
from t5kit.model import building
from tests.helpers import example_lengths, in_memory_t5_tokenizer, random_examples, random_word_ids

PAD, START = 0, 0


class AssignRowsTest(parameterized.TestCase):

    def test_a_row_takes_the_example_leaving_it_balanced_and_full(self):
        """A row of (8, 8) opened by (4, 1) has (4, 7) free. (4, 1) would fill its inputs and strand 6 targets, (3, 6)
        leaves (1, 1): balanced, and fuller than (1, 3)'s (3, 4); then nothing fits, and the next row opens with the
        oldest waiting example."""
        placement = packing.assign_rows([4, 4, 1, 3], [1, 1, 3, 6], (8, 8), rows_per_batch=2)
        self.assertEqual(placement.order.tolist(), [0, 3, 1, 2])
        self.assertEqual(placement.row.tolist(), [0, 1, 1, 0])
        self.assertEqual((placement.num_batches, placement.exhausted), (1, True))
        self.assertEqual(packing.choose_example([(4, 1), (1, 3), (3, 6)], 4, 7, (8, 8)), 2)
        self.assertEqual(packing.choose_example([(1, 3), (4, 1)], 4, 7, (8, 8)), 0)  # (3, 4) beats (0, 6)
        self.assertIsNone(packing.choose_example([(5, 1), (1, 8)], 4, 7, (8, 8)))

    def test_a_row_opens_with_the_oldest_waiting_example(self):
        """(8, 1) fits only an empty row and the others balance rows better: it still opens the second row."""
        placement = packing.assign_rows([4, 8, 4, 4, 4], [4, 1, 4, 4, 4], (8, 8), rows_per_batch=1)
        self.assertEqual([b.tolist() for b in placement.batches()], [[0, 2], [1], [3, 4]])

    def test_lookahead_lets_later_examples_fill_the_gaps(self):
        """One row of 8: without lookahead the second 5 closes the first batch; with one, it waits for the next
        batch while the 3 after it fills the gap, and the second 3 closes the batch."""
        plain = packing.assign_rows([5, 5, 3, 3], [1] * 4, (8, 8), 1, lookahead=0)
        self.assertEqual(plain.batch.tolist(), [0, 1, 1, 2])
        waiting = packing.assign_rows([5, 5, 3, 3], [1] * 4, (8, 8), 1, lookahead=1)
        self.assertEqual(waiting.batch.tolist(), [0, 1, 0, 1])
        self.assertEqual([b.tolist() for b in waiting.batches()], [[0, 2], [1, 3]])  # placement order

    def test_targets_bind_as_well_as_inputs(self):
        placement = packing.assign_rows([1, 1, 1], [5, 5, 3], (8, 8), rows_per_batch=1, lookahead=0)
        self.assertEqual(placement.batch.tolist(), [0, 1, 1])

    @parameterized.parameters((1, 0), (3, 0), (8, 0), (8, 16))
    def test_every_example_once_within_both_lengths(self, rows_per_batch, lookahead):
        inputs, targets = example_lengths(random_examples(500, seed=rows_per_batch))
        placement = packing.assign_rows(inputs, targets, (64, 16), rows_per_batch, lookahead)
        self.assertTrue(np.all(placement.batch >= 0))
        self.assertEqual(sorted(placement.order.tolist()), list(range(500)))
        self.assertTrue(np.all(np.diff(placement.batch[placement.order]) >= 0))
        # at most lookahead + 1 examples wait at any time, so the k-th placed example is at most that far ahead
        self.assertLessEqual(np.max(placement.order - np.arange(500)), lookahead + 1)
        cells = placement.batch * rows_per_batch + placement.row
        self.assertLessEqual(np.bincount(cells, weights=inputs).max(), 64)
        self.assertLessEqual(np.bincount(cells, weights=targets).max(), 16)
        self.assertEqual(placement.num_batches, placement.batch.max() + 1)

    def test_deterministic(self):
        inputs, targets = example_lengths(random_examples(300))
        first = packing.assign_rows(inputs, targets, (64, 16), 4)
        second = packing.assign_rows(inputs.tolist(), targets.tolist(), (64, 16), 4)
        np.testing.assert_array_equal(first.batch, second.batch)
        np.testing.assert_array_equal(first.row, second.row)

    def test_choosing_pads_less_than_next_fit(self):
        """Next-fit (no lookahead: a row takes the next example or closes) against choosing among the next 65; and
        the fill term against balance alone."""
        inputs, targets = example_lengths(random_examples(4000))
        row_shape = (64, packing.matched_target_length(64, inputs.mean(), targets.mean(), targets.max()))
        slots = {lookahead: packing.assign_rows(inputs, targets, row_shape, 8, lookahead).num_batches
                 for lookahead in (0, packing.LOOKAHEAD)}
        self.assertLess(slots[packing.LOOKAHEAD], 0.9 * slots[0])
        with mock.patch.object(packing, "FILL_WEIGHT", 0.0):
            balance_only = packing.assign_rows(inputs, targets, row_shape, 8).num_batches
        self.assertLess(slots[packing.LOOKAHEAD], balance_only)

    def test_next_fit_recovers_each_batch_rows(self):
        inputs, targets = example_lengths(random_examples(2000, seed=4))
        placement = packing.assign_rows(inputs, targets, (64, 16), 8)
        for batch in placement.batches():
            np.testing.assert_array_equal(packing.next_fit_rows(inputs[batch], targets[batch], (64, 16)),
                                          placement.row[batch])

    def test_a_later_pass_waits_for_the_earlier_one(self):
        """Without pass_starts, the small (1, 1) of the second pass closes row 0's gap before (6, 1) is placed; with
        it, the first pass is placed whole first."""
        lengths = [4, 6, 1], [1, 1, 1]
        self.assertEqual(packing.assign_rows(*lengths, (8, 8), 2).order.tolist(), [0, 2, 1])
        self.assertEqual(packing.assign_rows(*lengths, (8, 8), 2, pass_starts=[2]).order.tolist(), [0, 1, 2])

    def test_max_batches_leaves_the_rest_out(self):
        placement = packing.assign_rows([5, 4, 3, 2, 5, 7], [1] * 6, (8, 8), rows_per_batch=2, max_batches=1)
        self.assertEqual(placement.batch.tolist(), [0, 0, 0, 0, -1, -1])
        self.assertEqual((placement.num_batches, placement.exhausted), (1, False))

    def test_an_example_longer_than_a_row_is_refused_not_split(self):
        with self.assertRaisesRegex(ValueError, "example 1 has 3 input and 9 target ids, more than a packed row's "
                                                "8 and 8: truncate"):
            packing.assign_rows([2, 3], [2, 9], (8, 8), 2)

    def test_matched_target_length(self):
        self.assertEqual(packing.matched_target_length(512, 100.0, 25.0, 40), 128)
        self.assertEqual(packing.matched_target_length(512, 100.0, 1.0, 40), 40)  # every example must fit

    def test_fitted_target_length_pads_least_of_the_lengths_near_the_ratio(self):
        inputs, targets = example_lengths(random_examples(3000, seed=5))
        fitted = packing.fitted_target_length(inputs, targets, 64, 8, targets.max())
        ratio = 64 * targets.mean() / inputs.mean()
        self.assertBetween(fitted, np.floor(ratio) - 2, np.ceil(ratio) + 2)

        def worse_padding(target_length):
            placement = packing.assign_rows(inputs, targets, (64, target_length), 8)
            placed, slots = np.concatenate(placement.batches()[:-1]), (placement.num_batches - 1) * 8
            return max(1 - inputs[placed].sum() / (slots * 64), 1 - targets[placed].sum() / (slots * target_length))

        self.assertLessEqual(worse_padding(fitted), worse_padding(packing.matched_target_length(
            64, inputs.mean(), targets.mean(), targets.max())) + 0.005)
        self.assertEqual(packing.fitted_target_length(inputs, targets, 64, 8, 40), 40)  # every example must fit


class PackRowsTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        examples = random_examples(60, seed=7)
        first = packing.assign_rows(*example_lengths(examples), (64, 24), 4, 16).batches()[0]  # they fit 4 rows
        self.examples = [examples[i] for i in first]
        self.batch = packing.pack_examples(self.examples, 4, (64, 24), PAD, START)

    def test_round_trip_through_segment_ids(self):
        rows_of = packing.next_fit_rows(*example_lengths(self.examples), (64, 24))
        rows = packing.unpack_rows(self.batch)
        for row in range(4):
            expected = [self.examples[i] for i in np.flatnonzero(rows_of == row)]
            self.assertLen(rows[row], len(expected))
            for (inputs, targets), (want_inputs, want_targets) in zip(rows[row], expected):
                np.testing.assert_array_equal(inputs, want_inputs)
                np.testing.assert_array_equal(targets, want_targets)
        self.assertEqual(packing.examples_in(self.batch), len(self.examples))
        self.assertGreater(len(self.examples), 4)  # several examples share rows

    def test_shapes_and_padding_values(self):
        batch = self.batch
        for key in ("input_ids", "attention_mask", "encoder_segment_ids", "encoder_positions"):
            self.assertEqual(batch[key].shape, (4, 64), key)
        for key in ("labels", "decoder_input_ids", "decoder_segment_ids", "decoder_positions"):
            self.assertEqual(batch[key].shape, (4, 24), key)
        padding, target_padding = batch["encoder_segment_ids"] == 0, batch["decoder_segment_ids"] == 0
        np.testing.assert_array_equal(batch["attention_mask"], (~padding).astype(np.int64))
        self.assertTrue(np.all(batch["input_ids"][padding] == PAD))
        self.assertTrue(np.all(batch["labels"][target_padding] == -100))
        self.assertTrue(np.all(batch["decoder_input_ids"][target_padding] == PAD))
        self.assertTrue(np.all(batch["encoder_positions"][padding] == 0))
        self.assertTrue(np.all(batch["decoder_positions"][target_padding] == 0))

    def test_decoder_restarts_and_positions_count_within_each_example(self):
        batch = self.batch
        for row in range(4):
            for key, positions_key in (("encoder_segment_ids", "encoder_positions"),
                                       ("decoder_segment_ids", "decoder_positions")):
                segments = batch[key][row]
                for k in range(1, segments.max() + 1):
                    np.testing.assert_array_equal(batch[positions_key][row][segments == k],
                                                  np.arange((segments == k).sum()))
            segments = batch["decoder_segment_ids"][row]
            for k in range(1, segments.max() + 1):
                labels, decoder_inputs = batch["labels"][row][segments == k], batch["decoder_input_ids"][row][
                    segments == k]
                self.assertEqual(decoder_inputs[0], START)
                np.testing.assert_array_equal(decoder_inputs[1:], labels[:-1])
        # segments are numbered 1, 2, ... in slot order, the same in encoder and decoder
        for row in range(4):
            encoder, decoder = batch["encoder_segment_ids"][row], batch["decoder_segment_ids"][row]
            self.assertEqual(encoder[encoder > 0].tolist(), sorted(encoder[encoder > 0].tolist()))
            self.assertEqual(sorted(set(encoder[encoder > 0])), sorted(set(decoder[decoder > 0])))

    def test_a_batch_its_rows_cannot_hold_is_refused(self):
        with self.assertRaisesRegex(ValueError, "2 examples need 2 rows of \\(8, 8\\), more than a batch's 1"):
            packing.pack_examples([([5] * 6, [1]), ([5] * 6, [1])], 1, (8, 8), PAD, START)

    def test_padding_fractions(self):
        batch = packing.pack_rows([([2, 3, 1], [4, 1]), ([5, 1], [1])], [0, 1], 2, (4, 4), PAD, START)
        self.assertEqual(packing.padding_fractions(batch), (1 - 5 / 8, 1 - 3 / 8))
        unpacked = {"input_ids": np.ones((2, 4)), "labels": np.array([[1, 2, -100, -100], [1, 2, 3, 4]])}
        self.assertEqual(packing.padding_fractions(unpacked), (0.0, 0.25))  # no attention_mask: no input padding
        self.assertEqual(packing.examples_in(unpacked), 2)


def ul2_tokenizer():
    tokenizer = copy.deepcopy(in_memory_t5_tokenizer())  # the helper's is cached, and adding tokens changes it
    building.add_mode_tokens(tokenizer, ul2.mode_tokens(UL2_DENOISERS))
    return tokenizer


UL2_DENOISERS = check_denoisers(constants.UL2_DENOISERS, "ul2")
PREFIX_LM_DENOISERS = check_denoisers(constants.PREFIX_LM_DENOISERS, "prefix_lm")


def windows_dataset(tokens_length, count, seed=0):
    import datasets

    ids = random_word_ids(tokens_length * count, seed=seed).reshape(count, tokens_length)
    return datasets.Dataset.from_dict({"input_ids": ids.tolist()})


class PackedUL2Test(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = ul2_tokenizer()

    def collator(self, denoisers=UL2_DENOISERS, input_length=32, seed=1):
        return ul2.DataCollatorForUL2(self.tokenizer, denoisers, input_length=input_length, seed=seed,
                                      return_tensors="np")

    @parameterized.named_parameters(("ul2", UL2_DENOISERS), ("prefix_lm", PREFIX_LM_DENOISERS))
    def test_example_lengths_are_what_the_collator_gives(self, denoisers):
        collator = self.collator(denoisers)
        windows = windows_dataset(collator.tokens_length, 200)["input_ids"]
        for epoch in (0, 3):
            inputs, targets = collator.example_lengths(windows, epoch)
            collator.set_epoch(epoch)
            batch = collator([{"input_ids": window} for window in windows])
            np.testing.assert_array_equal(inputs, batch["attention_mask"].sum(axis=1))
            np.testing.assert_array_equal(targets, (batch["labels"] != -100).sum(axis=1))

    def test_packed_rows_hold_the_unpacked_windows(self):
        """Each packed batch holds the sampler's windows, corrupted exactly as the unpacked collator corrupts them
        in that epoch, in placement order."""
        collator = self.collator()
        dataset = windows_dataset(collator.tokens_length, 120)
        sampler, packer = packed_batches.packed_windows(dataset, collator, (128, 48), 4, seed=2)
        unpadded = packed_batches.UnpaddedExamples(collator)
        for epoch in (0, 1):
            sampler.set_epoch(epoch)
            collator.set_epoch(epoch)
            indices = next(iter(sampler))
            features = [dataset[i] for i in indices]
            rows = packing.unpack_rows(packer(features))
            packed = [example for row in rows for example in row]
            expected = unpadded(features)
            self.assertLen(packed, len(indices))
            rows_of = packing.next_fit_rows(*example_lengths(expected), (128, 48))
            order = np.lexsort((np.arange(len(expected)), rows_of))  # row by row, in placement order
            for (inputs, targets), index in zip(packed, order):
                np.testing.assert_array_equal(inputs, expected[index][0])
                np.testing.assert_array_equal(targets, expected[index][1])

    @parameterized.named_parameters(
        # UL2: windows of 50 (as unpacked at --input_length 51), targets 512 x the mean targets / inputs
        ("ul2", UL2_DENOISERS, (51, 50, 34, 256)),  # 34: X(3, .5)'s targets of 50 ids
        ("prefix_lm", PREFIX_LM_DENOISERS, (51, 51, 51, 512)))  # inputs and targets alike on average
    def test_packed_lengths_at_512(self, denoisers, expected):
        self.assertEqual(ul2.packed_lengths(512, denoisers), expected)

    @parameterized.named_parameters(("ul2", UL2_DENOISERS), ("prefix_lm", PREFIX_LM_DENOISERS))
    def test_default_packing_padding_at_512(self, denoisers, bound=0.05):
        """What docs/objectives.md states for batches of 8 rows: <= 5 % padding of input and of target slots with
        the default window (a tenth of the row; an eighth left UL2 at 6 %: its windows all keep at least half their
        ids as inputs, and a row's last gap shorter than that is never filled)."""
        window_inputs, tokens_length, window_targets, target_length = ul2.packed_lengths(512, denoisers)
        collator = ul2.DataCollatorForUL2(self.tokenizer, denoisers, input_length=window_inputs, seed=0,
                                          tokens_length=tokens_length)
        sampler, _ = packed_batches.packed_windows(windows_dataset(tokens_length, 10000), collator,
                                                   (512, target_length), 8, seed=0)
        encoder, decoder = sampler.expected_padding()
        self.assertLessEqual(encoder, bound)
        self.assertLessEqual(decoder, bound)


if __name__ == "__main__":
    absltest.main()
