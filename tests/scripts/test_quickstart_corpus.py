"""Spec of quickstart_corpus: prose-only paragraphs, a deterministic disjoint split, idempotent re-runs."""
import contextlib
import io
import subprocess
import sys
import sysconfig
from pathlib import Path
from unittest import mock

import datasets
import pytest
from absl.testing import absltest, parameterized

from scripts import quickstart_corpus
from t5kit import cli
from t5kit.errors import UsageError
from tests.helpers import REPO, built_quickstart_corpus

EMAIL_DIR = Path(sysconfig.get_paths()["stdlib"]) / "email"  # one package: a fast stand-in for the whole stdlib
# Stand-in for collect_documents, so tests of the output folder skip the slow stdlib scan.
FAKE_DOCUMENTS = [f"Document number {i} is one sentence of prose." for i in range(40)]


def read_documents(path):
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n\n")


@pytest.mark.slow  # builds the whole quickstart corpus in setUpClass
class BuiltCorpusTest(parameterized.TestCase):
    """One full build (the whole stdlib, as `make quickstart` runs it), shared by the tests below and the quickstart
    test (helpers.built_quickstart_corpus)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder, cls.paths = built_quickstart_corpus()
        cls.docs = {split: read_documents(path) for split, path in cls.paths.items()}

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
                                     sample_by="paragraph", cache_dir=self.create_tempdir().full_path)
        for split, docs in self.docs.items():
            self.assertEqual([row.strip("\n") for row in rows[split]["text"]], docs)

    def test_rerun_leaves_files(self):
        before = {split: (p.read_bytes(), p.stat().st_mtime_ns) for split, p in self.paths.items()}
        quickstart_corpus.main(["--output_dir", str(self.folder)])
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
        result = subprocess.run([sys.executable, "-m", "scripts.quickstart_corpus"], cwd=REPO, capture_output=True,
                                text=True)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr.strip().splitlines()[-1],
                         "error: --output_dir is required: the folder to write train.txt and validation.txt to")


def run_script(out):
    """(exit code, stderr) of the script's `__main__` path (cli.run_cli) in this process; test_missing_output_dir_
    exits_2 starts the real process once."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), mock.patch.object(sys, "argv", ["quickstart_corpus.py",
                                                                            "--output_dir", str(out)]):
        try:
            cli.run_cli(quickstart_corpus.main)
        except SystemExit as stop:
            return stop.code, stderr.getvalue()
    return 0, stderr.getvalue()


class OutputDirTest(parameterized.TestCase):
    """A user's files are never replaced; only files whose hash this script recorded count as a built corpus."""

    def setUp(self):
        super().setUp()
        self.enter_context(mock.patch.object(quickstart_corpus, "collect_documents", return_value=FAKE_DOCUMENTS))
        self.out = Path(self.create_tempdir().full_path)

    @parameterized.named_parameters(
        ("only_train", {"train.txt": "MY DATA"}, "train.txt"),
        ("only_validation", {"validation.txt": "MY DATA"}, "validation.txt"),
        ("both_foreign", {"train.txt": "MY DATA", "validation.txt": "MY DATA"}, "train.txt"),
        ("empty_train", {"train.txt": ""}, "train.txt"),
    )
    def test_user_files_refused(self, files, name):
        for file_name, text in files.items():
            (self.out / file_name).write_text(text, encoding="utf-8")
        code, stderr = run_script(self.out)
        self.assertEqual(code, 2)
        self.assertEqual(stderr.strip().splitlines()[-1],
                         f"error: --output_dir {self.out}: {name} was not written by quickstart_corpus.py; move it "
                         "away or pass another --output_dir")
        self.assertEqual({p.name: p.read_text(encoding="utf-8") for p in self.out.iterdir()}, files)

    def test_edited_after_build_refused(self):
        paths = quickstart_corpus.main(["--output_dir", str(self.out)])
        paths["train"].write_text("MY EDIT", encoding="utf-8")
        with self.assertRaisesRegex(UsageError, "train.txt was not written by quickstart_corpus.py"):
            quickstart_corpus.main(["--output_dir", str(self.out)])
        self.assertEqual(paths["train"].read_text(encoding="utf-8"), "MY EDIT")

    def test_deleted_split_rebuilt(self):
        paths = quickstart_corpus.main(["--output_dir", str(self.out)])
        before = {split: path.read_bytes() for split, path in paths.items()}
        paths["validation"].unlink()
        quickstart_corpus.main(["--output_dir", str(self.out)])
        self.assertEqual({split: path.read_bytes() for split, path in paths.items()}, before)

    @parameterized.named_parameters(
        ("is_file", "file.txt", "--output_dir {tmp}/file.txt is a file; pass a folder"),
        ("under_file", "file.txt/corpus",
         "--output_dir {tmp}/file.txt/corpus: {tmp}/file.txt is a file; pass a folder"),
        ("in_proc", "/proc/nope/corpus", "--output_dir /proc/nope/corpus cannot be created (No such file or "
                                         "directory); pass a folder you can write to"),
    )
    def test_bad_output_dir(self, out, message):
        (self.out / "file.txt").write_text("MY DATA", encoding="utf-8")
        with self.assertRaisesWithLiteralMatch(UsageError, message.format(tmp=self.out)):
            quickstart_corpus.main(["--output_dir", str(self.out / out)])  # an absolute `out` replaces self.out
        self.assertEqual([p.name for p in self.out.iterdir()], ["file.txt"])

if __name__ == "__main__":
    absltest.main()
