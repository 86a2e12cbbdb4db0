"""Spec of the task registry (constants.DATASET_VALS) and task_format: exact T5 strings for every task, the real
GLUE / SuperGLUE / BoolQ / Multi30k files, lookups with suggestions, and checks of YAML-declared tasks."""
import csv
import json

from absl.testing import absltest, parameterized

from constants import DATASET_VALS, NO_LABEL
from metrics import GLUE_SCORE_METRICS
from t5kit.data.superglue_formats import EXAMPLES
from t5kit.data.task_format import (
    build_task_vals,
    convert_file_row,
    format_input,
    format_stsb_target,
    format_target,
    get_task_vals,
    validate_task_vals,
)
from t5kit.errors import UsageError
from tests.helpers import require

ALL_TASKS = [(benchmark, task) for benchmark, tasks in DATASET_VALS.items() for task in tasks]
# sni/sni stands for a natural-instructions checkout's tasks (tests/data/test_sni.py), not for rows in a T5 format.
ROW_TASKS = [(benchmark, task) for benchmark, task in ALL_TASKS
             if DATASET_VALS[benchmark][task].get("row_format") != "sni"]

# One representative row per registry task (hub column names) -> the exact T5 input and target.
# Inputs follow t5/data/preprocessors.py `glue` (sorted feature names, WiC's named order) and its docstrings
# (the QQP, STS-B, ReCoRD and WSC rows are the docstring examples). Rows of tasks with an official file here are
# that file's rows, some shortened; FILE_CASES below format every row of those files (CB, COPA, MNLI, QQP, AX-b,
# MultiRC: no file here, so hand-written rows).
FORMAT_CASES = {
    ("glue", "cola"): (
        {"sentence": "Our friends won't buy this analysis, let alone the next one we propose.", "label": 1, "idx": 0},
        "cola sentence: Our friends won't buy this analysis, let alone the next one we propose.", "acceptable"),
    ("glue", "sst2"): (
        {"sentence": "hide new secretions from the parental units ", "label": 0, "idx": 0},
        "sst2 sentence: hide new secretions from the parental units ", "negative"),
    ("glue", "mrpc"): (
        {"sentence1": "He said the pie business doesn 't fit .", "sentence2": "The pie business does not fit .",
         "label": 1, "idx": 0},
        "mrpc sentence1: He said the pie business doesn 't fit . sentence2: The pie business does not fit .",
        "equivalent"),
    ("glue", "qqp"): (
        {"question1": "Why do I easily get bored of my friends?",
         "question2": "Why do I get bored of friends so quickly?", "label": 1, "idx": 10},
        "qqp question1: Why do I easily get bored of my friends? question2: Why do I get bored of friends so "
        "quickly?", "duplicate"),
    ("glue", "stsb"): (
        {"sentence1": "Three more US soldiers killed in Afghanistan", "sentence2": "NATO Soldier Killed in Afghanistan",
         "label": 1.8, "idx": 0},
        "stsb sentence1: Three more US soldiers killed in Afghanistan sentence2: NATO Soldier Killed in Afghanistan",
        "1.8"),
    ("glue", "mnli"): (
        {"premise": "A man is eating.", "hypothesis": "Nobody is eating.", "label": 2, "idx": 0},
        "mnli hypothesis: Nobody is eating. premise: A man is eating.", "contradiction"),
    ("glue", "qnli"): (
        {"question": "What came into force?", "sentence": "The new constitution came into force.", "label": 0},
        "qnli question: What came into force? sentence: The new constitution came into force.", "entailment"),
    ("glue", "rte"): (
        {"sentence1": "No Weapons of Mass Destruction Found in Iraq Yet.",
         "sentence2": "Weapons of Mass Destruction Found in Iraq.", "label": 1, "idx": 0},
        "rte sentence1: No Weapons of Mass Destruction Found in Iraq Yet. sentence2: Weapons of Mass Destruction "
        "Found in Iraq.", "not_entailment"),
    ("glue", "wnli"): (
        {"sentence1": "I stuck a pin through a carrot.", "sentence2": "The carrot had a hole.", "label": 1},
        "wnli sentence1: I stuck a pin through a carrot. sentence2: The carrot had a hole.", "entailment"),
    ("super_glue", "boolq"): (
        {"question": "is house tax and property tax are same", "passage": "Property tax is a local tax.",
         "idx": 1, "label": 1},
        "boolq passage: Property tax is a local tax. question: is house tax and property tax are same", "True"),
    ("super_glue", "cb"): (
        {"premise": "It was a sunny day.", "hypothesis": "It rained all day.", "idx": 0, "label": 1},
        "cb hypothesis: It rained all day. premise: It was a sunny day.", "contradiction"),
    ("super_glue", "copa"): (
        {"premise": "My body cast a shadow over the grass.", "choice1": "The sun was rising.",
         "choice2": "The grass was cut.", "question": "cause", "idx": 0, "label": 0},
        "copa choice1: The sun was rising. choice2: The grass was cut. premise: My body cast a shadow over the "
        "grass. question: cause", "choice1"),
    ("super_glue", "rte"): (
        {"premise": "Dana Reeve has died.", "hypothesis": "Christopher Reeve had an accident.", "idx": 0, "label": 1},
        "rte hypothesis: Christopher Reeve had an accident. premise: Dana Reeve has died.", "not_entailment"),
    ("super_glue", "wic"): (
        {"word": "class", "sentence1": "An emerging professional class.", "sentence2": "He showed real class.",
         "start1": 25, "start2": 16, "end1": 30, "end2": 21, "idx": 0, "label": 0},
        "wic sentence1: An emerging professional class. sentence2: He showed real class. word: class", "False"),
    # The GLUE diagnostic, cast as MNLI (its first row; diagnostic-full.tsv gives it "contradiction").
    ("glue", "ax"): (
        {"premise": "The cat sat on the mat.", "hypothesis": "The cat did not sit on the mat.", "label": 2, "idx": 0},
        "mnli hypothesis: The cat did not sit on the mat. premise: The cat sat on the mat.", "contradiction"),
    ("super_glue", "multirc"): (
        {"paragraph": "<b>Sent 1: </b>Susan wanted to have a birthday party.<br><b>Sent 2: </b>She called all of "
                      "her friends.<br>", "question": "Did Susan's sick friend recover?",
         "answer": "Yes, she recovered", "idx": {"paragraph": 0, "question": 0, "answer": 0}, "label": 1},
        "multirc question: Did Susan's sick friend recover? answer: Yes, she recovered paragraph: Sent 1: Susan "
        "wanted to have a birthday party. Sent 2: She called all of her friends. ", "True"),
    # preprocessors.record's docstring example (its first example of two).
    ("super_glue", "record"): (
        {"passage": "This is the passage.", "query": "A @placeholder is a bird.",
         "entities": ["penguin", "potato", "pigeon"], "answers": ["penguin", "pigeon"],
         "idx": {"passage": 0, "query": 0}},
        "record query: A @placeholder is a bird. entities: penguin, potato, pigeon passage: This is the passage.",
        "penguin"),
    # preprocessors.wsc_simple's docstring example.
    ("super_glue", "wsc"): (
        {"text": "Mitchell asked Tom if he could lend some money.", "span1_text": "Tom", "span2_text": "he",
         "span1_index": 2, "span2_index": 4, "idx": 0, "label": 1},
        "wsc: Mitchell asked Tom if *he* could lend some money.", "Tom"),
    # The diagnostics, cast as RTE (hub rows, after the file/hub column renames of AX-b).
    ("super_glue", "axb"): (
        {"premise": "The cat sat on the mat.", "hypothesis": "The cat did not sit on the mat.", "label": 1, "idx": 0},
        "rte hypothesis: The cat did not sit on the mat. premise: The cat sat on the mat.", "not_entailment"),
    ("super_glue", "axg"): (  # the official AX-g.jsonl's row idx 1 (hub form: no pair_id)
        {"premise": "The taxpayer met with the accountant to get help filing her taxes.",
         "hypothesis": "The accountant sought help filing taxes.", "label": 1, "idx": 1},
        "rte hypothesis: The accountant sought help filing taxes. premise: The taxpayer met with the accountant to get "
        "help filing her taxes.", "not_entailment"),
    ("summarization", "cnn_dailymail"): (
        {"article": "The cat sat on the mat. It was happy.", "highlights": "Cat sits on mat .\nIt is happy .",
         "id": "x"},
        "summarize: The cat sat on the mat. It was happy.", "Cat sits on mat .\nIt is happy ."),
    ("translation", "multi30k_en_de"): (
        {"en": "A man sleeping in a green room on a couch.",
         "de": "Ein Mann schläft in einem grünen Raum auf einem Sofa."},
        "translate English to German: A man sleeping in a green room on a couch.",
        "Ein Mann schläft in einem grünen Raum auf einem Sofa."),
}

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


