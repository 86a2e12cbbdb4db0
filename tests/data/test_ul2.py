"""Spec of UL2's mixture of denoisers and prefix-LM (t5kit/data/ul2.py, --objective/--denoisers): exact lengths and
sentinel layout per denoiser, round trips, the mixture's proportions, keyed choices, paradigm tokens, and
pre-training runs that resume bit for bit. (The --objective/--denoisers flag checks:
tests/config/test_pretrain_arguments.py.)"""
import copy

import numpy as np
import pytest
from absl.testing import absltest, parameterized
from safetensors.torch import load_file

import constants
from data_collator import DataCollatorForT5SpanCorruption, count_noise
from t5kit.config import parsing
from t5kit.config.pretrain_arguments import check_denoisers
from t5kit.config.script_flags import PRETRAIN_FLAG_CLASSES
from t5kit.data import ul2
from t5kit.errors import UsageError
from t5kit.model import building
from tests.helpers import OneThreadTestCase, in_memory_t5_tokenizer, pre_train, random_word_ids

UL2_DENOISERS = check_denoisers(constants.UL2_DENOISERS, "ul2")
NAMED_DENOISERS = [(ul2.describe(d).replace("(", "_").replace(")", "").replace("=", "").replace(", ", "_")
                    .replace(".", ""), d) for d in UL2_DENOISERS]


def tokenizer_with_mode_tokens():
    """A fresh T5-layout tokenizer (the helper's is cached, and adding tokens changes it) with UL2's tokens."""
    tokenizer = copy.deepcopy(in_memory_t5_tokenizer())
    building.add_mode_tokens(tokenizer, ul2.mode_tokens(UL2_DENOISERS))
    return tokenizer


TOKENIZER = tokenizer_with_mode_tokens()
EOS, PAD = TOKENIZER.eos_token_id, TOKENIZER.pad_token_id
SENTINELS = TOKENIZER.convert_tokens_to_ids([f"<extra_id_{i}>" for i in range(constants.NUM_SENTINELS)])


def alone(denoiser):
    return [{**denoiser, "proportion": 1.0}]


def windows(tokens_length, count, seed=0):
    return random_word_ids(tokens_length * count, seed=seed).reshape(count, tokens_length)


def restore(inputs, labels):
    """The window from a span-corrupted row: each sentinel of the inputs replaced by its span of the labels."""
    spans, current = {}, None
    for token in labels:
        if token in SENTINELS:
            current = spans.setdefault(token, [])
        elif token != EOS:
            current.append(token)
    return [t for token in inputs for t in (spans[token] if token in SENTINELS else [token])]


class LengthsTest(parameterized.TestCase):

    @parameterized.named_parameters(("ul2_512", UL2_DENOISERS, 512, (511, 342)),
                                    ("ul2_64", UL2_DENOISERS, 64, (63, 44)),
                                    ("prefix_lm_512", check_denoisers(constants.PREFIX_LM_DENOISERS, "prefix_lm"), 512,
                                     (512, 512)))
    def test_mixture_lengths(self, denoisers, input_length, expected):
        self.assertEqual(ul2.mixture_lengths(input_length, denoisers), expected)

    def test_every_default_denoiser_at_512(self):
        """(inputs with [mode] and EOS, targets with EOS) of a 511-id window; S: its longest of each."""
        got = {ul2.describe(d): ul2.denoiser_lengths(511, d) for d in UL2_DENOISERS}
        self.assertEqual(got, {"R(mu=3, r=0.15)": (462, 104), "R(mu=8, r=0.15)": (446, 88),
                               "X(mu=3, r=0.5)": (342, 342), "X(mu=8, r=0.5)": (289, 289),
                               "X(mu=64, r=0.15)": (437, 79), "X(mu=64, r=0.5)": (261, 261),
                               "S(r=0.25)": (512, 257)})

    def test_prefix_bounds_follow_random_prefix_noise_mask(self):
        self.assertEqual(ul2.prefix_bounds(511, 0.25), (255, 510))
        self.assertEqual(ul2.prefix_bounds(512, 0.5), (1, 511))

    def test_default_proportions(self):
        self.assertEqual([d["proportion"] for d in UL2_DENOISERS], [2 / 15] * 6 + [0.2])
        self.assertAlmostEqual(sum(d["proportion"] for d in UL2_DENOISERS), 1.0, places=12)

    def test_too_dense_a_span_denoiser_is_refused(self):
        with self.assertRaisesRegex(UsageError, r"X\(mu=1, r=0.9\) needs \d+ kept spans"):
            ul2.mixture_lengths(64, [dict(paradigm="X", mean_noise_span_length=1.0, noise_density=0.9,
                                          proportion=1.0, mode_token=None)])


