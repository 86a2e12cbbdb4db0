"""predict_t5.py end to end on a tiny fine-tuned RTE model and a briefly pre-trained one: every input format, the
model card's task, output in input order whatever the batches, rank scoring, span filling. (Its helpers:
tests/model/test_inference.py, tests/data/test_predict_inputs.py, tests/config/test_checks.py.)"""
import csv
import json
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from absl.testing import absltest, parameterized
from transformers import AutoTokenizer, T5ForConditionalGeneration

from t5kit.data import predict_inputs
from t5kit.errors import UsageError
from t5kit.model.inference import rank_label_words, score_label_words
from tests.helpers import (
    EVAL_ROWS,
    fine_tune,
    pre_train,
    predict,
    predict_flags,
    require,
    snapshot,
    tiny_flags,
    tiny_run_flags,
)

pytestmark = pytest.mark.train_class  # fine-tunes and pre-trains the models it predicts with

RTE_WORDS = {"entailment", "not_entailment"}


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def rte_dev_rows(limit):
    with open(require("glue/RTE/dev.tsv"), newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))[:limit]


def write_rows(path, rows, columns):
    """rows as .jsonl, .csv or .tsv by the suffix of path."""
    path = Path(path)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps({c: row[c] for c in columns}) + "\n" for row in rows))
    elif path.suffix == ".tsv":  # as the GLUE files are: no quoting (their text holds no tab)
        path.write_text("".join("\t".join(values) + "\n" for values in
                                [columns, *([row[c] for c in columns] for row in rows)]))
    else:
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    return str(path)


