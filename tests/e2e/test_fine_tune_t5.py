"""fine_tune_t5.py end to end on t5-tiny and the real GLUE TSVs: outputs, predictions, evaluate-only, rank
scoring, multi-task, a YAML-declared task, the GLUE submission file, and every refusal."""
import csv
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import pytest
import yaml
from absl.testing import absltest, parameterized
from transformers import AutoTokenizer, GPT2Config, T5ForConditionalGeneration

from metrics import glue_average
from t5kit.config import parsing
from t5kit.config.arguments import ModelArguments
from t5kit.config.script_flags import FINETUNE_FLAG_CLASSES
from t5kit.data import task_splits
from t5kit.errors import UsageError
from t5kit.model import building, t5_flex_attention
from t5kit.outputs import run_record
from tests.helpers import REPO, fine_tune, require, snapshot, tiny_flags

EVAL_ROWS = 12
TEST_ROWS = 6
RTE_WORDS = ("entailment", "not_entailment")


def eval_only_flags(output_dir, model_dir, **overrides):
    return tiny_flags(output_dir, model_size=None, tokenizer_name_or_path=None, model_name_or_path=model_dir,
                      do_train=False, **overrides)


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def read_tsv(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


@pytest.mark.train_class  # one RTE fine-tune shared by the tests
class FineTuneEndToEndTest(parameterized.TestCase):
    """One RTE fine-tune shared by the tests; evaluate-only and rank runs start from its saved model."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = Path(tempfile.mkdtemp())
        cls.run_dir = cls.tmp / "rte"
        cls.metrics = fine_tune(tiny_flags(str(cls.run_dir), do_predict=True,
                                                   max_predict_samples=TEST_ROWS))
        cls.saved = json.loads((cls.run_dir / "metrics.json").read_text())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def test_writes_outputs_and_keeps_the_best_checkpoint(self):
        for name in ("config.yaml", "metrics.json", "loss_curve.png", "model.safetensors", "config.json",
                     "predictions_rte_validation.jsonl", "predictions_rte_test.jsonl", "glue_submission/RTE.tsv"):
            self.assertTrue((self.run_dir / name).is_file(), name)
        self.assertEqual(self.saved["metric_for_best_model"], "accuracy")
        self.assertIsNotNone(self.saved["best_model_checkpoint"])
        self.assertBetween(self.saved["eval_accuracy"], 0.0, 100.0)
        self.assertEqual(self.saved["per_task_metrics"]["rte"]["accuracy"], self.saved["eval_accuracy"])
        self.assertEqual(self.saved["data"]["rte/validation"]["rows"], 277)
        self.assertEqual(self.saved["data"]["rte/validation"]["used"], EVAL_ROWS)
        self.assertEqual(self.saved["data"]["rte/train"]["malformed"], 0)
        evals = [entry for entry in self.saved["log_history"] if "eval_accuracy" in entry]
        self.assertLen(evals, 2)  # steps 2 and 4
        self.assertEqual(self.saved["best_metric"], max(entry["eval_accuracy"] for entry in evals))

    def test_predictions_match_the_validation_file(self):
        rows = read_tsv(require("glue/RTE/dev.tsv"))[:EVAL_ROWS]
        predictions = read_jsonl(self.run_dir / "predictions_rte_validation.jsonl")
        self.assertLen(predictions, EVAL_ROWS)
        self.assertEqual([p["input"] for p in predictions],
                         [f"rte sentence1: {r['sentence1']} sentence2: {r['sentence2']}" for r in rows])
        self.assertEqual([p["target"] for p in predictions], [r["label"] for r in rows])
        self.assertEqual([p["correct"] for p in predictions], [p["prediction"] == p["target"] for p in predictions])
        accuracy = 100.0 * sum(p["correct"] for p in predictions) / EVAL_ROWS
        self.assertAlmostEqual(accuracy, self.saved["eval_accuracy"])

    def test_glue_submission_has_the_leaderboard_format(self):
        lines = (self.run_dir / "glue_submission" / "RTE.tsv").read_text().splitlines()
        self.assertEqual(lines[0], "index\tprediction")
        test_rows = read_tsv(require("glue/RTE/test.tsv"))[:TEST_ROWS]
        self.assertEqual([line.split("\t")[0] for line in lines[1:]], [row["index"] for row in test_rows])
        self.assertContainsSubset({line.split("\t")[1] for line in lines[1:]}, RTE_WORDS)
        unlabeled = read_jsonl(self.run_dir / "predictions_rte_test.jsonl")
        self.assertEqual([(row["target"], row["correct"]) for row in unlabeled], [(None, None)] * TEST_ROWS)

    def test_config_yaml_alone_gives_the_same_flags(self):
        config = yaml.safe_load((self.run_dir / "config.yaml").read_text())
        derived = config.pop("derived")
        # The values the run used: the task's metric picked the best checkpoint.
        self.assertEqual((config["dataset_name"], config["max_steps"], config["metric_for_best_model"],
                          config["greater_is_better"]), ("rte", 4, "accuracy", True))
        self.assertEqual((derived["global_batch_size"], derived["world_size"], derived["precision"]), (4, 1, "fp32"))
        reloaded = parsing.parse_flags(FINETUNE_FLAG_CLASSES, [str(self.run_dir / "config.yaml")])
        self.assertEqual(run_record.flag_values(reloaded), config)

    def test_evaluate_only_on_the_saved_folder_reproduces_the_predictions(self):
        out = self.dir / "eval"
        metrics = fine_tune(eval_only_flags(str(out), str(self.run_dir)))
        self.assertEqual(metrics["eval_accuracy"], self.saved["eval_accuracy"])
        self.assertEqual((out / "predictions_rte_validation.jsonl").read_text(),
                         (self.run_dir / "predictions_rte_validation.jsonl").read_text())
        self.assertFalse((out / "model.safetensors").exists())
        self.assertFalse((out / "README.md").exists())  # no model saved here, so no card
        self.assertTrue((out / "out.log").is_file())

    def test_diagnostic_task_is_predicted_with_the_rte_model(self):
        # AX-b has only a test split: the run predicts it (scored, as its file has labels) and evaluates nothing.
        out = self.dir / "axb"
        metrics = fine_tune(eval_only_flags(str(out), str(self.run_dir), benchmark="super_glue", dataset_name="axb",
                                            data_dir=[str(REPO / "tests/fixtures/superglue")], do_predict=True))
        config = yaml.safe_load((out / "config.yaml").read_text())
        self.assertEqual((config["do_eval"], config["eval_strategy"], config["load_best_model_at_end"]),
                         (False, "no", False))
        self.assertIn("predict_matthews_correlation", metrics)
        self.assertEqual([line["idx"] for line in read_jsonl(out / "superglue_submission" / "AX-b.jsonl")],
                         [0, 1, 2, 3])

    def test_wnli_evaluated_as_t5_did(self):
        # --wnli_format wsc_simple: the pronoun marked, the candidate referent as target, scored by wsc_simple.
        out = self.dir / "wnli"
        metrics = fine_tune(eval_only_flags(str(out), str(self.run_dir), dataset_name="wnli",
                                            data_dir=[str(require("glue/WNLI"))], wnli_format="wsc_simple"))
        predictions = read_jsonl(out / "predictions_wnli_validation.jsonl")
        self.assertEqual((predictions[0]["input"], predictions[0]["target"]),
                         ("wsc: The drain is clogged with hair. *It* has to be cleaned.", "The hair"))
        self.assertAlmostEqual(metrics["eval_accuracy"],
                               100.0 * sum(p["correct"] for p in predictions) / len(predictions))

    def test_dropout_rate_applies_to_the_loaded_model_when_given(self):
        # The shared run was initialised randomly: no dropout (T5 v1.1 pre-training), recorded as such.
        derived = yaml.safe_load((self.run_dir / "config.yaml").read_text())["derived"]
        self.assertEqual(derived["dropout_rate"], 0.0)
        out = self.dir / "dropout"
        fine_tune(tiny_flags(str(out), model_size=None, tokenizer_name_or_path=None,
                             model_name_or_path=str(self.run_dir), dropout_rate=0.1, max_steps=2))
        self.assertEqual(yaml.safe_load((out / "config.yaml").read_text())["derived"]["dropout_rate"], 0.1)
        self.assertEqual(json.loads((out / "config.json").read_text())["dropout_rate"], 0.1)

    def test_rank_scoring_predicts_only_label_words(self):
        out = self.dir / "rank"
        metrics = fine_tune(eval_only_flags(str(out), str(self.run_dir), label_scoring="rank"))
        self.assertEqual(metrics["eval_invalid_count"], 0)
        predictions = read_jsonl(out / "predictions_rte_validation.jsonl")
        self.assertLen(predictions, EVAL_ROWS)
        self.assertContainsSubset({p["prediction"] for p in predictions}, RTE_WORDS)

    def test_readme_generate_snippet_matches_the_predictions(self):
        tokenizer = AutoTokenizer.from_pretrained(self.run_dir)
        model = T5ForConditionalGeneration.from_pretrained(self.run_dir)
        predictions = read_jsonl(self.run_dir / "predictions_rte_validation.jsonl")[:3]
        batch = tokenizer([p["input"] for p in predictions], return_tensors="pt", padding=True, truncation=True,
                          max_length=64)
        texts = tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True)
        self.assertEqual(texts, [p["prediction"] for p in predictions])


@pytest.mark.slow  # a fine-tuning run per test
class FineTuneVariantsTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def test_multi_task_reports_each_task_and_the_glue_average(self):
        out = self.dir / "mix"
        metrics = fine_tune(tiny_flags(
            str(out), dataset_name=None, tasks="glue/sst2,glue/rte,glue/stsb", data_dir=[str(require("glue"))],
            max_eval_samples=6, max_steps=2, mixture_temperature=2.0))
        saved = json.loads((out / "metrics.json").read_text())
        self.assertEqual(set(saved["per_task_metrics"]), {"sst2", "rte", "stsb"})
        self.assertEqual(saved["metric_for_best_model"], "average")
        self.assertAlmostEqual(saved["average"], glue_average(saved["per_task_metrics"], tasks=["sst2", "rte", "stsb"]))
        self.assertAlmostEqual(metrics["eval_average"], saved["average"])
        self.assertAlmostEqual(sum(saved["mixing_rates"].values()), 1.0)
        self.assertIn("eval_average", {key for entry in saved["log_history"] for key in entry})
        for task in ("sst2", "rte", "stsb"):
            self.assertLen(read_jsonl(out / f"predictions_{task}_validation.jsonl"), 6)

    def test_superglue_mixture_evaluates_and_writes_the_server_files(self):
        """MultiRC, ReCoRD and WSC trained together on the fixtures (T5's formats), AX-g predicted beside them: each
        task scored with SuperGLUE's own metrics, and each test split written as the SuperGLUE server takes it."""
        out = self.dir / "superglue"
        metrics = fine_tune(tiny_flags(
            str(out), dataset_name=None, tasks="super_glue/multirc,super_glue/record,super_glue/wsc,super_glue/axg",
            data_dir=[str(REPO / "tests/fixtures/superglue")], max_train_samples=None, max_eval_samples=None,
            max_target_length=8, max_steps=2, do_predict=True))
        saved = json.loads((out / "metrics.json").read_text())
        reported = {"multirc": ("f1", "exact_match", "combined_score"), "record": ("exact_match", "f1",
                    "combined_score"), "wsc": ("accuracy",)}
        self.assertCountEqual(saved["per_task_metrics"], reported)  # AX-g is only predicted
        for task, names in reported.items():
            self.assertContainsSubset(names + ("invalid_count", "invalid_rate"), saved["per_task_metrics"][task])
        self.assertEqual(saved["data"]["wsc/train"]["not_referent"], 3)
        self.assertEqual(saved["data"]["record/validation"]["used"], 4)  # one example per answer
        self.assertIn("predict_axg_gender_parity", metrics)  # AX-g's file has labels: scored when predicted
        lines = {name: read_jsonl(out / "superglue_submission" / f"{name}.jsonl")
                 for name in ("MultiRC", "ReCoRD", "WSC", "AX-g")}
        self.assertEqual([[len(q["answers"]) for q in line["passage"]["questions"]] for line in lines["MultiRC"]],
                         [[5, 2], [2]])
        self.assertEqual([line["idx"] for line in lines["ReCoRD"]], [0, 1, 2])
        self.assertContainsSubset({line["label"] for line in lines["WSC"]}, {"True", "False"})
        self.assertContainsSubset({line["label"] for line in lines["AX-g"]}, {"entailment", "not_entailment"})

    def test_task_declared_in_yaml_alone(self):
        out = self.dir / "custom"
        fine_tune([str(REPO / "configs/custom_task_example.yaml"), "--model_size", "t5-tiny",
                           "--tokenizer_name_or_path", str(require("t5_spiece")), "--output_dir", str(out),
                           "--max_steps", "2", "--eval_steps", "2", "--save_steps", "2", "--disable_tqdm", "true"])
        saved = json.loads((out / "metrics.json").read_text())
        task_metrics = saved["per_task_metrics"]["ticket_triage"]
        self.assertEqual(saved["metric_for_best_model"], "combined_score")
        self.assertEqual(task_metrics["invalid_count"], 0)  # rank scoring, set in the example config
        self.assertAlmostEqual(task_metrics["combined_score"], (task_metrics["accuracy"] + task_metrics["f1"]) / 2)
        predictions = read_jsonl(out / "predictions_ticket_triage_validation.jsonl")
        rows = read_jsonl(REPO / "configs/examples/ticket_triage_validation.jsonl")
        self.assertEqual([p["input"] for p in predictions], [f"triage ticket: {r['ticket']}" for r in rows])
        self.assertEqual([p["target"] for p in predictions], [r["team"] for r in rows])


class ConfigFilesTest(parameterized.TestCase):

    @parameterized.named_parameters(*[(path.stem, path) for path in sorted((REPO / "configs/glue").glob("*.yaml"))
                                      if path.stem != "base"])
    def test_glue_config_names_its_task(self, path):
        (_, data_args, training_args) = parsing.parse_flags(
            FINETUNE_FLAG_CLASSES, [str(path), "--model_name_or_path", "google-t5/t5-small"])
        (task,) = task_splits.resolve_tasks(data_args.task_selection())
        self.assertEqual(task["name"], f"glue/{path.stem}")
        self.assertEqual((training_args.learning_rate, training_args.output_dir), (1e-3, f"runs/glue/{path.stem}"))

    def test_sst2_recipe_config_fine_tunes_the_recipe_model_as_the_benchmark_does(self):
        (model_args, data_args, training_args) = parsing.parse_flags(
            FINETUNE_FLAG_CLASSES, [str(REPO / "configs/finetune_sst2_recipe.yaml")])
        (task,) = task_splits.resolve_tasks(data_args.task_selection())
        self.assertEqual((task["name"], model_args.model_name_or_path), ("glue/sst2", "runs/bench_quality/pretrain"))
        self.assertEqual((training_args.max_steps, training_args.learning_rate, training_args.seed), (300, 1e-3, 1))

    @pytest.mark.slow  # a fine-tuning run
    def test_quickstart_rte_config_runs(self):
        """configs/finetune_rte_quickstart.yaml on a tiny model built here (the quickstart's own model is a
        `make quickstart` away; this test needs none)."""
        model = Path(self.create_tempdir().full_path) / "tiny_model"
        model_args = ModelArguments(model_size="t5-tiny", tokenizer_name_or_path=str(require("t5_spiece")))
        tokenizer, built = building.load_tokenizer_and_model(model_args, use_cpu=True)
        built.save_pretrained(model)
        tokenizer.save_pretrained(model)
        out = Path(self.create_tempdir().full_path) / "rte"
        metrics = fine_tune([str(REPO / "configs/finetune_rte_quickstart.yaml"), "--model_name_or_path",
                                     str(model), "--data_dir", str(require("glue/RTE")), "--output_dir", str(out),
                                     "--max_steps", "2", "--eval_steps", "2", "--save_steps", "2",
                                     "--max_train_samples", "16", "--max_eval_samples", "8", "--disable_tqdm", "true"])
        self.assertIn("eval_accuracy", metrics)
        self.assertLen(read_jsonl(out / "predictions_rte_validation.jsonl"), 8)
        self.assertIn("rank 0 INFO", (out / "out.log").read_text())
        self.assertIn(f"value: {metrics['eval_accuracy']}", (out / "README.md").read_text())


class FineTuneRefusalsTest(parameterized.TestCase):
    """Each bad input: one-line UsageError naming the flag/file and the fix, the folder byte-identical."""

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        self.out = self.dir / "out"

    def assert_refused(self, argv, message):
        before = snapshot(self.dir)
        with self.assertRaisesRegex(UsageError, message) as raised:
            fine_tune(argv)
        self.assertNotIn("\n", str(raised.exception))
        self.assertEqual(snapshot(self.dir), before)

    def write_jsonl(self, name, rows):
        path = self.dir / name
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        return str(path)

    @parameterized.named_parameters(
        ("unknown_benchmark", {"benchmark": "glu"}, "--benchmark='glu' is not a valid choice; did you mean 'glue'"),
        ("unknown_task", {"dataset_name": "sst3"}, "unknown task 'sst3' for --benchmark glue; did you mean 'sst2'"),
        ("unknown_task_in_list", {"dataset_name": None, "tasks": "glue/rte,glue/qnlii"}, "did you mean 'qnli'"),
        ("rank_without_label_words", {"dataset_name": "stsb", "label_scoring": "rank"},
         "--label_scoring rank scores label words.*use --label_scoring generate"),
        ("unknown_best_metric", {"metric_for_best_model": "acuracy"},
         "--metric_for_best_model 'acuracy' is not reported by this run; did you mean 'accuracy'"),
        ("target_length_cuts_labels", {"max_target_length": 2}, "--max_target_length=2 would cut the targets"),
        ("bad_label_scoring", {"label_scoring": "vote"},
         "--label_scoring='vote' is not a valid choice; choices: generate, rank"),
        ("missing_data_dir", {"data_dir": ["/nonexistent/RTE"]}, "--data_dir /nonexistent/RTE is not a folder"),
        ("wrong_data_dir", {"data_dir": ["/"]}, "no train.tsv for the train split of glue/rte"),
    )
    def test_bad_flag(self, overrides, message):
        self.assert_refused(tiny_flags(str(self.out), **overrides), message)

    def test_non_empty_output_dir(self):
        self.out.mkdir()
        (self.out / "precious.txt").write_text("last week's results")
        self.assert_refused(tiny_flags(str(self.out)), "--output_dir .* is not empty")

    def test_missing_columns(self):
        bad = self.write_jsonl("train.jsonl", [{"text": "a b", "label": 0}] * 3)
        self.assert_refused(tiny_flags(str(self.out), data_dir=None, train_file=bad, validation_file=bad),
                            r"--train_file .*train.jsonl lacks column\(s\) sentence1, sentence2 of task glue/rte")

    def test_label_not_in_the_registry(self):
        rows = [{"sentence1": "a", "sentence2": "b", "label": "entailment"}, {"sentence1": "a", "sentence2": "b",
                                                                             "label": "maybe"}]
        bad = self.write_jsonl("train.jsonl", rows)
        self.assert_refused(tiny_flags(str(self.out), data_dir=None, train_file=bad, validation_file=bad),
                            "train.jsonl line 2: label 'maybe' is not one of task glue/rte's labels: 0 "
                            r"\(entailment\), 1 \(not_entailment\)")

    def test_empty_split(self):
        header_only = self.dir / "dev.tsv"
        header_only.write_text("index\tsentence1\tsentence2\tlabel\n")
        self.assert_refused(tiny_flags(str(self.out), data_dir=None, train_file=str(require("glue/RTE/train.tsv")),
                                       validation_file=str(header_only)),
                            "dev.tsv: the validation split of glue/rte has no usable rows")

    def test_unlabeled_test_file_used_for_evaluation(self):
        self.assert_refused(tiny_flags(str(self.out), data_dir=None, train_file=str(require("glue/RTE/train.tsv")),
                                       validation_file=str(require("glue/RTE/test.tsv"))),
                            "--validation_file .*test.tsv has no label column 'label' .*--test_file with --do_predict")

    def test_eval_split_missing_from_local_files(self):
        self.assert_refused(tiny_flags(str(self.out), data_dir=None, train_file=str(require("glue/RTE/train.tsv"))),
                            "--do_eval needs --validation_file")

    def test_model_folder_that_is_not_seq2seq(self):
        gpt2 = self.dir / "gpt2"
        GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(gpt2)
        self.assert_refused(tiny_flags(str(self.out), model_name_or_path=str(gpt2), model_size=None),
                            "--model_name_or_path .*gpt2 is a gpt2 model .not an encoder-decoder., not a T5 model")

    def test_t5_flex_on_a_gpu_older_than_ampere(self):
        with mock.patch.object(t5_flex_attention, "visible_gpus", return_value=[("Tesla T4", (7, 5))]):
            self.assert_refused(tiny_flags(str(self.out), attn_implementation="t5_flex", use_cpu=False),
                                "--attn_implementation t5_flex needs an Ampere or newer GPU .* Tesla T4, is 7.5")

    @pytest.mark.slow  # a second interpreter
    def test_command_line_exit_code_and_one_line_error(self):
        result = subprocess.run([sys.executable, str(REPO / "fine_tune_t5.py"), "--benchmark", "glue",
                                 "--dataset_name", "cola2", "--output_dir", str(self.out),
                                 "--tokenizer_name_or_path", str(require("t5_spiece"))],
                                cwd=self.dir, capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 2)
        self.assertEqual([line for line in result.stderr.splitlines() if line.startswith("error:")],
                         ["error: unknown task 'cola2' for --benchmark glue; did you mean 'cola'? choices: cola, "
                          "sst2, mrpc, qqp, stsb, mnli, qnli, rte, wnli, ax"])
        self.assertFalse(self.out.exists())


if __name__ == "__main__":
    absltest.main()
