"""Spec of data/sni.py: Super-NaturalInstructions read from the official layout and put in the Tk-Instruct format
exactly as nanoT5 does, on the real (trimmed) task files of tests/fixtures/natural_instructions; the checkout
checks; the English track; the instance caps; the reference nanoT5 scores against."""
import json
import random
import shutil
import string
from pathlib import Path

from absl.testing import absltest, parameterized

from t5kit.data import sni
from t5kit.data.task_splits import SplitPlan
from t5kit.errors import UsageError
from t5kit.specs import SNISpec, TaskDataSpec
from tests.helpers import REPO, T5TokenizerTestCase

FIXTURE = REPO / "tests" / "fixtures" / "natural_instructions"
TEST_TASKS = ("task1159_bard_analogical_reasoning_containers", "task1388_cb_entailment")
TRAIN_TASKS = ("task1146_country_capital", "task1331_reverse_array")


def nanot5_sources(batch, tokenizer, max_source_length, add_task_name=False, add_task_definition=True,
                   num_pos_examples=0, num_neg_examples=0, add_explanation=False):
    """The input texts of PiotrNawrot/nanoT5 nanoT5/utils/copied_utils.py @ 1375b38 (unchanged since 73b2e63),
    DataCollatorForNI.__call__ lines 400-574 ("sources = []" .. the truncation by decode), transcribed for
    tk_instruct=False (its lines 402-450 pick a random encoding instead); `batch` holds ni_dataset.py examples
    ({"Task", "Definition", "Positive Examples", "Negative Examples", "Instance"})."""
    sources = []
    for instance in batch:
        task_input = ""
        # add the input first.
        task_input += "Now complete the following example -\n"
        task_input += f"Input: {instance['Instance']['input'].strip()}"
        if task_input[-1] not in string.punctuation:
            task_input += "."
        task_input += "\n"
        task_input += "Output: "

        task_name = ""
        if add_task_name:
            task_name += instance["Task"] + ". "

        definition = ""
        if add_task_definition:
            if isinstance(instance["Definition"], list):
                definition = (
                    "Definition: " + instance["Definition"][0].strip()
                )
            else:
                definition = "Definition: " + instance["Definition"].strip()
            if definition[-1] not in string.punctuation:
                definition += "."
            definition += "\n\n"

        # try to add positive examples.
        pos_examples = []
        for idx, pos_example in enumerate(
            instance["Positive Examples"][:num_pos_examples]
        ):
            pos_example_str = f" Positive Example {idx+1} -\n"
            pos_example_str += f"Input: {pos_example['input'].strip()}"
            if pos_example_str[-1] not in string.punctuation:
                pos_example_str += "."
            pos_example_str += "\n"
            pos_example_str += f" Output: {pos_example['output'].strip()}"
            if pos_example_str[-1] not in string.punctuation:
                pos_example_str += "."
            pos_example_str += "\n"
            if add_explanation and "explanation" in pos_example:
                pos_example_str += (
                    f" Explanation: {pos_example['explanation'].strip()}"
                )
                if pos_example_str[-1] not in string.punctuation:
                    pos_example_str += "."
                pos_example_str += "\n"
            pos_example_str += "\n"
            if (
                len(
                    tokenizer(
                        definition
                        + " ".join(pos_examples)
                        + pos_example_str
                        + task_input
                    )["input_ids"]
                )
                <= max_source_length
            ):
                pos_examples.append(pos_example_str)
            else:
                break

        # try to add negative examples.
        neg_examples = []
        for idx, neg_example in enumerate(
            instance["Negative Examples"][:num_neg_examples]
        ):
            neg_example_str = f" Negative Example {idx+1} -\n"
            neg_example_str += f"Input: {neg_example['input'].strip()}"
            if neg_example_str[-1] not in string.punctuation:
                neg_example_str += "."
            neg_example_str += "\n"
            neg_example_str += f" Output: {neg_example['output'].strip()}"
            if neg_example_str[-1] not in string.punctuation:
                neg_example_str += "."
            neg_example_str += "\n"
            if add_explanation and "explanation" in neg_example:
                neg_example_str += (
                    f" Explanation: {neg_example['explanation'].strip()}"
                )
                if neg_example_str[-1] not in string.punctuation:
                    neg_example_str += "."
                neg_example_str += "\n"
            neg_example_str += "\n"
            if (
                len(
                    tokenizer(
                        definition
                        + " ".join(pos_examples)
                        + " ".join(neg_examples)
                        + neg_example_str
                        + task_input
                    )["input_ids"]
                )
                <= max_source_length
            ):
                neg_examples.append(neg_example_str)
            else:
                break

        source = (
            task_name
            + definition
            + "".join(pos_examples)
            + "".join(neg_examples)
            + task_input
        )
        tokenized_source = tokenizer(source)["input_ids"]
        if len(tokenized_source) <= max_source_length:
            sources.append(source)
        else:
            sources.append(
                tokenizer.decode(
                    tokenized_source[: max_source_length],
                    skip_special_tokens=True,
                )
            )
    return sources


