"""The flags of train_tokenizer.py, with the training settings of T5's released vocabulary as defaults."""
from dataclasses import dataclass, field
from typing import Optional

from constants import NUM_SENTINELS
from t5kit.config.output_arguments import OutputDirArguments, OverwriteOutputDirArguments
from t5kit.config.parsing import Program, check_choices
from t5kit.errors import UsageError

# Training settings of T5's released vocabulary, read from the trainer_spec stored in its spiece.model
# (gs://t5-data/vocabs/cc_all.32000/sentencepiece.model): unigram, 32000 pieces, character_coverage 0.9995,
# input_sentence_size 100M. We cap sampling at 10M sentences by default: SentencePiece holds them all in RAM.
T5_PIECE_COUNT = 32000
T5_CHARACTER_COVERAGE = 0.9995
DEFAULT_INPUT_SENTENCE_SIZE = 10_000_000
# 3 special pieces + the 94 printable non-space ASCII characters; fewer pieces cannot spell English text.
MIN_VOCAB_SIZE = 3 + 94
MIN_INPUT_SENTENCE_SIZE = 101  # SentencePiece's trainer_interface.cc rejects 1..100 (0 means all lines)
MAX_SEED = 2**32 - 1  # set_random_generator_seed takes a uint32


@dataclass
class TokenizerArguments(OverwriteOutputDirArguments, OutputDirArguments):
    """The SentencePiece training's flags; --output_dir and --overwrite_output_dir come from the shared groups."""

    train_files: Optional[list[str]] = field(
        default=None, metadata={"help": "One or more local text files, one sentence or paragraph per line. Required."}
    )
    vocab_size: int = field(
        default=T5_PIECE_COUNT,
        metadata={"help": f"SentencePiece pieces including <pad>, </s>, <unk>; the {NUM_SENTINELS} sentinels come on "
                          f"top (T5: {T5_PIECE_COUNT} -> {T5_PIECE_COUNT + NUM_SENTINELS} tokens). "
                          f"At least {MIN_VOCAB_SIZE}; at most what the text supports."},
    )
    model_type: str = field(
        default="unigram",
        metadata={"help": "SentencePiece algorithm. Only 'unigram' (T5's): transformers' T5Tokenizer rebuilds a "
                          "Unigram model from tokenizer.json, so BPE pieces would tokenize differently once loaded.",
                  "choices": ("unigram",)},
    )
    character_coverage: float = field(
        default=T5_CHARACTER_COVERAGE,
        metadata={"help": "Fraction of characters the pieces must cover; rarer ones become <unk>. T5 used 0.9995; "
                          "1.0 keeps every character seen (fine for small English corpora)."},
    )
    input_sentence_size: int = field(
        default=DEFAULT_INPUT_SENTENCE_SIZE,
        metadata={"help": "Train on a random sample of at most this many lines (0 = all lines). T5 used 100M; "
                          "memory grows with it."},
    )
    seed: int = field(default=42, metadata={"help": "Seed of SentencePiece's line sampling and shuffling."})

    def __post_init__(self):
        check_choices(self)
        if not self.train_files:
            raise UsageError("--train_files is required: pass one or more local text files")
        if not self.output_dir:
            raise UsageError("--output_dir is required: the folder to write the tokenizer to")
        if self.vocab_size < MIN_VOCAB_SIZE:
            raise UsageError(f"--vocab_size {self.vocab_size} is too small; use at least {MIN_VOCAB_SIZE} "
                             f"(T5 uses {T5_PIECE_COUNT})")
        if not 0.0 < self.character_coverage <= 1.0:
            raise UsageError(f"--character_coverage {self.character_coverage} must be in (0, 1]; T5 used "
                             f"{T5_CHARACTER_COVERAGE}")
        if self.input_sentence_size < 0 or 0 < self.input_sentence_size < MIN_INPUT_SENTENCE_SIZE:
            raise UsageError(f"--input_sentence_size {self.input_sentence_size} must be 0 (all lines) or at least "
                             f"{MIN_INPUT_SENTENCE_SIZE} (SentencePiece's minimum)")
        if not 0 <= self.seed <= MAX_SEED:
            raise UsageError(f"--seed {self.seed} must be in [0, {MAX_SEED}] (SentencePiece takes an unsigned 32-bit "
                             "seed)")


# Declared with its group, not in script_flags.py, so that train_tokenizer.py parses its flags without importing
# transformers' TrainingArguments (and torch, peft with it): the script starts in seconds less.
TOKENIZER_FLAG_CLASSES = Program((TokenizerArguments,))