class DenoiserTest(parameterized.TestCase):

    @parameterized.named_parameters(*[(name, d) for name, d in NAMED_DENOISERS if d["paradigm"] != "S"])
    def test_span_denoiser_exact_layout_and_round_trip(self, denoiser):
        collator = ul2.DataCollatorForUL2(TOKENIZER, alone(denoiser), input_length=128, seed=1, return_tensors="np")
        rows = windows(collator.tokens_length, 8)
        batch = collator([{"input_ids": row} for row in rows])
        noise, spans = count_noise(collator.tokens_length, denoiser["noise_density"],
                                       denoiser["mean_noise_span_length"])
        input_length, target_length = ul2.denoiser_lengths(collator.tokens_length, denoiser)
        self.assertEqual(batch["input_ids"].shape, (8, 128))
        self.assertEqual(batch["labels"].shape, (8, collator.target_length))
        mode_id = TOKENIZER.convert_tokens_to_ids(denoiser["mode_token"])
        for row, inputs, mask, labels in zip(rows, batch["input_ids"], batch["attention_mask"], batch["labels"]):
            self.assertEqual(int(mask.sum()), input_length)
            inputs, labels = inputs[:input_length], labels[labels != -100]
            self.assertLen(labels, target_length)
            self.assertEqual(inputs[0], mode_id)
            self.assertEqual([inputs[-1], labels[-1]], [EOS, EOS])
            self.assertEqual([t for t in inputs if t in SENTINELS], SENTINELS[:spans])
            self.assertEqual([t for t in labels if t in SENTINELS], SENTINELS[:spans])
            self.assertEqual(labels[0], SENTINELS[0])
            self.assertEqual(len(labels) - spans - 1, noise)
            self.assertEqual(restore(inputs[1:-1], labels), row.tolist())

    def test_r_denoiser_rows_are_span_corruption_rows(self):
        """R and X reuse data_collator's keyed masks: the span-corruption collator at the same window length and
        settings gives the same row, without the paradigm token."""
        denoiser = UL2_DENOISERS[0]
        collator = ul2.DataCollatorForUL2(TOKENIZER, alone(denoiser), input_length=128, seed=5, return_tensors="np")
        span = DataCollatorForT5SpanCorruption(TOKENIZER, noise_density=0.15, mean_noise_span_length=3.0,
                                               input_length=collator.input_length - 1, seed=5,
                                               tokens_length=collator.tokens_length,
                                               target_length=ul2.denoiser_lengths(collator.tokens_length, denoiser)[1],
                                               return_tensors="np")
        features = [{"input_ids": row} for row in windows(collator.tokens_length, 4)]
        ours, theirs = collator(features), span(features)
        np.testing.assert_array_equal(ours["input_ids"][:, 1:128], theirs["input_ids"])
        np.testing.assert_array_equal(ours["labels"], theirs["labels"])

    @parameterized.named_parameters(("ul2_s", 0.25, "[S2S]"), ("t5_prefix_lm", 0.5, None))
    def test_prefix_lm_splits_the_window_once(self, density, mode_token):
        denoiser = dict(paradigm="S", noise_density=density, mean_noise_span_length=None, proportion=1.0,
                        mode_token=mode_token)
        collator = ul2.DataCollatorForUL2(TOKENIZER, [denoiser], input_length=64, seed=2, return_tensors="np")
        length = collator.tokens_length
        fewest, most = ul2.prefix_bounds(length, density)
        rows = windows(length, 2000)
        batch = collator([{"input_ids": row} for row in rows])
        offset = int(mode_token is not None)
        prefixes = batch["attention_mask"].sum(axis=1) - 1 - offset
        self.assertEqual((prefixes.min(), prefixes.max()), (fewest, most))  # every split point reached
        for row, inputs, labels, prefix in zip(rows[:50], batch["input_ids"], batch["labels"], prefixes[:50]):
            if mode_token:
                self.assertEqual(inputs[0], TOKENIZER.convert_tokens_to_ids(mode_token))
            self.assertEqual(inputs[offset + prefix], EOS)
            self.assertTrue((inputs[offset + prefix + 1:] == PAD).all())
            targets = labels[labels != -100]
            self.assertEqual(targets[-1], EOS)
            self.assertEqual(inputs[offset:offset + prefix].tolist() + targets[:-1].tolist(), row.tolist())
        # The targets hold r of the window on average (uniform split: mean prefix (fewest + most) / 2).
        self.assertAlmostEqual(1 - prefixes.mean() / length, 1 - (fewest + most) / 2 / length, delta=0.01)
        self.assertAlmostEqual(1 - (fewest + most) / 2 / length, density, delta=2 / length)

    def test_decoder_inputs_are_labels_shifted_right(self):
        collator = ul2.DataCollatorForUL2(TOKENIZER, UL2_DENOISERS, input_length=64, seed=0, return_tensors="np")
        batch = collator([{"input_ids": row} for row in windows(collator.tokens_length, 16)])
        labels = np.where(batch["labels"] == -100, PAD, batch["labels"])
        np.testing.assert_array_equal(batch["decoder_input_ids"][:, 1:], labels[:, :-1])
        self.assertTrue((batch["decoder_input_ids"][:, 0] == PAD).all())


