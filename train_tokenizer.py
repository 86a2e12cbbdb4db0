"""Train a SentencePiece tokenizer offline with T5's layout, saved as a folder `AutoTokenizer` loads.

    python train_tokenizer.py --train_files corpus/train.txt --output_dir tokenizer --vocab_size 8000
    python train_tokenizer.py --train_files a.txt b.txt --output_dir tok --input_sentence_size 2000000
    python train_tokenizer.py --train_files c4_en.txt --output_dir tok32k --overwrite_output_dir

Layout (t5/data/vocabularies.py): <pad>=0, </s>=1, <unk>=2, no BOS, then the SentencePiece pieces, then the 100
sentinels with <extra_id_99> = piece count and <extra_id_0> the highest id (32099 in T5's 32100-token vocabulary).
The folder holds spiece.model (for sentencepiece/seqio), tokenizer.json and tokenizer_config.json.
"""
import codecs
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import sentencepiece
from tokenizers.models import Unigram
from transformers import AutoTokenizer, T5TokenizerFast
from transformers.convert_slow_tokenizer import SentencePieceExtractor

import flags
from constants import EOS_ID, NUM_SENTINELS, PAD_ID, UNK_ID
from flags import UsageError
from modeling import check_t5_tokenizer
from output_dir import creating_output_dir, refuse_a_file_in_the_way

logger = logging.getLogger(__name__)

# Training settings of T5's released vocabulary, read from the trainer_spec stored in its spiece.model
# (gs://t5-data/vocabs/cc_all.32000/sentencepiece.model): unigram, 32000 pieces, character_coverage 0.9995,
# input_sentence_size 100M. We cap sampling at 10M sentences by default: SentencePiece holds them all in RAM.
T5_PIECE_COUNT = 32000
T5_CHARACTER_COVERAGE = 0.9995
DEFAULT_INPUT_SENTENCE_SIZE = 10_000_000
# 3 special pieces + the 94 printable non-space ASCII characters; fewer pieces cannot spell English text.
MIN_VOCAB_SIZE = 3 + 94
SPIECE_FILE = "spiece.model"  # the name transformers' T5Tokenizer looks for (VOCAB_FILES_NAMES)
MIN_INPUT_SENTENCE_SIZE = 101  # SentencePiece's trainer_interface.cc rejects 1..100 (0 means all lines)
MAX_SEED = 2**32 - 1  # set_random_generator_seed takes a uint32
# SentencePiece reads every line as text: rows of these formats would teach it braces, quotes and commas.
STRUCTURED_SUFFIXES = (".json", ".jsonl", ".csv", ".tsv")
TEXT_CHECK_BYTES = 1 << 16  # how much of each file to check for UTF-8 text; reading it all could take minutes


@dataclass
class TokenizerArguments:
    train_files: Optional[list[str]] = field(
        default=None, metadata={"help": "One or more local text files, one sentence or paragraph per line. Required."}
    )
    output_dir: Optional[str] = field(
        default=None, metadata={"help": "Folder to write the tokenizer to (created). Required."}
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
                          "Unigram model from tokenizer.json, so BPE pieces would tokenize differently once loaded."},
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
    overwrite_output_dir: bool = field(
        default=False, metadata={"help": "Replace --output_dir if it exists and is not empty."}
    )

    def __post_init__(self):
        if not self.train_files:
            raise UsageError("--train_files is required: pass one or more local text files")
        if not self.output_dir:
            raise UsageError("--output_dir is required: the folder to write the tokenizer to")
        if self.vocab_size < MIN_VOCAB_SIZE:
            raise UsageError(f"--vocab_size {self.vocab_size} is too small; use at least {MIN_VOCAB_SIZE} "
                             f"(T5 uses {T5_PIECE_COUNT})")
        if self.model_type != "unigram":
            raise UsageError(f"--model_type {self.model_type!r} is not supported; use 'unigram' (transformers' "
                             "T5Tokenizer always loads a Unigram model)")
        if not 0.0 < self.character_coverage <= 1.0:
            raise UsageError(f"--character_coverage {self.character_coverage} must be in (0, 1]; T5 used "
                             f"{T5_CHARACTER_COVERAGE}")
        if self.input_sentence_size < 0 or 0 < self.input_sentence_size < MIN_INPUT_SENTENCE_SIZE:
            raise UsageError(f"--input_sentence_size {self.input_sentence_size} must be 0 (all lines) or at least "
                             f"{MIN_INPUT_SENTENCE_SIZE} (SentencePiece's minimum)")
        if not 0 <= self.seed <= MAX_SEED:
            raise UsageError(f"--seed {self.seed} must be in [0, {MAX_SEED}] (SentencePiece takes an unsigned 32-bit "
                             "seed)")


