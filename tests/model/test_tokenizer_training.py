"""Spec of train_tokenizer: T5's id layout after loading, SentencePiece parity, the real T5 vocab, bad input.
(The flags' own ranges: tests/config/test_tokenizer_arguments.py.)"""
import functools
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
import sentencepiece
import transformers
from absl.testing import absltest, parameterized

from scripts import quickstart_corpus
from t5kit.errors import UsageError
from t5kit.model import tokenizer_check, tokenizer_training
from tests.helpers import REPO, require, snapshot, train_tokenizer

PIECES = 1000
# Real sentences (stdlib documentation and Austen's Emma), plain ASCII so the round trip is exact.
SENTENCES = (
    ("docstring", "Return a list of the words in the string, using sep as the delimiter string."),
    ("emma", "Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy disposition."),
    ("numbers", "The header was folded at 78 characters, as RFC 2822 recommends."),
)


@functools.lru_cache(maxsize=None)
def email_documents():
    """About 500 KB of real prose needing nothing beyond Python: the email package's documentation."""
    source_dir = Path(sysconfig.get_paths()["stdlib"]) / "email"
    return quickstart_corpus.collect_documents(source_dir=source_dir)


def write_lines(path, documents):
    path.write_text("\n".join(documents) + "\n", encoding="utf-8")
    return path


