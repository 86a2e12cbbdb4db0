"""Spec of data_collator: T5 length math, span-corruption invariants, seeding, outputs, and bad-argument errors."""
import functools
import itertools
import struct

import numpy as np
import scipy.stats
import torch
import transformers
from absl.testing import absltest, parameterized
from tokenizers import Tokenizer, models

import data_collator
from data_collator import DataCollatorForT5SpanCorruption, compute_input_and_target_lengths, count_noise
from t5kit.errors import UsageError
from tests.helpers import in_memory_t5_tokenizer, random_word_ids, require

# (input_length, noise_density, mean_noise_span_length): T5's default, shorter windows, denser/shorter spans.
COMBOS = (
    ("t5_default", 512, 0.15, 3.0),
    ("short", 128, 0.15, 3.0),
    ("dense_short_spans", 64, 0.3, 2.0),
    ("long_spans", 100, 0.2, 5.0),
    ("half_noise", 256, 0.5, 3.0),  # exercises T5's density-0.5 length hack
)


@functools.lru_cache(maxsize=None)
def real_tokenizer():
    return transformers.T5TokenizerFast.from_pretrained(str(require("t5_spiece")))


@functools.lru_cache(maxsize=None)
def wiki_ids():
    """Real token ids: the start of wikitext-2 test, tokenized line by line and concatenated, as data/corpus.py
    packs."""
    lines = require("wikitext-2-raw/wiki.test.raw").read_text(encoding="utf-8")[:80_000].splitlines()
    return np.concatenate([np.asarray(ids) for ids in real_tokenizer()(lines)["input_ids"] if ids])


# The spec runs twice: on the real T5 tokenizer and real text (../shared/data), and on a T5-layout tokenizer built
# in memory with Zipf-distributed word ids, so that it never depends on the data being there.
SOURCES = {"real": (real_tokenizer, wiki_ids),
           "in_memory": (in_memory_t5_tokenizer, lambda: random_word_ids(200_000))}


def tokenizer_of(source):
    return SOURCES[source][0]()


def windows(tokens_length, count, source="in_memory"):
    """`count` windows of `tokens_length` ids (wrapping round the sample when it runs out)."""
    ids = np.resize(SOURCES[source][1](), count * tokens_length)
    return [{"input_ids": row} for row in ids.reshape(count, tokens_length)]


def make_collator(input_length=512, noise_density=0.15, mean_noise_span_length=3.0, tokenizer=None,
                  source="in_memory", **kwargs):
    _, target_length = compute_input_and_target_lengths(input_length, noise_density, mean_noise_span_length)
    return DataCollatorForT5SpanCorruption(
        tokenizer or tokenizer_of(source), noise_density=noise_density,
        mean_noise_span_length=mean_noise_span_length, input_length=input_length, target_length=target_length,
        **kwargs)


def word_level_tokenizer(num_sentinels):
    """A tiny in-memory tokenizer with T5's specials and `num_sentinels` sentinels numbered upwards from 3,
    the opposite direction to T5's vocabulary."""
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    vocab.update({f"<extra_id_{i}>": 3 + i for i in range(num_sentinels)})
    vocab.update({f"w{i}": len(vocab) + i for i in range(50)})
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")),
        pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


def split_at_sentinels(row, sentinels):
    """Labels row -> list of spans, one per sentinel, in order (the trailing EOS dropped)."""
    spans, sentinel_set = [], set(sentinels.tolist())
    for token in row[:-1].tolist():
        if token in sentinel_set:
            spans.append([])
        else:
            spans[-1].append(token)
    return spans


def count_runs(mask):
    """Number of maximal runs of True per row of a (B, T) boolean array."""
    return (mask & ~np.pad(mask, ((0, 0), (1, 0)))[:, :-1]).sum(axis=1)


def segmentation_picks(seed, batch_size, num_items, num_segments):
    """Uniform draws picks[:, step] in [step, num_items - 1), as draw_gap_picks makes for one segmentation."""
    return np.random.default_rng(seed).integers(np.arange(num_segments - 1), num_items - 1,
                                                size=(batch_size, num_segments - 1))


class LengthMathTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("t5_default", 512, 0.15, 3.0, (568, 114)),  # nanoT5 / HF run_t5_mlm_flax
        # By hand: 141 -> 21 noise, 7 spans, 120 + 7 + 1 = 128 inputs; 142 -> 129 > 128.
        ("short", 128, 0.15, 3.0, (141, 29)),
        # By hand: 767 -> 384 noise, 128 spans, 512 inputs but 513 targets, so the 0.5 hack steps back to 766.
        ("half_noise_hack", 512, 0.5, 3.0, (766, 512)),
        # T5's own test of random_spans_helper (t5/data/preprocessors_test.py): the search starts at 63.
        ("t5_test_mean_span_2", 64, 0.2, 2.0, (70, 22)),
        ("t5_test_mean_span_1", 64, 0.2, 1.0, (63, 27)),
        # By hand: 511 -> 77 noise tokens in 77 spans, 434 + 77 + 1 = 512 inputs, 77 + 77 + 1 = 155 targets.
        ("mean_span_1", 512, 0.15, 1.0, (511, 155)),
    )
    def test_known_values(self, input_length, density, span, expected):
        self.assertEqual(compute_input_and_target_lengths(input_length, density, span), expected)

    @parameterized.named_parameters(*[combo for combo in COMBOS if combo[2] != 0.5])
    def test_matches_brute_force_definition(self, input_length, density, span):
        """tokens_length is the longest window whose corrupted form (kept + one sentinel per noise span + EOS)
        fits input_length; targets hold noise + one sentinel per kept span + EOS."""
        def corrupted(tokens):
            noise, spans = round(tokens * density), round(round(tokens * density) / span)
            return tokens - noise + spans + 1, noise + spans + 1

        tokens_length = max(t for t in range(input_length - 1, 4 * input_length)
                            if corrupted(t)[0] <= input_length)
        self.assertEqual(compute_input_and_target_lengths(input_length, density, span),
                         (tokens_length, corrupted(tokens_length)[1]))


def float32(value):
    """value rounded to the nearest IEEE float32, through struct: the product or quotient of two float32 values
    computed in float64 and rounded once to float32 is the correctly rounded float32 result, as TF computes it."""
    return struct.unpack("f", struct.pack("f", value))[0]


def t5_mask_counts(length, density, span):
    """T5's random_spans_noise_mask counts transcribed: float32 product and quotient, round half to even (tf.round
    and Python's round both), noise clipped to [1, length - 1], at least one span."""
    noise = min(max(round(float32(float32(length) * float32(density))), 1), length - 1)
    return noise, max(round(float32(float32(noise) / float32(span))), 1)


def python_counts(length, density, span):
    """The same counts in Python floats (float64), as T5's random_spans_helper computes the lengths."""
    noise = round(length * density)
    return noise, round(noise / span)


