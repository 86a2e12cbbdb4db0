"""data/task_sources.py: task rows from local files, official GLUE / SuperGLUE folders and line-aligned text, in hub
form: each reader's line numbers and columns, malformed rows marked rather than raised, every spelling of a label,
the columns a split needs, the rows dropped (counted and logged) and a split left empty refused, each error naming
the file and line."""
import logging
from pathlib import Path

from absl.testing import absltest, parameterized

from constants import NO_LABEL
from t5kit.data import task_sources
from t5kit.data.task_format import get_task_vals
from t5kit.data.task_splits import SplitPlan
from t5kit.errors import UsageError
from t5kit.specs import TaskDataSpec
from tests.helpers import require


def plan(task="rte", role="eval", split="validation", benchmark="glue"):
    return SplitPlan(get_task_vals(benchmark, task), split, role, task)


class ReadersTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def write(self, name, text):
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def test_tsv_keeps_quotes_and_marks_a_row_of_the_wrong_width(self):
        path = self.write("rows.tsv", 'sentence1\tsentence2\tlabel\n"Quoted" start\tb\t0\nonly one field\n'
                                      "a\tb\t1\textra\n")
        rows, columns = task_sources.read_local_file(path)
        self.assertEqual(columns, ["sentence1", "sentence2", "label"])
        self.assertEqual([number for number, _ in rows], [2, 3, 4])
        self.assertEqual(rows[0][1], {"sentence1": '"Quoted" start', "sentence2": "b", "label": "0"})  # QUOTE_NONE
        self.assertIsNone(rows[1][1]["sentence2"])  # missing fields hold None
        self.assertEqual(rows[2][1][None], ["extra"])  # extra fields go under None

    def test_csv_unquotes_and_drops_a_byte_order_mark(self):
        path = self.write("rows.csv", '\ufefftext,label\n"a, quoted one",1\n')
        rows, columns = task_sources.read_local_file(path)
        self.assertEqual((columns, rows), (["text", "label"], [(2, {"text": "a, quoted one", "label": "1"})]))

    def test_json_lines_number_every_line_and_mark_bad_ones(self):
        path = self.write("rows.jsonl", '{"text": "a", "label": 1}\n\nnot json\n[1, 2]\n{"text": "b", "other": 2}\n')
        rows, columns = task_sources.read_local_file(path)
        self.assertEqual(rows, [(1, {"text": "a", "label": 1}), (3, None), (4, None), (5, {"text": "b", "other": 2})])
        self.assertEqual(columns, ["text", "label", "other"])

    def test_a_json_array_file_is_read_as_rows(self):
        path = self.write("rows.json", '[{"text": "a"}, 3, {"text": "b"}]')
        self.assertEqual(task_sources.read_local_file(path), ([(1, {"text": "a"}), (2, None), (3, {"text": "b"})],
                                                              ["text"]))

    def test_parallel_text_lines_become_rows(self):
        self.write("val.en", "A man sleeps.\nTwo dogs.\n")
        self.write("val.de", "Ein Mann schläft.\nZwei Hunde.\n")
        rows, columns = task_sources.read_parallel_text(self.dir, {"en": "val.en", "de": "val.de"})
        self.assertEqual(columns, ["en", "de"])
        self.assertEqual(rows, [(1, {"en": "A man sleeps.", "de": "Ein Mann schläft."}),
                                (2, {"en": "Two dogs.", "de": "Zwei Hunde."})])
        self.write("val.de", "Ein Mann schläft.\n")
        with self.assertRaisesRegex(UsageError, r"are not line-aligned \(\{'en': 2, 'de': 1\} lines\)$"):
            task_sources.read_parallel_text(self.dir, {"en": "val.en", "de": "val.de"})

    def test_the_task_file_is_found_in_its_folder_or_a_benchmark_folder(self):
        rte = get_task_vals("glue", "rte")
        self.write("glue/RTE/dev.tsv", "x\n")
        self.write("task/dev.tsv", "x\n")
        self.assertEqual(task_sources.find_task_file([str(self.dir / "glue")], rte, "validation"),
                         (self.dir / "glue" / "RTE", "dev.tsv"))
        self.assertEqual(task_sources.find_task_file([str(self.dir / "elsewhere"), str(self.dir / "task")], rte,
                                                     "validation"), (self.dir / "task", "dev.tsv"))
        with self.assertRaisesRegex(UsageError, rf"^--data_dir {self.dir}: no test.tsv for the test split of glue/rte "
                                                rf"\(looked in {self.dir}/RTE, {self.dir}\); pass the official RTE "
                                                r"folder$"):
            task_sources.find_task_file([str(self.dir)], rte, "test")

    def test_read_split_takes_local_files_before_a_data_dir(self):
        path = self.write("dev.jsonl", '{"sentence1": "a", "sentence2": "b", "label": 0}\n')
        spec = TaskDataSpec(data_dir=(str(require("glue")),), validation_file=str(path))
        rows, columns, where, from_task_files = task_sources.read_split(plan(), spec)
        self.assertEqual((len(rows), where, from_task_files), (1, f"--validation_file {path}", False))
        rows, columns, where, from_task_files = task_sources.read_split(
            plan(), TaskDataSpec(data_dir=(str(require("glue")),)))
        self.assertEqual((len(rows), where, from_task_files), (277, str(require("glue") / "RTE" / "dev.tsv"), True))
        self.assertEqual(columns, ["index", "sentence1", "sentence2", "label"])


