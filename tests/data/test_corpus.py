"""corpus.py: loading local corpora, cached tokenisation, packing into exact windows (map-style and streamed).
(The corpus flags' own checks: tests/config/test_pretrain_arguments.py.)"""
import json
import os
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
from absl.testing import absltest, parameterized
from transformers import T5TokenizerFast

from t5kit.config import parsing
from t5kit.config.pretrain_arguments import PretrainDataArguments
from t5kit.config.script_flags import PRETRAIN_FLAG_CLASSES
from t5kit.data import corpus
from t5kit.errors import UsageError
from tests.helpers import read_paragraphs, require, tiny_run_flags

WINDOW = 61  # a prime, so windows straddle document boundaries at varying offsets


class DataTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = T5TokenizerFast.from_pretrained(str(require("t5_spiece")))
        cls.paragraphs = read_paragraphs(require("gutenberg/austen-persuasion.txt"), 400)

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def write_text(self, paragraphs, name="corpus.txt"):
        path = self.dir / name
        path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
        return str(path)

    def tokenized_ids(self, paragraphs):
        return [self.tokenizer(p)["input_ids"] for p in paragraphs]

    def test_packing_keeps_every_token_but_the_final_remainder(self):
        docs = datasets.Dataset.from_dict({"input_ids": self.tokenized_ids(self.paragraphs)})
        windows = corpus.pack_windows(docs, WINDOW)
        stream = np.concatenate([np.asarray(ids) for ids in docs["input_ids"]])
        self.assertEqual(len(windows), len(stream) // WINDOW)
        packed = np.asarray(windows["input_ids"])  # (num_windows, WINDOW)
        self.assertEqual(packed.shape, (len(stream) // WINDOW, WINDOW))
        np.testing.assert_array_equal(packed.reshape(-1), stream[:packed.size])
        self.assertNotIn(self.tokenizer.pad_token_id, packed)
        # Every document still ends with EOS inside the stream.
        self.assertEqual(int((packed == self.tokenizer.eos_token_id).sum()),
                         int((stream[:packed.size] == self.tokenizer.eos_token_id).sum()))

    def test_corpus_shorter_than_one_window_is_refused(self):
        docs = datasets.Dataset.from_dict({"input_ids": [[5, 6, 1]]})
        with self.assertRaisesRegex(UsageError, "corpus has 3 tokens, shorter than one window of 568"):
            corpus.pack_windows(docs, 568)

    def test_tokenisation_is_cached_between_runs(self):
        path = self.write_text(self.paragraphs)
        args = PretrainDataArguments(train_files=[path])
        cache = str(self.dir / "cache")
        first = corpus.tokenize_documents(corpus.load_raw_corpus(args.corpus_spec(7, cache))["train"], self.tokenizer,
                                          "text")
        cache_file = first.cache_files[0]["filename"]
        mtime = os.stat(cache_file).st_mtime_ns
        # A fresh tokenizer object, as in a second process: same fingerprint, so the cache is reused.
        fresh = T5TokenizerFast.from_pretrained(str(require("t5_spiece")))
        second = corpus.tokenize_documents(corpus.load_raw_corpus(args.corpus_spec(7, cache))["train"], fresh, "text")
        self.assertEqual(second.cache_files[0]["filename"], cache_file)
        self.assertEqual(os.stat(cache_file).st_mtime_ns, mtime)
        self.assertEqual(second["input_ids"], first["input_ids"])

    def test_another_tokenizer_or_option_is_another_cache_entry(self):
        """The cache key (corpus.tokenize_fingerprint) reads the tokenizer itself, not its object: a tokenizer with
        one more token, or EOS left off, tokenises anew instead of reading the first run's ids."""
        path = self.write_text(self.paragraphs)
        args = PretrainDataArguments(train_files=[path])
        spec = args.corpus_spec(7, str(self.dir / "cache"))
        first = corpus.tokenize_documents(corpus.load_raw_corpus(spec)["train"], self.tokenizer, "text")
        grown = T5TokenizerFast.from_pretrained(str(require("t5_spiece")))
        grown.add_tokens(["Elliot"])
        runs = {"tokenizer": corpus.tokenize_documents(corpus.load_raw_corpus(spec)["train"], grown, "text"),
                "append_eos": corpus.tokenize_documents(corpus.load_raw_corpus(spec)["train"], self.tokenizer, "text",
                                                        append_eos=False)}
        for name, run in runs.items():
            self.assertNotEqual(run.cache_files[0]["filename"], first.cache_files[0]["filename"], name)
            self.assertNotEqual(run["input_ids"], first["input_ids"], name)

    def test_blank_documents_are_skipped_and_eos_ends_each(self):
        docs = datasets.Dataset.from_dict({"text": ["Anne Elliot.", "   ", "", "Captain Wentworth."]})
        tokenized = corpus.tokenize_documents(docs, self.tokenizer, "text")
        self.assertEqual(len(tokenized), 2)
        self.assertTrue(all(ids[-1] == self.tokenizer.eos_token_id for ids in tokenized["input_ids"]))

    @parameterized.named_parameters(("eos", "eos", False), ("none", "none", False),
                                    ("eos_streamed", "eos", True), ("none_streamed", "none", True))
    def test_document_separator(self, separator, streaming):
        docs = ["Anne Elliot.", "Captain Wentworth."]
        args = PretrainDataArguments(train_files=[self.write_text(docs * 40)], streaming=streaming,
                                     validation_files=[self.write_text(docs * 40, "v.txt")],
                                     document_separator=separator)
        train, _, _ = corpus.build_pretraining_datasets(args.corpus_spec(7, str(self.dir / "cache")),
                                                        self.tokenizer, 32)
        words = [self.tokenizer(doc, add_special_tokens=False)["input_ids"] for doc in docs]
        # eos: each document ends with EOS (HF's run_t5_mlm_flax.py); none: joined directly (T5's C4 task).
        eos = [self.tokenizer.eos_token_id] if separator == "eos" else []
        expected = (words[0] + eos + words[1] + eos) * 10
        np.testing.assert_array_equal(next(iter(train))["input_ids"], expected[:32])

    @parameterized.named_parameters(("jsonl", ".jsonl"), ("csv", ".csv"), ("tsv", ".tsv"), ("parquet", ".parquet"))
    def test_every_file_type_gives_the_same_tokens(self, suffix):
        paragraphs = [p.replace("\n", " ") for p in self.paragraphs[:50]]
        path = self.dir / f"corpus{suffix}"
        frame = pd.DataFrame({"id": range(len(paragraphs)), "body": paragraphs})
        if suffix == ".jsonl":
            path.write_text("".join(json.dumps(row) + "\n" for row in frame.to_dict("records")))
        elif suffix == ".parquet":
            frame.to_parquet(path)
        else:
            frame.to_csv(path, index=False, sep="\t" if suffix == ".tsv" else ",")
        args = PretrainDataArguments(train_files=[str(path)], text_column="body")
        raw = corpus.load_raw_corpus(args.corpus_spec(7, str(self.dir / "cache")))["train"]
        tokenized = corpus.tokenize_documents(raw, self.tokenizer, "body")
        self.assertEqual(tokenized["input_ids"], self.tokenized_ids(paragraphs))

    @parameterized.named_parameters(("paragraph", "paragraph", 3), ("line", "line", 5), ("document", "document", 1))
    def test_sample_by_splits_text_files(self, sample_by, expected_documents):
        path = self.write_text(["one line\ntwo line", "three", "four\nfive"])
        args = PretrainDataArguments(train_files=[path], sample_by=sample_by)
        raw = corpus.load_raw_corpus(args.corpus_spec(7, str(self.dir / "cache")))["train"]
        self.assertLen([t for t in raw["text"] if t.strip()], expected_documents)

    def test_missing_text_column_lists_the_columns(self):
        path = self.dir / "c.jsonl"
        path.write_text('{"body": "x"}\n')
        args = PretrainDataArguments(train_files=[str(path)])
        with self.assertRaisesRegex(UsageError, "--text_column 'text' is not a column of --train_files "
                                                ".*c.jsonl; columns: body"):
            corpus.build_pretraining_datasets(args.corpus_spec(7, str(self.dir / "c")), self.tokenizer, WINDOW)

    @parameterized.named_parameters(("jsonl", ".jsonl", False), ("parquet", ".parquet", False),
                                    ("jsonl_streamed", ".jsonl", True))
    def test_validation_files_may_be_another_type_than_training(self, suffix, streaming):
        train_path = self.write_text(["Anne Elliot.", "Captain Wentworth."], "train.txt")
        val_path = self.dir / f"val{suffix}"
        frame = pd.DataFrame({"text": ["Lady Russell.", "Sir Walter.", "Mary."]})
        if suffix == ".parquet":
            frame.to_parquet(val_path)
        else:
            val_path.write_text("".join(json.dumps(row) + "\n" for row in frame.to_dict("records")))
        args = PretrainDataArguments(train_files=[train_path], validation_files=[str(val_path)], streaming=streaming)
        raw = corpus.load_raw_corpus(args.corpus_spec(7, str(self.dir / "cache")))
        self.assertEqual([row["text"].strip() for row in raw["train"]], ["Anne Elliot.", "Captain Wentworth."])
        self.assertEqual([row["text"] for row in raw["validation"]], ["Lady Russell.", "Sir Walter.", "Mary."])

    @parameterized.named_parameters(
        ("broken_json_line", "c.jsonl", '{"text": "a"}\n{"text": \n', "cannot be read .JSON parse error"),
        ("unterminated_csv_quote", "c.csv", 'text\n"never closed\nmore\n', "cannot be read .*EOF inside string"),
        ("not_parquet", "c.parquet", "plain text\n", "cannot be read .*[Pp]arquet"),
        ("binary_txt", "c.txt", bytes(range(256)) * 4, "c.txt: not utf-8 text .byte 128.; pass --encoding"),
        ("header_only_csv", "c.csv", "text\n", "holds no documents"),
        ("blank_lines_txt", "c.txt", "\n\n\n\n", "holds no documents"),
        ("number_text", "c.jsonl", '{"text": 5}\n', "--text_column 'text' of --train_files .* holds int64"),
    )
    def test_unreadable_corpus_file_is_one_line_naming_it(self, name, content, message):
        path = self.dir / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        for streaming in (False, True):
            with self.subTest(streaming=streaming):
                args = PretrainDataArguments(train_files=[str(path)], streaming=streaming, max_eval_samples=1)
                with self.assertRaisesRegex(UsageError, message) as caught:
                    corpus.build_pretraining_datasets(args.corpus_spec(7, str(self.dir / f"cache{streaming}")),
                                                      self.tokenizer, WINDOW)
                self.assertIn(f"--train_files {path}", str(caught.exception))
                self.assertNotIn("\n", str(caught.exception))

    @parameterized.named_parameters(("map_style", False), ("streaming", True))
    def test_encoding_reads_latin1_and_names_the_exact_file_that_is_not_utf8(self, streaming):
        good = [self.write_text(self.paragraphs[i::3], f"book{i}.txt") for i in range(3)]
        latin1 = self.dir / "gutenberg_latin1.txt"
        latin1.write_bytes("\n\n".join(["Caf\u00e9 au lait, na\u00efve \u00e9t\u00e9."] * 40 + self.paragraphs[:50])
                          .encode("latin-1"))
        files = [*good, str(latin1)]  # the bad one is fourth: a message naming "the first three" would miss it
        args = PretrainDataArguments(train_files=files, streaming=streaming, max_eval_samples=2)
        with self.assertRaisesRegex(UsageError, f"^--train_files {latin1}: not utf-8 text .byte 3.; pass --encoding"):
            corpus.build_pretraining_datasets(args.corpus_spec(7, str(self.dir / f"cache{streaming}")),
                                              self.tokenizer, WINDOW)
        args = PretrainDataArguments(train_files=[str(latin1)], encoding="latin-1", streaming=streaming,
                                     max_eval_samples=2)
        train, _, _ = corpus.build_pretraining_datasets(args.corpus_spec(7, str(self.dir / f"latin{streaming}")),
                                                        self.tokenizer, WINDOW)
        text = " ".join(self.tokenizer.decode(row["input_ids"]) for row, _ in zip(train, range(200)))
        self.assertIn("Café au lait", text)

    def test_whitespace_only_text_file_is_refused_naming_it(self):
        path = self.write_text([" "], "blank.txt")  # one whitespace-only paragraph
        for streaming, message in ((False, "--validation_split_percentage=5.0 of the 1 document.s. of --train_files "
                                           ".*blank.txt leaves none"),
                                   (True, "the stream has only 0 windows of 61 tokens .--train_files .*blank.txt")):
            with self.subTest(streaming=streaming):
                args = PretrainDataArguments(train_files=[path], streaming=streaming, max_eval_samples=1)
                with self.assertRaisesRegex(UsageError, message):
                    corpus.build_pretraining_datasets(args.corpus_spec(7, str(self.dir / f"cache{streaming}")),
                                                      self.tokenizer, WINDOW)

    def test_unreadable_validation_file_is_named(self):
        train_path = self.write_text(self.paragraphs[:20], "train.txt")
        val_path = self.dir / "val.jsonl"
        val_path.write_text('{"text": \n')
        args = PretrainDataArguments(train_files=[train_path], validation_files=[str(val_path)])
        with self.assertRaisesRegex(UsageError, "--validation_files .*val.jsonl: cannot be read"):
            corpus.build_pretraining_datasets(args.corpus_spec(7, str(self.dir / "c")), self.tokenizer, WINDOW)

    def test_null_documents_are_dropped_like_blank_ones(self):
        docs = datasets.Dataset.from_dict({"text": [None, "", "  "]})
        self.assertEmpty(corpus.tokenize_documents(docs, self.tokenizer, "text"))
        path = self.dir / "c.jsonl"
        path.write_text('{"text": null}\n{"text": ""}\n')
        args = PretrainDataArguments(train_files=[str(path)])
        with self.assertRaisesRegex(UsageError, "--train_files .*c.jsonl: corpus has 0 tokens"):
            corpus.build_pretraining_datasets(args.corpus_spec(7, str(self.dir / "c")), self.tokenizer, WINDOW)

    def test_validation_split_of_a_single_document_is_refused(self):
        single = datasets.Dataset.from_dict({"text": ["Only one document."]})
        with self.assertRaisesRegex(UsageError, "--validation_split_percentage=5 of the 1 document.s. of"):
            corpus.split_off_validation(single, 5, seed=7)

    def test_validation_split_holds_out_whole_documents(self):
        path = self.write_text(self.paragraphs)
        args = PretrainDataArguments(train_files=[path], validation_split_percentage=10)
        raw = corpus.load_raw_corpus(args.corpus_spec(7, str(self.dir / "cache")))["train"]
        train, validation = corpus.split_off_validation(raw, 10, seed=7)
        self.assertEqual(len(train) + len(validation), len(raw))
        self.assertEqual(len(validation), round(len(raw) * 0.1))
        self.assertEmpty(set(train["text"]) & set(validation["text"]) - {""})

    def test_build_returns_exact_windows_for_train_and_eval(self):
        train_path = self.write_text(self.paragraphs[:300], "train.txt")
        val_path = self.write_text(self.paragraphs[300:], "val.txt")
        args = PretrainDataArguments(train_files=[train_path], validation_files=[val_path], max_eval_samples=5)
        train, validation, counts = corpus.build_pretraining_datasets(args.corpus_spec(7, str(self.dir / "cache")),
                                                                      self.tokenizer, WINDOW)
        self.assertLen(validation, 5)
        self.assertGreater(len(train), 100)
        self.assertEqual(counts, {"train_documents": 300, "train_windows": len(train),
                                  "validation_documents": len(self.paragraphs) - 300, "validation_windows": 5})
        self.assertTrue(all(len(ids) == WINDOW for ids in train["input_ids"]))

    def test_streaming_without_validation_split_holds_out_first_windows(self):
        path = self.write_text(self.paragraphs)
        args = PretrainDataArguments(train_files=[path], streaming=True, max_eval_samples=3)
        train, validation, counts = corpus.build_pretraining_datasets(args.corpus_spec(7), self.tokenizer, WINDOW)
        self.assertEqual(counts, {"train_documents": None, "train_windows": None, "validation_documents": None,
                                  "validation_windows": 3})
        held_out = np.asarray(validation["input_ids"])
        first_train = next(iter(train))["input_ids"]
        self.assertEqual(held_out.shape, (3, WINDOW))
        self.assertNotIn(list(first_train), [list(w) for w in held_out])
        streaming_without_limit = PretrainDataArguments(train_files=[path], streaming=True)
        with self.assertRaisesRegex(UsageError, "--streaming without a validation split needs --max_eval_samples"):
            corpus.build_pretraining_datasets(streaming_without_limit.corpus_spec(7), self.tokenizer, WINDOW)

    def test_streaming_with_validation_files_streams_both(self):
        train_path = self.write_text(self.paragraphs[:300], "train.txt")
        val_path = self.write_text(self.paragraphs[300:], "val.txt")
        args = PretrainDataArguments(train_files=[train_path], validation_files=[val_path], streaming=True,
                                     max_eval_samples=5)
        train, validation, _ = corpus.build_pretraining_datasets(args.corpus_spec(7), self.tokenizer, WINDOW)
        evaluation = list(validation)
        self.assertEqual([sorted(w) for w in evaluation], [["input_ids"]] * 5)  # no ids: never resumed
        val_ids = np.concatenate([np.asarray(ids) for ids in self.tokenized_ids(self.paragraphs[300:])])
        np.testing.assert_array_equal(np.concatenate([w["input_ids"] for w in evaluation]), val_ids[:5 * WINDOW])
        first = next(iter(train))
        self.assertEqual((first["window_index"], first["stream_epoch"]), (0, 0))
        train_ids = np.concatenate([np.asarray(ids) for ids in self.tokenized_ids(self.paragraphs[:1])])
        np.testing.assert_array_equal(first["input_ids"][:len(train_ids)], train_ids[:WINDOW])

    def test_streaming_refuses_what_would_break_exact_resume_or_evaluation(self):
        path = self.write_text(self.paragraphs[:20])
        too_many = PretrainDataArguments(train_files=[path], streaming=True, max_eval_samples=10_000)
        with self.assertRaisesRegex(UsageError, r"--max_eval_samples 10000: the stream has only \d+ windows"):
            corpus.build_pretraining_datasets(too_many.corpus_spec(7), self.tokenizer, WINDOW)
        with self.assertRaisesRegex(UsageError, "--streaming needs --dataloader_num_workers 0"):
            parsing.parse_flags(PRETRAIN_FLAG_CLASSES, tiny_run_flags(
                str(self.dir / "out"), path, streaming=True, max_eval_samples=2, dataloader_num_workers=2))
        with self.assertRaisesRegex(UsageError, "--streaming needs --max_steps N"):
            parsing.parse_flags(PRETRAIN_FLAG_CLASSES, tiny_run_flags(
                str(self.dir / "out"), path, streaming=True, max_eval_samples=2, max_steps=-1))


if __name__ == "__main__":
    absltest.main()