class NoiseRoundingTest(parameterized.TestCase):
    """The noise mask rounds in float32, the length helper in float64, each as T5 does."""

    def test_length_190_at_density_015(self):
        # float32(190) * float32(0.15) = 28.500002 -> 29; 190 * 0.15 = 28.5 in float64 -> 28 (half to even).
        self.assertEqual(float32(float32(190) * float32(0.15)), 28.500001907348633)
        self.assertEqual((count_noise(190, 0.15, 3.0), python_counts(190, 0.15, 3.0)), ((29, 10), (28, 9)))

    @parameterized.named_parameters(
        # (input_length, the helper's (tokens_length, targets_length)): windows whose float32 noise count is one
        # more than the helper's float64 count, so one more span: inputs come out as long, targets 2 longer.
        ("172", 172, (190, 38)), ("316", 316, (350, 70)), ("352", 352, (390, 78)), ("604", 604, (670, 134)))
    def test_mask_counts_are_float32_where_float64_differs(self, input_length, helper_lengths):
        self.assertEqual(compute_input_and_target_lengths(input_length, 0.15, 3.0), helper_lengths)
        tokens_length = helper_lengths[0]
        self.assertEqual(count_noise(tokens_length, 0.15, 3.0), t5_mask_counts(tokens_length, 0.15, 3.0))
        noise, spans = python_counts(tokens_length, 0.15, 3.0)
        self.assertEqual(count_noise(tokens_length, 0.15, 3.0), (noise + 1, spans + 1))

    def test_collator_cuts_the_longer_targets_as_t5_does(self):
        # 190 ids: 29 noise tokens in 10 spans -> 161 + 10 + 1 = 172 inputs (exact) and 29 + 10 + 1 = 40 targets,
        # cut before EOS to the helper's 38 (seqio's append_eos_after_trim).
        with self.assertLogs("data_collator", "WARNING") as logs:
            collator = make_collator(172, 0.15, 3.0, seed=0, return_tensors="np")
        self.assertIn("puts 29 noise tokens in 10 span(s) into a window of 190 ids", logs.output[0])
        features = windows(190, 3)
        batch = collator(features)
        self.assertEqual((batch["input_ids"].shape, batch["labels"].shape), ((3, 172), (3, 38)))
        self.assertNotIn("attention_mask", batch)
        sentinels = collator.sentinel_ids
        self.assertEqual(np.isin(batch["input_ids"], sentinels).sum(axis=1).tolist(), [10] * 3)
        self.assertEqual(batch["labels"][:, -1].tolist(), [1] * 3)  # EOS stays last after the cut
        noise_tokens = [len(feature["input_ids"]) - (row.size - 1 - np.isin(row, sentinels).sum())
                        for feature, row in zip(features, batch["input_ids"])]
        self.assertEqual(noise_tokens, [29] * 3)

    @parameterized.named_parameters(("t5_default", 512, (568, 114), (85, 28)), ("short", 128, (141, 29), (21, 7)))
    def test_float32_and_float64_agree_elsewhere(self, input_length, helper_lengths, counts):
        self.assertEqual(compute_input_and_target_lengths(input_length, 0.15, 3.0), helper_lengths)
        self.assertEqual(count_noise(helper_lengths[0], 0.15, 3.0), counts)
        self.assertEqual(t5_mask_counts(helper_lengths[0], 0.15, 3.0), counts)


