"""bench/ct2_agreement.py: the gold labels of the official dev files, and one run of every arm on a tiny model."""
import csv
import re
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from absl.testing import absltest, parameterized

from bench import ct2_agreement
from bench.predict import has_bf16
from t5kit.data.task_format import find_task
from tests.forked import run_forked
from tests.helpers import require, save_tiny_t5


class GoldLabelsTest(parameterized.TestCase):

    @parameterized.parameters(("glue/sst2", "SST-2", "label", {"0": "negative", "1": "positive"}),
                              ("glue/rte", "RTE", "label", {"entailment": "entailment",
                                                            "not_entailment": "not_entailment"}))
    def test_label_words_follow_the_file(self, task, folder, column, words):
        path = require(f"glue/{folder}/dev.tsv")
        with open(path, encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
        gold = ct2_agreement.gold_labels(find_task(task), path, 100_000)
        self.assertEqual(gold, [words[row[column]] for row in rows])
        self.assertLen(ct2_agreement.gold_labels(find_task(task), path, 7), 7)

    def test_a_file_without_header_is_read_with_the_task_columns(self):
        """CoLA's official dev.tsv has no header line: source, label, notes, sentence."""
        path = require("glue/CoLA/dev.tsv")
        with open(path, encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
        words = {"0": "unacceptable", "1": "acceptable"}
        self.assertEqual(ct2_agreement.gold_labels(find_task("glue/cola"), path, 100_000),
                         [words[row[1]] for row in rows])


@pytest.mark.slow
class EveryArmTest(absltest.TestCase):

    def test_one_line_per_scoring_with_every_arm(self):
        # each arm's predict_t5.py in a forked process (tests/forked.py): a real process, started in
        # a tenth of a second instead of importing torch and transformers again
        forked = mock.patch.object(ct2_agreement, "run_predict_t5", lambda argv: run_forked("predict_t5", argv))
        with tempfile.TemporaryDirectory() as folder, forked:
            model = save_tiny_t5(Path(folder) / "model")
            results = ct2_agreement.main(["--model_name_or_path", model, "--max_examples", "12",
                                          "--compute_types", "int8", "--fp16"])
        self.assertEqual(set(results), {"generate", "rank"})
        for line in results.values():
            # (float32's parity with the torch backend: tests/model/test_ctranslate2_backend.py)
            self.assertRegex(line, r"ct2 int8: agrees with torch fp32 on \d+\.\d%")
            self.assertRegex(line, r"torch fp16: agrees with torch fp32 on \d+\.\d%")
            bf16 = has_bf16("cpu")  # the torch bf16 arm runs where predict_t5.py would default to it
            self.assertEqual("torch bf16: agrees with torch fp32 on" in line, bf16)
            self.assertLen(re.findall(r"accuracy \d+\.\d%", line), 4 if bf16 else 3)


if __name__ == "__main__":
    absltest.main()
