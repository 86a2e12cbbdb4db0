"""config/predict_arguments.py: predict_t5.py's flags are checked before the model is loaded: the input file (its
existence, type and content), the output file (its type, that it is no folder, not overwritten unless asked, and
creatable), generation and the backend's own flags, each refusal one line naming the flag."""
from pathlib import Path

from absl.testing import absltest, parameterized

from t5kit.config.predict_arguments import (
    BACKENDS,
    INPUT_SUFFIXES,
    PredictArguments,
    check_input_file,
    check_output_file,
)
from t5kit.errors import UsageError


class PredictFlagsTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        self.input = self.dir / "in.txt"
        self.input.write_text("a line\n")

    def predict_args(self, **overrides):
        return PredictArguments(**{"model_name_or_path": str(self.dir / "model"), "input_file": str(self.input),
                                   "output_file": str(self.dir / "out.jsonl"), "use_cpu": True, "bf16": False,
                                   **overrides})

    def test_defaults_greedy_torch_batches_of_32_tokenizer_of_the_model(self):
        args = self.predict_args()
        self.assertEqual((args.num_beams, args.batch_size, args.backend, args.compute_type, args.threads,
                          args.label_scoring, args.tokenizer_name_or_path),
                         (1, 32, "torch", "default", None, "generate", str(self.dir / "model")))
        self.assertEqual(BACKENDS, ("torch", "ctranslate2"))

    @parameterized.parameters("model_name_or_path", "input_file", "output_file")
    def test_each_required_flag_is_named(self, flag):
        with self.assertRaisesRegex(UsageError, f"^--{flag} is required; see --help$"):
            self.predict_args(**{flag: None})

    @parameterized.named_parameters(
        ("beams_with_ranking", dict(label_scoring="rank", num_beams=2),
         "^--num_beams applies to generation; --label_scoring rank scores every label word$"),
        ("no_beams", dict(num_beams=0), "^--num_beams=0 must be >= 1"),
        ("no_batch", dict(batch_size=0), "^--batch_size=0 must be >= 1"),
        ("no_new_tokens", dict(max_new_tokens=0), "^--max_new_tokens=0 must be >= 1"),
        ("compute_type_on_torch", dict(compute_type="int8"), "^--compute_type and --threads apply to --backend "
                                                             "ctranslate2; the torch backend takes --bf16 and "
                                                             "--use_cpu$"),
        ("threads_on_torch", dict(threads=2), "^--compute_type and --threads apply to --backend ctranslate2"),
        ("no_threads", dict(backend="ctranslate2", threads=0), "^--threads=0 must be >= 1"),
        ("backend", dict(backend="onnx"), "^--backend='onnx' is not a valid choice; choices: torch, ctranslate2$"))
    def test_refusals_name_the_flag(self, values, message):
        with self.assertRaisesRegex(UsageError, message):
            self.predict_args(**values)

    def test_the_ctranslate2_backend_takes_its_own_flags(self):
        args = self.predict_args(backend="ctranslate2", compute_type="int8", threads=2)
        self.assertEqual((args.backend, args.compute_type, args.threads), ("ctranslate2", "int8", 2))


class InputAndOutputFileTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    @parameterized.parameters(*INPUT_SUFFIXES)
    def test_every_input_type_is_read(self, suffix):
        path = self.dir / f"in{suffix.upper()}"  # the suffix's case does not matter
        path.write_text("x\n")
        self.assertIsNone(check_input_file(path))

    def test_bad_input_files(self):
        with self.assertRaisesRegex(UsageError, f"^--input_file {self.dir}/nope.txt not found; check the path$"):
            check_input_file(self.dir / "nope.txt")
        (self.dir / "in.parquet").write_text("x")
        with self.assertRaisesRegex(UsageError, r"^--input_file .*in.parquet: predict_t5.py reads .txt, .jsonl, "
                                                r".json, .csv, .tsv files$"):
            check_input_file(self.dir / "in.parquet")
        (self.dir / "empty.txt").write_text("")
        with self.assertRaisesRegex(UsageError, r"^--input_file .*empty.txt is empty; give one example a line"):
            check_input_file(self.dir / "empty.txt")

    def test_output_files_that_may_be_written(self):
        self.assertIsNone(check_output_file(self.dir / "new" / "deeper" / "out.jsonl", overwrite=False))
        (self.dir / "old.tsv").write_text("x\n")
        self.assertIsNone(check_output_file(self.dir / "old.tsv", overwrite=True))

    def test_bad_output_files(self):
        with self.assertRaisesRegex(UsageError, r"^--output_file .*out.csv: write .jsonl or .tsv$"):
            check_output_file(self.dir / "out.csv", overwrite=False)
        (self.dir / "folder.jsonl").mkdir()
        with self.assertRaisesRegex(UsageError, r"^--output_file .*folder.jsonl is a folder; name a file in it$"):
            check_output_file(self.dir / "folder.jsonl", overwrite=True)
        (self.dir / "old.jsonl").write_text("{}\n")
        with self.assertRaisesRegex(UsageError, r"^--output_file .*old.jsonl exists; pass --overwrite true to "
                                                r"replace it, or choose another path$"):
            check_output_file(self.dir / "old.jsonl", overwrite=False)
        (self.dir / "notes.txt").write_text("a file\n")
        with self.assertRaisesRegex(UsageError, rf"^--output_file .*out.jsonl cannot be created: {self.dir}/notes.txt "
                                                r"is a file; choose another path$"):
            check_output_file(self.dir / "notes.txt" / "sub" / "out.jsonl", overwrite=False)


if __name__ == "__main__":
    absltest.main()
