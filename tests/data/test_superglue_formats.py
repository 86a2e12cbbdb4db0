"""superglue_formats.py and the tasks it serves, on fixtures in the official layout (tests/fixtures/superglue) and
the real GLUE files: T5's exact strings (its preprocessors' docstring examples), one example per MultiRC answer
and ReCoRD answer, WSC's training filter, WNLI as WSC, the diagnostics, malformed rows counted, and the plan
that keeps diagnostic tasks out of training."""
import csv
import json
import logging
from pathlib import Path
from types import SimpleNamespace

from absl.testing import absltest, parameterized

from constants import DATASET_VALS, NO_LABEL, WNLI_AS_WSC
from t5kit.config.finetune_arguments import FineTuneDataArguments
from t5kit.data import superglue_formats, task_data
from t5kit.data.task_format import get_task_vals
from t5kit.errors import UsageError
from t5kit.model import building
from tests.helpers import REPO, require

FIXTURES = REPO / "tests" / "fixtures" / "superglue"
SUSAN = ("Sent 1: Susan wanted to have a birthday party. Sent 2: She called all of her friends. Sent 3: She has five "
         "friends. Sent 4: Her mom said that Susan can invite them all to the party. Sent 5: Her first friend could "
         "not go to the party because she was sick. Sent 6: On the day of the party, all five friends showed up. ")
PUERTO_RICO = ("record query: For one, they can truthfully say, \"Don't blame me, I didn't vote for them,\" when "
               "discussing the @placeholder presidency entities: CNN, Congress, Puerto Rico, US passage: (CNN) "
               "Puerto Rico on Sunday overwhelmingly voted for statehood. But Congress, the only body that can "
               "approve new states, will ultimately decide whether the status of the US commonwealth changes. It "
               "was the fifth such vote on statehood. Puerto Rico voted Sunday in favor of US statehood")
MARK = ("wsc: Mark told Pete many lies about himself, which Pete included in his book. *He* should have been more "
        "truthful.")


def data_args(**overrides):
    return FineTuneDataArguments(**{"dataset_name": "multirc", "benchmark": "super_glue",
                                    "data_dir": [str(FIXTURES)], **overrides})


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def write_jsonl(path, rows):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(json.dumps(row) + "\n" for row in rows))


class T5DocstringTest(parameterized.TestCase):
    """The examples T5's own preprocessors document, formatted exactly as they say."""

    def test_record_docstring_example(self):
        row = {"passage": "This is the passage.", "query": "A @placeholder is a bird.",
               "entities": ["penguin", "potato", "pigeon"], "answers": ["penguin", "pigeon"],
               "idx": {"passage": 0, "query": 0}}
        examples = superglue_formats.record_examples(get_task_vals("super_glue", "record"), row)
        text = "record query: A @placeholder is a bird. entities: penguin, potato, pigeon passage: This is the passage."
        self.assertEqual([(e.input, e.target) for e in examples], [(text, "penguin"), (text, "pigeon")])

    @parameterized.named_parameters(
        ("after_a_full_stop", "It won.\n@highlight\nA win", "It won. A win"),
        ("after_a_quote", "He said \"no\"\n@highlight\nA win", "He said \"no\" A win"),
        ("after_a_word", "It won\n@highlight\nA win\n@highlight\nAgain", "It won. A win. Again"))
    def test_record_highlights(self, passage, expected):
        row = {"passage": passage, "query": "q", "entities": [], "answers": [], "idx": {"passage": 0, "query": 0}}
        (example,) = superglue_formats.record_examples(get_task_vals("super_glue", "record"), row)
        self.assertEqual(example.input, f"record query: q entities:  passage: {expected}")
        self.assertIsNone(example.target)

    def test_wsc_simple_docstring_example(self):
        row = {"text": "Mitchell asked Tom if he could lend some money.", "span1_text": "Tom", "span2_text": "he",
               "span1_index": 2, "span2_index": 4, "idx": 0, "label": 1}
        (example,) = superglue_formats.wsc_examples(get_task_vals("super_glue", "wsc"), row)
        self.assertEqual((example.input, example.target), ("wsc: Mitchell asked Tom if *he* could lend some money.",
                                                           "Tom"))
        self.assertEqual(example.meta, {"idx": 0, "label": 1, "referent": "Tom"})

    def test_multirc_markup_is_removed_from_the_whole_input(self):
        row = {"question": "Who <b>won</b>?", "answer": "Ann<br>Lee", "paragraph": "<b>Sent 1: </b>Ann won.<br>",
               "idx": {"paragraph": 3, "question": 7, "answer": 9}, "label": 1}
        (example,) = superglue_formats.multirc_examples(get_task_vals("super_glue", "multirc"), row)
        self.assertEqual(example, superglue_formats.Example(
            "multirc question: Who won? answer: Ann Lee paragraph: Sent 1: Ann won. ", "True",
            {"idx": {"paragraph": 3, "question": 7, "answer": 9}, "group": (3, 7)}))


