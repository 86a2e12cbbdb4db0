"""Spec of quickstart_corpus: prose-only paragraphs, a deterministic disjoint split, idempotent re-runs."""
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import datasets
from absl.testing import absltest, parameterized

import quickstart_corpus
from flags import UsageError

REPO = Path(__file__).resolve().parents[1]
EMAIL_DIR = Path(sysconfig.get_paths()["stdlib"]) / "email"  # one package: a fast stand-in for the whole stdlib


def read_documents(path):
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n\n")


class BuiltCorpusTest(parameterized.TestCase):
    """One full build (the whole stdlib, as `make quickstart` runs it) shared by the tests below."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.paths = quickstart_corpus.main(["--output_dir", cls.tmp.name])
        cls.docs = {split: read_documents(path) for split, path in cls.paths.items()}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()
        super().tearDownClass()

    @parameterized.named_parameters(("train", "train"), ("validation", "validation"))
    def test_paragraphs_are_prose(self, split):
        for doc in self.docs[split]:
            self.assertGreaterEqual(len(doc), quickstart_corpus.DEFAULT_MIN_CHARS)
            self.assertEqual(doc, " ".join(doc.split()))  # one line, whitespace collapsed
            self.assertNotRegex(doc, r"(^|\s)>>> ")  # a doctest prompt; prose may still quote ">>>"

    def test_split_is_disjoint_95_5(self):
        train, validation = self.docs["train"], self.docs["validation"]
        self.assertEmpty(set(train) & set(validation))
        self.assertEqual(len(validation), (len(train) + len(validation)) // quickstart_corpus.VALIDATION_EVERY)

    def test_corpus_is_not_tiny(self):
        """About 1.9 MB with CPython 3.11; a much smaller corpus means a source stopped being read."""
        self.assertGreater(sum(len(doc) for doc in self.docs["train"]), 1_000_000)

    def test_datasets_reads_one_row_per_document(self):
        rows = datasets.load_dataset("text", data_files={k: str(p) for k, p in self.paths.items()},
                                     sample_by="paragraph", cache_dir=str(Path(self.tmp.name) / "cache"))
        for split, docs in self.docs.items():
            self.assertEqual([row.strip("\n") for row in rows[split]["text"]], docs)

    def test_rerun_leaves_files(self):
        before = {split: (p.read_bytes(), p.stat().st_mtime_ns) for split, p in self.paths.items()}
        quickstart_corpus.main(["--output_dir", self.tmp.name])
        self.assertEqual({split: (p.read_bytes(), p.stat().st_mtime_ns) for split, p in self.paths.items()}, before)


class DocumentsTest(parameterized.TestCase):
    def test_deterministic(self):
        first = quickstart_corpus.collect_documents(source_dir=EMAIL_DIR)
        self.assertEqual(quickstart_corpus.collect_documents(source_dir=EMAIL_DIR), first)
        self.assertLen(set(first), len(first))  # duplicates kept once

    def test_build_writes_identical_files(self):
        def build():
            out = Path(self.create_tempdir().full_path)
            splits = quickstart_corpus.split_documents(quickstart_corpus.collect_documents(source_dir=EMAIL_DIR))
            for split, docs in splits.items():
                quickstart_corpus.write_text(out / f"{split}.txt", docs)
            return {p.name: p.read_bytes() for p in out.iterdir()}

        self.assertEqual(build(), build())

    @parameterized.named_parameters(
        ("doctest", "Count how often each letter occurs in a word:\n\n>>> Counter('shazam')['a']\n2",
         ["Count how often each letter occurs in a word:"]),
        ("assignment", "result = compute(first_value, second_value)\ncache[key] = result.", []),
        ("underline", "Header registry\n---------------\n\nHeaders are parsed into objects on first access.",
         ["Headers are parsed into objects on first access."]),
        ("no_sentence_end", "make_table -- generates HTML for a single side by side table of the two files", []),
        ("signature", "max(iterable, *[, default=obj, key=func]) -> value max(arg1, arg2, *args) -> value.", []),
        ("short", "Return the foo.", []),
    )
    def test_split_paragraphs_keeps_prose_only(self, text, kept):
        self.assertEqual(quickstart_corpus.split_paragraphs(text, min_chars=40), kept)

    def test_split_paragraphs_collapses_whitespace(self):
        text = "    Return a new   list of\n    the words in the string,\n    using sep as the delimiter."
        self.assertEqual(quickstart_corpus.split_paragraphs(text, min_chars=40),
                         ["Return a new list of the words in the string, using sep as the delimiter."])


class BadInputTest(parameterized.TestCase):
    @parameterized.named_parameters(
        ("few_documents", ["--max_documents", "5"], "--max_documents 5 leaves validation empty"),
        ("min_chars", ["--min_chars", "0"], "--min_chars 0 must be >= 1"),
        ("typo", ["--max_document", "50"], "unknown flag '--max_document' .*did you mean '--max_documents'"),
    )
    def test_refused_before_writing(self, extra, message):
        out = Path(self.create_tempdir().full_path) / "corpus"
        with self.assertRaisesRegex(UsageError, message):
            quickstart_corpus.main(["--output_dir", str(out)] + extra)
        self.assertFalse(out.exists())

    def test_missing_output_dir_exits_2(self):
        result = subprocess.run([sys.executable, str(REPO / "quickstart_corpus.py")], capture_output=True, text=True)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr.strip().splitlines()[-1],
                         "error: --output_dir is required: the folder to write train.txt and validation.txt to")


if __name__ == "__main__":
    absltest.main()