def check_paths(args):
    """Refuses bad training files and an output folder that is a file, under a file or not empty, before training."""
    for path in args.train_files:
        check_train_file(path)
    out = Path(args.output_dir)
    refuse_a_file_in_the_way(out)
    if out.is_dir() and any(out.iterdir()) and not args.overwrite_output_dir:
        raise UsageError(f"--output_dir {out} is not empty; use --overwrite_output_dir to replace it")


def check_train_file(path):
    """A missing, empty, comma-named, structured or non-text file: SentencePiece would fail or learn garbage."""
    if not os.path.isfile(path):
        raise UsageError(f"--train_files: {path} does not exist or is not a file")
    if os.path.getsize(path) == 0:
        raise UsageError(f"--train_files: {path} is empty; pass files with text")
    if "," in path:  # SentencePiece splits its input list on commas
        raise UsageError(f"--train_files: {path} contains a comma; rename or symlink it")
    if path.lower().endswith(STRUCTURED_SUFFIXES):
        raise UsageError(f"--train_files: {path} is {Path(path).suffix[1:]} data, whose syntax SentencePiece would "
                         "learn; extract the text column to a .txt file, one text per line")
    with open(path, "rb") as file:
        chunk = file.read(TEXT_CHECK_BYTES)
    try:  # an incremental decoder: a character cut at the chunk's end is not an error
        codecs.getincrementaldecoder("utf-8")().decode(chunk, final=False)
        bad = chunk.index(b"\0") if b"\0" in chunk else None  # valid UTF-8, but binary
    except UnicodeDecodeError as err:
        bad = err.start
    if bad is not None:
        raise UsageError(f"--train_files: {path} is not UTF-8 text (byte {bad}); convert it (e.g. iconv -f "
                         "latin1 -t utf-8) or pass text files")


def train_sentencepiece(args, model_prefix):
    """Trains SentencePiece with T5's special ids; returns the .model path. Maps its size errors to UsageError."""
    try:
        sentencepiece.SentencePieceTrainer.train(
            input=args.train_files, model_prefix=model_prefix, vocab_size=args.vocab_size,
            model_type=args.model_type, character_coverage=args.character_coverage,
            input_sentence_size=args.input_sentence_size, shuffle_input_sentence=True,
            pad_id=PAD_ID, eos_id=EOS_ID, unk_id=UNK_ID, bos_id=-1,  # T5 has no BOS
            num_threads=os.cpu_count() or 1, minloglevel=1,  # its INFO log is hundreds of lines
        )
    except RuntimeError as error:
        usage_error = usage_error_from(error, args)
        if usage_error is None:
            raise
        raise usage_error from None  # the C++ check text adds nothing the one-line message lacks
    return f"{model_prefix}.model"


def usage_error_from(error, args):
    """SentencePiece's size/empty-input errors -> UsageError naming the flag; None for any other error."""
    message = str(error)
    if match := re.search(r"smaller than required_chars\. \d+ vs (\d+)", message):
        return UsageError(f"--vocab_size {args.vocab_size} is below the {match.group(1)} pieces the text's characters "
                          f"need; raise --vocab_size or lower --character_coverage ({args.character_coverage})")
    if match := re.search(r"Vocabulary size too high \(\d+\)\. Please set it to a value <= (\d+)", message):
        return UsageError(f"--vocab_size {args.vocab_size} is more than the training text supports (at most "
                          f"{match.group(1)}); lower --vocab_size or add text to --train_files")
    if "all_chars_count" in message:
        return UsageError(f"--train_files {' '.join(args.train_files)} contain no text (only whitespace)")
    return None


