"""A SentencePiece tokenizer trained with T5's layout (t5/data/vocabularies.py): <pad>=0, </s>=1, <unk>=2, no BOS,
the pieces, then the 100 sentinels with <extra_id_0> the highest id. train_tokenizer.py runs these steps."""
import codecs
import os
import re
from pathlib import Path

import sentencepiece
from tokenizers.models import Unigram
from transformers import AutoTokenizer, T5TokenizerFast
from transformers.convert_slow_tokenizer import SentencePieceExtractor

from constants import EOS_ID, NUM_SENTINELS, PAD_ID, UNK_ID
from t5kit.errors import UsageError
from t5kit.model.tokenizer_check import check_t5_tokenizer

SPIECE_FILE = "spiece.model"  # the name transformers' T5Tokenizer looks for (VOCAB_FILES_NAMES)
# SentencePiece reads every line as text: rows of these formats would teach it braces, quotes and commas.
STRUCTURED_SUFFIXES = (".json", ".jsonl", ".csv", ".tsv")
TEXT_CHECK_BYTES = 1 << 16  # how much of each file to check for UTF-8 text; reading it all could take minutes


def check_train_files(train_files):
    """Refuses bad training files before training (the output folder is run_folder.check_new_output_dir's)."""
    for path in train_files:
        check_train_file(path)


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