class PredictEndToEndTest(parameterized.TestCase):
    """A tiny RTE fine-tune (its card names glue/rte) and a 60-step pre-training (it emits sentinels), shared."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as helpers.OneThreadTestCase: two threads on a shared 2-core machine run slower
        cls.tmp = Path(tempfile.mkdtemp())
        cls.rte = cls.tmp / "rte"
        fine_tune(tiny_flags(str(cls.rte)))
        cls.pretrained = cls.tmp / "pretrained"
        pre_train(tiny_run_flags(str(cls.pretrained), str(require("gutenberg/austen-persuasion.txt")), max_steps=60,
                                 per_device_train_batch_size=8, logging_steps=20))

    @classmethod
    def tearDownClass(cls):
        torch.set_num_threads(cls.threads)
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def run_predict(self, input_file, name="out.jsonl", model=None, **overrides):
        out = self.dir / name
        rows = predict(predict_flags(str(model or self.rte), str(input_file), str(out), **overrides))
        self.assertEqual(rows, read_jsonl(out)) if out.suffix == ".jsonl" else None
        return rows

    def test_official_dev_file_with_the_card_task_predicts_as_evaluation_did(self):
        """Same model, same inputs, greedy: the rows fine_tune_t5.py's evaluation predicted, in the same order."""
        rows = self.run_predict(require("glue/RTE/dev.tsv"), max_predict_samples=EVAL_ROWS)
        evaluated = read_jsonl(self.rte / "predictions_rte_validation.jsonl")
        self.assertEqual([row["input"] for row in rows], [row["input"] for row in evaluated])
        self.assertEqual([row["prediction"] for row in rows], [row["prediction"] for row in evaluated])
        self.assertEqual([row["line"] for row in rows], list(range(2, 2 + EVAL_ROWS)))  # line 1: the header
        self.assertEqual(sorted(rows[0]), ["input", "line", "prediction"])

    @parameterized.named_parameters(("jsonl", "rows.jsonl"), ("csv", "rows.csv"), ("tsv", "rows.tsv"))
    def test_every_row_format_gives_the_same_predictions(self, name):
        source = rte_dev_rows(EVAL_ROWS)
        path = write_rows(self.dir / name, source, ["sentence1", "sentence2"])
        rows = self.run_predict(path)
        self.assertEqual([row["input"] for row in rows],
                         [f"rte sentence1: {r['sentence1']} sentence2: {r['sentence2']}" for r in source])
        evaluated = read_jsonl(self.rte / "predictions_rte_validation.jsonl")
        self.assertEqual([row["prediction"] for row in rows], [row["prediction"] for row in evaluated])

    def test_txt_lines_get_a_single_column_task_format(self):
        path = self.dir / "reviews.txt"
        path.write_text("a gripping film\n\nflat and dull\n")
        rows = self.run_predict(path, task="sst2")
        self.assertEqual([(row["line"], row["input"]) for row in rows],
                         [(1, "sst2 sentence: a gripping film"), (3, "sst2 sentence: flat and dull")])
        self.assertEqual(len(read_jsonl(self.dir / "out.jsonl")), 2)

    def test_output_is_in_input_order_whatever_the_batches(self):
        one_batch = self.run_predict(require("glue/RTE/dev.tsv"), "a.jsonl", max_predict_samples=20)
        small_batches = self.run_predict(require("glue/RTE/dev.tsv"), "b.jsonl", max_predict_samples=20,
                                         batch_size=3)
        self.assertEqual(small_batches, one_batch)

    def test_tsv_output_holds_the_same_rows(self):
        rows = self.run_predict(require("glue/RTE/dev.tsv"), "out.tsv", max_predict_samples=5)
        with open(self.dir / "out.tsv", newline="", encoding="utf-8") as handle:
            written = list(csv.DictReader(handle, delimiter="\t"))
        self.assertEqual([{k: str(v) for k, v in row.items()} for row in rows], written)

    def test_rank_scoring_picks_the_likeliest_label_word(self):
        rows = self.run_predict(require("glue/RTE/dev.tsv"), label_scoring="rank", max_predict_samples=6)
        self.assertContainsSubset({row["prediction"] for row in rows}, RTE_WORDS)
        tokenizer = AutoTokenizer.from_pretrained(self.rte)
        model = T5ForConditionalGeneration.from_pretrained(self.rte).eval()
        for row in rows[:3]:  # one at a time, unpadded: the same choice
            encoded = tokenizer([row["input"]], return_tensors="pt", truncation=True, max_length=64)
            scores = score_label_words(model, tokenizer, encoded.input_ids, encoded.attention_mask,
                                       ["entailment", "not_entailment"])
            self.assertEqual(rank_label_words(scores, ["entailment", "not_entailment"]), [row["prediction"]])

    def test_span_filling_keeps_the_sentinels_and_fills_the_input(self):
        path = self.dir / "spans.txt"
        path.write_text("The <extra_id_0> walks in <extra_id_1> park.\n\nA <extra_id_0> day.\n")
        rows = self.run_predict(path, model=self.pretrained, max_new_tokens=12)
        self.assertEqual([row["line"] for row in rows], [1, 3])
        for row in rows:
            self.assertTrue(row["prediction"].startswith("<extra_id_0>"), row)
            self.assertEqual(row["filled"], predict_inputs.fill_spans(row["input"], row["prediction"]))
            self.assertNotIn("<extra_id_", row["filled"])

    def test_bf16_weights_predict_label_words_like_fp32(self):
        """--bf16 true on the CPU (the weights cast to bf16; emulated and slow where the CPU lacks bf16, and this
        model is tiny): label words ranked in bf16 are label words, in input order, nearly all as ranked in fp32."""
        rows = dict(label_scoring="rank", max_predict_samples=EVAL_ROWS)
        fp32 = self.run_predict(require("glue/RTE/dev.tsv"), "fp32.jsonl", **rows)
        bf16 = self.run_predict(require("glue/RTE/dev.tsv"), "bf16.jsonl", bf16=True, **rows)
        self.assertEqual([row["line"] for row in bf16], [row["line"] for row in fp32])
        self.assertContainsSubset({row["prediction"] for row in bf16}, RTE_WORDS)
        agree = sum(a["prediction"] == b["prediction"] for a, b in zip(fp32, bf16))
        self.assertGreaterEqual(agree, EVAL_ROWS - 2)

    def test_task_none_feeds_the_inputs_as_they_are(self):
        path = write_rows(self.dir / "raw.jsonl", [{"text": "rte sentence1: a sentence2: b"}], ["text"])
        (row,) = self.run_predict(path, task="none", text_column="text", max_new_tokens=4)
        self.assertEqual((row["line"], row["input"]), (1, "rte sentence1: a sentence2: b"))

    @parameterized.named_parameters(
        ("several_columns_from_txt", "lines.txt", "x\n", {"task": "rte"}, "task glue/rte reads columns sentence1, "
         "sentence2, and a .txt file holds one text a line"),
        ("no_text_column_without_task", "rows.jsonl", '{"review": "x"}\n', {"task": "none"},
         "has columns review; pass --text_column NAME"),
        ("rank_without_labels", "rows.jsonl", '{"sentence1": "a", "sentence2": "b"}\n',
         {"task": "stsb", "label_scoring": "rank"}, "task glue/stsb, a regression task; pass --task NAME or use "
         "--label_scoring generate"),
        ("only_blank_lines", "blank.txt", "\n  \n", {"task": "sst2"},
         r"has no examples \(2 row\(s\) read, 2 blank or malformed\)"))
    def test_refusals_write_nothing(self, name, content, overrides, message):
        path = self.dir / name
        path.write_text(content)
        before = snapshot(self.dir)
        with self.assertRaisesRegex(UsageError, message):
            predict(predict_flags(str(self.rte), str(path), str(self.dir / "out.jsonl"), **overrides))
        self.assertEqual(snapshot(self.dir), before)


if __name__ == "__main__":
    absltest.main()
