"""Spec of the task registry (constants.DATASET_VALS): its GLUE and SuperGLUE tasks, the T5 task each reproduces,
valid and complete entries, exact T5 strings for a row of every task, T5's label words and the GLUE metrics.
(task_format's lookups, formatting of the real GLUE / SuperGLUE / BoolQ / Multi30k files and checks of
YAML-declared tasks: tests/data/test_task_format.py.)"""
from absl.testing import absltest, parameterized

from constants import DATASET_VALS
from metrics import GLUE_SCORE_METRICS
from t5kit.data.superglue_formats import EXAMPLES
from t5kit.data.task_format import format_target, get_task_vals, validate_task_vals

ALL_TASKS = [(benchmark, task) for benchmark, tasks in DATASET_VALS.items() for task in tasks]
# sni/sni stands for a natural-instructions checkout's tasks (tests/data/test_sni.py), not for rows in a T5 format.
ROW_TASKS = [(benchmark, task) for benchmark, task in ALL_TASKS
             if DATASET_VALS[benchmark][task].get("row_format") != "sni"]

# One representative row per registry task (hub column names) -> the exact T5 input and target.
# Inputs follow t5/data/preprocessors.py `glue` (sorted feature names, WiC's named order) and its docstrings
# (the QQP, STS-B, ReCoRD and WSC rows are the docstring examples). Rows of tasks with an official file here are
# that file's rows, some shortened; tests/data/test_task_format.py formats every row of those files (CB, COPA,
# MNLI, QQP, AX-b, MultiRC: no file here, so hand-written rows).
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

if __name__ == "__main__":
    absltest.main()
