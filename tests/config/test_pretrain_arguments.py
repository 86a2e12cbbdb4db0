"""config/pretrain_arguments.py: pre_train_t5.py's own flag groups refuse bad values in one line each (the corpus,
--objective and --denoisers, filled with their defaults), the cross-group checks of --packing, --streaming and
--init_embeddings, and the specs the data layer takes are built from the flags field by field. (The span settings'
shared validator: tests/test_span_settings.py.)"""
from pathlib import Path
from types import SimpleNamespace

from absl.testing import absltest, parameterized

import constants
from t5kit.config import parsing
from t5kit.config.pretrain_arguments import (
    ObjectiveArguments,
    PretrainDataArguments,
    SpanCorruptionArguments,
    check_denoisers,
    check_encoding,
    check_init_embeddings,
    check_packing,
    check_streaming,
    objective_spec,
)
from t5kit.config.script_flags import PRETRAIN_FLAG_CLASSES
from t5kit.errors import UsageError
from t5kit.specs import CorpusSpec, ObjectiveSpec

UL2_DENOISERS = check_denoisers(constants.UL2_DENOISERS, "ul2")


class ObjectiveFlagsTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("misspelt_setting", [{"paradigm": "S", "noise_densty": 0.25, "proportion": 1}],
         r"--denoisers item 1: unknown denoiser setting 'noise_densty'; did you mean 'noise_density'\?"),
        ("unknown_setting", [{"paradigm": "R", "mean_span": 3, "noise_density": 0.15, "proportion": 1}],
         r"unknown denoiser setting 'mean_span'; choices: paradigm, mean_noise_span_length, noise_density"),
        ("unknown_paradigm", [{"paradigm": "Q", "noise_density": 0.15, "proportion": 1}],
         r"paradigm 'Q' is not a UL2 paradigm; choices: R, X, S"),
        ("sum", [{"paradigm": "S", "noise_density": 0.25, "proportion": 0.5}],
         r"--denoisers proportions sum to 0.5, not 1"),
        ("s_with_span", [{"paradigm": "S", "noise_density": 0.25, "proportion": 1, "mean_noise_span_length": 3}],
         r"an S-denoiser has no mean_noise_span_length"),
        ("s_density", [{"paradigm": "S", "noise_density": 0.75, "proportion": 1}], r"must be in \(0, 0.5\] for S"),
        ("span_without_length", [{"paradigm": "R", "noise_density": 0.15, "proportion": 1}],
         r"mean_noise_span_length must be a number, got None"),
        ("mode_token_with_space", [{"paradigm": "S", "noise_density": 0.25, "proportion": 1, "mode_token": "[a b]"}],
         r"mode_token '\[a b\]' must be a non-empty string without spaces"),
        ("not_a_list", {"paradigm": "S"}, r"--denoisers must be a non-empty YAML list of mappings"),
    )
    def test_bad_denoisers(self, denoisers, message):
        with self.assertRaisesRegex(UsageError, message):
            ObjectiveArguments(objective="ul2", denoisers=denoisers)

    def test_prefix_lm_takes_only_s_denoisers(self):
        with self.assertRaisesRegex(UsageError, "--objective prefix_lm takes only S denoisers"):
            ObjectiveArguments(objective="prefix_lm", denoisers=[dict(constants.UL2_DENOISERS[0], proportion=1)])

    def test_denoisers_need_a_mixture_objective(self):
        with self.assertRaisesRegex(UsageError, "--denoisers applies to --objective ul2 or prefix_lm"):
            ObjectiveArguments(denoisers=[{"paradigm": "S", "noise_density": 0.5, "proportion": 1}])

    def test_defaults_are_filled(self):
        self.assertEqual(ObjectiveArguments(objective="ul2").denoisers, UL2_DENOISERS)
        self.assertEqual(ObjectiveArguments(objective="prefix_lm").denoisers, [
            {"paradigm": "S", "mean_noise_span_length": None, "noise_density": 0.5, "proportion": 1.0,
             "mode_token": None}])
        self.assertIsNone(ObjectiveArguments().denoisers)

    def test_yaml_list_and_command_line_text_agree(self):
        work = self.create_tempdir()
        common = ["--output_dir", str(work.full_path), "--tokenizer_name_or_path", "unused", "--train_files",
                  work.create_file("t.txt", "text\n").full_path, "--objective", "ul2"]
        text = "[{paradigm: S, noise_density: 0.25, proportion: 1, mode_token: '[S2S]'}]"
        config = work.create_file("c.yaml", f"denoisers: {text}\n").full_path
        from_yaml = parsing.parse_flags(PRETRAIN_FLAG_CLASSES, [config, *common])[3]
        from_flag = parsing.parse_flags(PRETRAIN_FLAG_CLASSES, [*common, "--denoisers", text])[3]
        self.assertEqual(from_yaml.denoisers, from_flag.denoisers)
        self.assertEqual(from_yaml.denoisers[0]["mode_token"], "[S2S]")




class DataFlagsTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        (self.dir / "a.txt").write_text("some text\n")
        (self.dir / "b.txt").write_text("other text\n")
        (self.dir / "empty.txt").write_text("")
        (self.dir / "c.jsonl").write_text('{"text": "x"}\n')
        (self.dir / "d.docx").write_text("x")

    @parameterized.named_parameters(
        ("no_data", {}, "no training data: pass --train_files"),
        ("missing_file", {"train_files": ["nope.txt"]}, "--train_files: file nope.txt not found"),
        ("empty_file", {"train_files": ["empty.txt"]}, "--train_files: file .*empty.txt is empty"),
        ("unsupported_type", {"train_files": ["d.docx"]}, "unsupported file type '.docx'"),
        ("mixed_types", {"train_files": ["a.txt", "c.jsonl"]}, "mix types; give files of one type per flag"),
        ("validation_is_training", {"train_files": ["a.txt"], "validation_files": ["a.txt"]},
         "--validation_files .*a.txt is also a training file"),
        ("two_sources", {"train_files": ["a.txt"], "dataset_name": "allenai/c4"},
         "--dataset_name and --train_files both set; pass one source"),
        ("bad_sample_by", {"train_files": ["a.txt"], "sample_by": "sentence"},
         "--sample_by='sentence' is not a valid choice; choices: paragraph, line, document"),
        ("bad_document_separator", {"train_files": ["a.txt"], "document_separator": "newline"},
         "--document_separator='newline' is not a valid choice; choices: eos, none"),
        ("no_train_samples", {"train_files": ["a.txt"], "max_train_samples": 0}, "--max_train_samples=0 must be >= 1"),
        ("negative_train_samples", {"train_files": ["a.txt"], "max_train_samples": -3},
         "--max_train_samples=-3 must be >= 1"),
    )
    def test_bad_data_flags(self, kwargs, message):
        kwargs = {k: [str(self.dir / p) if p != "nope.txt" else p for p in v] if k.endswith("files") else v
                  for k, v in kwargs.items()}
        with self.assertRaisesRegex(UsageError, message):
            PretrainDataArguments(**kwargs)


    def test_validation_split_percentage_and_tokenising_workers(self):
        text = str(self.dir / "a.txt")
        with self.assertRaisesRegex(UsageError, r"^--validation_split_percentage=100 must be in \(0, 100\)$"):
            PretrainDataArguments(train_files=[text], validation_split_percentage=100)
        with self.assertRaisesRegex(UsageError, r"^--preprocessing_num_workers=0 must be >= 1 \(leave it unset"):
            PretrainDataArguments(train_files=[text], preprocessing_num_workers=0)

    def test_the_corpus_spec_holds_the_flags_the_seed_and_the_cache(self):
        args = PretrainDataArguments(train_files=[str(self.dir / "a.txt")], validation_files=[str(self.dir / "b.txt")],
                                     sample_by="line", document_separator="none", max_eval_samples=7)
        spec = args.corpus_spec(seed=11, cache_dir="/cache", trust_remote_code=True)
        self.assertEqual(spec, CorpusSpec(
            train_files=(str(self.dir / "a.txt"),), validation_files=(str(self.dir / "b.txt"),), sample_by="line",
            document_separator="none", max_eval_samples=7, seed=11, cache_dir="/cache", trust_remote_code=True))
        self.assertIsInstance(spec.train_files, tuple)  # frozen spec: no list the data layer could change

    def test_encoding_must_be_one_python_knows(self):
        check_encoding("latin-1")
        with self.assertRaisesRegex(UsageError, r"^--encoding 'klingon' is not a text encoding Python knows; e\.g\. "
                                                r"utf-8 or latin-1$"):
            check_encoding("klingon")