def nanot5_examples(task_name):
    """nanoT5/utils/ni_dataset.py @ 1375b38 `_generate_examples` (lines 144-172) for one task, without the test
    split's [:100] and the shuffle and cap (lines 162-167): the task file's fields plus "Task", one example per
    instance."""
    task_data = json.loads((FIXTURE / "tasks" / f"{task_name}.json").read_text(encoding="utf-8"))
    task_data["Task"] = task_name
    if "Instruction Source" in task_data:
        task_data.pop("Instruction Source")
    all_instances = task_data.pop("Instances")
    examples = []
    for instance in all_instances:
        example = task_data.copy()
        example["id"] = instance["id"]
        example["Instance"] = instance
        examples.append(example)
    return examples


def sni_flags(data_dir=FIXTURE, max_source_length=1024, **overrides):
    """The data spec read_sni_split reads: the --sni_* defaults (SNISpec), a checkout, --max_source_length; sni_*
    overrides set the SNI settings, the others the spec's own fields."""
    sni_settings = {name.removeprefix("sni_"): value for name, value in overrides.items() if name.startswith("sni_")}
    others = {name: value for name, value in overrides.items() if not name.startswith("sni_")}
    return TaskDataSpec(data_dir=(str(data_dir),) if data_dir else (), max_source_length=max_source_length,
                        sni=SNISpec(**sni_settings), **others)


def plan(split):
    return SplitPlan({}, split, "train" if split == "train" else "eval", "sni")


class TkInstructFormatTest(T5TokenizerTestCase):

    @parameterized.named_parameters(
        ("nanot5_defaults", 1024, dict(num_pos_examples=2)),
        ("task_name_negatives_explanations", 1024,
         dict(add_task_name=True, num_pos_examples=3, num_neg_examples=2, add_explanation=True)),
        ("no_definition", 1024, dict(add_task_definition=False, num_pos_examples=2)),
        ("examples_dropped_when_they_do_not_fit", 96, dict(num_pos_examples=3, num_neg_examples=2)),
        ("inputs_cut_by_decoding", 40, dict(num_pos_examples=2)),
    )
    def test_inputs_equal_nanot5_on_every_fixture_instance(self, max_source_length, settings):
        flags = sni_flags(max_source_length=max_source_length,
                          **{f"sni_{name}": value for name, value in settings.items()})
        for task_name in (*TRAIN_TASKS, *TEST_TASKS):
            batch = nanot5_examples(task_name)
            expected = nanot5_sources(batch, self.tokenizer, max_source_length, **settings)
            task = sni.load_task(FIXTURE / "tasks" / f"{task_name}.json")
            ours = [sni.tk_instruct_input(task, task_name, example["Instance"], self.tokenizer, max_source_length,
                                          flags.sni)[0] for example in batch]
            self.assertEqual(ours, expected, task_name)

    def test_default_input_of_a_real_instance(self):
        """The default format written out once (docs/data.md shows it): definition, 2 positive examples, the
        instance; a definition without final punctuation gets a period."""
        task = sni.load_task(FIXTURE / "tasks" / "task1146_country_capital.json")
        text, cut = sni.tk_instruct_input(task, "task1146_country_capital", task["Instances"][0], self.tokenizer,
                                          1024, sni_flags().sni)
        self.assertFalse(cut)
        self.assertEqual(text, (
            "Definition: In this task, you are given a country name and you need to return the capital city of the "
            "given country.\n\n"
            " Positive Example 1 -\nInput: United States.\n Output: Washington.\n\n"
            " Positive Example 2 -\nInput: India.\n Output: New Delhi.\n\n"
            "Now complete the following example -\nInput: Afghanistan.\nOutput: "))


