"""outputs/predictions.py: the leaderboard files. Every SuperGLUE task's test split (fixtures in the official layout,
the real RTE and WiC files) gives the <Task>.jsonl the SuperGLUE server takes: idx and label in its vocabulary,
MultiRC and ReCoRD in their nested and per-query forms; GLUE's AX.tsv and WNLI scored as WSC."""
import json
from pathlib import Path

from absl.testing import absltest, parameterized

from constants import DATASET_VALS, WNLI_AS_WSC
from t5kit.config.finetune_arguments import FineTuneDataArguments
from t5kit.data import task_splits
from t5kit.data.task_format import get_task_vals
from t5kit.outputs import predictions
from tests.helpers import REPO, T5TokenizerTestCase, require

FIXTURES = REPO / "tests" / "fixtures" / "superglue"

# task -> (its folder: the fixtures, or ../shared/data for RTE and WiC), predicted texts, expected file lines.
SUPERGLUE_CASES = {
    "boolq": (None, ["True", "False"], [{"idx": 0, "label": "true"}, {"idx": 1, "label": "false"}]),
    "cb": (None, ["neutral", "contradiction", "no idea"],  # an invalid prediction gets the first label
           [{"idx": 0, "label": "neutral"}, {"idx": 1, "label": "contradiction"}, {"idx": 2, "label": "entailment"}]),
    "copa": (None, ["choice2", "choice1"], [{"idx": 0, "label": 1}, {"idx": 1, "label": 0}]),
    "multirc": (None, ["True", "False", "True", "False", "False", "True", "False", "True", "True"], [
        {"idx": 0, "passage": {"questions": [
            {"idx": 0, "answers": [{"idx": 0, "label": 1}, {"idx": 1, "label": 0}, {"idx": 2, "label": 1},
                                   {"idx": 3, "label": 0}, {"idx": 4, "label": 0}]},
            {"idx": 1, "answers": [{"idx": 5, "label": 1}, {"idx": 6, "label": 0}]}]}},
        {"idx": 1, "passage": {"questions": [
            {"idx": 2, "answers": [{"idx": 7, "label": 1}, {"idx": 8, "label": 1}]}]}}]),
    "record": (None, [" US ", "pigeon", "potato"],
               [{"idx": 0, "label": "US"}, {"idx": 1, "label": "pigeon"}, {"idx": 2, "label": "potato"}]),
    "rte": ("superglue", ["entailment", "not_entailment", "entailment"],
            [{"idx": 0, "label": "entailment"}, {"idx": 1, "label": "not_entailment"},
             {"idx": 2, "label": "entailment"}]),
    "wic": ("superglue", ["False", "True", "True"],
            [{"idx": 0, "label": "false"}, {"idx": 1, "label": "true"}, {"idx": 2, "label": "true"}]),
    # Candidates Maude and Dora, trains, puffs, roars, whistles: does the prediction name the candidate?
    "wsc": (None, ["Maude and Dora", "Dora", "the trains", "Roars", ""],
            [{"idx": 0, "label": "True"}, {"idx": 1, "label": "False"}, {"idx": 2, "label": "False"},
             {"idx": 3, "label": "True"}, {"idx": 4, "label": "False"}]),
    "axb": (None, ["entailment", "not_entailment", "entailment", "entailment"],
            [{"idx": i, "label": label} for i, label in enumerate(["entailment", "not_entailment", "entailment",
                                                                    "entailment"])]),
    "axg": (None, ["not_entailment", "not_entailment", "entailment", "not_entailment"],
            [{"idx": i, "label": label} for i, label in enumerate(["not_entailment", "not_entailment", "entailment",
                                                                    "not_entailment"])]),
}
SERVER_FILES = {"boolq": "BoolQ", "cb": "CB", "copa": "COPA", "multirc": "MultiRC", "record": "ReCoRD",
                "rte": "RTE", "wic": "WiC", "wsc": "WSC", "axb": "AX-b", "axg": "AX-g"}


