"""The span settings (noise density, mean span length, input length) have one validator,
t5kit/specs.check_span_settings, and the kept-span count one check, data_collator.check_kept_spans: the flags, the
--denoisers items, the span-corruption collator and UL2's mixture lengths accept the same values and refuse the
same ones in the same words."""
import math
import re

from absl.testing import absltest, parameterized

import constants
from data_collator import DataCollatorForT5SpanCorruption, compute_input_and_target_lengths
from t5kit import specs
from t5kit.config.pretrain_arguments import SpanCorruptionArguments, check_denoiser
from t5kit.data import ul2
from t5kit.errors import UsageError
from tests.helpers import in_memory_t5_tokenizer

DENOISER = "--denoisers item 1"


def flags(density, span, length):
    SpanCorruptionArguments(input_length=length, noise_density=density, mean_noise_span_length=span)


def collator(density, span, length):
    target_length = compute_input_and_target_lengths(length, density, span)[1] if 0 < density < 1 and span >= 1 \
        and length >= constants.MIN_INPUT_LENGTH else 1
    return DataCollatorForT5SpanCorruption(in_memory_t5_tokenizer(), noise_density=density, mean_noise_span_length=span,
                                           input_length=length, target_length=target_length, seed=0)


def span_denoiser(density, span, paradigm="R"):
    return check_denoiser(DENOISER, {"paradigm": paradigm, "noise_density": density, "mean_noise_span_length": span,
                                     "proportion": 1.0})


def error_of(call, *args):
    try:
        call(*args)
    except UsageError as err:
        return str(err)
    raise AssertionError(f"{call.__name__}{args} accepted bad span settings")


class SpanSettingsTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("t5", 0.15, 3.0, 512), ("shortest_input", 0.15, 3.0, 8), ("ul2_extreme", 0.5, 8.0, 64),
        ("dense_single_tokens", 0.3, 1.0, 128),
    )
    def test_every_caller_accepts_good_settings(self, density, span, length):
        specs.check_span_settings(density, span, length)
        flags(density, span, length)
        made = collator(density, span, length)
        self.assertEqual(made.tokens_length, compute_input_and_target_lengths(length, density, span)[0])
        filled = span_denoiser(density, span)
        self.assertEqual((filled["noise_density"], filled["mean_noise_span_length"]), (density, span))
        tokens_length, _ = ul2.mixture_lengths(length, [dict(filled, mode_token=None)])
        self.assertGreaterEqual(tokens_length, length - 1)

    @parameterized.named_parameters(
        ("density_zero", 0.0, 3.0, "noise_density=0.0 must be in (0, 1); the T5 paper uses 0.15"),
        ("density_one", 1.0, 3.0, "noise_density=1.0 must be in (0, 1); the T5 paper uses 0.15"),
        ("density_nan", math.nan, 3.0, "noise_density=nan must be in (0, 1); the T5 paper uses 0.15"),
        ("span_below_one", 0.15, 0.5, "mean_noise_span_length=0.5 must be >= 1 (tokens); the T5 paper uses 3"),
        ("span_nan", 0.15, math.nan, "mean_noise_span_length=nan must be >= 1 (tokens); the T5 paper uses 3"),
    )
    def test_flags_denoisers_and_collator_refuse_in_one_wording(self, density, span, message):
        self.assertEqual(error_of(flags, density, span, 512), f"--{message}")
        self.assertEqual(error_of(collator, density, span, 512), f"--{message}")
        self.assertEqual(error_of(span_denoiser, density, span), f"{DENOISER}: {message}")

    @parameterized.named_parameters(("seven", 7), ("zero", 0), ("negative", -4))
    def test_a_too_short_input_length_is_refused_alike(self, length):
        message = f"--input_length={length} is too short for span corruption; use >= 8 (T5: 512)"
        self.assertEqual(error_of(flags, 0.15, 3.0, length), message)
        self.assertEqual(error_of(collator, 0.15, 3.0, length), message)
        self.assertEqual(error_of(ul2.mixture_lengths, length, constants.UL2_DENOISERS), message)

    @parameterized.named_parameters(("above_half", 0.75), ("zero", 0.0))
    def test_an_s_denoiser_takes_at_most_half(self, density):
        message = error_of(check_denoiser, DENOISER, {"paradigm": "S", "noise_density": density, "proportion": 1.0})
        self.assertEqual(message, f"{DENOISER}: noise_density={density} must be in (0, 0.5] for S (T5's "
                                  "random_prefix_noise_mask); UL2's S-denoiser uses 0.25")
        self.assertEqual(check_denoiser(DENOISER, {"paradigm": "S", "noise_density": 0.5, "proportion": 1.0})
                         ["noise_density"], 0.5)

    def test_too_many_spans_for_the_kept_tokens_is_refused_alike(self):
        """Density 0.9 with single-token spans: the collator's flags and a UL2 denoiser get one sentence, each
        naming what to change where it is set."""
        collator_message = error_of(collator, 0.9, 1.0, 64)
        denoiser = {"paradigm": "X", "noise_density": 0.9, "mean_noise_span_length": 1.0, "proportion": 1.0,
                    "mode_token": None}
        ul2_message = error_of(ul2.mixture_lengths, 64, [denoiser])
        pattern = (r"^{settings} needs (\d+) kept spans in windows of (\d+) ids but leaves (\d+) kept tokens; "
                   r"lower {where}noise_density or raise {where}mean_noise_span_length$")
        for message, settings, where in (
                (collator_message, r"--noise_density=0.9 with --mean_noise_span_length=1.0", "--"),
                (ul2_message, r"--denoisers X\(mu=1, r=0.9\)", "its ")):
            match = re.match(pattern.format(settings=settings, where=where), message)
            self.assertIsNotNone(match, message)
            spans, length, kept = map(int, match.groups())
            self.assertGreater(spans, kept)
            self.assertEqual(length - kept, round(0.9 * length))  # the noise tokens count_noise puts in

if __name__ == "__main__":
    absltest.main()