class TrainedTokenizerTest(parameterized.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.documents = email_documents()
        cls.corpus = write_lines(Path(cls.tmp.name) / "corpus.txt", cls.documents)
        cls.out = Path(cls.tmp.name) / "tokenizer"
        train_tokenizer(["--train_files", str(cls.corpus), "--output_dir", str(cls.out),
                              "--vocab_size", str(PIECES)])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()
        super().tearDownClass()

    @parameterized.named_parameters(("auto", transformers.AutoTokenizer), ("t5_fast", transformers.T5TokenizerFast))
    def test_t5_layout(self, loader):
        tokenizer = loader.from_pretrained(self.out)
        self.assertIsInstance(tokenizer, transformers.T5TokenizerFast)
        self.assertEqual((tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id), (0, 1, 2))
        self.assertIsNone(tokenizer.bos_token_id)
        self.assertLen(tokenizer, PIECES + 100)
        self.assertEqual(tokenizer.convert_tokens_to_ids("<extra_id_0>"), len(tokenizer) - 1)
        self.assertEqual(tokenizer.convert_tokens_to_ids("<extra_id_99>"), PIECES)
        self.assertEqual(tokenizer_check.check_t5_tokenizer(tokenizer, "trained"),
                         list(range(PIECES + 99, PIECES - 1, -1)))

    @parameterized.named_parameters(*SENTENCES)
    def test_round_trip_appends_eos(self, sentence):
        tokenizer = transformers.AutoTokenizer.from_pretrained(self.out)
        ids = tokenizer(sentence)["input_ids"]
        self.assertEqual(ids[-1], tokenizer.eos_token_id)
        self.assertNotIn(tokenizer.unk_token_id, ids)
        self.assertEqual(tokenizer.decode(ids, skip_special_tokens=True), sentence)

    def test_matches_sentencepiece(self):
        """The HF tokenizer splits text exactly as the SentencePiece model it was built from."""
        tokenizer = transformers.AutoTokenizer.from_pretrained(self.out)
        processor = sentencepiece.SentencePieceProcessor(model_file=str(self.out / "spiece.model"))
        lines = self.documents[::10]
        self.assertEqual(tokenizer(lines, add_special_tokens=False)["input_ids"], processor.encode(lines))

    def test_sentinels_split_text(self):
        tokenizer = transformers.AutoTokenizer.from_pretrained(self.out)
        ids = tokenizer("Return <extra_id_0> list <extra_id_1>.", add_special_tokens=False)["input_ids"]
        self.assertContainsSubsequence(ids, [PIECES + 99, PIECES + 98])

    def test_folder_holds_only_the_tokenizer(self):
        self.assertEqual(sorted(p.name for p in self.out.iterdir()),
                         ["spiece.model", "tokenizer.json", "tokenizer_config.json"])
        self.assertEqual(sorted(p.name for p in self.out.parent.iterdir()), ["corpus.txt", "tokenizer"])


class RealT5Test(absltest.TestCase):
    def test_construction_reproduces_t5(self):
        tokenizer = tokenizer_training.build_t5_tokenizer(str(require("t5_spiece/spiece.model")))
        ids = tokenizer("Studies have shown that owning a dog is good for you")["input_ids"]
        self.assertEqual(ids, [6536, 43, 2008, 24, 293, 53, 3, 9, 1782, 19, 207, 21, 25, 1])
        self.assertLen(tokenizer, 32100)
        self.assertEqual(tokenizer_check.check_t5_tokenizer(tokenizer, "t5")[:2], [32099, 32098])


class BadInputTest(parameterized.TestCase):
    def setUp(self):
        super().setUp()
        self.tmp = Path(self.create_tempdir().full_path)
        self.text = write_lines(self.tmp / "text.txt", email_documents()[:300])
        (self.tmp / "empty.txt").write_text("", encoding="utf-8")
        (self.tmp / "blank.txt").write_text("  \n\n \n", encoding="utf-8")
        (self.tmp / "latin1.txt").write_bytes("Caesar's Æneas and café.\n".encode("latin-1"))
        (self.tmp / "nul.txt").write_bytes(b"text\0\0\0\n")
        (self.tmp / "rows.jsonl").write_text('{"text": "Emma Woodhouse, handsome."}\n', encoding="utf-8")
        self.out = self.tmp / "out"
        self.out.mkdir()
        (self.out / "keep.txt").write_text("not a tokenizer", encoding="utf-8")

    @parameterized.named_parameters(
        ("missing_file", ["--train_files", "{tmp}/nope.txt"], "--train_files: .*nope.txt does not exist"),
        ("empty_file", ["--train_files", "{tmp}/empty.txt"], "--train_files: .*empty.txt is empty"),
        ("blank_file", ["--train_files", "{tmp}/blank.txt"], "--train_files .*blank.txt contain no text"),
        ("vocab_below_floor", ["--vocab_size", "50"], "--vocab_size 50 is too small; use at least 97"),
        ("vocab_above_text", ["--vocab_size", "100000"], "--vocab_size 100000 is more than .*at most \\d+"),
        ("bpe", ["--model_type", "bpe"], "--model_type='bpe' is not a valid choice; choices: unigram"),
        ("coverage", ["--character_coverage", "1.5"], "--character_coverage 1.5 must be in"),
        ("typo", ["--vocab_sise", "100"], "unknown flag '--vocab_sise' .*did you mean '--vocab_size'"),
        ("sentence_size_10", ["--input_sentence_size", "10"], "--input_sentence_size 10 must be 0 .*at least 101"),
        ("sentence_size_100", ["--input_sentence_size", "100"], "--input_sentence_size 100 must be 0 .*at least 101"),
        ("sentence_size_negative", ["--input_sentence_size", "-1"], "--input_sentence_size -1 must be 0"),
        ("seed_negative", ["--seed", "-1"], "--seed -1 must be in \\[0, 4294967295\\]"),
        ("seed_above_uint32", ["--seed", str(2**32)], "--seed 4294967296 must be in"),
        ("latin1", ["--train_files", "{tmp}/latin1.txt"], "--train_files: .*latin1.txt is not UTF-8 text \\(byte 9\\)"),
        ("binary", ["--train_files", sys.executable], "is not UTF-8 text"),
        ("nul_bytes", ["--train_files", "{tmp}/nul.txt"], "--train_files: .*nul.txt is not UTF-8 text \\(byte 4\\)"),
        ("jsonl", ["--train_files", "{tmp}/rows.jsonl"], "--train_files: .*rows.jsonl is jsonl data.*extract the text"),
        ("output_under_file", ["--output_dir", "{tmp}/text.txt/tok"], "--output_dir .*/text.txt/tok: .*text.txt is a "
                                                                       "file; pass a folder"),
        ("output_in_proc", ["--output_dir", "/proc/nope/tok"], "--output_dir /proc/nope/tok cannot be created"),
    )
    def test_refused_and_output_untouched(self, extra, message):
        """Even with --overwrite_output_dir, a refused run leaves the folder and its parent byte-identical."""
        before = snapshot(self.tmp)
        argv = ["--train_files", str(self.text), "--output_dir", str(self.out), "--overwrite_output_dir"]
        with self.assertRaisesRegex(UsageError, message):
            train_tokenizer(argv + [arg.format(tmp=self.tmp) for arg in extra])
        self.assertEqual(snapshot(self.tmp), before)

    @pytest.mark.slow  # a second interpreter
    def test_non_empty_output_exits_2(self):
        before = snapshot(self.tmp)
        result = subprocess.run(
            [sys.executable, str(REPO / "train_tokenizer.py"), "--train_files", str(self.text),
             "--output_dir", str(self.out)], capture_output=True, text=True, cwd=self.tmp)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr.strip().splitlines()[-1],
                         f"error: --output_dir {self.out} is not empty; use --overwrite_output_dir to replace it")
        self.assertEqual(snapshot(self.tmp), before)

    @pytest.mark.slow  # a second interpreter
    def test_output_in_proc_exits_2(self):
        result = subprocess.run(
            [sys.executable, str(REPO / "train_tokenizer.py"), "--train_files", str(self.text),
             "--output_dir", "/proc/nope/tok"], capture_output=True, text=True, cwd=self.tmp)
        self.assertEqual((result.returncode, result.stderr.strip().splitlines()[-1]),
                         (2, "error: --output_dir /proc/nope/tok cannot be created (No such file or directory); "
                             "pass a folder you can write to"))

    def test_overwrite_replaces_folder(self):
        train_tokenizer(["--train_files", str(self.text), "--output_dir", str(self.out), "--vocab_size", "300",
                              "--overwrite_output_dir"])
        self.assertNotIn("keep.txt", [p.name for p in self.out.iterdir()])
        self.assertLen(transformers.AutoTokenizer.from_pretrained(self.out), 400)
        self.assertEqual(sorted(p.name for p in self.tmp.iterdir()),
                         ["blank.txt", "empty.txt", "latin1.txt", "nul.txt", "out", "rows.jsonl", "text.txt"])


if __name__ == "__main__":
    absltest.main()
