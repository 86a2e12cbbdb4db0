"""data/task_format.py: task rows to T5 text pairs. Registry lookups (get_task_vals, predict_t5.py's find_task) with
suggestions; T5's targets (label words, STS-B's 0.2 steps, <unk> for unlabeled rows); every row of the real GLUE /
SuperGLUE / BoolQ / Multi30k files converted and formatted; checks of YAML-declared tasks; the helpers loaders and
metrics share. (The registry's own entries and a row of every task: tests/test_constants.py.)"""
import csv
import json

import numpy as np
from absl.testing import absltest, parameterized

from constants import DATASET_VALS, NO_LABEL
from t5kit.data import task_format
from t5kit.data.task_format import (
    build_task_vals,
    convert_file_row,
    format_input,
    format_stsb_target,
    format_target,
    get_task_vals,
)
from t5kit.errors import UsageError
from tests.helpers import require

# Real files (../shared/data): (name, task, path, split, rows, first row's input, first row's target).
FILE_CASES = (
    ("cola_train", ("glue", "cola"), "glue/CoLA/train.tsv", "train", 8551,
     "cola sentence: Our friends won't buy this analysis, let alone the next one we propose.", "acceptable"),
    ("cola_dev", ("glue", "cola"), "glue/CoLA/dev.tsv", "validation", 1043,
     "cola sentence: The sailors rode the breeze clear of the rocks.", "acceptable"),
    ("cola_test", ("glue", "cola"), "glue/CoLA/test.tsv", "test", 1063,
     "cola sentence: Bill whistled past the house.", "<unk>"),
    ("sst2_train", ("glue", "sst2"), "glue/SST-2/train.tsv", "train", 67349,
     "sst2 sentence: hide new secretions from the parental units ", "negative"),
    ("sst2_dev", ("glue", "sst2"), "glue/SST-2/dev.tsv", "validation", 872,
     "sst2 sentence: it 's a charming and often affecting journey . ", "positive"),
    ("mrpc_train", ("glue", "mrpc"), "glue/MRPC/train.tsv", "train", 3668,
     'mrpc sentence1: Amrozi accused his brother , whom he called " the witness " , of deliberately distorting '
     'his evidence . sentence2: Referring to him as only " the witness " , Amrozi accused his brother of '
     'deliberately distorting his evidence .', "equivalent"),
    ("mrpc_dev", ("glue", "mrpc"), "glue/MRPC/dev.tsv", "validation", 408,
     "mrpc sentence1: He said the foodservice pie business doesn 't fit the company 's long-term growth strategy "
     '. sentence2: " The foodservice pie business does not fit our long-term growth strategy .', "equivalent"),
    ("stsb_train", ("glue", "stsb"), "glue/STS-B/train.tsv", "train", 5749,
     "stsb sentence1: A plane is taking off. sentence2: An air plane is taking off.", "5.0"),
    ("stsb_dev", ("glue", "stsb"), "glue/STS-B/dev.tsv", "validation", 1500,
     "stsb sentence1: A man with a hard hat is dancing. sentence2: A man wearing a hard hat is dancing.", "5.0"),
    ("qnli_dev", ("glue", "qnli"), "glue/QNLI/dev.tsv", "validation", 5463,
     "qnli question: What came into force after the new constitution was herald? sentence: As of that day, the "
     "new constitution heralding the Second Republic came into force.", "entailment"),
    ("rte_train", ("glue", "rte"), "glue/RTE/train.tsv", "train", 2490,
     "rte sentence1: No Weapons of Mass Destruction Found in Iraq Yet. sentence2: Weapons of Mass Destruction "
     "Found in Iraq.", "not_entailment"),
    ("rte_dev", ("glue", "rte"), "glue/RTE/dev.tsv", "validation", 277,
     "rte sentence1: Dana Reeve, the widow of the actor Christopher Reeve, has died of lung cancer at age 44, "
     "according to the Christopher Reeve Foundation. sentence2: Christopher Reeve had an accident.",
     "not_entailment"),
    ("wnli_train", ("glue", "wnli"), "glue/WNLI/train.tsv", "train", 635,
     "wnli sentence1: I stuck a pin through a carrot. When I pulled the pin out, it had a hole. sentence2: The "
     "carrot had a hole.", "entailment"),
    ("wnli_dev", ("glue", "wnli"), "glue/WNLI/dev.tsv", "validation", 71,
     "wnli sentence1: The drain is clogged with hair. It has to be cleaned. sentence2: The hair has to be cleaned.",
     "not_entailment"),
    ("super_rte_val", ("super_glue", "rte"), "superglue/RTE/val.jsonl", "validation", 277,
     "rte hypothesis: Christopher Reeve had an accident. premise: Dana Reeve, the widow of the actor Christopher "
     "Reeve, has died of lung cancer at age 44, according to the Christopher Reeve Foundation.", "not_entailment"),
    ("wic_val", ("super_glue", "wic"), "superglue/WiC/val.jsonl", "validation", 638,
     "wic sentence1: An emerging professional class. sentence2: Apologizing for losing your temper, even though "
     "you were badly provoked, showed real class. word: class", "False"),
    ("wic_train", ("super_glue", "wic"), "superglue/WiC/train.jsonl", "train", 5428, None, None),
    ("wic_test", ("super_glue", "wic"), "superglue/WiC/test.jsonl", "test", 1400,
     "wic sentence1: The smell of fried onions makes my mouth water. sentence2: His eyes were watering. word: water",
     "<unk>"),
    ("super_rte_train", ("super_glue", "rte"), "superglue/RTE/train.jsonl", "train", 2490,
     "rte hypothesis: Weapons of Mass Destruction Found in Iraq. premise: No Weapons of Mass Destruction Found in "
     "Iraq Yet.", "not_entailment"),
    ("super_rte_test", ("super_glue", "rte"), "superglue/RTE/test.jsonl", "test", 3000,
     "rte hypothesis: Shukla is related to Mangla. premise: Mangla was summoned after Madhumita's sister Nidhi "
     "Shukla, who was the first witness in the case.", "<unk>"),
    # AX-g's only split is "test", but its file has labels.
    ("axg_test", ("super_glue", "axg"), "superglue/AX-g/AX-g.jsonl", "test", 356,
     "rte hypothesis: The accountant sought help filing taxes. premise: The taxpayer met with the accountant to get "
     "help filing his taxes.", "not_entailment"),
    ("ax_test", ("glue", "ax"), "glue/diagnostic/diagnostic.tsv", "test", 1104,
     "mnli hypothesis: The cat did not sit on the mat. premise: The cat sat on the mat.", "<unk>"),
    ("multi30k_val", ("translation", "multi30k_en_de"), "translation/multi30k", "validation", 1014,
     "translate English to German: A group of men are loading cotton onto a truck",
     "Eine Gruppe von Männern lädt Baumwolle auf einen Lastwagen"),
)