class ConversionTest(parameterized.TestCase):

    def test_label_id_accepts_every_spelling_of_a_label(self):
        rte = get_task_vals("glue", "rte")
        self.assertEqual([task_sources.label_id(rte, value) for value in (1, "1", "not_entailment", " 0 ", "no")],
                         [1, 1, 1, 0, None])
        self.assertEqual(task_sources.convert_local_row(rte, {"sentence1": "a", "sentence2": "b"}, False)["label"],
                         NO_LABEL)
    def test_local_rows_take_the_registry_form(self):
        stsb, rte = get_task_vals("glue", "stsb"), get_task_vals("glue", "rte")
        self.assertEqual(task_sources.convert_local_row(stsb, {"sentence1": "a", "sentence2": "b", "label": "4.75"},
                                                        True)["label"], 4.75)
        self.assertEqual(task_sources.convert_local_row(rte, {"sentence1": "a", "sentence2": "b", "label": "0"},
                                                        True)["label"], 0)
        for malformed in (None, {"sentence1": "a", None: ["x"]}, {"sentence1": "a", "label": ""},
                          {"sentence1": "a", "label": None}):
            self.assertIsNone(task_sources.convert_local_row(rte, malformed, True), malformed)

    def test_a_label_that_names_no_label_is_refused_naming_the_valid_ones(self):
        with self.assertRaisesRegex(UsageError, r"^label 'maybe' is not one of task glue/rte's labels: 0 "
                                                r"\(entailment\), 1 \(not_entailment\); fix the file"):
            task_sources.convert_local_row(get_task_vals("glue", "rte"), {"sentence1": "a", "label": "maybe"}, True)
        with self.assertRaisesRegex(UsageError, r"^task glue/stsb: label 'high' is not a number$"):
            task_sources.convert_local_row(get_task_vals("glue", "stsb"), {"sentence1": "a", "label": "high"}, True)

    def test_columns_a_split_needs(self):
        columns = ["sentence1", "sentence2"]
        self.assertFalse(task_sources.check_columns(plan(role="predict", split="test"), columns, "t.tsv"))
        self.assertTrue(task_sources.check_columns(plan(), [*columns, "label"], "t.tsv"))
        with self.assertRaisesRegex(UsageError, r"^t.tsv lacks column\(s\) sentence2 of task glue/rte; its columns: "
                                                r"sentence1, label \(rename them"):
            task_sources.check_columns(plan(), ["sentence1", "label"], "t.tsv")
        with self.assertRaisesRegex(UsageError, r"^t.tsv has no label column 'label' \(evaluation compares "
                                                r"predictions with labels\); an unlabeled file is only for "):
            task_sources.check_columns(plan(), columns, "t.tsv")
        with self.assertRaisesRegex(UsageError, r"\(training needs targets\)"):
            task_sources.check_columns(plan(role="train", split="train"), columns, "t.tsv")

    def test_rows_are_kept_marked_malformed_or_dropped_unlabeled(self):
        rows = [(2, {"sentence1": "a", "sentence2": "b", "label": "1"}), (3, None),
                (4, {"sentence1": "c", "sentence2": None, "label": "0"}),
                (5, {"sentence1": "d", "sentence2": "e", "label": -1})]
        kept, malformed, unlabeled = task_sources.convert_rows(plan(), rows, ["sentence1", "sentence2", "label"],
                                                               "t.jsonl", from_task_files=False)
        self.assertEqual((kept, malformed, unlabeled),
                         ([(2, {"sentence1": "a", "sentence2": "b", "label": 1})], [3, 4], 1))
        kept, _, unlabeled = task_sources.convert_rows(plan(role="predict", split="test"), rows[-1:],
                                                       ["sentence1", "sentence2", "label"], "t.jsonl", False)
        self.assertEqual((len(kept), unlabeled), (1, 0))  # predicted: an unlabeled row is what a test split holds

    def test_an_error_in_a_row_names_the_file_and_line(self):
        rows = [(7, {"sentence1": "a", "sentence2": "b", "label": "maybe"})]
        with self.assertRaisesRegex(UsageError, r"^t.jsonl line 7: label 'maybe' is not one of task glue/rte's"):
            task_sources.convert_rows(plan(), rows, ["sentence1", "sentence2", "label"], "t.jsonl", False)

    def test_dropped_rows_are_logged_and_an_empty_split_refused(self):
        with self.assertLogs("t5kit.data.task_sources", logging.WARNING) as logs:
            task_sources.report_dropped(plan(), "t.tsv", 10, [3, 5, 8, 9], 2, used=4)
        self.assertEqual(len(logs.output), 2)
        self.assertIn("t.tsv: dropped 4 malformed row(s) of 10", logs.output[0])
        self.assertIn("e.g. line(s) 3, 5, 8", logs.output[0])
        self.assertIn(f"t.tsv: dropped 2 unlabeled row(s) (label {NO_LABEL}) from the validation split", logs.output[1])
        with self.assertRaisesRegex(UsageError, r"^t.tsv: the validation split of glue/rte has no usable rows \(3 "
                                                r"read, 1 malformed, 2 unlabeled\); check the file$"):
            task_sources.report_dropped(plan(), "t.tsv", 3, [1], 2, used=0)


if __name__ == "__main__":
    absltest.main()
