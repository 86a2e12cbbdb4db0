"""config/export_arguments.py: export_t5.py's flags are checked before anything is converted: the model, the probe,
the format and precision, where the export goes and the hub upload, each refusal one line naming the flag."""
from pathlib import Path

from absl.testing import absltest, parameterized

from t5kit.config.export_arguments import EXPORT_FORMATS, QUANTIZATIONS, ExportArguments
from t5kit.errors import UsageError


class ExportFlagsTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        self.model = self.dir / "run"
        self.model.mkdir()

    def export_args(self, **overrides):
        return ExportArguments(**{"model_name_or_path": str(self.model), **overrides})

    def test_defaults_export_float32_ctranslate2_probed_on_16_inputs(self):
        args = self.export_args()
        self.assertEqual((args.format, args.quantization, args.probe_file, args.probe_examples,
                          args.probe_max_new_tokens, args.output_dir), ("ctranslate2", "float32", None, 16, 16, None))
        self.assertEqual(EXPORT_FORMATS, ("ctranslate2",))
        self.assertEqual(QUANTIZATIONS, ("float32", "int8", "int8_float32", "bfloat16"))

    @parameterized.parameters(*QUANTIZATIONS)
    def test_every_quantization_is_accepted(self, quantization):
        self.assertEqual(self.export_args(quantization=quantization).quantization, quantization)

    def test_a_probe_file_that_exists_is_accepted(self):
        probe = self.dir / "probe.txt"
        probe.write_text("a line\n")
        self.assertEqual(self.export_args(probe_file=str(probe)).probe_file, str(probe))

    def test_a_hub_model_needs_an_output_dir_and_a_local_one_does_not(self):
        with self.assertRaisesRegex(UsageError, "^--model_name_or_path google-t5/t5-small is not a local folder: "
                                                "name --output_dir for its export$"):
            ExportArguments(model_name_or_path="google-t5/t5-small")
        args = ExportArguments(model_name_or_path="google-t5/t5-small", output_dir=str(self.dir / "ct2"))
        self.assertEqual(args.output_dir, str(self.dir / "ct2"))

    @parameterized.named_parameters(
        ("no_model", dict(model_name_or_path=None), "^--model_name_or_path is required; see --help$"),
        ("format", dict(format="onnx"), "^--format='onnx' is not a valid choice; choices: ctranslate2$"),
        ("quantization", dict(quantization="int4"), "^--quantization='int4' is not a valid choice"),
        ("probe_examples", dict(probe_examples=0), r"^--probe_examples=0 must be >= 1"),
        ("probe_tokens", dict(probe_max_new_tokens=-1), r"^--probe_max_new_tokens=-1 must be >= 1"),
        ("push_without_repo", dict(push_to_hub=True), r"^--push_to_hub true needs --hub_model_id NAME \(the repo "
                                                      r"is named, never guessed\)$"))
    def test_refused_before_anything_is_converted(self, values, message):
        with self.assertRaisesRegex(UsageError, message):
            self.export_args(**values)

    def test_a_missing_probe_file_is_named(self):
        missing = self.dir / "nope.txt"
        with self.assertRaisesRegex(UsageError, f"^--probe_file {missing} not found; check the path$"):
            self.export_args(probe_file=str(missing))


if __name__ == "__main__":
    absltest.main()