class ReadSplitTest(T5TokenizerTestCase):

    def test_test_split_reads_every_instance_with_all_its_references(self):
        examples = sni.read_sni_split(plan("test"), sni_flags(), self.tokenizer, seed=0)
        self.assertEqual(examples.stats["tasks"], list(TEST_TASKS))
        instances = {instance["id"]: instance for name in TEST_TASKS
                     for instance in sni.load_task(FIXTURE / "tasks" / f"{name}.json")["Instances"]}
        self.assertCountEqual([row["id"] for row in examples.meta], instances)  # 11, all under the 100 cap
        for row, target in zip(examples.meta, examples.targets):
            self.assertEqual(row["references"], instances[row["id"]]["output"])
            self.assertIn(target, row["references"])
        self.assertEqual({row["category"] for row in examples.meta}, {"Word Analogy", "Textual Entailment"})

    def test_caps_and_draws_depend_on_the_seed_alone(self):
        flags = sni_flags(sni_max_num_instances_per_task=3)
        first = sni.read_sni_split(plan("train"), flags, self.tokenizer, seed=1)
        again = sni.read_sni_split(plan("train"), flags, self.tokenizer, seed=1)
        other = sni.read_sni_split(plan("train"), flags, self.tokenizer, seed=2)
        self.assertEqual(first.meta, again.meta)
        self.assertEqual(first.inputs, again.inputs)
        self.assertEqual([row["task"] for row in first.meta], [TRAIN_TASKS[0]] * 3 + [TRAIN_TASKS[1]] * 3)
        self.assertNotEqual([row["id"] for row in first.meta], [row["id"] for row in other.meta])

    def test_the_reference_draw_is_random_choice_seeded_per_task(self):
        """nanoT5's DataCollatorForNI draws `random.choice(output)` from the global state of its DataLoader workers,
        at every evaluation: a draw no seed of its reproduces. Ours is the same uniform choice, drawn once from
        --seed and the task's name: the same with the same seed, another with another, and a task's draw is its own
        whatever other tasks its split file lists."""
        def drawn(seed, data_dir=FIXTURE):
            examples = sni.read_sni_split(plan("test"), sni_flags(data_dir, max_source_length=64), self.tokenizer, seed)
            return {row["id"]: target for row, target in zip(examples.meta, examples.targets)
                    if row["task"] == TEST_TASKS[0] and len(row["references"]) > 1}
        self.assertLen(drawn(0), 2)  # the fixture's two instances with two outputs
        self.assertEqual(drawn(0), drawn(0))
        by_seed = [drawn(seed) for seed in range(12)]
        instances = {row["id"]: row["output"] for row in
                     sni.load_task(FIXTURE / "tasks" / f"{TEST_TASKS[0]}.json")["Instances"]}
        for instance in by_seed[0]:  # each output of each instance drawn by some seed
            self.assertCountEqual({draws[instance] for draws in by_seed}, instances[instance])
        alone = Path(self.create_tempdir().full_path)
        shutil.copytree(FIXTURE, alone, dirs_exist_ok=True)
        (alone / "splits" / "default" / "test_tasks.txt").write_text(TEST_TASKS[0] + "\n")
        self.assertEqual([drawn(seed, alone) for seed in range(12)], by_seed)

    def test_select_instances_keeps_the_test_splits_first_100(self):
        instances = [{"id": str(i)} for i in range(150)]
        test = sni.select_instances(instances, "test", 100, random.Random(0))
        self.assertCountEqual([row["id"] for row in test], [str(i) for i in range(100)])
        self.assertEqual(len(sni.select_instances(instances, "train", 100, random.Random(0))), 100)
        self.assertEqual(len(sni.select_instances(instances, "train", -1, random.Random(0))), 150)

    @parameterized.named_parameters(
        ("spanish_output", "Output_language", ["Spanish"], False),
        ("spanish_input", "Input_language", ["Spanish"], False),
        ("two_input_languages", "Input_language", ["English", "Spanish"], False),
        # splits/README.md: "both task input and task output are in English"; the instructions' language is no part
        ("spanish_instructions", "Instruction_language", ["Spanish"], True),
        ("english_listed_twice", "Input_language", ["English", "English"], True),  # split_tasks.py: a set of them
        ("lower_case", "Output_language", ["english"], False),  # with Input_language "English": two names
    )
    def test_the_english_track_is_english_input_and_output(self, field, languages, kept):
        checkout = Path(self.create_tempdir().full_path)
        shutil.copytree(FIXTURE, checkout, dirs_exist_ok=True)
        path = checkout / "tasks" / "task1388_cb_entailment.json"
        task = json.loads(path.read_text())
        task[field] = languages
        path.write_text(json.dumps(task))
        english = sni.read_sni_split(plan("test"), sni_flags(checkout), self.tokenizer, seed=0)
        self.assertEqual(english.stats["tasks"], list(TEST_TASKS) if kept else [TEST_TASKS[0]])
        self.assertEqual(english.stats["non_english_tasks"], 0 if kept else 1)
        every = sni.read_sni_split(plan("test"), sni_flags(checkout, sni_english_only=False), self.tokenizer, 0)
        self.assertEqual(every.stats["tasks"], list(TEST_TASKS))

    @parameterized.named_parameters(
        ("english", ["English"], ["English"]), ("twice", ["English", "English"], ["English"]),
        ("lower_case", ["english"], ["english"]), ("two_spellings", ["English"], ["english"]),
        ("spanish_output", ["English"], ["Spanish"]), ("bilingual", ["English", "Spanish"], ["English"]),
        ("none", [], []), ("output_only", [], ["English"]))
    def test_english_is_split_tasks_rule(self, inputs, outputs):
        """natural-instructions src/split_tasks.py @ b00871c (the script that wrote splits/default), its task loop:
        `languages = set(task_info["Input_language"] + task_info["Output_language"])`, non-English unless
        `len(languages) == 1 and languages.pop().lower() == "english"`."""
        languages = set(inputs + outputs)
        official = len(languages) == 1 and languages.pop().lower() == "english"
        self.assertEqual(sni.is_english({"Input_language": inputs, "Output_language": outputs}), official)

    def test_the_fixtures_split_files_are_english_track_tasks(self):
        """The fixture's split files list 2 test and 2 training tasks of the official splits/default, every one
        English in and out: the English track keeps all of them."""
        for split, names in (("test", TEST_TASKS), ("train", TRAIN_TASKS)):
            self.assertEqual(sni.split_task_names(sni_flags(), split), list(names))
            examples = sni.read_sni_split(plan(split), sni_flags(), self.tokenizer, seed=0)
            self.assertEqual((examples.stats["tasks"], examples.stats["non_english_tasks"]), (list(names), 0))