# A grid of settings: every shape compute_input_and_target_lengths returns must be accepted by the collator.
GRID_INPUT_LENGTHS = (8, 16, 63, 64, 128, 512, 1024)
GRID_DENSITIES = (0.001, 0.01, 0.05, 0.15, 0.2, 0.3, 0.5)
GRID_MEAN_SPANS = (1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


class HelperShapesTest(parameterized.TestCase):
    """T5's helper and T5's noise mask disagree at the edges (the mask keeps >= 1 noise token and >= 1 span; the
    density-0.5 step): there the corrupted window is cut before EOS or padded to the helper's lengths, as T5's
    append_eos_after_trim and feature converter do. Everywhere else it has exactly those lengths unpadded."""

    def test_every_helper_shape_is_accepted_and_produced(self):
        tokenizer = in_memory_t5_tokenizer(num_words=3000, num_sentinels=600)  # 1024 at mean span 1: 511 spans
        kinds = {"exact": 0, "padded": 0, "cut": 0}
        for input_length, density, span in itertools.product(GRID_INPUT_LENGTHS, GRID_DENSITIES, GRID_MEAN_SPANS):
            with self.subTest(input_length=input_length, density=density, span=span):
                tokens_length, target_length = compute_input_and_target_lengths(input_length, density, span)
                collator = DataCollatorForT5SpanCorruption(
                    tokenizer, noise_density=density, mean_noise_span_length=span, input_length=input_length,
                    target_length=target_length, seed=0, return_tensors="np")
                ids = 3 + np.arange(2 * tokens_length).reshape(2, tokens_length) % 2000
                batch = collator([{"input_ids": row} for row in ids])
                self.assertEqual(batch["input_ids"].shape, (2, input_length))
                self.assertEqual(batch["labels"].shape, (2, target_length))
                self.assertEqual(batch["decoder_input_ids"].shape, (2, target_length))
                real_inputs = batch.get("attention_mask", np.ones_like(batch["input_ids"])).astype(bool)
                real_labels = batch["labels"] != data_collator.LABEL_PAD_ID
                # EOS closes the real part of every row, cut or not; padding follows it.
                self.assertTrue((batch["input_ids"][:, real_inputs[0].sum() - 1] == 1).all())
                self.assertTrue((batch["labels"][:, real_labels[0].sum() - 1] == 1).all())
                self.assertTrue((batch["input_ids"][~real_inputs] == 0).all())
                raw = (collator.raw_input_length, collator.raw_target_length)
                kinds["exact" if raw == (input_length, target_length) else
                      "padded" if raw[0] < input_length else "cut"] += 1
                self.assertEqual(real_inputs.all() and real_labels.all(), raw[0] >= input_length)
        # Padded: density 0.5 at mean span 1 (one per input length). Cut: the mask's one-noise-token and one-span
        # minimum where the helper counts none (low densities, long mean spans).
        self.assertEqual(kinds, {"exact": 203, "padded": 7, "cut": 84})

    @parameterized.named_parameters(
        # 512 ids, 1 noise token but round(1 / 3) = 0 spans by the helper: T5's mask makes 1 span, so 513 inputs
        # and 3 targets, cut before EOS to 512 and 2 (T5: append_eos_after_trim).
        ("very_low_density", 512, 0.001, 3.0, (512, 2), (512, 2), False),
        ("mean_span_1", 512, 0.15, 1.0, (512, 155), (512, 155), False),
        # 62 ids (the density-0.5 step): 31 noise tokens in 31 spans, 63 inputs and 63 targets, padded to 64.
        ("half_density_mean_span_1", 64, 0.5, 1.0, (64, 64), (63, 63), True),
    )
    def test_settings_t5_accepts(self, input_length, density, span, shapes, real, padded):
        tokens_length, target_length = compute_input_and_target_lengths(input_length, density, span)
        collator = make_collator(input_length, density, span, seed=0, return_tensors="np")
        batch = collator(windows(tokens_length, 2))
        self.assertEqual((batch["input_ids"].shape[1], batch["labels"].shape[1]), shapes)
        self.assertEqual(("attention_mask" in batch), padded)
        if padded:
            self.assertEqual(batch["attention_mask"].sum(axis=1).tolist(), [real[0]] * 2)
            self.assertEqual((batch["labels"] != data_collator.LABEL_PAD_ID).sum(axis=1).tolist(), [real[1]] * 2)
            self.assertEqual(batch["decoder_input_ids"].min(), 0)  # padding enters the decoder as the pad id


class SpanCorruptionTest(parameterized.TestCase):
    SOURCE = "real"  # InMemorySpanCorruptionTest runs the same spec on the in-memory tokenizer


    @parameterized.named_parameters(*COMBOS)
    def test_exact_shapes(self, input_length, density, span):
        collator = make_collator(input_length, density, span, seed=0, source=self.SOURCE)
        tokens_length, target_length = compute_input_and_target_lengths(input_length, density, span)
        batch = collator(windows(tokens_length, 3, self.SOURCE))
        self.assertEqual(tuple(batch["input_ids"].shape), (3, input_length))
        self.assertEqual(tuple(batch["labels"].shape), (3, target_length))
        self.assertEqual(tuple(batch["decoder_input_ids"].shape), (3, target_length))
        self.assertEqual(batch["input_ids"].dtype, torch.int64)

    @parameterized.named_parameters(*COMBOS)
    def test_round_trip_restores_window(self, input_length, density, span):
        """Each input sentinel replaced by the labels' span after the same sentinel gives back the window."""
        collator = make_collator(input_length, density, span, seed=1, return_tensors="np", source=self.SOURCE)
        features = windows(collator.tokens_length, 8, self.SOURCE)
        batch = collator(features)
        sentinels = collator.sentinel_ids
        for feature, inputs, labels in zip(features, batch["input_ids"], batch["labels"]):
            spans = iter(split_at_sentinels(labels, sentinels))
            restored = [tok for t in inputs[:-1].tolist() for tok in (next(spans) if t in sentinels else [t])]
            np.testing.assert_array_equal(restored, feature["input_ids"])

    @parameterized.named_parameters(*COMBOS)
    def test_sentinels_in_order_and_eos_last(self, input_length, density, span):
        collator = make_collator(input_length, density, span, seed=2, return_tensors="np", source=self.SOURCE)
        batch = collator(windows(collator.tokens_length, 4, self.SOURCE))
        _, num_spans = count_noise(collator.tokens_length, density, span)
        expected = [tokenizer_of(self.SOURCE).convert_tokens_to_ids(f"<extra_id_{i}>") for i in range(num_spans)]
        for key in ("input_ids", "labels"):
            for row in batch[key]:
                self.assertEqual(row[np.isin(row, expected)].tolist(), expected)
                self.assertEqual(row[-1], tokenizer_of(self.SOURCE).eos_token_id)
        # The first span is always kept, so every target starts with <extra_id_0>.
        self.assertTrue((batch["labels"][:, 0] == expected[0]).all())

    def test_real_sentinel_ids_decrease(self):
        np.testing.assert_array_equal(make_collator(source=self.SOURCE).sentinel_ids[:3], [32099, 32098, 32097])

    @parameterized.named_parameters(*COMBOS)
    def test_exact_noise_and_span_counts(self, input_length, density, span):
        tokens_length, _ = compute_input_and_target_lengths(input_length, density, span)
        num_noise, num_spans = count_noise(tokens_length, density, span)
        mask = data_collator.random_spans_noise_mask(np.random.default_rng(3), 64, tokens_length, density, span)
        np.testing.assert_array_equal(mask.sum(axis=1), num_noise)
        np.testing.assert_array_equal(count_runs(mask), num_spans)
        np.testing.assert_array_equal(count_runs(~mask), num_spans)
        self.assertFalse(mask[:, 0].any())  # starts with a kept span ...
        self.assertTrue(mask[:, -1].all())  # ... so with equal counts it ends with a noise span

    def test_default_counts(self):
        self.assertEqual(count_noise(568, 0.15, 3.0), (85, 28))  # round(85.2) = 85, round(85 / 3) = 28

    def test_mean_noise_span_length(self):
        """Per window the mean span length is num_noise / num_spans exactly (85 / 28 at T5's defaults), within
        the rounding of the span count (|n/k - m| <= m * 0.5 / k) of mean_noise_span_length. Across draws each
        single span must average n / k too (spans are exchangeable): checked on the first and last noise span
        within 4 standard errors of the sample mean (a fixed seed makes the test deterministic)."""
        num_noise, num_spans = count_noise(568, 0.15, 3.0)
        self.assertLessEqual(abs(num_noise / num_spans - 3.0), 3.0 * 0.5 / num_spans)
        mask = data_collator.random_spans_noise_mask(np.random.default_rng(4), 4000, 568, 0.15, 3.0)
        self.assertEqual(mask.sum() / count_runs(mask).sum(), num_noise / num_spans)
        starts = data_collator.random_segmentation_starts(segmentation_picks(5, 4000, num_noise, num_spans),
                                                          num_noise, num_spans)
        lengths = np.diff(np.concatenate([starts, np.full((4000, 1), num_noise)], axis=1), axis=1)
        for column in (0, -1):
            sample = lengths[:, column]
            stderr = sample.std(ddof=1) / np.sqrt(len(sample))
            self.assertLess(abs(sample.mean() - num_noise / num_spans), 4 * stderr)

    def test_all_valid_masks_equally_likely(self):
        """Length 12 at density 0.5, span 3: 6 noise tokens in 2 spans, 6 kept in 2 spans, C(5,1)^2 = 25 masks.
        Every one must appear, nothing else may, and the counts must pass a chi-square test at p = 1e-3."""
        valid = {bits for bits in itertools.product((False, True), repeat=12)
                 if sum(bits) == 6 and not bits[0] and bits[-1] and count_runs(np.array([bits]))[0] == 2}
        self.assertLen(valid, 25)
        draws = data_collator.random_spans_noise_mask(np.random.default_rng(6), 5000, 12, 0.5, 3.0)
        seen = {}
        for row in map(tuple, draws.tolist()):
            seen[row] = seen.get(row, 0) + 1
        self.assertEqual(set(seen), valid)
        _, p_value = scipy.stats.chisquare(list(seen.values()))
        self.assertGreater(p_value, 1e-3)

    @parameterized.named_parameters(("two_of_ten", 10, 2), ("four_of_eight", 8, 4), ("five_of_twelve", 12, 5))
    def test_segmentations_equally_likely(self, num_items, num_segments):
        """All C(num_items - 1, num_segments - 1) splits into non-empty segments appear, equally often
        (chi-square at p = 1e-3, fixed seed)."""
        starts = data_collator.random_segmentation_starts(segmentation_picks(8, 20_000, num_items, num_segments),
                                                          num_items, num_segments)
        self.assertTrue((np.diff(np.concatenate([starts, np.full((20_000, 1), num_items)], 1), axis=1) > 0).all())
        _, counts = np.unique(starts, axis=0, return_counts=True)
        self.assertLen(counts, len(list(itertools.combinations(range(num_items - 1), num_segments - 1))))
        self.assertGreater(scipy.stats.chisquare(counts).pvalue, 1e-3)

    def test_masks_do_not_depend_on_how_the_batch_is_split(self):
        """One batch of 4 gets the masks of two batches of 2 from the same generator, so gradient accumulation
        and the per-device batch size leave the training data unchanged."""
        rows = windows(568, 4, self.SOURCE)
        whole = make_collator(seed=11, return_tensors="np", source=self.SOURCE)(rows)
        halves = make_collator(seed=11, return_tensors="np", source=self.SOURCE)
        first, second = halves(rows[:2]), halves(rows[2:])
        for key in ("input_ids", "labels"):
            np.testing.assert_array_equal(whole[key], np.concatenate([first[key], second[key]]))

    def test_decoder_input_ids_are_labels_shifted_right(self):
        batch = make_collator(seed=7, return_tensors="np", source=self.SOURCE)(windows(568, 2, self.SOURCE))
        np.testing.assert_array_equal(batch["decoder_input_ids"][:, 0], tokenizer_of(self.SOURCE).pad_token_id)
        np.testing.assert_array_equal(batch["decoder_input_ids"][:, 1:], batch["labels"][:, :-1])



class InMemorySpanCorruptionTest(SpanCorruptionTest):
    SOURCE = "in_memory"

class SeedAndOutputTest(parameterized.TestCase):
    SOURCE = "real"  # InMemorySeedAndOutputTest runs the same spec on the in-memory tokenizer


    def test_same_seed_same_batches(self):
        first, second = make_collator(seed=11, source=self.SOURCE), make_collator(seed=11, source=self.SOURCE)
        for _ in range(2):  # the generator's state advances identically across calls too
            a, b = first(windows(568, 4, self.SOURCE)), second(windows(568, 4, self.SOURCE))
            for key in a:
                torch.testing.assert_close(a[key], b[key])

    def test_different_seed_different_batch(self):
        rows = windows(568, 4, self.SOURCE)
        a, b = make_collator(seed=11, source=self.SOURCE)(rows), make_collator(seed=12, source=self.SOURCE)(rows)
        self.assertFalse(torch.equal(a["input_ids"], b["input_ids"]))

    def test_explicit_generator_per_call(self):
        collator = make_collator(seed=0, source=self.SOURCE)
        a = collator(windows(568, 2, self.SOURCE), rng=np.random.default_rng(99))
        b = collator(windows(568, 2, self.SOURCE), rng=np.random.default_rng(99))
        torch.testing.assert_close(a["labels"], b["labels"])

    def test_masks_are_a_function_of_seed_epoch_and_window(self):
        """Keyed masks: order, batch companions and DataLoader workers change nothing; epoch and seed do."""
        rows = windows(568, 4, self.SOURCE)
        collator = make_collator(seed=5, return_tensors="np", source=self.SOURCE)
        forward = collator(rows)["labels"]
        backward = collator(rows[::-1])["labels"][::-1]
        np.testing.assert_array_equal(forward, backward)
        loader = torch.utils.data.DataLoader(rows, batch_size=1, num_workers=2, collate_fn=collator)
        np.testing.assert_array_equal(np.concatenate([b["labels"] for b in loader]), forward)
        collator.set_epoch(1)
        self.assertFalse(np.array_equal(collator(rows)["labels"], forward))
        collator.set_epoch(0)
        np.testing.assert_array_equal(collator(rows)["labels"], forward)
        other_seed = make_collator(seed=6, return_tensors="np", source=self.SOURCE)
        self.assertFalse(np.array_equal(other_seed(rows)["labels"], forward))

    def test_keyed_masks_are_uniform_over_segmentations(self):
        """The hash-derived picks give every split into non-empty segments equally often (chi-square at
        p = 1e-3), like the generator-drawn ones: 12 items, 5 segments, keys from 20,000 distinct windows."""
        num_items, num_segments = 12, 5
        keys = data_collator.window_keys(np.arange(20_000, dtype=np.int64)[:, None], seed=3, epoch=0)
        picks = data_collator.keyed_gap_picks(keys, num_items, num_items, num_segments)[:, :num_segments - 1]
        starts = data_collator.random_segmentation_starts(picks, num_items, num_segments)
        _, counts = np.unique(starts, axis=0, return_counts=True)
        self.assertLen(counts, len(list(itertools.combinations(range(num_items - 1), num_segments - 1))))
        self.assertGreater(scipy.stats.chisquare(counts).pvalue, 1e-3)

    def test_numpy_and_torch_outputs_agree(self):
        as_np = make_collator(seed=13, return_tensors="np", source=self.SOURCE)(windows(568, 2, self.SOURCE))
        as_pt = make_collator(seed=13, return_tensors="pt", source=self.SOURCE)(windows(568, 2, self.SOURCE))
        self.assertEqual(set(as_np), {"input_ids", "labels", "decoder_input_ids"})
        for key, value in as_np.items():
            self.assertIsInstance(value, np.ndarray)
            self.assertIsInstance(as_pt[key], torch.Tensor)
            np.testing.assert_array_equal(as_pt[key].numpy(), value)

    def test_accepts_lists(self):
        rows = [{"input_ids": f["input_ids"].tolist()} for f in windows(568, 2, self.SOURCE)]
        batch = make_collator(seed=0, source=self.SOURCE)(rows)
        self.assertEqual(tuple(batch["input_ids"].shape), (2, 512))

    def test_wrong_window_length_names_tokens_length(self):
        with self.assertRaisesRegex(ValueError, "tokens_length=568"):
            make_collator(source=self.SOURCE)(windows(512, 2, self.SOURCE))

    def test_sentinels_looked_up_by_name(self):
        """A tokenizer numbering sentinels upwards from 3 gets those ids, not ids derived from its vocab size."""
        collator = make_collator(64, 0.15, 3.0, tokenizer=word_level_tokenizer(10), seed=0, return_tensors="np")
        _, num_spans = count_noise(collator.tokens_length, 0.15, 3.0)
        np.testing.assert_array_equal(collator.sentinel_ids, 3 + np.arange(num_spans))
        batch = collator([{"input_ids": 13 + np.arange(collator.tokens_length) % 50}])
        self.assertEqual(batch["labels"][0, 0], 3)



class InMemorySeedAndOutputTest(SeedAndOutputTest):
    SOURCE = "in_memory"

class BadArgumentsTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("density_above_one", dict(noise_density=1.5), "--noise_density=1.5"),
        ("density_zero", dict(noise_density=0.0), "--noise_density=0.0"),
        ("span_below_one", dict(mean_noise_span_length=0.5), "--mean_noise_span_length=0.5"),
        ("more_spans_than_kept_tokens", dict(noise_density=0.9, mean_noise_span_length=1.0), "--noise_density"),
        ("target_length_mismatch", dict(target_length=100),
         "target_length=100 does not match .*windows of 568 ids give targets of 114"),
        ("input_length_too_short", dict(input_length=1, target_length=1), "--input_length=1"),
        ("unknown_return_tensors", dict(return_tensors="tf"), "return_tensors='tf'"),
    )
    def test_raises_usage_error_naming_flag(self, kwargs, message):
        with self.assertRaisesRegex(UsageError, message):
            DataCollatorForT5SpanCorruption(in_memory_t5_tokenizer(), **kwargs)

    def test_tokenizer_without_sentinels(self):
        with self.assertRaisesRegex(UsageError, "lacks <extra_id_0>.*train_tokenizer.py"):
            make_collator(tokenizer=word_level_tokenizer(0))

    def test_tokenizer_with_too_few_sentinels(self):
        # 512 inputs need 28 sentinels; 10 are not enough, so init refuses before any batch is built.
        with self.assertRaisesRegex(UsageError, "lacks <extra_id_10> .18 of the 28"):
            make_collator(tokenizer=word_level_tokenizer(10))


if __name__ == "__main__":
    absltest.main()
