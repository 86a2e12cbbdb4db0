"""outputs/finetuning_card.py: the model card of a fine-tuning run. On a real tiny run (README.md's metadata parses
back with huggingface_hub, its numbers are metrics.json's, its usage snippet runs with the task prefix, its tasks
recorded for predict_t5.py), and its parts alone: the model-index entries of an evaluated split, each task's input
and target line, a YAML-declared task as build_task_vals takes it back, the data source, the SNI task lists."""
import pytest
import yaml
from absl.testing import absltest, parameterized

from t5kit.data.task_format import build_task_vals, get_task_vals
from t5kit.outputs import finetuning_card
from tests.helpers import CardTestCase, fine_tune, python_block, run_snippet, tiny_flags

FINE_TUNE_SECTIONS = ["Results", "Model", "Data", "Objective", "Training", "Training results", "How to use",
                      "Reproduce", "Framework versions"]
MOOD = {"prefix": "mood:", "text_column_name": "text", "label_column_name": "mood", "labels": {0: "sad", 1: "happy"},
        "metric_names": ["accuracy"]}


@pytest.mark.train_class  # fine-tunes in setUpClass
class FineTuneCardTest(CardTestCase):
    sections = FINE_TUNE_SECTIONS

    @classmethod
    def run_into(cls, out):
        fine_tune(tiny_flags(str(out)))

    def test_model_index_values_are_those_of_metrics_json(self):
        (result,) = self.card.data.eval_results
        self.assertEqual((result.task_type, result.dataset_type, result.dataset_config, result.dataset_split,
                          result.dataset_name, result.metric_type),
                         ("text-classification", "nyu-mll/glue", "rte", "validation", "glue/rte", "accuracy"))
        self.assertEqual(result.metric_value, self.metrics["per_task_metrics"]["rte"]["accuracy"])
        self.assertEqual(result.metric_value, self.metrics["eval_accuracy"])
        self.assertEqual(self.card.data.datasets, ["nyu-mll/glue"])

    def test_the_body_shows_the_same_numbers(self):
        rte = self.metrics["per_task_metrics"]["rte"]
        self.assertIn(f"| glue/rte | validation | accuracy | {rte['accuracy']:.4f} |", self.text)
        self.assertIn(f"| glue/rte | validation | invalid_rate | {rte['invalid_rate']:.4f} |", self.text)
        stats = self.metrics["data"]["rte/validation"]
        self.assertIn(f"| rte/validation | {stats['rows']} | {stats['used']} | {stats['malformed']} | "
                      f"{stats['truncated_inputs']} |", self.text)
        self.assertIn(f"| parameters | {self.metrics_parameters():,} (1.07M) |", self.text)

    def metrics_parameters(self):
        return yaml.safe_load((self.out / "config.yaml").read_text())["derived"]["parameters"]

    def test_the_task_is_recorded_for_predict(self):
        section = self.card.data.to_dict()["t5kit"]
        self.assertEqual((section["script"], section["tasks"], section["custom_tasks"], section["max_source_length"],
                          section["label_scoring"]),  # how each evaluated task was predicted
                         ("fine_tune_t5.py", ["glue/rte"], {}, 64, {"glue/rte": "generate"}))

    def test_the_usage_snippet_runs_the_generate_call_with_the_task_prefix(self):
        code = python_block(self.text)
        self.assertIn("inputs = tokenizer(['rte sentence1: ", code)
        self.assertIn("outputs = model.generate(**inputs, max_new_tokens=", code)
        printed = run_snippet(code)
        self.assertTrue(printed.startswith("[") and printed.rstrip().endswith("]"), printed)

    def test_reproduce_names_the_command_and_the_run_record(self):
        self.assertIn(f"python fine_tune_t5.py --output_dir {self.out} --model_size t5-tiny", self.text)
        self.assertIn(f"python fine_tune_t5.py {self.out}/config.yaml --output_dir {self.out}_rerun", self.text)
        self.assertIn("- `glue/rte` (classification): input `rte sentence1: ... sentence2: ...`, target "
                      "`entailment`, `not_entailment`", self.text)