def nanot5_references(tokenizer, labels, max_target_length):
    """What nanoT5's predict() scores against: DataCollatorForNI.__call__ (copied_utils.py @ 1375b38 lines 588-602,
    the drawn outputs `labels` tokenized, the padding masked with -100), then train_utils.py predict's `decode`
    (lines 129-135) of batch["labels"]. The collator's padding arguments are nanoT5's (model_utils.py
    get_data_collator: padding="longest", pad_to_multiple_of=8, label_pad_token_id=-100)."""
    labels = tokenizer(labels, max_length=max_target_length, padding="longest", return_tensors="pt", truncation=True,
                       pad_to_multiple_of=8)
    label_mask = labels["attention_mask"].bool()
    preds = labels["input_ids"].masked_fill(~label_mask, -100)
    preds[preds == -100] = tokenizer.pad_token_id
    preds = tokenizer.batch_decode(preds, skip_special_tokens=True, clean_up_tokenization_spaces=True)
    preds = [pred.strip() for pred in preds]
    return preds


class NanoT5ReferenceTest(T5TokenizerTestCase):
    """The reference --sni_metric nanot5 scores against equals nanoT5's own, on every output of the fixture."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.outputs = [output for name in (*TRAIN_TASKS, *TEST_TASKS)
                       for instance in sni.load_task(FIXTURE / "tasks" / f"{name}.json")["Instances"]
                       for output in instance["output"]]

    # multiples of 8: the collator pads to one, and transformers refuses a cut that is not (nanoT5's is 128)
    @parameterized.named_parameters(("nanot5s_128", 128), ("cut_at_16", 16), ("cut_at_8", 8))
    def test_equals_nanot5s_collator_and_decode(self, max_target_length):
        ours = [sni.nanot5_reference(self.tokenizer, output, max_target_length) for output in self.outputs]
        self.assertEqual(ours, nanot5_references(self.tokenizer, self.outputs, max_target_length))

    def test_a_reversed_array_cut_to_16_tokens(self):
        """task1331's first output holds 49 tokens with EOS: 15 fit before EOS at 16 ("▁[", "33", ",", "▁47", ",",
        "▁", "114", ",", "▁26", "8,", "▁12", "8,", "▁99", ",", "▁"), decoded and stripped."""
        output = "[33, 47, 114, 268, 128, 99, 172, 121, 239, 231, 40, 145, 28, 44, 31, 250, 84, 81, 280, 96]"
        self.assertIn(output, self.outputs)
        self.assertEqual(sni.nanot5_reference(self.tokenizer, output, 16), "[33, 47, 114, 268, 128, 99,")
        self.assertEqual(sni.nanot5_reference(self.tokenizer, output, 128), output)

    def test_spaces_are_cleaned_up_as_transformers_does(self):
        texts = [*self.outputs, "I do n't know , he said . Is n't it ? Yes ! We 're , they 've , I 'm"]
        for text in texts:
            self.assertEqual(sni.clean_up_tokenization(text), self.tokenizer.clean_up_tokenization(text))
            ids = self.tokenizer(text).input_ids
            self.assertEqual(sni.nanot5_text(self.tokenizer.decode(ids, skip_special_tokens=True)),
                             self.tokenizer.decode(ids, skip_special_tokens=True,
                                                   clean_up_tokenization_spaces=True).strip())
        self.assertEqual(sni.nanot5_text(" I do n't know , he said . "), "I don't know, he said.")


class CheckoutTest(parameterized.TestCase):

    def checkout(self):
        folder = Path(self.create_tempdir().full_path)
        shutil.copytree(FIXTURE, folder, dirs_exist_ok=True)
        return folder

    def test_the_fixture_is_a_checkout(self):
        sni.check_checkout(sni_flags(), ["train", "test"])

    def test_a_folder_without_tasks_is_refused(self):
        folder = self.checkout()
        shutil.rmtree(folder / "tasks")
        with self.assertRaisesRegex(UsageError, r"is not a natural-instructions checkout: .*tasks/ is missing"):
            sni.check_checkout(sni_flags(folder), ["train", "test"])

    def test_a_missing_split_file_is_named(self):
        folder = self.checkout()
        (folder / "splits" / "default" / "test_tasks.txt").unlink()
        with self.assertRaisesRegex(UsageError, r"the split file .*test_tasks.txt is missing"):
            sni.check_checkout(sni_flags(folder), ["train", "test"])
        sni.check_checkout(sni_flags(folder), ["train"])  # a training-only run does not need it

    def test_a_task_without_its_file_is_named_with_its_line(self):
        folder = self.checkout()
        with open(folder / "splits" / "default" / "train_tasks.txt", "a") as handle:
            handle.write("task9999_missing\n")
        with self.assertRaisesRegex(UsageError, r"train_tasks.txt line 3 names task task9999_missing, which has no "
                                                r"task file .*task9999_missing.json"):
            sni.check_checkout(sni_flags(folder), ["train"])

    def test_a_run_without_a_checkout_or_with_row_files_is_refused(self):
        with self.assertRaisesRegex(UsageError, r"reads a natural-instructions checkout: pass --data_dir"):
            sni.check_checkout(sni_flags(data_dir=None), ["test"])
        with self.assertRaisesRegex(UsageError, r"not from --train_file"):
            sni.check_checkout(sni_flags(train_file="rows.jsonl"), ["test"])

    @parameterized.named_parameters(
        ("not_json", "{\"Definition\": [", r"task1146_country_capital.json is not valid JSON"),
        ("not_a_task", "{\"Definition\": [\"Reverse.\"]}", r"is no natural-instructions task file: it lacks "
                                                           r"Positive Examples, Negative Examples, Instances"),
    )
    def test_a_broken_task_file_is_named(self, text, message):
        folder = self.checkout()
        (folder / "tasks" / "task1146_country_capital.json").write_text(text)
        with self.assertRaisesRegex(UsageError, message):
            sni.read_sni_split(plan("train"), sni_flags(folder), tokenizer=None, seed=0)

    def test_another_split_folder(self):
        folder = self.checkout()
        (folder / "splits" / "mine").mkdir()
        (folder / "splits" / "mine" / "train_tasks.txt").write_text("task1331_reverse_array\n")
        flags = sni_flags(folder, sni_split_dir=str(folder / "splits" / "mine"))
        sni.check_checkout(flags, ["train"])
        self.assertEqual(sni.split_task_names(flags, "train"), ["task1331_reverse_array"])


if __name__ == "__main__":
    absltest.main()
