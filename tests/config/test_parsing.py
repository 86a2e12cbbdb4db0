"""config/parsing.py: YAML merge order, _include, ${T5_DATA_DIR}, command-line overrides, type checks of YAML values,
refusals."""
import dataclasses
import os
import re
from pathlib import Path
from unittest import mock

import yaml
from absl.testing import absltest, parameterized

from t5kit.config import parsing
from t5kit.config.script_flags import FINETUNE_FLAG_CLASSES, PRETRAIN_FLAG_CLASSES
from t5kit.errors import UsageError
from tests.helpers import REPO, require

PRETRAIN, FINETUNE = PRETRAIN_FLAG_CLASSES, FINETUNE_FLAG_CLASSES


@dataclasses.dataclass
class ToyArguments:
    learning_rate: float = dataclasses.field(default=1e-3, metadata={"help": "step size"})
    batch_size: int = dataclasses.field(default=8, metadata={"help": "examples per step"})
    name: str = dataclasses.field(default="run", metadata={"help": "run name"})
    use_bf16: bool = dataclasses.field(default=False, metadata={"help": "bf16 autocast"})
    files: list[str] = dataclasses.field(default=None, metadata={"help": "input files"})
    schedule_kwargs: dict = dataclasses.field(default=None, metadata={"help": "scheduler options"})

    def __post_init__(self):
        if self.batch_size < 1:
            raise UsageError(f"--batch_size={self.batch_size} must be >= 1")


class FlagsTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def write(self, name, content):
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
        return str(path)

    def parse(self, *argv):
        (args,) = parsing.parse_flags((ToyArguments,), list(argv))
        return args, dataclasses.asdict(args)

    def test_defaults_without_config(self):
        args, resolved = self.parse()
        self.assertEqual((args.learning_rate, args.batch_size, args.name), (1e-3, 8, "run"))
        self.assertEqual(resolved["batch_size"], 8)

    def test_files_merge_left_to_right_then_command_line_wins(self):
        a = self.write("a.yaml", {"learning_rate": 0.1, "batch_size": 2, "name": "a"})
        b = self.write("b.yaml", {"batch_size": 4})
        args, _ = self.parse(a, b, "--name=cli")
        self.assertEqual((args.learning_rate, args.batch_size, args.name), (0.1, 4, "cli"))
        args, _ = self.parse(b, a)
        self.assertEqual(args.batch_size, 2)

    def test_yaml_values_are_type_checked_like_command_line_values(self):
        # YAML 1.1 reads 3e-4 as a string; it must still become the float 3e-4.
        args, _ = self.parse(self.write("c.yaml", "learning_rate: 3e-4\nuse_bf16: true\n"))
        self.assertEqual(args.learning_rate, 3e-4)
        self.assertIs(args.use_bf16, True)
        with self.assertRaisesRegex(UsageError, r"d.yaml: learning_rate: expected a number, got 'fast'"):
            self.parse(self.write("d.yaml", "learning_rate: fast\n"))

    def test_single_value_for_a_list_flag_becomes_a_list(self):
        args, _ = self.parse(self.write("one.yaml", "files: corpus.txt\n"))
        self.assertEqual(args.files, ["corpus.txt"])

    def test_nested_mappings_deep_merge(self):
        a = self.write("a.yaml", {"schedule_kwargs": {"power": 2.0, "end": 0.1}})
        b = self.write("b.yaml", {"schedule_kwargs": {"end": 0.0}})
        args, _ = self.parse(a, b)
        self.assertEqual(args.schedule_kwargs, {"power": 2.0, "end": 0.0})

    def test_include_is_relative_to_the_including_file_and_merged_first(self):
        self.write("presets/base.yaml", {"learning_rate": 0.5, "batch_size": 16})
        child = self.write("configs/child.yaml", "_include: [../presets/base.yaml]\nbatch_size: 32\n")
        args, resolved = self.parse(child)
        self.assertEqual((args.learning_rate, args.batch_size), (0.5, 32))
        self.assertNotIn("_include", resolved)

    def test_include_cycle_is_refused(self):
        self.write("x.yaml", "_include: [y.yaml]\n")
        self.write("y.yaml", "_include: [x.yaml]\n")
        with self.assertRaisesRegex(UsageError, r"_include cycle in config files: x.yaml -> y.yaml -> x.yaml"):
            self.parse(str(self.dir / "x.yaml"))

    @parameterized.named_parameters(
        ("list_document", "- learning_rate\n- 1\n", "must be a mapping of flag: value, got a list"),
        ("scalar_document", "just text\n", "must be a mapping of flag: value, got a str"),
        ("broken_yaml", "learning_rate: [1\n", r"bad.yaml is not valid YAML: line 2, column 1: expected ',' or '\]'"),
        ("bad_indent", "a: 1\n b: 2\n",
         "bad.yaml is not valid YAML: line 2, column 3: mapping values are not allowed here"),
    )
    def test_bad_config_file_is_refused(self, content, message):
        with self.assertRaisesRegex(UsageError, message):
            self.parse(self.write("bad.yaml", content))

    def test_missing_config_file(self):
        with self.assertRaisesRegex(UsageError, "config file .*nope.yaml not found"):
            self.parse(str(self.dir / "nope.yaml"))

    def test_unknown_yaml_key_names_the_file_and_suggests(self):
        path = self.write("typo.yaml", {"learning_rat": 0.1})
        with self.assertRaisesRegex(UsageError, rf"unknown key 'learning_rat' in {path}; did you mean 'learning_rate'"):
            self.parse(path)

    def test_unknown_command_line_flag_suggests(self):
        with self.assertRaisesRegex(UsageError, r"unknown flag '--batch_sise' .*did you mean '--batch_size'"):
            self.parse("--batch_sise", "3")

    def test_abbreviations_are_not_guessed(self):
        with self.assertRaisesRegex(UsageError, "unknown flag '--learning'"):
            self.parse("--learning", "0.1")

    def test_positional_that_is_not_yaml(self):
        with self.assertRaisesRegex(UsageError, "'train.txt' is not a YAML config"):
            self.parse("train.txt")

    def test_a_bug_in_a_dataclass_is_not_turned_into_a_usage_error(self):
        @dataclasses.dataclass
        class Buggy:
            value: int = dataclasses.field(default=1, metadata={"help": "a number"})

            def __post_init__(self):
                self.value = self.value + "1"  # our bug, not the user's input

        with self.assertRaises(TypeError):
            parsing.parse_flags((Buggy,), ["--value", "2"])

    def test_dataclass_validation_becomes_usage_error(self):
        with self.assertRaisesRegex(UsageError, "--batch_size=0 must be >= 1"):
            self.parse("--batch_size", "0")

    def test_resolved_flags_round_trip_through_yaml(self):
        a = self.write("a.yaml", {"learning_rate": 0.25, "files": ["x.txt", "y.txt"], "schedule_kwargs": {"p": 1}})
        args, resolved = self.parse(a, "--batch_size", "3", "--use_bf16", "true")
        saved = self.write("resolved/config.yaml", resolved)
        again, resolved_again = self.parse(saved)
        self.assertEqual(again, args)
        self.assertEqual(resolved_again, resolved)

    def tiny_pretrain_yaml(self, extra):
        """A pre-training config that parses (t5-tiny, a real corpus and tokenizer), then `extra`'s keys."""
        config = {"model_size": "t5-tiny", "tokenizer_name_or_path": str(require("t5_spiece")),
                  "train_files": str(require("gutenberg/austen-persuasion.txt")), "use_cpu": True,
                  "output_dir": str(self.dir / "out"), "report_to": "none", "max_steps": 2, "input_length": 64}
        return self.write("tiny.yaml", yaml.safe_dump(config) + extra)

    # Each of these once got past parsing (crashing later, after config.yaml was written, or with a message naming
    # no key); every one must be refused while parsing, naming the file and the key, with what the key takes.
    @parameterized.named_parameters(
        ("list_for_int", PRETRAIN, "max_steps: [1, 2]\n", r"c.yaml: max_steps: expected an integer, got \[1, 2\]"),
        ("mapping_for_float", PRETRAIN, "learning_rate: {a: 1}\n",
         r"c.yaml: learning_rate: expected a number, got \{'a': 1\}"),
        ("int_include", PRETRAIN, "_include: 5\n",
         r"c.yaml: _include: expected a config file name or a list of them, got 5$"),
        ("int_in_include_list", PRETRAIN, "_include: [a.yaml, 5]\n", r"c.yaml: _include: .* got \['a.yaml', 5\]"),
        ("fine_tune_list_for_int", FINETUNE, "max_source_length: [64]\n",
         r"c.yaml: max_source_length: expected an integer, got \[64\]"),
        ("null_for_int", PRETRAIN, "max_steps:\n", r"c.yaml: max_steps: expected an integer, got null"),
        ("bool_for_int", PRETRAIN, "max_steps: true\n", r"c.yaml: max_steps: expected an integer, got true"),
        ("float_for_int", PRETRAIN, "seed: 2.5\n", r"c.yaml: seed: expected an integer, got 2.5"),
        ("word_for_bool", PRETRAIN, "use_cpu: maybe\n", r"c.yaml: use_cpu: expected true or false, got 'maybe'"),
        ("unknown_choice", PRETRAIN, "lr_scheduler_type: bogus\n",
         r"c.yaml: lr_scheduler_type: expected one of 'linear', .*, got 'bogus'"),
        ("mapping_in_list", PRETRAIN, "train_files: [{a: 1}]\n",
         r"c.yaml: train_files: expected a string, or a list of them, got \[\{'a': 1\}\]"),
    )
    def test_yaml_value_of_the_wrong_type_is_refused_naming_file_and_key(self, flag_classes, content, message):
        with self.assertRaisesRegex(UsageError, message):
            parsing.parse_flags(flag_classes, [self.write("c.yaml", content)])

    def test_wrong_type_in_an_included_file_names_that_file(self):
        self.write("presets/base.yaml", "batch_size: [4]\n")
        with self.assertRaisesRegex(UsageError, r"presets/base.yaml: batch_size: expected an integer, got \[4\]"):
            self.parse(self.write("configs/child.yaml", "_include: ../presets/base.yaml\n"))

    def test_int_for_a_list_file_flag_is_a_file_name_as_on_the_command_line(self):
        with self.assertRaisesRegex(UsageError, r"^--train_files: file 5 not found$"):
            parsing.parse_flags(PRETRAIN_FLAG_CLASSES, [self.tiny_pretrain_yaml("train_files: 5\n")])

    @parameterized.named_parameters(
        ("int_for_float", "learning_rate: 1\n", "learning_rate", 1.0),
        ("yaml_string_float", "learning_rate: 3e-4\n", "learning_rate", 3e-4),
        ("list_for_list_flag", "train_files: [CORPUS, CORPUS]\n", "train_files", ["CORPUS", "CORPUS"]),
        ("list_for_report_to", "report_to: [wandb]\n", "report_to", ["wandb"]),
        ("scalar_for_report_to", "report_to: wandb\n", "report_to", ["wandb"]),
        ("mapping_for_dict_field", "lr_scheduler_kwargs: {power: 2}\n", "lr_scheduler_kwargs", {"power": 2}),
        ("choice", "lr_scheduler_type: cosine\n", "lr_scheduler_type", "cosine"),
        ("word_for_bool_with_no_flag", "dataloader_pin_memory: 'no'\n", "dataloader_pin_memory", False),
        ("null_for_optional", "save_total_limit: null\n", "save_total_limit", None),
    )
    def test_yaml_value_accepted_as_on_the_command_line(self, extra, key, expected):
        corpus = str(require("gutenberg/austen-persuasion.txt"))
        parsed = parsing.parse_flags(PRETRAIN_FLAG_CLASSES, [self.tiny_pretrain_yaml(extra.replace("CORPUS", corpus))])
        expected = [corpus if v == "CORPUS" else v for v in expected] if isinstance(expected, list) else expected
        self.assertEqual(next(getattr(flags_of, key) for flags_of in parsed if hasattr(flags_of, key)), expected)