class MixtureTest(parameterized.TestCase):

    def test_empirical_proportions(self):
        """20,000 windows: each denoiser's share within 4 standard deviations of its proportion."""
        collator = ul2.DataCollatorForUL2(TOKENIZER, UL2_DENOISERS, input_length=64, seed=0, return_tensors="np")
        count = 20_000
        chosen = collator.denoiser_indices(windows(collator.tokens_length, count, seed=3))
        shares = np.bincount(chosen, minlength=len(UL2_DENOISERS)) / count
        for share, denoiser in zip(shares, UL2_DENOISERS):
            p = denoiser["proportion"]
            self.assertLess(abs(share - p), 4 * np.sqrt(p * (1 - p) / count), ul2.describe(denoiser))

    def test_choice_and_mask_do_not_depend_on_the_batch(self):
        """The same windows collated in one batch, in batches of 3 and in reverse order give the same rows."""
        collator = ul2.DataCollatorForUL2(TOKENIZER, UL2_DENOISERS, input_length=64, seed=7, return_tensors="np")
        features = [{"input_ids": row} for row in windows(collator.tokens_length, 12)]
        whole = collator(features)
        parts = [collator(features[i:i + 3]) for i in range(0, 12, 3)]
        backwards = collator(features[::-1])
        for key in whole:
            np.testing.assert_array_equal(whole[key], np.concatenate([p[key] for p in parts]))
            np.testing.assert_array_equal(whole[key], backwards[key][::-1])

    def test_epoch_and_seed_draw_new_choices(self):
        collator = ul2.DataCollatorForUL2(TOKENIZER, UL2_DENOISERS, input_length=64, seed=7, return_tensors="np")
        rows = windows(collator.tokens_length, 200)
        first = collator.denoiser_indices(rows)
        collator.set_epoch(1)
        second = collator.denoiser_indices(rows)
        collator.set_epoch(0)
        np.testing.assert_array_equal(collator.denoiser_indices(rows), first)
        self.assertGreater((first != second).mean(), 0.5)
        other_seed = ul2.DataCollatorForUL2(TOKENIZER, UL2_DENOISERS, input_length=64, seed=8)
        self.assertGreater((other_seed.denoiser_indices(rows) != first).mean(), 0.5)

    def test_torch_batch_matches_numpy(self):
        features = [{"input_ids": row} for row in windows(63, 4)]
        as_numpy = ul2.DataCollatorForUL2(TOKENIZER, UL2_DENOISERS, input_length=64, seed=1, return_tensors="np")
        as_torch = ul2.DataCollatorForUL2(TOKENIZER, UL2_DENOISERS, input_length=64, seed=1)
        for key, value in as_torch(features).items():
            np.testing.assert_array_equal(value.numpy(), as_numpy(features)[key])