class FixtureSplitTest(parameterized.TestCase):
    """Each task's fixture files read from --data_dir as the official files are."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = building.load_tokenizer(str(require("t5_spiece")))

    def build(self, task, split, role, args=None, benchmark="super_glue"):
        plan = task_data.SplitPlan(get_task_vals(benchmark, task), split, role, task)
        return task_data.build_task_split(plan, args or data_args(), self.tokenizer)

    @parameterized.named_parameters(
        # (task, split, role, rows read, examples, first input, first targets)
        ("multirc_val", "multirc", "validation", "eval", 2, 9,
         f"multirc question: Did Susan's sick friend recover? answer: Yes, she recovered paragraph: {SUSAN}",
         ["True", "False", "True", "False", "True", "True", "False", "True", "False"]),
        ("multirc_test", "multirc", "test", "predict", 2, 9,
         f"multirc question: Did Susan's sick friend recover? answer: Yes, she recovered paragraph: {SUSAN}",
         [None] * 9),
        ("record_val", "record", "validation", "eval", 2, 4, PUERTO_RICO, ["US", "penguin", "pigeon", "potato"]),
        ("record_test", "record", "test", "predict", 2, 3, PUERTO_RICO, [None] * 3),
        ("wsc_val", "wsc", "validation", "eval", 5, 5, MARK, ["Mark", "Pete", "Tom", "The trophy",
                                                             "the brown suitcase"]),
        ("wsc_train", "wsc", "train", "train", 5, 3, MARK, ["Mark", "Tom", "The trophy"]),  # referents only
        ("wsc_test", "wsc", "test", "predict", 5, 5, MARK, [None] * 5),
        ("axb", "axb", "test", "predict", 4, 4,
         "rte hypothesis: The cat did not sit on the mat. premise: The cat sat on the mat.",
         ["not_entailment", "not_entailment", "entailment", "entailment"]),
        ("axg", "axg", "test", "predict", 4, 4,
         "rte hypothesis: The accountant sought help filing taxes. premise: The taxpayer met with the accountant to "
         "get help filing his taxes.", ["not_entailment", "not_entailment", "entailment", "entailment"]),
    )
    def test_fixture_split(self, task, split, role, rows, examples, first_input, targets):
        result = self.build(task, split, role)
        self.assertEqual((result.stats["rows"], result.stats["malformed"], result.stats["used"]), (rows, 0, examples))
        self.assertEqual(result.inputs[0], first_input)
        self.assertEqual(result.targets, targets)
        self.assertEqual("labels" in result.dataset.column_names, None not in targets)

    def test_record_groups_and_answers(self):
        split = self.build("record", "validation", "eval")
        self.assertEqual([(m["group"], m["answers"]) for m in split.meta], [
            ((0, 0), ["US"]), ((1, 1), ["penguin", "pigeon"]), ((1, 1), ["penguin", "pigeon"]), ((1, 2), ["potato"])])
        self.assertEqual(split.inputs[1], split.inputs[2])  # one input per query, one target per answer
        self.assertEqual(split.indices[1], {"passage": 1, "query": 1})

    def test_multirc_groups_by_question(self):
        split = self.build("multirc", "validation", "eval")
        self.assertEqual([m["group"] for m in split.meta], [(0, 0)] * 5 + [(0, 1)] * 2 + [(1, 2)] * 2)
        self.assertEqual(split.indices[-1], {"paragraph": 1, "question": 2, "answer": 8})

    def test_wsc_training_keeps_only_referents(self):
        split = self.build("wsc", "train", "train")
        self.assertEqual((split.stats["not_referent"], [m["label"] for m in split.meta]), (2, [1, 1, 1]))

    def test_axg_pairs(self):
        self.assertEqual([m["group"] for m in self.build("axg", "test", "predict").meta],
                         [551646, 551646, 551647, 551647])

    def test_glue_ax_reads_the_real_diagnostic_file(self):
        folder = require("glue/diagnostic")
        split = self.build("ax", "test", "predict", data_args(dataset_name="ax", benchmark="glue",
                                                              data_dir=[str(folder.parent)]), benchmark="glue")
        self.assertEqual((split.stats["rows"], split.stats["used"]), (1104, 1104))
        self.assertEqual(split.inputs[0], "mnli hypothesis: The cat did not sit on the mat. premise: The cat sat on "
                                          "the mat.")
        self.assertEqual((split.targets[0], split.indices[:2]), (None, ["0", "1"]))


class MalformedRowTest(parameterized.TestCase):
    """Rows that do not hold together are counted as malformed and logged, never a crash; the others are kept."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = building.load_tokenizer(str(require("t5_spiece")))

    def broken_copy(self, task, break_row):
        """A --data_dir whose <task>/val.jsonl is the fixture plus a broken copy of its first row."""
        folder = Path(self.create_tempdir().full_path)
        name = DATASET_VALS["super_glue"][task]["data_dir_name"]
        rows = read_jsonl(FIXTURES / name / "val.jsonl")
        broken = json.loads(json.dumps(rows[0]))
        break_row(broken)
        write_jsonl(folder / name / "val.jsonl", [*rows, broken])
        return folder, len(rows)

    @parameterized.named_parameters(
        ("multirc_question_without_answers", "multirc",
         lambda row: row["passage"]["questions"][0].pop("answers")),
        ("multirc_answer_without_label", "multirc",
         lambda row: row["passage"]["questions"][1]["answers"][0].pop("label")),
        ("record_query_without_answers", "record", lambda row: row["qas"][0].pop("answers")),
        ("record_entity_outside_the_passage", "record",
         lambda row: row["passage"]["entities"].append({"start": 5, "end": 10_000})),
        ("record_answer_span_reversed", "record", lambda row: row["qas"][0]["answers"][0].update(start=9, end=3)),
        ("wsc_pronoun_index_names_another_word", "wsc", lambda row: row["target"].update(span2_index=3)),
        ("wsc_without_spans", "wsc", lambda row: row.pop("target")),
    )
    def test_malformed_row_is_counted(self, task, break_row):
        folder, good = self.broken_copy(task, break_row)
        plan = task_data.SplitPlan(get_task_vals("super_glue", task), "validation", "eval", task)
        with self.assertLogs("t5kit.data.task_files", logging.WARNING) as logs:
            split = task_data.build_task_split(plan, data_args(data_dir=[str(folder)]), self.tokenizer)
        self.assertEqual((split.stats["rows"], split.stats["malformed"]), (good + 1, 1))
        self.assertIn(f"dropped 1 malformed row(s) of {good + 1}", logs.output[0])
        self.assertIn(f"line(s) {good + 1}", logs.output[0])

    def test_only_malformed_rows_is_refused_naming_the_file(self):
        folder = Path(self.create_tempdir().full_path)
        write_jsonl(folder / "ReCoRD" / "val.jsonl", [{"idx": 0, "passage": {"text": "x", "entities": []}}])
        plan = task_data.SplitPlan(get_task_vals("super_glue", "record"), "validation", "eval", "record")
        with self.assertRaisesRegex(UsageError, r"ReCoRD/val.jsonl: the validation split of super_glue/record has no "
                                                r"usable rows \(1 read, 1 malformed"):
            task_data.build_task_split(plan, data_args(data_dir=[str(folder)]), self.tokenizer)