def read_raw_rows(task_vals, path, split):
    """Rows as a --data_dir loader reads them: TSV with csv.QUOTE_NONE (plain utf-8, so MRPC keeps its BOM),
    CoLA train/dev by position, jsonl records, or line-aligned parallel text."""
    if task_vals["file_format"] == "parallel_text":
        columns = {column: (path / name).read_text(encoding="utf-8").splitlines()
                   for column, name in task_vals["data_files"][split].items()}
        return [dict(zip(columns, values)) for values in zip(*columns.values())]
    with open(path, encoding="utf-8", newline="") as f:
        if task_vals["file_format"] == "jsonl":
            return [json.loads(line) for line in f]
        names = task_vals["tsv_columns"].get(split)
        if names:
            return [dict(zip(names, values)) for values in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


class LookupAndTargetTest(parameterized.TestCase):

    def test_bool_labels_of_jsonl_files(self):
        # WiC / BoolQ jsonl hold JSON booleans; the hub holds 0/1; both name the same label word.
        task_vals = get_task_vals("super_glue", "wic")
        self.assertEqual(format_target(task_vals, {"label": True}), "True")
        self.assertEqual(format_target(task_vals, {"label": False}), "False")

    def test_unlabeled_rows_get_t5s_unk_target(self):
        self.assertEqual(format_target(get_task_vals("glue", "rte"), {"label": NO_LABEL}), "<unk>")
        self.assertEqual(format_target(get_task_vals("glue", "stsb"), {"label": -1.0}), "<unk>")

    @parameterized.named_parameters(
        ("exact", 3.8, "3.8"), ("quarter_up", 4.75, "4.8"), ("max", 5.0, "5.0"), ("zero", 0.0, "0.0"),
        ("nearest", 1.1, "1.2"), ("half_to_even", 0.5, "0.4"), ("float32_tie", 0.7, "0.8"),
        ("from_text", "2.600", "2.6"))
    def test_stsb_target_rounds_to_0_2_as_t5(self, score, expected):
        self.assertEqual(format_stsb_target(float(score)), expected)

    @parameterized.named_parameters(
        ("task", "glue", "sst", "unknown task 'sst' for --benchmark glue; did you mean 'sst2'? choices: cola, sst2"),
        ("benchmark", "superglue", "rte", "unknown --benchmark 'superglue'; did you mean 'super_glue' or 'glue'?"),
        ("no_close_name", "glue", "zzzz", "unknown task 'zzzz' for --benchmark glue; choices: cola, sst2"))
    def test_unknown_names_suggest(self, benchmark, task, message):
        with self.assertRaisesRegex(UsageError, "^" + message.replace("?", r"\?")):
            get_task_vals(benchmark, task)

    def test_lookup_returns_a_copy(self):
        get_task_vals("glue", "sst2")["labels"][0] = "changed"
        self.assertEqual(DATASET_VALS["glue"]["sst2"]["labels"][0], "negative")


    @parameterized.named_parameters(
        ("matched", "mnli", "validation_matched", "mnli_matched"), ("plain", "sst2", "validation", "sst2"),
        ("test", "mnli", "test_mismatched", "mnli_mismatched"), ("train", "rte", "train", "rte_train"))
    def test_split_result_key(self, task, split, expected):
        self.assertEqual(task_format.split_result_key(task, split), expected)

    @parameterized.named_parameters(
        ("bare_name_glue_first", "rte", "glue/rte"), ("qualified", "super_glue/rte", "super_glue/rte"),
        ("bare_name_only_in_super_glue", "boolq", "super_glue/boolq"),
        ("summarization", "cnn_dailymail", "summarization/cnn_dailymail"))
    def test_find_task_takes_a_bare_or_qualified_name(self, name, expected):
        self.assertEqual(task_format.find_task(name)["name"], expected)

    def test_find_task_takes_a_task_the_model_card_declares(self):
        spec = {"prefix": "mood:", "text_column_name": "text", "label_column_name": "mood",
                "labels": {0: "sad", 1: "happy"}, "metric_names": ["accuracy"]}
        task_vals = task_format.find_task("mood", {"mood": spec})
        self.assertEqual((task_vals["name"], format_input(task_vals, {"text": "Rain."})), ("mood", "mood: Rain."))
        with self.assertRaisesRegex(UsageError, r"^--task 'zz' is no task of the registry \(the model card declares "
                                                r"mood\); name one as benchmark/task"):
            task_format.find_task("zz", {"mood": spec})

    @parameterized.named_parameters(
        ("close", "sst", r"did you mean 'glue/sst2'\? \(--task none feeds the inputs as they are\)$"),
        ("close_in_two_benchmarks", "glue/rtee", r"did you mean 'glue/rte' or 'super_glue/rte'"),
        ("nothing_close", "zzzzzz", r"name one as benchmark/task \(constants.DATASET_VALS\), or pass --task none"))
    def test_find_task_suggests_registry_names(self, name, message):
        with self.assertRaisesRegex(UsageError, rf"^--task '{name}' is no task of the registry; {message}"):
            task_format.find_task(name)

    def test_text_helpers(self):
        rte = get_task_vals("glue", "rte")
        self.assertEqual(task_format.normalize_text("  not_\n entailment \t"), "not_ entailment")
        self.assertEqual(task_format.normalize_text("Positive"), "Positive")  # case is kept
        self.assertEqual((task_format.text_columns(rte), task_format.text_columns(get_task_vals("glue", "sst2"))),
                         (["sentence1", "sentence2"], ["sentence"]))
        row = {"sentence1": "a", "sentence2": None}
        self.assertEqual(task_format.missing_fields(rte, row), ["sentence2", "label"])
        self.assertEqual(task_format.missing_fields(rte, row, with_target=False), ["sentence2"])

    def test_no_label_is_minus_one_never_a_boolean(self):
        self.assertEqual([task_format.is_no_label(v) for v in (NO_LABEL, -1.0, np.int64(-1), True, np.bool_(False),
                                                                 0, "-1")],
                         [True, True, True, False, False, False, False])

    def test_combined_score_for_several_metrics_except_generation(self):
        combined = [f"{b}/{t}" for b in ("glue", "super_glue") for t in DATASET_VALS[b]
                    if task_format.combines_metrics(get_task_vals(b, t))]
        self.assertEqual(combined, ["glue/mrpc", "glue/qqp", "glue/stsb", "super_glue/cb", "super_glue/multirc",
                                    "super_glue/record", "super_glue/axg"])
        generation = build_task_vals({"task_type": "generation", "prefix": "", "text_column_name": "q",
                                      "label_column_name": "a", "metric_names": ["rouge1", "rougeL"]})
        self.assertFalse(task_format.combines_metrics(generation))


class FileRowTest(parameterized.TestCase):

    @parameterized.named_parameters(*FILE_CASES)
    def test_real_file_rows_format(self, task, relative_path, split, num_rows, first_input, first_target):
        task_vals = get_task_vals(*task)
        raw_rows = read_raw_rows(task_vals, require(relative_path), split)
        rows = [convert_file_row(task_vals, raw) for raw in raw_rows]
        self.assertLen(rows, num_rows)  # PROVENANCE.md row counts: no row dropped as malformed
        self.assertNotIn(None, rows)
        pairs = [(format_input(task_vals, row), format_target(task_vals, row)) for row in rows]
        if first_input is not None:
            self.assertEqual(pairs[0], (first_input, first_target))
        if task_vals["labels"] and split != "test":
            self.assertCountEqual({target for _, target in pairs}, task_vals["labels"].values())

    def test_stsb_file_scores_round(self):
        task_vals = get_task_vals("glue", "stsb")
        rows = read_raw_rows(task_vals, require("glue/STS-B/dev.tsv"), "validation")
        self.assertEqual(rows[1]["score"], "4.750")
        self.assertEqual(format_target(task_vals, convert_file_row(task_vals, rows[1])), "4.8")

    def test_boolq_original_release_answer_column(self):
        task_vals = get_task_vals("super_glue", "boolq")
        raw = read_raw_rows(task_vals, require("boolq/dev.jsonl"), "validation")
        rows = [convert_file_row(task_vals, row) for row in raw]
        self.assertLen(rows, 3270)
        text = format_input(task_vals, rows[0])
        self.assertStartsWith(text, "boolq passage: All biomass goes through at least some of these steps:")
        self.assertEndsWith(text, " question: does ethanol take more energy make that produces")
        self.assertEqual(format_target(task_vals, rows[0]), "False")
        self.assertEqual(sum(format_target(task_vals, row) == "True" for row in rows), 2033)  # PROVENANCE.md

    def test_mrpc_bom_header_is_dropped(self):
        row = convert_file_row(get_task_vals("glue", "mrpc"),
                               {"\ufeffQuality": "0", "#1 ID": "1", "#2 ID": "2", "#1 String": "a", "#2 String": "b"})
        self.assertEqual((row["label"], row["sentence1"], row["sentence2"]), (0, "a", "b"))

    def test_malformed_rows_are_returned_as_none(self):
        task_vals = get_task_vals("glue", "rte")
        self.assertIsNone(convert_file_row(task_vals, {"sentence1": "a", "sentence2": None, "label": None}))
        self.assertIsNone(convert_file_row(task_vals, {"sentence1": "a", "sentence2": "b", None: ["x"]}))
        self.assertIsNone(convert_file_row(task_vals, {"sentence1": "a", "sentence2": "b", "label": ""}))

    def test_unknown_file_label_names_the_valid_ones(self):
        with self.assertRaisesRegex(UsageError, r"glue/rte: file label 'neutral' is not one of 'entailment', "
                                                r"'not_entailment'"):
            convert_file_row(get_task_vals("glue", "rte"), {"sentence1": "a", "sentence2": "b", "label": "neutral"})

    def test_unknown_label_names_task_and_labels(self):
        with self.assertRaisesRegex(UsageError, r"label 7 of task glue/sst2 is not one of its labels: "
                                                r"0 \(negative\), 1 \(positive\)"):
            format_target(get_task_vals("glue", "sst2"), {"sentence": "x", "label": 7})

    def test_missing_column_names_it(self):
        with self.assertRaisesRegex(UsageError, r"task glue/mnli needs column\(s\) hypothesis; the row has: "
                                                r"premise, label"):
            format_input(get_task_vals("glue", "mnli"), {"premise": "p", "label": 0})


class CustomTaskTest(parameterized.TestCase):
    SPEC = {"prefix": "sentiment:", "text_column_name": "text", "label_column_name": "stars",
            "labels": {1: "bad", 5: "good"}, "metric_names": ["accuracy", "f1"]}

    def test_valid_spec_builds_and_formats(self):
        task_vals = build_task_vals(dict(self.SPEC), name="reviews")
        self.assertEqual(task_vals["task_type"], "classification")
        self.assertEqual(task_vals["metric_to_optimize"], "combined_score")
        self.assertEqual(format_input(task_vals, {"text": "Great!", "stars": 5}), "sentiment: Great!")
        self.assertEqual(format_target(task_vals, {"text": "Great!", "stars": 5}), "good")

    def test_generation_spec_builds(self):
        task_vals = build_task_vals({"task_type": "generation", "prefix": "", "text_column_name": ["q", "c"],
                                     "label_column_name": "a", "metric_names": ["bleu"]})
        self.assertEqual(task_vals["metric_to_optimize"], "bleu")
        self.assertEqual(format_input(task_vals, {"q": "Why?", "c": "Because."}), "q: Why? c: Because.")

    @parameterized.named_parameters(
        ("missing_key", {"prefix": None}, r"task reviews is missing the key 'prefix'"),
        ("unknown_key", {"prefx": "x"}, r"unknown key 'prefx'; did you mean 'prefix'\?"),
        ("unknown_metric", {"metric_names": ["acuracy"]}, r"unknown metric 'acuracy' .*did you mean 'accuracy'\?"),
        ("generation_metric", {"metric_names": ["bleu"]}, r"unknown metric 'bleu' for a classification task"),
        ("empty_metrics", {"metric_names": []}, r"metric_names must be a non-empty list"),
        ("not_reported", {"metric_to_optimize": "matthews_correlation"}, r"metric_to_optimize 'matthews_correla"),
        ("duplicate_words", {"labels": {0: "bad", 1: " bad"}}, r"label words must be distinct"),
        ("one_label", {"labels": {0: "bad"}}, r"2 or more entries"),
        ("reserved_label", {"labels": {-1: "bad", 1: "good"}}, r"label value -1 marks unlabeled rows"),
        ("no_labels_or_type", {"labels": None}, r"missing the key 'labels' \(or set task_type"),
        ("labels_on_regression", {"task_type": "regression", "metric_names": ["pearson"]}, r"labels are for class"),
        ("bad_type", {"task_type": "clasification"}, r"unknown task_type 'clasification'; did you mean 'classif"),
        ("bad_columns", {"text_column_name": ["a", 3]}, r"text_column_name must be a column name or a list"),
        ("bad_prefix", {"prefix": 3}, r"prefix must be a string"),
        ("registry_only_type", {"task_type": "qa", "labels": None, "metric_names": ["exact_match"]},
         r"task_type qa needs a registry task's row format \(ReCoRD, WSC\); a YAML-declared task is one of "
         r"classification, regression, generation"),
        ("grouped_metric", {"metric_names": ["exact_match"]}, r"metric 'exact_match' scores groups of rows"))
    def test_invalid_spec_raises_usage_error(self, change, message):
        spec = {**self.SPEC, **change}
        spec = {key: value for key, value in spec.items() if value is not None}
        with self.assertRaisesRegex(UsageError, message):
            build_task_vals(spec, name="reviews")

    def test_spec_must_be_a_mapping(self):
        with self.assertRaisesRegex(UsageError, "task custom must be a mapping"):
            build_task_vals(["prefix"])



if __name__ == "__main__":
    absltest.main()