class LeaderboardFileTest(T5TokenizerTestCase):

    def setUp(self):
        super().setUp()
        self.out = Path(self.create_tempdir().full_path)

    def predict_split(self, benchmark, task, folder, **flags):
        task_vals = get_task_vals(benchmark, task)
        task_vals.update(flags.pop("task_overrides", {}))
        args = FineTuneDataArguments(dataset_name=task, benchmark=benchmark, data_dir=[str(folder)],
                                     max_predict_samples=3 if folder != FIXTURES else None, **flags)
        plan = task_splits.SplitPlan(task_vals, task_vals["test_splits"][0], "predict", task)
        return task_splits.build_task_split(plan, args.task_data(), self.tokenizer)

    def test_every_superglue_task_has_its_server_file(self):
        self.assertCountEqual(SUPERGLUE_CASES, DATASET_VALS["super_glue"])
        self.assertEqual({task: DATASET_VALS["super_glue"][task]["data_dir_name"] for task in SERVER_FILES},
                         SERVER_FILES)

    @parameterized.named_parameters((task, task) for task in SUPERGLUE_CASES)
    def test_superglue_file(self, task):
        shared, texts, expected = SUPERGLUE_CASES[task]
        split = self.predict_split("super_glue", task, require(shared) if shared else FIXTURES)
        path = predictions.write_leaderboard_file(self.out, split, texts)
        self.assertEqual(path, self.out / "superglue_submission" / f"{SERVER_FILES[task]}.jsonl")
        self.assertEqual([json.loads(line) for line in path.read_text().splitlines()], expected)

    def test_glue_ax_file(self):
        split = self.predict_split("glue", "ax", require("glue/diagnostic").parent)
        path = predictions.write_leaderboard_file(self.out, split, ["contradiction", "neutral", "no idea"])
        self.assertEqual(path, self.out / "glue_submission" / "AX.tsv")
        self.assertEqual(path.read_text().splitlines(), [
            "index\tprediction", "0\tcontradiction", "1\tneutral", "2\tentailment"])

    def test_wnli_as_wsc_file_says_whether_the_candidate_is_the_referent(self):
        split = self.predict_split("glue", "wnli", require("glue/WNLI"), task_overrides=WNLI_AS_WSC)
        candidates = [meta["referent"] for meta in split.meta]
        path = predictions.write_leaderboard_file(self.out, split, [candidates[0], "nobody", ""])
        self.assertEqual(path.read_text().splitlines(), ["index\tprediction", "0\t1", "1\t0", "2\t0"])

    @parameterized.named_parameters(
        # WSC candidates anyone (not the referent), Mr. Moncrieff (the referent), lemon trees, Larry, Chester (not):
        # naming a candidate is right where it is the referent, naming someone else where it is not.
        ("wsc", "wsc", "validation", ["anyone", "Mr. Moncrieff", "the lemons", "Dad", "Chester"],
         [False, True, True, True, False]),
        # ReCoRD: any answer of the query is right, after SQuAD's normalisation.
        ("record", "record", "validation", ["the US", "pigeon", "pigeon", "Potato."], [True, True, True, True]),
        ("multirc", "multirc", "validation", ["True"] * 9, [True, False, True, False, True, True, False, True, False]))
    def test_predictions_file_marks_rows_as_the_metric_does(self, task, split_name, texts, expected):
        task_vals = get_task_vals("super_glue", task)
        plan = task_splits.SplitPlan(task_vals, split_name, "eval", task)
        split = task_splits.build_task_split(plan, FineTuneDataArguments(
            dataset_name=task, benchmark="super_glue", data_dir=[str(FIXTURES)]).task_data(), self.tokenizer)
        self.assertEqual([row["correct"] for row in predictions.prediction_rows(split, texts)], expected)

    def test_other_benchmarks_have_none(self):
        split = self.predict_split("translation", "multi30k_en_de", require("translation/multi30k"))
        self.assertIsNone(predictions.write_leaderboard_file(self.out, split, ["x"] * 3))


if __name__ == "__main__":
    absltest.main()