def build_t5_tokenizer(spiece_model):
    """SentencePiece .model -> T5TokenizerFast with all pieces plus the 100 sentinels appended in reverse.

    `T5TokenizerFast(vocab_file=...)` in transformers 5 ignores the file and builds a 104-token placeholder vocab,
    so we pass the pieces, scores and normalizer ourselves, as `from_pretrained` does for a folder holding only
    spiece.model (SentencePieceExtractor + T5Converter in transformers/convert_slow_tokenizer.py), except that it
    also lists <pad> and </s> among the extra special tokens. The released T5 spiece.model gives t5-small's ids.
    """
    spm = SentencePieceExtractor(spiece_model).extract(Unigram)
    sentinels = [(f"<extra_id_{i}>", 0.0) for i in reversed(range(NUM_SENTINELS))]  # <extra_id_0> gets the top id
    return T5TokenizerFast(
        vocab=spm["vocab"] + sentinels, extra_ids=NUM_SENTINELS,
        _spm_precompiled_charsmap=spm["_spm_precompiled_charsmap"],  # SentencePiece's nmt_nfkc normalization
    )


def check_saved_layout(folder, piece_count):
    """Reloads the saved folder both ways and asserts T5's layout, so a transformers change cannot pass silently."""
    for cls in (AutoTokenizer, T5TokenizerFast):
        tokenizer = cls.from_pretrained(folder)
        sentinel_ids = check_t5_tokenizer(tokenizer, folder)
        got = (len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id,
               sentinel_ids[0], sentinel_ids[-1])
        want = (piece_count + NUM_SENTINELS, PAD_ID, EOS_ID, UNK_ID, piece_count + NUM_SENTINELS - 1, piece_count)
        assert got == want, f"{cls.__name__} loaded {folder} as {got}, expected {want}"


def make_work_dir(out):
    """Creates --output_dir's parent and a temp folder in it; failing there (under /proc, read-only) is bad input."""
    with creating_output_dir(out):
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))


def replace_folder(new, out):
    """Moves the finished folder `new` to `out`; an existing `out` is moved aside first, then deleted."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.replace(out, old / out.name)
    os.replace(new, out)
    if old is not None:
        shutil.rmtree(old)


def main(argv=None):
    # 1. Flags: validated before anything is read or written.
    (args,), resolved = flags.parse_flags((TokenizerArguments,), sys.argv[1:] if argv is None else argv)
    check_paths(args)

    # 2. Logging
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    logger.info("flags: %s", resolved)

    # 3. Train into a temp folder beside --output_dir, so a crash never leaves a half-written tokenizer there.
    out = Path(args.output_dir).resolve()
    work = make_work_dir(out)
    try:
        start = time.time()
        sentencepiece.set_random_generator_seed(args.seed)
        spiece_model = train_sentencepiece(args, str(work / "spiece"))
        logger.info("trained %d SentencePiece pieces in %.1f s", args.vocab_size, time.time() - start)

        # 4. T5 tokenizer: pieces + 100 sentinels; save as transformers does, plus the .model for sentencepiece.
        tokenizer = build_t5_tokenizer(spiece_model)
        check_t5_tokenizer(tokenizer, str(out))
        final = work / "tokenizer"
        tokenizer.save_pretrained(final)
        shutil.copyfile(spiece_model, final / SPIECE_FILE)
        check_saved_layout(str(final), args.vocab_size)

        # 5. Publish.
        replace_folder(final, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    logger.info("tokenizer (%d tokens: %d pieces + %d sentinels) written to %s: %s", len(tokenizer),
                args.vocab_size, NUM_SENTINELS, out, ", ".join(sorted(os.listdir(out))))
    return out


if __name__ == "__main__":
    flags.run_cli(main)  # UsageError -> one `error: ...` line on stderr, exit code 2
