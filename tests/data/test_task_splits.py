"""data/task_splits.py, reading through task_sources.py, on the real GLUE/SuperGLUE files. (task_sources' readers
and row conversion alone: tests/data/test_task_sources.py; mixtures: tests/data/test_task_mixture.py; the
length-bucket sampler: tests/train/test_task_trainer.py.)"""
import json
import logging

from absl.testing import absltest, parameterized

from t5kit.config.finetune_arguments import FineTuneDataArguments
from t5kit.data import task_splits
from t5kit.data.task_format import get_task_vals
from tests.helpers import T5TokenizerTestCase, require


def data_args(**overrides):
    values = dict(dataset_name="rte", max_source_length=512)
    values.update(overrides)
    return FineTuneDataArguments(**values)


def run_args(do_train=True, do_eval=True, do_predict=False):
    return dict(do_train=do_train, do_eval=do_eval, do_predict=do_predict)


class TaskDataTest(T5TokenizerTestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.create_tempdir().full_path

    def build(self, args, task="rte", split="validation", role="eval", benchmark="glue"):
        plan = task_splits.SplitPlan(get_task_vals(benchmark, task), split, role, task)
        return task_splits.build_task_split(plan, args.task_data(), self.tokenizer)

    @parameterized.named_parameters(
        ("rte", "rte", "RTE", 277), ("sst2", "sst2", "SST-2", 872), ("cola_no_header", "cola", "CoLA", 1043),
        ("mrpc_bom_header", "mrpc", "MRPC", 408), ("stsb", "stsb", "STS-B", 1500), ("wnli", "wnli", "WNLI", 71),
    )
    def test_glue_dev_files_read_completely(self, task, folder, rows):
        split = self.build(data_args(data_dir=[str(require("glue"))]), task=task)
        self.assertEqual((split.stats["rows"], split.stats["malformed"], len(split.inputs)), (rows, 0, rows))
        self.assertTrue(all(split.inputs) and all(split.targets))

    def test_superglue_jsonl_folder(self):
        split = self.build(data_args(data_dir=[str(require("superglue"))]), benchmark="super_glue")
        self.assertLen(split.inputs, 277)
        self.assertTrue(split.inputs[0].startswith("rte hypothesis: "))
        self.assertContainsSubset(set(split.targets), {"entailment", "not_entailment"})

    def test_malformed_rows_are_counted_and_logged(self):
        source = require("glue/RTE/dev.tsv").read_text().splitlines()[:11]  # header + 10 rows
        broken = [*source, "999\tonly two fields", "1000\ta\tb\t", "1001\ta\tb\tentailment\textra"]
        path = f"{self.dir}/dev.tsv"
        with open(path, "w") as handle:
            handle.write("\n".join(broken) + "\n")
        with self.assertLogs("t5kit.data.task_sources", logging.WARNING) as logs:
            split = self.build(data_args(train_file=path, validation_file=path))
        self.assertEqual((split.stats["rows"], split.stats["malformed"], len(split.inputs)), (13, 3, 10))
        self.assertIn("dropped 3 malformed row(s) of 13", logs.output[0])
        self.assertIn("line(s) 12, 13, 14", logs.output[0])

    def test_truncated_inputs_are_counted_with_eos_kept(self):
        split = self.build(data_args(data_dir=[str(require("glue/RTE"))], max_source_length=16,
                                     max_eval_samples=20))
        lengths = [len(ids) for ids in split.dataset["input_ids"]]
        self.assertEqual(split.stats["truncated_inputs"], 20)  # every RTE pair is longer than 16 tokens
        self.assertEqual(set(lengths), {16})
        self.assertTrue(all(ids[-1] == self.tokenizer.eos_token_id for ids in split.dataset["input_ids"]))

    def test_labels_given_as_ids_strings_or_words(self):
        rows = [{"sentence1": "a", "sentence2": "b", "label": label} for label in (0, "1", "entailment", 1)]
        path = f"{self.dir}/rows.jsonl"
        with open(path, "w") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in rows)
        split = self.build(data_args(train_file=path, validation_file=path))
        self.assertEqual(split.targets, ["entailment", "not_entailment", "entailment", "not_entailment"])

    def test_unlabeled_test_rows_keep_the_file_index(self):
        split = self.build(data_args(data_dir=[str(require("glue/RTE"))], max_predict_samples=3), split="test",
                           role="predict")
        self.assertEqual((split.targets, split.indices), ([None] * 3, ["0", "1", "2"]))
        self.assertNotIn("labels", split.dataset.column_names)

    def test_default_target_length_fits_the_longest_label_word(self):
        rte = get_task_vals("glue", "rte")
        longest = max(len(self.tokenizer(word).input_ids) for word in ("entailment", "not_entailment"))
        self.assertEqual(task_splits.default_target_length(rte, self.tokenizer), longest)
        stsb = get_task_vals("glue", "stsb")
        self.assertEqual(task_splits.default_target_length(stsb, self.tokenizer),
                         max(len(ids) for ids in self.tokenizer([f"{i / 5:.1f}" for i in range(26)]).input_ids))


class PlanAndTasksTest(parameterized.TestCase):

    def test_mnli_evaluates_matched_and_mismatched(self):
        tasks = task_splits.resolve_tasks(data_args(dataset_name="mnli").task_selection())
        plans = task_splits.plan_splits(tasks, data_args(dataset_name="mnli").task_data(), **run_args(do_predict=True))
        self.assertEqual([(p.role, p.split, p.key) for p in plans], [
            ("train", "train", "mnli"), ("eval", "validation_matched", "mnli_matched"),
            ("eval", "validation_mismatched", "mnli_mismatched"), ("predict", "test_matched", "mnli_matched"),
            ("predict", "test_mismatched", "mnli_mismatched")])

    def test_same_task_name_in_two_benchmarks_gets_qualified_keys(self):
        args = data_args(dataset_name=None, tasks="glue/rte,super_glue/rte")
        plans = task_splits.plan_splits(task_splits.resolve_tasks(args.task_selection()), args.task_data(),
                                        **run_args(do_train=False))
        self.assertEqual([p.key for p in plans], ["glue_rte", "super_glue_rte"])

    def test_custom_task_from_yaml_text(self):
        spec = "{prefix: 'mood:', text_column_name: text, label_column_name: mood, labels: {0: sad, 1: happy}, " \
               "metric_names: [accuracy]}"
        path = f"{self.create_tempdir().full_path}/rows.jsonl"
        with open(path, "w") as handle:
            handle.write('{"text": "x", "mood": 1}\n')
        (task,) = task_splits.resolve_tasks(data_args(dataset_name="mood", custom_task=spec, train_file=path,
                                                         validation_file=path).task_selection())
        self.assertEqual((task["name"], task["metric_to_optimize"], task["labels"]), ("custom/mood", "accuracy",
                                                                                      {0: "sad", 1: "happy"}))


if __name__ == "__main__":
    absltest.main()
