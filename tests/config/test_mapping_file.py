"""The one reader of settings files (config/mapping_file.py), alone and through its three callers: run configs,
DeepSpeed JSONs and sweep YAMLs refuse a missing file, bad syntax and a non-mapping with the same wording."""
from pathlib import Path

from absl.testing import absltest, parameterized

from t5kit.config import launch_checks, parsing
from t5kit.config.mapping_file import read_mapping
from t5kit.config.pretrain_arguments import parse_denoisers_text
from t5kit.errors import UsageError
from t5kit.sweep import space

# caller -> (reads the file at path, what it names the file, file suffix)
CALLERS = {
    "config": (parsing.load_yaml_config, "config file", ".yaml"),
    "deepspeed": (launch_checks.load_deepspeed_config, "--deepspeed file", ".json"),
    "sweep": (space.load_sweep, "sweep file", ".yaml"),
}


class ReadMappingTest(parameterized.TestCase):

    def write(self, text, name="f.yaml"):
        path = Path(self.create_tempdir().full_path) / name
        path.write_text(text)
        return path

    def test_reads_a_yaml_mapping(self):
        self.assertEqual(read_mapping(self.write("a: 1\nb: [x, y]\n"), "config file", "flag: value"),
                         {"a": 1, "b": ["x", "y"]})

    def test_reads_a_json_object(self):
        path = self.write('{"a": {"b": 2}}', "f.json")
        self.assertEqual(read_mapping(path, "--deepspeed file", "settings", syntax="JSON"), {"a": {"b": 2}})

    @parameterized.named_parameters(("empty", ""), ("comments_only", "# nothing yet\n"))
    def test_an_empty_yaml_file_is_an_empty_mapping(self, text):
        self.assertEqual(read_mapping(self.write(text), "config file", "flag: value"), {})

    def test_an_empty_json_file_is_not_json(self):
        with self.assertRaisesRegex(UsageError, r"f.json is not valid JSON: line 1, column 1: Expecting value$"):
            read_mapping(self.write("", "f.json"), "x file", "settings", syntax="JSON")

    @parameterized.named_parameters(
        ("unclosed_list", "a: [1\n", r"is not valid YAML: line 2, column 1: expected ',' or '\]'"),
        ("tab_indent", "a:\n\tb: 1\n", r"is not valid YAML: line 2, column 1: found character '\\t'"),
    )
    def test_bad_yaml_names_file_line_and_column(self, text, message):
        path = self.write(text)
        with self.assertRaisesRegex(UsageError, f"^config file {path} {message}"):
            read_mapping(path, "config file", "flag: value")

    def test_bad_json_names_file_line_and_column(self):
        path = self.write('{"a": 1,\n "b": }', "f.json")
        message = f"^x file {path} is not valid JSON: line 2, column 7: Expecting value$"
        with self.assertRaisesRegex(UsageError, message):
            read_mapping(path, "x file", "settings", syntax="JSON")

    @parameterized.named_parameters(
        ("yaml_list", "- a\n- b\n", "YAML", "list"), ("yaml_scalar", "just text\n", "YAML", "str"),
        ("json_list", "[1, 2]", "JSON", "list"), ("json_number", "3", "JSON", "int"),
    )
    def test_a_top_level_that_is_no_mapping_is_refused(self, text, syntax, kind):
        path = self.write(text)
        with self.assertRaisesRegex(UsageError, f"^x file {path} must be a mapping of flag: value, got a {kind}$"):
            read_mapping(path, "x file", "flag: value", syntax=syntax)

    def test_a_missing_file_gets_the_hint(self):
        with self.assertRaisesRegex(UsageError, "^x file nope.yaml not found; check the path$"):
            read_mapping("nope.yaml", "x file", "flag: value")

    def test_an_unknown_syntax_is_a_bug_not_bad_input(self):
        with self.assertRaises(ValueError):
            read_mapping(self.write("a: 1"), "x file", "flag: value", syntax="TOML")

    def test_denoisers_text_names_line_and_column_as_files_do(self):
        with self.assertRaisesRegex(UsageError, r"^--denoisers is not valid YAML: line 2, column 1: expected ',' or "
                                                r"'\]', but got '<stream end>'"):
            parse_denoisers_text("[{paradigm: S}\n")

    @parameterized.named_parameters(*[(name, name) for name in CALLERS])
    def test_each_caller_refuses_a_list_with_the_one_wording(self, caller):
        read, what, suffix = CALLERS[caller]
        path = self.write("[1, 2]\n", "f" + suffix)
        with self.assertRaisesRegex(UsageError, f"^{what} {path} must be a mapping of .*, got a list$"):
            read(path)

    @parameterized.named_parameters(*[(name, name) for name in CALLERS])
    def test_each_caller_refuses_bad_syntax_naming_line_and_column(self, caller):
        read, what, suffix = CALLERS[caller]
        path = self.write("{a: [1\n", "f" + suffix)
        syntax = "JSON" if suffix == ".json" else "YAML"
        with self.assertRaisesRegex(UsageError, f"^{what} {path} is not valid {syntax}: line \\d+, column \\d+: "):
            read(path)

    @parameterized.named_parameters(*[(name, name) for name in CALLERS])
    def test_each_caller_refuses_a_missing_file(self, caller):
        read, what, suffix = CALLERS[caller]
        path = Path(self.create_tempdir().full_path) / ("nope" + suffix)
        with self.assertRaisesRegex(UsageError, f"^{what} {path} not found; "):
            read(path)


if __name__ == "__main__":
    absltest.main()
