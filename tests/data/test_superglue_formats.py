"""superglue_formats.py and the tasks it serves, on the official files in ../shared/data (SuperGLUE WSC and AX-g,
the GLUE files) and on fixtures in the official layout (tests/fixtures/superglue) where no official file is here:
T5's exact strings (its preprocessors' docstring examples and special cases), one example per MultiRC answer and
ReCoRD answer, WSC's training filter, AX-g's pairs, WNLI as WSC, the diagnostics, malformed rows counted, and the
plan that keeps diagnostic tasks out of training."""
import collections
import csv
import json
import logging
from pathlib import Path

from absl.testing import absltest, parameterized

import metrics
from constants import DATASET_VALS, NO_LABEL, WNLI_AS_WSC
from t5kit.config.finetune_arguments import FineTuneDataArguments
from t5kit.data import superglue_formats, task_splits
from t5kit.data.task_format import get_task_vals
from t5kit.errors import UsageError
from tests.helpers import REPO, T5TokenizerTestCase, require

FIXTURES = REPO / "tests" / "fixtures" / "superglue"
SUSAN = ("Sent 1: Susan wanted to have a birthday party. Sent 2: She called all of her friends. Sent 3: She has five "
         "friends. Sent 4: Her mom said that Susan can invite them all to the party. Sent 5: Her first friend could "
         "not go to the party because she was sick. Sent 6: On the day of the party, all five friends showed up. ")
PUERTO_RICO = ("record query: For one, they can truthfully say, \"Don't blame me, I didn't vote for them,\" when "
               "discussing the @placeholder presidency entities: CNN, Congress, Puerto Rico, US passage: (CNN) "
               "Puerto Rico on Sunday overwhelmingly voted for statehood. But Congress, the only body that can "
               "approve new states, will ultimately decide whether the status of the US commonwealth changes. It "
               "was the fifth such vote on statehood. Puerto Rico voted Sunday in favor of US statehood")
# The WSC fixture's rows are the official files' first five (their pronouns marked as T5's wsc_simple marks them).
PONY = ("wsc: The pony behaved well, sir, and showed no vice; but at last he just threw up his heels and tipped the "
        "young gentleman into the thorn hedge. *He* wanted me to help him out, but I hope you will excuse me, sir, I "
        "did not feel inclined to do so.")
BERNARD = ("wsc: Bernard , who had not told the government official that he was less than 21 when he filed for a "
           "homestead claim, did not consider that he had done anything dishonest. Still, anyone who knew that he was "
           "19 years old could take his claim away from *him* .")
MAUDE = ("wsc: Maude and Dora had seen the trains rushing across the prairie, with long, rolling puffs of black smoke "
         "streaming back from the engine. Their roars and their wild, clear whistles could be heard from far away. "
         "Horses ran away when *they* came in sight.")


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


class FixtureSplitTest(T5TokenizerTestCase):
    """Each task's fixture files read from --data_dir as the official files are."""

    def build(self, task, split, role, args=None, benchmark="super_glue"):
        plan = task_splits.SplitPlan(get_task_vals(benchmark, task), split, role, task)
        return task_splits.build_task_split(plan, (args or data_args()).task_data(), self.tokenizer)

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
        ("wsc_val", "wsc", "validation", "eval", 5, 5, BERNARD, ["anyone", "Mr. Moncrieff", "lemon trees", "Larry",
                                                                "Chester"]),
        ("wsc_train", "wsc", "train", "train", 5, 2, PONY, ["young gentleman", "the cup"]),  # referents only
        ("wsc_test", "wsc", "test", "predict", 5, 5, MAUDE, [None] * 5),
        ("axb", "axb", "test", "predict", 4, 4,
         "rte hypothesis: The cat did not sit on the mat. premise: The cat sat on the mat.",
         ["not_entailment", "not_entailment", "entailment", "entailment"]),
        ("axg", "axg", "test", "predict", 4, 4,
         "rte hypothesis: The accountant sought help filing taxes. premise: The taxpayer met with the accountant to "
         "get help filing his taxes.", ["not_entailment"] * 4),
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
        self.assertEqual((split.stats["not_referent"], [m["label"] for m in split.meta]), (3, [1, 1]))

    def test_axg_pairs(self):
        # The fixture's rows are the official file's first four: pair_ids 551646, 551648, ... pair nothing.
        self.assertEqual([m["group"] for m in self.build("axg", "test", "predict").meta], [0, 0, 1, 1])

    def test_glue_ax_reads_the_real_diagnostic_file(self):
        folder = require("glue/diagnostic")
        split = self.build("ax", "test", "predict", data_args(dataset_name="ax", benchmark="glue",
                                                              data_dir=[str(folder.parent)]), benchmark="glue")
        self.assertEqual((split.stats["rows"], split.stats["used"]), (1104, 1104))
        self.assertEqual(split.inputs[0], "mnli hypothesis: The cat did not sit on the mat. premise: The cat sat on "
                                          "the mat.")
        self.assertEqual((split.targets[0], split.indices[:2]), (None, ["0", "1"]))