class CardPartsTest(parameterized.TestCase):

    def test_model_index_entries_are_the_tasks_metrics_exactly(self):
        metrics = {"f1": 0.8125, "accuracy": 0.75, "combined_score": 0.78125, "loss": 1.5, "invalid_rate": 0.0}
        results = finetuning_card.task_eval_results(get_task_vals("glue", "mrpc"), "validation", metrics)
        self.assertEqual([(r.metric_type, r.metric_value) for r in results],
                         [("f1", 0.8125), ("accuracy", 0.75), ("combined_score", 0.78125)])  # not loss nor rates
        self.assertEqual({(r.task_type, r.task_name, r.dataset_type, r.dataset_config, r.dataset_name,
                           r.dataset_split) for r in results},
                         {("text-classification", "Text Classification", "nyu-mll/glue", "mrpc", "glue/mrpc",
                           "validation")})

    def test_model_index_task_types_follow_the_benchmark_and_a_custom_task_is_its_own_dataset(self):
        (summary,) = finetuning_card.task_eval_results(get_task_vals("summarization", "cnn_dailymail"), "validation",
                                                       {"rougeL": 0.2})
        self.assertEqual((summary.task_type, summary.dataset_type, summary.dataset_config),
                         ("summarization", "abisee/cnn_dailymail", "3.0.0"))
        (mood,) = finetuning_card.task_eval_results(build_task_vals(dict(MOOD), name="custom/mood"), "validation",
                                                    {"accuracy": 0.5})
        self.assertEqual((mood.task_type, mood.dataset_type, mood.dataset_config, mood.dataset_name),
                         ("text-classification", "custom", None, "custom/mood"))

    def test_a_custom_task_goes_into_the_card_as_build_task_vals_takes_it(self):
        task_vals = build_task_vals(dict(MOOD), name="custom/mood")
        spec = finetuning_card.custom_task_spec(task_vals)
        self.assertEqual(spec, {**MOOD, "task_type": "classification", "metric_to_optimize": "accuracy"})
        self.assertEqual(yaml.safe_load(yaml.safe_dump(spec)), spec)  # plain YAML: lists, not tuples
        rebuilt = build_task_vals(spec, name="custom/mood")
        self.assertEqual({key: rebuilt[key] for key in spec}, {key: task_vals[key] for key in spec})

    @parameterized.named_parameters(
        ("classification", ("glue", "rte"), {}, "- `glue/rte` (classification): input `rte sentence1: ... sentence2: "
                                                "...`, target `entailment`, `not_entailment`"),
        ("one_column", ("glue", "sst2"), {}, "- `glue/sst2` (classification): input `sst2 sentence: ...`, target "
                                             "`negative`, `positive`"),
        ("held_out", ("glue", "rte"), {"held_out": True}, "- `glue/rte` (classification, held out: evaluated, never "
                                                          "trained on): input `rte sentence1: ... sentence2: ...`"),
        ("regression", ("glue", "stsb"), {}, "- `glue/stsb` (regression): input `stsb sentence1: ... sentence2: ...`, "
                                             "target the text of `label`"),
        ("generation", ("summarization", "cnn_dailymail"), {}, "- `summarization/cnn_dailymail` (generation): input "
                                                               "`summarize: ...`, target the text of `highlights`"),
        ("row_options", ("super_glue", "record"), {"row_options": True}, "- `super_glue/record` (qa): input `record "
                                                                         "query: passage: ... query: ... entities: "
                                                                         "...`, target the right one of the row's "
                                                                         "own options"))
    def test_each_task_gets_its_input_and_target_line(self, name, extra, line):
        self.assertStartsWith(finetuning_card.task_line({**get_task_vals(*name), **extra}), line)

    def test_a_task_without_a_prefix_shows_its_columns_alone(self):
        task_vals = build_task_vals({**MOOD, "prefix": "", "text_column_name": ["q", "c"]})
        self.assertEqual(finetuning_card.input_template(task_vals), "q: ... c: ...")

    @parameterized.named_parameters(
        ("files", {"train_file": "/data/mood/train.jsonl", "validation_file": "/data/dev.jsonl"},
         "`train.jsonl`, `dev.jsonl`"),
        ("folders", {"data_dir": ["../shared/data/glue", "../shared/data/superglue"]},
         "the official files in `../shared/data/glue`, `../shared/data/superglue`"),
        ("hub", {}, "the hub datasets above"))
    def test_the_data_source(self, record, expected):
        self.assertEqual(finetuning_card.source_of(record), expected)

    def test_the_scoring_sentence_names_the_tasks_ranked_by_each_rows_options(self):
        scoring = {"super_glue/wic": "rank", "super_glue/copa": "rank", "glue/rte": "generate"}
        text = finetuning_card.scoring_sentence(scoring, None, ["super_glue/copa", "super_glue/record"])
        self.assertStartsWith(text, "`super_glue/wic`, `super_glue/copa`: predicted by ranking the label words "
                                    "(`super_glue/copa`: each row's own options), never invalid (--label_scoring "
                                    "unset: held-out tasks in FLAN's templates are ranked, as FLAN scores them). "
                                    "Other tasks: predictions are generated")
        self.assertEqual(finetuning_card.scoring_sentence({"super_glue/wic": "rank"}, "rank"),
                         "`super_glue/wic`: predicted by ranking the label words, never invalid (--label_scoring "
                         "rank).")

    def test_sni_splits_name_their_tasks_then_count_the_rest(self):
        summary = {"data": {"sni/train": {"tasks": [f"task{i}" for i in range(23)]}, "sni/test": {"tasks": ["a"]},
                            "rte/validation": {"rows": 3, "tasks": ["not_sni"]}}}
        lines = finetuning_card.sni_objective(get_task_vals("sni", "sni"), summary).splitlines()
        self.assertStartsWith(lines[0], "- `sni/sni`: Super-NaturalInstructions in the Tk-Instruct format")
        shown = ", ".join(f"`task{i}`" for i in range(finetuning_card.SNI_TASKS_SHOWN))
        self.assertEqual(lines[1:], [f"  - train tasks (23): {shown} and 3 more", "  - test tasks (1): `a`"])


del CardTestCase  # a base with no run of its own: pytest must not collect it

if __name__ == "__main__":
    absltest.main()
