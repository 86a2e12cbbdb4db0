"""config/finetune_arguments.py: fine_tune_t5.py's data and training flags: the task (a registry task, a mixture,
held-out tasks, a task declared in YAML, the SNI benchmark) and where its rows come from, FLAN's format, LoRA's
settings, the defaults that depend on the benchmark, and the specs the data layer takes, built field by field."""
from pathlib import Path
from types import SimpleNamespace

from absl.testing import absltest, parameterized

from t5kit.config import parsing
from t5kit.config.finetune_arguments import (
    FineTuneDataArguments,
    check_model_to_train,
    parse_custom_task,
    split_names,
)
from t5kit.config.script_flags import FINETUNE_FLAG_CLASSES
from t5kit.errors import UsageError
from t5kit.specs import SNISpec, TaskDataSpec, TaskSelection
from tests.helpers import require, tiny_flags


def data_args(**overrides):
    return FineTuneDataArguments(**{"dataset_name": "rte", "max_source_length": 512, **overrides})


class DataFlagsTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("tasks_and_dataset_name", dict(tasks="glue/rte"), "--tasks replaces --dataset_name"),
        ("no_task", dict(dataset_name=None), "no task: pass --dataset_name"),
        ("zero_temperature", dict(mixture_temperature=0.0), "--mixture_temperature=0.0 must be > 0"),
        ("zero_cap", dict(mixture_cap=0), "--mixture_cap=0 must be >= 1"),
        ("custom_without_files", dict(custom_task={"prefix": "x"}), "--custom_task needs its rows"),
        ("unsupported_file", dict(train_file=__file__), "fine-tuning reads .csv, .tsv, .json, .jsonl files"),
    )
    def test_bad_data_flags(self, overrides, message):
        with self.assertRaisesRegex(UsageError, message):
            data_args(**overrides)

    @parameterized.named_parameters(
        ("negative_few_shot", dict(instruction_templates="flan", few_shot=-1), "--few_shot=-1 must be >= 0"),
        ("options_without_templates", dict(instruction_options=True), "--instruction_options is part of FLAN's"),
        ("held_out_from_local_files", dict(eval_tasks="glue/rte", train_file="TRAIN", validation_file="TRAIN"),
         "--eval_tasks reads its tasks from --data_dir or the hub"),
    )
    def test_bad_instruction_flags(self, overrides, message):
        files = {key: str(require("glue/RTE/dev.tsv")) for key, value in overrides.items() if value == "TRAIN"}
        with self.assertRaisesRegex(UsageError, message):
            data_args(**{**overrides, **files})

    def test_a_folder_that_is_not_one_is_named(self):
        missing = Path(self.create_tempdir().full_path) / "RTE"
        with self.assertRaisesRegex(UsageError, f"^--data_dir {missing} is not a folder; pass e.g. "):
            data_args(data_dir=str(missing))

    def test_local_files_read_one_task_alone(self):
        rows = str(require("glue/RTE/dev.tsv"))
        with self.assertRaisesRegex(UsageError, "^--train_file reads one task's rows from local files; it cannot be "
                                                "combined with --tasks$"):
            data_args(dataset_name=None, tasks="glue/rte,glue/sst2", train_file=rows)
        with self.assertRaisesRegex(UsageError, "^--validation_file reads one task's rows from local files; it cannot "
                                                "be combined with --data_dir$"):
            data_args(validation_file=rows, data_dir=[str(require("glue/RTE"))])

    def test_defaults_follow_the_benchmark(self):
        self.assertEqual(data_args(max_source_length=None).max_source_length, 512)  # T5 fine-tuned with 512
        sni = FineTuneDataArguments(benchmark="sni")
        self.assertEqual((sni.dataset_name, sni.max_source_length), ("sni", 1024))  # nanoT5's: the one task
        mixture = FineTuneDataArguments(benchmark="sni", tasks="glue/rte")
        self.assertEqual((mixture.dataset_name, mixture.max_source_length), (None, 512))

    def test_yaml_lists_and_a_single_folder_become_the_flag_values(self):
        args = data_args(dataset_name=None, tasks=["glue/sst2", "glue/mrpc"], eval_tasks=("glue/rte",),
                         data_dir=str(require("glue")))
        self.assertEqual((args.tasks, args.eval_tasks, args.data_dir),
                         ("glue/sst2,glue/mrpc", "glue/rte", [str(require("glue"))]))

    def test_a_custom_task_given_as_text_is_read_as_yaml(self):
        rows = str(require("glue/RTE/dev.tsv"))
        args = data_args(dataset_name="mood", custom_task="{prefix: 'mood:', labels: {0: sad, 1: happy}}",
                         train_file=rows, validation_file=rows)
        self.assertEqual(args.custom_task, {"prefix": "mood:", "labels": {0: "sad", 1: "happy"}})
        self.assertEqual(parse_custom_task("[1, 2]"), [1, 2])  # the task's own checks say what a task needs
        with self.assertRaisesRegex(UsageError, "^--custom_task is not valid YAML/JSON; pass a mapping like "):
            parse_custom_task("{prefix: [")

    @parameterized.named_parameters(("none", None, ()), ("empty", "", ()), ("one", "glue/rte", ("glue/rte",)),
                                    ("spaces_and_stray_commas", " glue/sst2, ,glue/rte,", ("glue/sst2", "glue/rte")))
    def test_split_names(self, text, expected):
        self.assertEqual(split_names(text), expected)

    def test_the_task_selection_holds_the_task_flags(self):
        args = data_args(dataset_name=None, tasks="glue/sst2, glue/mrpc", eval_tasks="glue/rte",
                         wnli_format="wsc_simple", instruction_templates="flan", instruction_options=True, few_shot=2)
        self.assertEqual(args.task_selection(), TaskSelection(
            benchmark="glue", tasks=("glue/sst2", "glue/mrpc"), eval_tasks=("glue/rte",), wnli_format="wsc_simple",
            instruction_templates="flan", instruction_options=True, few_shot=2))

    def test_the_task_data_holds_the_data_flags_and_the_sni_settings(self):
        folder = str(require("glue/RTE"))
        args = data_args(data_dir=[folder], max_target_length=8, max_train_samples=10, max_eval_samples=5,
                         max_predict_samples=3, leaderboard_files=False, sni_num_pos_examples=1)
        self.assertEqual(args.task_data(cache_dir="/cache"), TaskDataSpec(
            data_dir=(folder,), max_source_length=512, max_target_length=8, max_train_samples=10, max_eval_samples=5,
            max_predict_samples=3, leaderboard_files=False, cache_dir="/cache", sni=SNISpec(num_pos_examples=1)))


class TrainingFlagsTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("merge_without_peft", dict(merge_adapters=True), "--merge_adapters merges LoRA adapters: pass --peft lora"),
        ("rank", dict(peft="lora", lora_r=0), "--lora_r=0 must be >= 1"),
        ("alpha", dict(peft="lora", lora_alpha=0), "--lora_alpha=0.0 must be > 0"),
        ("empty_targets", dict(peft="lora", lora_target_modules=","), "--lora_target_modules names no module"),
        ("peft_choice", dict(peft="qlora"), "--peft='qlora' is not a valid choice; did you mean 'lora'?"))
    def test_bad_lora_flags(self, flags, message):
        with self.assertRaisesRegex(UsageError, message):
            parsing.parse_flags(FINETUNE_FLAG_CLASSES, tiny_flags("/tmp/unused", **flags))

    def test_target_modules_from_yaml_list_and_comma_string(self):
        config = self.create_tempfile("c.yaml", "peft: lora\nlora_target_modules: [q, k, v]\n").full_path
        base = "google-t5/t5-small"  # LoRA adapts an existing model (nothing is loaded here)
        from_yaml = parsing.parse_flags(FINETUNE_FLAG_CLASSES, [config, *tiny_flags("/tmp/unused",
                                                                                    model_name_or_path=base)])[2]
        from_flag = parsing.parse_flags(FINETUNE_FLAG_CLASSES, tiny_flags("/tmp/unused", peft="lora",
                                                                           lora_target_modules="q,k,v",
                                                                           model_name_or_path=base))[2]
        self.assertEqual(from_yaml.lora_target_modules, ["q", "k", "v"])
        self.assertEqual(from_flag.lora_target_modules, ["q", "k", "v"])

    def test_lora_defaults_are_hu_et_al_s(self):
        _, _, training_args = parsing.parse_flags(FINETUNE_FLAG_CLASSES, tiny_flags(
            "/tmp/unused", peft="lora", model_name_or_path="google-t5/t5-small"))
        self.assertEqual((training_args.lora_r, training_args.lora_alpha, training_args.lora_dropout,
                          training_args.lora_target_modules), (8, 16.0, 0.0, ["q", "v"]))

    def test_fine_tuning_defaults_evaluate_each_epoch_and_keep_the_best_by_the_tasks_metric(self):
        _, _, training_args = parsing.parse_flags(FINETUNE_FLAG_CLASSES, tiny_flags(
            "/tmp/unused", eval_strategy=None, save_strategy=None, save_total_limit=None, max_steps=None))
        self.assertEqual((training_args.do_train, training_args.do_eval, training_args.predict_with_generate,
                          training_args.eval_strategy, training_args.save_strategy,
                          training_args.load_best_model_at_end, training_args.save_total_limit,
                          training_args.train_sampling_strategy),
                         (True, True, True, "epoch", "epoch", True, 1, "length_buckets"))
        self.assertTrue(training_args.metric_for_best_model_from_task)  # filled from the task in step 1

    @parameterized.named_parameters(
        ("evaluate_a_random_init", dict(do_train=False, peft=None), "^--do_train false evaluates an existing model"),
        ("adapt_a_random_init", dict(do_train=True, peft="lora"), "^--peft lora adapts an existing model"))
    def test_what_needs_an_existing_model(self, training, message):
        with self.assertRaisesRegex(UsageError, message):
            check_model_to_train(SimpleNamespace(model_name_or_path=None), None, SimpleNamespace(**training))
        self.assertIsNone(check_model_to_train(SimpleNamespace(model_name_or_path="google-t5/t5-small"), None,
                                               SimpleNamespace(**training)))


if __name__ == "__main__":
    absltest.main()
