"""data.py: loading local corpora, cached tokenisation, packing into exact windows (map-style and streamed)."""
import json
import os
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
from absl.testing import absltest, parameterized
from transformers import T5TokenizerFast

import data
from flags import UsageError
from run_flags import PretrainDataArguments, T5TrainingArguments
from shared_data import require

WINDOW = 61  # a prime, so windows straddle document boundaries at varying offsets


def read_paragraphs(path, limit):
    text = Path(path).read_text(encoding="utf-8")
    return [p.strip() for p in text.split("\n\n") if p.strip()][:limit]


class DataTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = T5TokenizerFast.from_pretrained(str(require("t5_spiece")))
        cls.paragraphs = read_paragraphs(require("gutenberg/austen-persuasion.txt"), 400)

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        self.training_args = T5TrainingArguments(output_dir=str(self.dir / "out"), use_cpu=True, seed=7)

    def write_text(self, paragraphs, name="corpus.txt"):
        path = self.dir / name
        path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
        return str(path)

    def tokenized_ids(self, paragraphs):
        return [self.tokenizer(p)["input_ids"] for p in paragraphs]

    def test_packing_keeps_every_token_but_the_final_remainder(self):
        docs = datasets.Dataset.from_dict({"input_ids": self.tokenized_ids(self.paragraphs)})
        windows = data.pack_windows(docs, WINDOW)
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
            data.pack_windows(docs, 568)

    def test_tokenisation_is_cached_between_runs(self):
        path = self.write_text(self.paragraphs)
        args = PretrainDataArguments(train_files=[path])
        cache = str(self.dir / "cache")
        first = data.tokenize_documents(data.load_raw_corpus(args, cache)["train"], self.tokenizer, "text")
        cache_file = first.cache_files[0]["filename"]
        mtime = os.stat(cache_file).st_mtime_ns
        # A fresh tokenizer object, as in a second process: same fingerprint, so the cache is reused.
        fresh = T5TokenizerFast.from_pretrained(str(require("t5_spiece")))
        second = data.tokenize_documents(data.load_raw_corpus(args, cache)["train"], fresh, "text")
        self.assertEqual(second.cache_files[0]["filename"], cache_file)
        self.assertEqual(os.stat(cache_file).st_mtime_ns, mtime)
        self.assertEqual(second["input_ids"], first["input_ids"])

    def test_blank_documents_are_skipped_and_eos_ends_each(self):
        docs = datasets.Dataset.from_dict({"text": ["Anne Elliot.", "   ", "", "Captain Wentworth."]})
        tokenized = data.tokenize_documents(docs, self.tokenizer, "text")
        self.assertEqual(len(tokenized), 2)
        self.assertTrue(all(ids[-1] == self.tokenizer.eos_token_id for ids in tokenized["input_ids"]))

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
        raw = data.load_raw_corpus(args, str(self.dir / "cache"))["train"]
        tokenized = data.tokenize_documents(raw, self.tokenizer, "body")
        self.assertEqual(tokenized["input_ids"], self.tokenized_ids(paragraphs))

    @parameterized.named_parameters(("paragraph", "paragraph", 3), ("line", "line", 5), ("document", "document", 1))
    def test_sample_by_splits_text_files(self, sample_by, expected_documents):
        path = self.write_text(["one line\ntwo line", "three", "four\nfive"])
        raw = data.load_raw_corpus(PretrainDataArguments(train_files=[path], sample_by=sample_by),
                                   str(self.dir / "cache"))["train"]
        self.assertLen([t for t in raw["text"] if t.strip()], expected_documents)

    def test_missing_text_column_lists_the_columns(self):
        path = self.dir / "c.jsonl"
        path.write_text('{"body": "x"}\n')
        args = PretrainDataArguments(train_files=[str(path)])
        with self.assertRaisesRegex(UsageError, "--text_column 'text' is not a column of the training data; "
                                                "columns: body"):
            data.build_pretraining_datasets(args, self.tokenizer, WINDOW, self.training_args, str(self.dir / "c"))

    def test_validation_split_holds_out_whole_documents(self):
        path = self.write_text(self.paragraphs)
        args = PretrainDataArguments(train_files=[path], validation_split_percentage=10)
        raw = data.load_raw_corpus(args, str(self.dir / "cache"))["train"]
        train, validation = data.split_off_validation(raw, 10, seed=7)
        self.assertEqual(len(train) + len(validation), len(raw))
        self.assertEqual(len(validation), round(len(raw) * 0.1))
        self.assertEmpty(set(train["text"]) & set(validation["text"]) - {""})

    def test_build_returns_exact_windows_for_train_and_eval(self):
        train_path = self.write_text(self.paragraphs[:300], "train.txt")
        val_path = self.write_text(self.paragraphs[300:], "val.txt")
        args = PretrainDataArguments(train_files=[train_path], validation_files=[val_path], max_eval_samples=5)
        train, validation = data.build_pretraining_datasets(args, self.tokenizer, WINDOW, self.training_args,
                                                            str(self.dir / "cache"))
        self.assertLen(validation, 5)
        self.assertGreater(len(train), 100)
        self.assertTrue(all(len(ids) == WINDOW for ids in train["input_ids"]))

    def test_streaming_without_validation_split_holds_out_first_windows(self):
        path = self.write_text(self.paragraphs)
        args = PretrainDataArguments(train_files=[path], streaming=True, max_eval_samples=3)
        train, validation = data.build_pretraining_datasets(args, self.tokenizer, WINDOW, self.training_args)
        held_out = np.asarray(validation["input_ids"])
        first_train = next(iter(train))["input_ids"]
        self.assertEqual(held_out.shape, (3, WINDOW))
        self.assertNotIn(list(first_train), [list(w) for w in held_out])
        streaming_without_limit = PretrainDataArguments(train_files=[path], streaming=True)
        with self.assertRaisesRegex(UsageError, "--streaming without a validation split needs --max_eval_samples"):
            data.build_pretraining_datasets(streaming_without_limit, self.tokenizer, WINDOW, self.training_args)

    def test_streaming_with_validation_files_streams_both(self):
        train_path = self.write_text(self.paragraphs[:300], "train.txt")
        val_path = self.write_text(self.paragraphs[300:], "val.txt")
        args = PretrainDataArguments(train_files=[train_path], validation_files=[val_path], streaming=True,
                                     max_eval_samples=5)
        train, validation = data.build_pretraining_datasets(args, self.tokenizer, WINDOW, self.training_args)
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
            data.build_pretraining_datasets(too_many, self.tokenizer, WINDOW, self.training_args)
        workers = T5TrainingArguments(output_dir=str(self.dir / "out"), use_cpu=True, dataloader_num_workers=2)
        args = PretrainDataArguments(train_files=[path], streaming=True, max_eval_samples=2)
        with self.assertRaisesRegex(UsageError, "--streaming needs --dataloader_num_workers 0"):
            data.build_pretraining_datasets(args, self.tokenizer, WINDOW, workers)


class DataFlagsTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        (self.dir / "a.txt").write_text("some text\n")
        (self.dir / "b.txt").write_text("other text\n")
        (self.dir / "empty.txt").write_text("")
        (self.dir / "c.jsonl").write_text('{"text": "x"}\n')
        (self.dir / "d.docx").write_text("x")

    @parameterized.named_parameters(
        ("no_data", {}, "no training data: pass --train_files"),
        ("missing_file", {"train_files": ["nope.txt"]}, "--train_files: file nope.txt not found"),
        ("empty_file", {"train_files": ["empty.txt"]}, "--train_files: file .*empty.txt is empty"),
        ("unsupported_type", {"train_files": ["d.docx"]}, "unsupported file type '.docx'"),
        ("mixed_types", {"train_files": ["a.txt", "c.jsonl"]}, "mix types"),
        ("validation_is_training", {"train_files": ["a.txt"], "validation_files": ["a.txt"]},
         "--validation_files .*a.txt is also a training file"),
        ("two_sources", {"train_files": ["a.txt"], "dataset_name": "allenai/c4"}, "both set"),
        ("bad_sample_by", {"train_files": ["a.txt"], "sample_by": "sentence"}, "--sample_by='sentence'; choices"),
    )
    def test_bad_data_flags(self, kwargs, message):
        kwargs = {k: [str(self.dir / p) if p != "nope.txt" else p for p in v] if k.endswith("files") else v
                  for k, v in kwargs.items()}
        with self.assertRaisesRegex(UsageError, message):
            PretrainDataArguments(**kwargs)


if __name__ == "__main__":
    absltest.main()