class RegistryTest(parameterized.TestCase):

    def test_format_cases_cover_every_registry_task(self):
        self.assertCountEqual(FORMAT_CASES, ROW_TASKS)

    def test_glue_and_superglue_have_their_20_tasks(self):
        self.assertEqual({benchmark: list(DATASET_VALS[benchmark]) for benchmark in ("glue", "super_glue")}, {
            "glue": ["cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli", "ax"],
            "super_glue": ["boolq", "cb", "copa", "multirc", "record", "rte", "wic", "wsc", "axb", "axg"]})

    def test_every_glue_and_superglue_task_names_the_t5_task_it_reproduces(self):
        t5_tasks = {f"{b}/{t}": DATASET_VALS[b][t]["t5_task"] for b in ("glue", "super_glue") for t in DATASET_VALS[b]}
        self.assertEqual(t5_tasks, {
            **{f"glue/{t}": f"glue_{t}_v002" for t in DATASET_VALS["glue"]},
            **{f"super_glue/{t}": f"super_glue_{t}_v102" for t in DATASET_VALS["super_glue"] if t != "wsc"},
            "super_glue/wsc": "super_glue_wsc_v102_simple_train"})

    @parameterized.named_parameters((f"{b}_{t}", b, t) for b, t in ALL_TASKS)
    def test_entry_is_valid_and_complete(self, benchmark, task):
        task_vals = get_task_vals(benchmark, task)
        validate_task_vals(task_vals, task_vals["name"])
        self.assertEqual(task_vals["name"], f"{benchmark}/{task}")
        for split in (task_vals["train_split"], *task_vals["validation_splits"], *task_vals["test_splits"]):
            if split is not None:  # diagnostic tasks have no training split
                self.assertIn(split, task_vals["data_files"])

    @parameterized.named_parameters((f"{b}_{t}", b, t) for b, t in ROW_TASKS)
    def test_formats_row_as_t5(self, benchmark, task):
        row, expected_input, expected_target = FORMAT_CASES[(benchmark, task)]
        task_vals = get_task_vals(benchmark, task)
        example = EXAMPLES[task_vals.get("row_format", "glue")](task_vals, row)[0]
        self.assertEqual((example.input, example.target), (expected_input, expected_target))

    @parameterized.named_parameters((f"{b}_{t}", b, t) for b, t in ALL_TASKS if DATASET_VALS[b][t]["labels"])
    def test_every_label_formats_to_its_word(self, benchmark, task):
        task_vals = get_task_vals(benchmark, task)
        column = task_vals["label_column_name"]
        for label, word in task_vals["labels"].items():
            self.assertEqual(format_target(task_vals, {column: label}), word)

    def test_label_words_are_t5s(self):
        # t5/data/glue_utils.py passes the tfds ClassLabel names, which the HF hub datasets share.
        words = {f"{b}/{t}": list(DATASET_VALS[b][t]["labels"].values())
                 for b, t in ALL_TASKS if DATASET_VALS[b][t]["labels"]}
        self.assertEqual(words, {
            "glue/cola": ["unacceptable", "acceptable"], "glue/sst2": ["negative", "positive"],
            "glue/mrpc": ["not_equivalent", "equivalent"], "glue/qqp": ["not_duplicate", "duplicate"],
            "glue/mnli": ["entailment", "neutral", "contradiction"], "glue/qnli": ["entailment", "not_entailment"],
            "glue/rte": ["entailment", "not_entailment"], "glue/wnli": ["not_entailment", "entailment"],
            "super_glue/boolq": ["False", "True"], "super_glue/cb": ["entailment", "contradiction", "neutral"],
            "super_glue/copa": ["choice1", "choice2"], "super_glue/rte": ["entailment", "not_entailment"],
            "super_glue/wic": ["False", "True"], "glue/ax": ["entailment", "neutral", "contradiction"],
            "super_glue/multirc": ["False", "True"], "super_glue/axb": ["entailment", "not_entailment"],
            "super_glue/axg": ["entailment", "not_entailment"],
        })

    def test_glue_metric_choices(self):
        glue = DATASET_VALS["glue"]
        self.assertEqual(glue["cola"]["metric_to_optimize"], "matthews_correlation")
        for task in ("mrpc", "qqp"):
            self.assertEqual(glue[task]["metric_names"], ("f1", "accuracy"))
        self.assertEqual(glue["stsb"]["metric_names"], ("pearson", "spearmanr"))
        self.assertEqual(glue["mnli"]["validation_splits"], ("validation_matched", "validation_mismatched"))
        self.assertEqual(tuple(task for task, pairs in GLUE_SCORE_METRICS.items() if len(pairs) == 2),
                         ("mrpc", "stsb", "qqp", "mnli"))
        # The GLUE score averages the nine tasks; the diagnostic set (ax) is reported apart.
        self.assertCountEqual(GLUE_SCORE_METRICS, set(DATASET_VALS["glue"]) - {"ax"})

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