def groups(objective="span_corruption", packing=False, streaming=False, window=None, input_length=64,
           model=None, init_embeddings="random", workers=0, max_steps=10):
    """The five flag groups a cross-group check takes, holding only what the checks read."""
    return (SimpleNamespace(model_name_or_path=model),
            SimpleNamespace(streaming=streaming),
            SimpleNamespace(input_length=input_length),
            SimpleNamespace(objective=objective, packing_window_input_length=window, init_embeddings=init_embeddings),
            SimpleNamespace(packing=packing, dataloader_num_workers=workers, max_steps=max_steps))


class CrossGroupChecksTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("window_without_packing", dict(objective="ul2", window=16),
         "^--packing_window_input_length applies to --packing true"),
        ("span_corruption", dict(packing=True), "^--packing true with --objective span_corruption"),
        ("streamed", dict(objective="ul2", packing=True, streaming=True), "^--packing true with --streaming"),
        ("window_too_short", dict(objective="prefix_lm", packing=True, window=7),
         r"^--packing_window_input_length=7 must be in \[8, --input_length=64\]$"),
        ("window_longer_than_the_row", dict(objective="ul2", packing=True, window=65),
         r"^--packing_window_input_length=65 must be in \[8, --input_length=64\]$"))
    def test_packing_refusals(self, values, message):
        with self.assertRaisesRegex(UsageError, message):
            check_packing(*groups(**values))

    @parameterized.named_parameters(("off", {}), ("ul2", dict(objective="ul2", packing=True)),
                                    ("shortest_window", dict(objective="prefix_lm", packing=True, window=8)),
                                    ("window_of_the_row", dict(objective="ul2", packing=True, window=64)))
    def test_packing_accepted(self, values):
        self.assertIsNone(check_packing(*groups(**values)))

    @parameterized.named_parameters(
        ("loader_workers", dict(streaming=True, workers=2), "^--streaming needs --dataloader_num_workers 0"),
        ("no_max_steps", dict(streaming=True, max_steps=-1), "^--streaming needs --max_steps N"))
    def test_streaming_refusals(self, values, message):
        with self.assertRaisesRegex(UsageError, message):
            check_streaming(*groups(**values))

    def test_streaming_accepted_and_map_style_unchecked(self):
        self.assertIsNone(check_streaming(*groups(streaming=True)))
        self.assertIsNone(check_streaming(*groups(workers=4, max_steps=-1)))  # not streamed: nothing to check

    @parameterized.named_parameters(
        ("loaded_model", dict(model="google-t5/t5-small"), "^--init_embeddings word_vectors starts a new model"),
        ("streamed", dict(streaming=True), "^--init_embeddings word_vectors counts the whole training corpus"))
    def test_word_vectors_refusals(self, values, message):
        with self.assertRaisesRegex(UsageError, message):
            check_init_embeddings(*groups(init_embeddings="word_vectors", **values))
        self.assertIsNone(check_init_embeddings(*groups(**values)))  # random init: nothing to check

    def test_the_objective_spec_holds_the_flags(self):
        span = SpanCorruptionArguments(input_length=128, noise_density=0.2, mean_noise_span_length=4.0)
        spec = objective_spec(span, ObjectiveArguments(objective="ul2", packing_window_input_length=20), packing=1)
        self.assertEqual(spec, ObjectiveSpec(name="ul2", input_length=128, noise_density=0.2,
                                             mean_noise_span_length=4.0, denoisers=tuple(UL2_DENOISERS), packed=True,
                                             packing_window_input_length=20))
        plain = objective_spec(SpanCorruptionArguments(), ObjectiveArguments(), packing=None)
        self.assertEqual((plain.name, plain.input_length, plain.denoisers, plain.packed),
                         ("span_corruption", constants.INPUT_LENGTH, (), False))


if __name__ == "__main__":
    absltest.main()