class OfficialWscTest(T5TokenizerTestCase):
    """wsc_simple on the official SuperGLUE WSC files (../shared/data/superglue/WSC): no row lost, T5's bytes."""

    def build(self, split, role):
        plan = task_splits.SplitPlan(get_task_vals("super_glue", "wsc"), split, role, "wsc")
        args = data_args(dataset_name="wsc", data_dir=[str(require("superglue/WSC"))])
        return task_splits.build_task_split(plan, args.task_data(), self.tokenizer)

    @parameterized.named_parameters(
        # (split, role, rows, examples): training keeps the rows whose candidate is the referent (T5's
        # correct_referent_only), evaluation and prediction keep them all.
        ("train", "train", "train", 554, 259), ("validation", "validation", "eval", 104, 104),
        ("test", "test", "predict", 146, 146))
    def test_every_official_row_is_formatted(self, split, role, rows, examples):
        result = self.build(split, role)
        self.assertEqual((result.stats["rows"], result.stats["malformed"], result.stats["used"]),
                         (rows, 0, examples))
        self.assertTrue(all(text.startswith("wsc: ") and text.count("*") == 2 for text in result.inputs))

    def test_validation_row_42_is_t5s_special_case(self):
        # span2_index 30 names "use", not "it": T5's _wsc_inputs spells this text out, byte for byte.
        split = self.build("validation", "eval")
        position = split.indices.index(42)
        self.assertEqual(split.inputs[position], (
            "wsc: When they had eventually calmed down a bit , and had gotten home, Mr. Farley put the magic pebble "
            "in an iron safe . Some day they might want to use *it* , but really for now, what more could they wish "
            "for?"))
        self.assertEqual(split.targets[position], "safe")

    def test_train_rows_137_453_533_are_t5s_other_special_case(self):
        # span2_index 22 names 'him,"': T5 blanks "him" and moves the comma and quote behind it.
        split = self.build("train", "eval")
        expected = ("wsc: The boy continued to whip the pony , and eventually the pony threw him over. John laughed "
                    "out quite loud. \"Good for *him* ,\" he said.")
        self.assertEqual([(split.inputs[split.indices.index(idx)], split.targets[split.indices.index(idx)])
                          for idx in (137, 453, 533)], [(expected, "pony"), (expected, "John"), (expected, "boy")])

    def test_wsc_accuracy_on_the_official_validation_rows(self):
        # Naming every candidate is right exactly on the rows whose candidate is the referent (label True), naming
        # no candidate exactly on the others; the shares are counted here from the raw file.
        split = self.build("validation", "eval")
        referents = sum(row["label"] for row in read_jsonl(require("superglue/WSC/val.jsonl")))
        task_vals = get_task_vals("super_glue", "wsc")
        named = metrics.compute_task_metrics(task_vals, [m["referent"].upper() for m in split.meta], split.targets,
                                             split.meta)
        nobody = metrics.compute_task_metrics(task_vals, ["Zebedee"] * 104, split.targets, split.meta)
        self.assertAlmostEqual(named["accuracy"], 100 * referents / 104)
        self.assertAlmostEqual(nobody["accuracy"], 100 * (104 - referents) / 104)
        self.assertEqual((named["invalid_count"], nobody["invalid_count"]), (0, 0))

    @parameterized.named_parameters(
        # TFDS's wsc.fixed (_fix_wst): span1_text "The table" takes the case of its word in the text.
        ("case", "validation", 5, "the table"),
        # ... and loses its newline.
        ("newline", "train", 234, "willow-towered Canopy Huntertropic wrestles"),
        # ... and its trailing full stop.
        ("full_stop", "test", 117, "the traffic light"),
        # Kamenev and Zinoviev are not adjacent in the text: TFDS leaves the span as it is.
        ("unfixable", "test", 80, "Kamenev and Zinoviev"))
    def test_span_texts_are_repaired_as_wsc_fixed(self, split, idx, referent):
        result = self.build(split, "predict" if split == "test" else "eval")
        self.assertEqual(result.meta[result.indices.index(idx)]["referent"], referent)