class WnliAsWscTest(parameterized.TestCase):
    """--wnli_format wsc_simple: T5's wnli_simple on the real WNLI files."""

    def rows(self, split):
        with open(require(f"glue/WNLI/{split}.tsv"), encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
        return [dict(row, label=int(row.get("label", NO_LABEL))) for row in rows]

    def test_first_dev_row_by_hand(self):
        # "it" (premise word 6) matches the hypothesis best: "hair" before it, "has to be cleaned" after it; the
        # hypothesis words in its place are "the hair", spelt as in the hypothesis.
        (example,) = superglue_formats.wnli_examples(WNLI_AS_WSC, self.rows("dev")[0])
        self.assertEqual((example.input, example.target), (
            "wsc: The drain is clogged with hair. *It* has to be cleaned.", "The hair"))
        self.assertEqual(example.meta, {"idx": "0", "label": 0, "referent": "The hair"})

    @parameterized.named_parameters(("dev", "dev", 71), ("test", "test", 146), ("train", "train", 635))
    def test_every_real_row_gets_an_example(self, split, count):
        # T5: "manually verified to produce reasonable WSC examples for the dev and test sets".
        examples = [superglue_formats.wnli_examples(WNLI_AS_WSC, row) for row in self.rows(split)]
        self.assertLen(examples, count)
        self.assertTrue(all(len(example) == 1 and "*" in example[0].input for example in examples))

    def test_possessive_candidate_loses_its_s(self):
        # "his" matches "dog" before it and "fur was wet" after it; the hypothesis's "Kim's dog's" stands in its
        # place, and T5's targets are never possessive.
        row = {"sentence1": "Ann met Kim's dog. His fur was wet.", "sentence2": "Kim's dog's fur was wet.",
               "label": 1, "index": "4"}
        (example,) = superglue_formats.wnli_examples(WNLI_AS_WSC, row)
        self.assertEqual((example.input, example.target), ("wsc: Ann met Kim's dog. *His* fur was wet.", "Kim's dog"))


class DiagnosticPlanTest(parameterized.TestCase):
    """Diagnostic tasks (and WNLI as WSC) are predicted, never trained on: T5 mixes them in with rate 0."""

    def test_mixture_predicts_the_diagnostic_beside_its_source_task(self):
        args = FineTuneDataArguments(tasks="super_glue/rte,super_glue/axb,super_glue/axg")
        plans = task_data.plan_splits(task_data.resolve_tasks(args), args,
                                      SimpleNamespace(do_train=True, do_eval=True, do_predict=True))
        self.assertEqual([(p.role, p.key) for p in plans], [
            ("train", "rte"), ("eval", "rte"), ("predict", "rte"), ("predict", "axb"), ("predict", "axg")])

    @parameterized.named_parameters(
        ("ax_train", dict(dataset_name="ax"), dict(do_train=True),
         r"--do_train: glue/ax is only predicted, never trained on .*fine-tuned on glue/mnli"),
        ("axb_evaluated_only", dict(dataset_name="axb", benchmark="super_glue"),
         dict(do_train=False, do_predict=False), r"nothing to do: super_glue/axb has only a test split; pass "
                                                 r"--do_predict true"),
        ("wnli_as_wsc_train", dict(dataset_name="wnli", wnli_format="wsc_simple"), dict(do_train=True),
         r"--do_train: glue/wnli is only predicted.*fine-tuned on super_glue/wsc"),
    )
    def test_diagnostic_alone_is_refused_for_training_or_with_nothing_to_do(self, flags, run, message):
        args = FineTuneDataArguments(**flags)
        with self.assertRaisesRegex(UsageError, message):
            task_data.plan_splits(task_data.resolve_tasks(args), args,
                                  SimpleNamespace(**{"do_train": False, "do_eval": True, "do_predict": True, **run}))

    def test_diagnostic_alone_is_predicted_without_evaluation(self):
        args = FineTuneDataArguments(dataset_name="axb", benchmark="super_glue")
        plans = task_data.plan_splits(task_data.resolve_tasks(args), args,
                                      SimpleNamespace(do_train=False, do_eval=True, do_predict=True))
        self.assertEqual([(p.role, p.split) for p in plans], [("predict", "test")])

    def test_wnli_format_switches_the_task_to_wnli_simple(self):
        (task,) = task_data.resolve_tasks(FineTuneDataArguments(dataset_name="wnli", wnli_format="wsc_simple"))
        self.assertEqual((task["name"], task["row_format"], task["task_type"], task["t5_task"]),
                         ("glue/wnli", "wnli_simple", "referent", "glue_wnli_v002_simple_eval"))
        (plain,) = task_data.resolve_tasks(FineTuneDataArguments(dataset_name="wnli"))
        self.assertEqual(plain["t5_task"], "glue_wnli_v002")


if __name__ == "__main__":
    absltest.main()
