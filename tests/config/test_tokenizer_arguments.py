"""config/tokenizer_arguments.py: train_tokenizer.py's flags default to the settings of T5's released vocabulary,
and each out-of-range value is refused in one line naming the flag, its range and T5's value."""
from absl.testing import absltest, parameterized

from t5kit.config.tokenizer_arguments import (
    MAX_SEED,
    MIN_INPUT_SENTENCE_SIZE,
    MIN_VOCAB_SIZE,
    TokenizerArguments,
)
from t5kit.errors import UsageError


def tokenizer_args(**overrides):
    return TokenizerArguments(**{"train_files": ["a.txt"], "output_dir": "out", **overrides})


class TokenizerFlagsTest(parameterized.TestCase):

    def test_defaults_are_t5s_vocabulary_settings(self):
        args = tokenizer_args()
        self.assertEqual((args.vocab_size, args.model_type, args.character_coverage, args.input_sentence_size,
                          args.seed), (32000, "unigram", 0.9995, 10_000_000, 42))
        self.assertEqual((MIN_VOCAB_SIZE, MIN_INPUT_SENTENCE_SIZE, MAX_SEED), (97, 101, 4294967295))

    @parameterized.named_parameters(("all_lines", 0), ("minimum", 101))
    def test_input_sentence_size_accepted(self, size):
        args = TokenizerArguments(train_files=["a.txt"], output_dir="out", input_sentence_size=size)
        self.assertEqual(args.input_sentence_size, size)

    @parameterized.named_parameters(
        ("smallest_vocab", dict(vocab_size=97)), ("all_characters", dict(character_coverage=1.0)),
        ("seed_zero", dict(seed=0)), ("largest_seed", dict(seed=2**32 - 1)))
    def test_edges_of_the_ranges_are_accepted(self, values):
        args = tokenizer_args(**values)
        for name, value in values.items():
            self.assertEqual(getattr(args, name), value)

    @parameterized.named_parameters(
        ("no_files", dict(train_files=None), "^--train_files is required: pass one or more local text files$"),
        ("no_output", dict(output_dir=None), "^--output_dir is required: the folder to write the tokenizer to$"),
        ("vocab", dict(vocab_size=96), r"^--vocab_size 96 is too small; use at least 97 \(T5 uses 32000\)$"),
        ("no_coverage", dict(character_coverage=0.0), r"^--character_coverage 0.0 must be in \(0, 1\]; T5 used "
                                                      r"0.9995$"),
        ("coverage_above_one", dict(character_coverage=1.5), r"^--character_coverage 1.5 must be in \(0, 1\]"),
        ("sample_too_small", dict(input_sentence_size=100), r"^--input_sentence_size 100 must be 0 \(all lines\) or "
                                                            r"at least 101 \(SentencePiece's minimum\)$"),
        ("seed_too_large", dict(seed=2**32), r"^--seed 4294967296 must be in \[0, 4294967295\] \(SentencePiece "
                                             r"takes an unsigned 32-bit seed\)$"),
        ("bpe", dict(model_type="bpe"), r"^--model_type='bpe' is not a valid choice; choices: unigram$"))
    def test_refusals_name_the_flag_and_its_range(self, values, message):
        with self.assertRaisesRegex(UsageError, message):
            tokenizer_args(**values)


if __name__ == "__main__":
    absltest.main()