class DataDirTest(parameterized.TestCase):
    """${T5_DATA_DIR} in a config file: the variable, ../shared/data where it is unset; no other ${...}."""

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        self.enter_context(mock.patch.dict(os.environ))
        os.environ.pop("T5_DATA_DIR", None)

    def parse(self, name, content):
        path = self.dir / name
        path.write_text(content)
        (args,) = parsing.parse_flags((ToyArguments,), [str(path)])
        return args

    @parameterized.named_parameters(("unset", None, "../shared/data"), ("empty", "", "../shared/data"),
                                    ("absolute", "/srv/t5", "/srv/t5"), ("relative", "data", "data"))
    def test_expanded_in_string_values_and_list_items(self, value, data_dir):
        if value is not None:
            os.environ["T5_DATA_DIR"] = value
        args = self.parse("c.yaml", "name: ${T5_DATA_DIR}/glue/RTE\nfiles: [a.txt, '${T5_DATA_DIR}/b.txt']\n"
                                    "schedule_kwargs:\n  path: ${T5_DATA_DIR}\n")
        self.assertEqual((args.name, args.files), (f"{data_dir}/glue/RTE", ["a.txt", f"{data_dir}/b.txt"]))
        self.assertEqual(args.schedule_kwargs, {"path": "${T5_DATA_DIR}"})  # mappings are left as they are

    def test_a_list_flag_takes_one_expanded_path(self):
        os.environ["T5_DATA_DIR"] = "/srv/t5"
        self.assertEqual(self.parse("c.yaml", "files: ${T5_DATA_DIR}/x.txt\n").files, ["/srv/t5/x.txt"])

    def test_an_included_file_is_expanded_too(self):
        (self.dir / "base.yaml").write_text("name: ${T5_DATA_DIR}/glue\n")
        self.assertEqual(self.parse("child.yaml", "_include: base.yaml\n").name, "../shared/data/glue")

    @parameterized.named_parameters(("other_variable", "name: ${HOME}/x\n", "name", "HOME"),
                                    ("in_a_list", "files: [a, '${DATA}/b']\n", "files", "DATA"),
                                    ("empty", "name: ${}/x\n", "name", ""))
    def test_any_other_placeholder_is_refused_naming_the_file(self, content, key, name):
        message = (f"{self.dir / 'c.yaml'}: {key}: ${{{name}}} is not expanded; a config file may name only "
                   "${T5_DATA_DIR} (the data folder, ../shared/data where it is unset)")
        with self.assertRaisesRegex(UsageError, f"^{re.escape(message)}$"):
            self.parse("c.yaml", content)

    def test_a_bare_dollar_name_is_left_as_it_is(self):
        os.environ["T5_DATA_DIR"] = "/srv/t5"
        self.assertEqual(self.parse("c.yaml", "name: $T5_DATA_DIR/x\n").name, "$T5_DATA_DIR/x")

    def test_a_shipped_config_reads_the_data_folder(self):
        data = require("glue/RTE").parents[1]
        os.environ["T5_DATA_DIR"] = str(data)
        (_, data_args, _) = parsing.parse_flags(FINETUNE, [str(REPO / "configs/finetune_rte_quickstart.yaml")])
        self.assertEqual(data_args.data_dir, [f"{data}/glue/RTE"])


if __name__ == "__main__":
    absltest.main()