class ModeTokenTest(parameterized.TestCase):

    def test_missing_mode_tokens_are_added_once(self):
        tokenizer = copy.deepcopy(in_memory_t5_tokenizer())
        before = len(tokenizer)
        self.assertEqual(building.add_mode_tokens(tokenizer, ["[NLU]", "[NLG]", "[S2S]"]), ["[NLU]", "[NLG]", "[S2S]"])
        self.assertLen(tokenizer, before + 3)
        self.assertEqual(building.add_mode_tokens(tokenizer, ["[NLU]", "[NLG]", "[S2S]"]), [])
        ids = tokenizer("[NLG] w5 w6", add_special_tokens=False)["input_ids"]
        self.assertEqual(ids, [tokenizer.convert_tokens_to_ids("[NLG]"), 5, 6])

    @parameterized.named_parameters(("eos", "</s>"), ("sentinel", "<extra_id_0>"), ("pad", "<pad>"))
    def test_a_special_token_cannot_be_a_mode_token(self, token):
        with self.assertRaisesRegex(UsageError, f"mode_token '{token}' is one of the tokenizer's own special"):
            building.add_mode_tokens(copy.deepcopy(in_memory_t5_tokenizer()), [token])

    def test_collator_refuses_a_tokenizer_without_its_mode_token(self):
        with self.assertRaisesRegex(UsageError, r"lacks the paradigm token \[NLU\]"):
            ul2.DataCollatorForUL2(in_memory_t5_tokenizer(), UL2_DENOISERS, input_length=64)


@pytest.mark.slow  # pre-training runs, one resumed
class PretrainObjectiveRunTest(OneThreadTestCase):

    def test_ul2_run_resumes_bit_identical(self):
        """A UL2 run stopped after 2 steps and resumed to 4 ends with the weights of a 4-step run: the denoiser and
        mask of every window are keyed, not drawn from a stream the resume would have to replay."""
        def flags(out, steps, **extra):
            return self.run_flags(out, objective="ul2", max_steps=steps, lr_scheduler_type="constant", **extra)

        pre_train(flags(self.dir / "plain", 4))
        pre_train(flags(self.dir / "resumed", 2))
        pre_train(flags(self.dir / "resumed", 4, resume_from_checkpoint="auto"))
        expected = load_file(self.dir / "plain/model.safetensors")
        got = load_file(self.dir / "resumed/model.safetensors")
        for name, tensor in expected.items():
            self.assertTrue(got[name].equal(tensor), f"{name} differs after resuming")
        record = parsing.load_yaml_config(self.dir / "plain/config.yaml")
        self.assertEqual(record["derived"]["tokens_length"], 63)
        self.assertEqual(record["derived"]["target_length"], 44)
        tokenizer = building.load_tokenizer(str(self.dir / "plain"))
        self.assertEqual(building.add_mode_tokens(tokenizer, ["[NLU]", "[NLG]", "[S2S]"]), [])  # saved with the model
        # config.yaml alone reproduces the flags, denoisers included.
        again = parsing.parse_flags(PRETRAIN_FLAG_CLASSES, [str(self.dir / "plain/config.yaml")])
        self.assertEqual(again[3].denoisers, UL2_DENOISERS)

    def test_prefix_lm_run(self):
        metrics = pre_train(self.run_flags(self.dir / "prefix_lm", objective="prefix_lm", max_steps=2))
        record = parsing.load_yaml_config(self.dir / "prefix_lm/config.yaml")
        self.assertEqual((record["derived"]["tokens_length"], record["derived"]["target_length"]), (64, 64))
        self.assertTrue(np.isfinite(metrics["eval_loss"]))


if __name__ == "__main__":
    absltest.main()