class OfficialAxgTest(T5TokenizerTestCase):
    """AX-g on the official file (../shared/data/superglue/AX-g/AX-g.jsonl): Winogender pairs are the rows idx 2k
    and 2k + 1, whether the rows come from the official file or in the hub's shape (no pair_id)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.rows = read_jsonl(require("superglue/AX-g/AX-g.jsonl"))

    def build(self, **flags):
        plan = task_splits.SplitPlan(get_task_vals("super_glue", "axg"), "test", "predict", "axg")
        args = data_args(**{"dataset_name": "axg", "data_dir": [str(require("superglue/AX-g"))], **flags})
        return task_splits.build_task_split(plan, args.task_data(), self.tokenizer)

    def hub_shaped_file(self, rows):
        path = Path(self.create_tempdir().full_path) / "axg.jsonl"
        write_jsonl(path, [{key: row[key] for key in ("premise", "hypothesis", "idx", "label")} for row in rows])
        return path

    def test_official_file_has_178_pairs(self):
        groups = [m["group"] for m in self.build().meta]
        self.assertEqual((len(groups), len(set(groups))), (356, 178))
        self.assertEqual(set(collections.Counter(groups).values()), {2})
        self.assertLen({row["pair_id"] for row in self.rows}, 356)  # pair_id pairs nothing in the official file

    def test_hub_shaped_rows_pair_as_the_official_file(self):
        hub = self.build(data_dir=None, test_file=str(self.hub_shaped_file(self.rows)))
        self.assertEqual([m["group"] for m in hub.meta], [m["group"] for m in self.build().meta])

    def test_gender_parity_is_the_consecutive_pair_definition(self):
        # A fixed prediction per row (by premise length; every 50th row invalid), scored through the task's metric
        # and counted here by hand over rows (2k, 2k + 1) of the raw file.
        predictions = ["maybe" if i % 50 == 7 else ("entailment" if len(row["premise"]) % 3 else "not_entailment")
                       for i, row in enumerate(self.rows)]
        split = self.build()
        results = metrics.compute_task_metrics(split.task_vals, predictions, split.targets, split.meta)
        alike = [predictions[2 * k] == predictions[2 * k + 1] != "maybe" for k in range(178)]
        self.assertAlmostEqual(results["gender_parity"], 100 * sum(alike) / 178)
        self.assertBetween(sum(alike), 1, 177)  # the prediction list tells alike and unlike pairs apart
        correct = [p == row["label"] for p, row in zip(predictions, self.rows)]
        self.assertAlmostEqual(results["accuracy"], 100 * sum(correct) / 356)
        self.assertAlmostEqual(results["combined_score"], (results["accuracy"] + results["gender_parity"]) / 2)

    @parameterized.named_parameters(
        # A row taken out and the rest numbered again: idx 0 and 1 are no longer one sentence's two genders.
        ("hypotheses_differ", lambda rows: [dict(row, idx=i) for i, row in enumerate(rows[:1] + rows[2:])],
         r"AX-g rows idx 0 and 1 should be one Winogender pair \(idx 2k, 2k \+ 1, the same hypothesis\) but their "
         r"hypotheses differ; pass the official AX-g.jsonl in its released order$"),
        ("idx_twice", lambda rows: [rows[0], rows[0]] + rows[2:], r"line 2: AX-g idx 0 comes twice"),
        ("idx_not_a_number", lambda rows: [dict(rows[0], idx="first")] + rows[1:],
         r"line 1: AX-g idx 'first' is not a whole number"))
    def test_rows_that_do_not_pair_are_refused(self, reorder, message):
        rows = list(self.rows)
        for shape in ("official", "hub"):
            with self.subTest(shape), self.assertRaisesRegex(UsageError, message):
                if shape == "hub":
                    self.build(data_dir=None, test_file=str(self.hub_shaped_file(reorder(rows))))
                else:
                    folder = Path(self.create_tempdir().full_path)
                    write_jsonl(folder / "AX-g" / "AX-g.jsonl", reorder(rows))
                    self.build(data_dir=[str(folder)])


class MalformedRowTest(T5TokenizerTestCase):
    """Rows that do not hold together are counted as malformed and logged, never a crash; the others are kept."""

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
        plan = task_splits.SplitPlan(get_task_vals("super_glue", task), "validation", "eval", task)
        with self.assertLogs("t5kit.data.task_sources", logging.WARNING) as logs:
            split = task_splits.build_task_split(plan, data_args(data_dir=[str(folder)]).task_data(), self.tokenizer)
        self.assertEqual((split.stats["rows"], split.stats["malformed"]), (good + 1, 1))
        self.assertIn(f"dropped 1 malformed row(s) of {good + 1}", logs.output[0])
        self.assertIn(f"line(s) {good + 1}", logs.output[0])

    def test_only_malformed_rows_is_refused_naming_the_file(self):
        folder = Path(self.create_tempdir().full_path)
        write_jsonl(folder / "ReCoRD" / "val.jsonl", [{"idx": 0, "passage": {"text": "x", "entities": []}}])
        plan = task_splits.SplitPlan(get_task_vals("super_glue", "record"), "validation", "eval", "record")
        with self.assertRaisesRegex(UsageError, r"ReCoRD/val.jsonl: the validation split of super_glue/record has no "
                                                r"usable rows \(1 read, 1 malformed"):
            task_splits.build_task_split(plan, data_args(data_dir=[str(folder)]).task_data(), self.tokenizer)


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
        plans = task_splits.plan_splits(task_splits.resolve_tasks(args.task_selection()), args.task_data(),
                                        do_train=True, do_eval=True, do_predict=True)
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
            task_splits.plan_splits(task_splits.resolve_tasks(args.task_selection()), args.task_data(),
                                    **{"do_train": False, "do_eval": True, "do_predict": True, **run})

    def test_diagnostic_alone_is_predicted_without_evaluation(self):
        args = FineTuneDataArguments(dataset_name="axb", benchmark="super_glue")
        plans = task_splits.plan_splits(task_splits.resolve_tasks(args.task_selection()), args.task_data(),
                                        do_train=False, do_eval=True, do_predict=True)
        self.assertEqual([(p.role, p.split) for p in plans], [("predict", "test")])

    def test_wnli_format_switches_the_task_to_wnli_simple(self):
        selection = FineTuneDataArguments(dataset_name="wnli", wnli_format="wsc_simple").task_selection()
        (task,) = task_splits.resolve_tasks(selection)
        self.assertEqual((task["name"], task["row_format"], task["task_type"], task["t5_task"]),
                         ("glue/wnli", "wnli_simple", "referent", "glue_wnli_v002_simple_eval"))
        (plain,) = task_splits.resolve_tasks(FineTuneDataArguments(dataset_name="wnli").task_selection())
        self.assertEqual(plain["t5_task"], "glue_wnli_v002")


if __name__ == "__main__":
    absltest.main()
