"""t5kit/specs.py: the small typed specs the config layer builds and the data layer takes, frozen, with what they
derive; the corpus file types; and check_span_settings alone: each setting's range, a None left unchecked, the
denoiser's own name in its message, an S-denoiser's tighter density. (Every caller of the validator refusing in the
same words: tests/test_span_settings.py.)"""
import dataclasses
import math

from absl.testing import absltest, parameterized

from t5kit import specs
from t5kit.errors import UsageError


class SpecsTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("objective", specs.ObjectiveSpec("ul2", 512, 0.15, 3.0), "name"), ("corpus", specs.CorpusSpec(), "seed"),
        ("tasks", specs.TaskSelection(), "tasks"), ("sni", specs.SNISpec(), "split_dir"),
        ("task_data", specs.TaskDataSpec(), "data_dir"))
    def test_specs_are_frozen(self, spec, field):
        with self.assertRaises(dataclasses.FrozenInstanceError):
            setattr(spec, field, None)

    def test_local_files_by_role(self):
        self.assertEqual(specs.TaskDataSpec().local_files, {"train": None, "eval": None, "predict": None})
        spec = specs.TaskDataSpec(train_file="t.jsonl", test_file="p.tsv")
        self.assertEqual(spec.local_files, {"train": "t.jsonl", "eval": None, "predict": "p.tsv"})

    def test_an_unpacked_objective_and_a_fine_tuning_without_limits_by_default(self):
        objective = specs.ObjectiveSpec("span_corruption", 512, 0.15, 3.0)
        self.assertEqual((objective.denoisers, objective.packed, objective.packing_window_input_length),
                         ((), False, None))
        data = specs.TaskDataSpec()
        self.assertEqual((data.max_source_length, data.max_train_samples, data.leaderboard_files, data.sni),
                         (512, None, True, specs.SNISpec()))

    @parameterized.named_parameters(
        ("text", ".txt", "text"), ("raw", ".raw", "text"), ("jsonl", ".jsonl", "json"), ("json", ".json", "json"),
        ("tsv", ".tsv", "csv"), ("csv", ".csv", "csv"), ("parquet", ".parquet", "parquet"))
    def test_corpus_file_builders(self, suffix, builder):
        self.assertEqual(specs.FILE_BUILDERS[suffix], builder)


class CheckSpanSettingsTest(parameterized.TestCase):

    def test_settings_left_none_are_not_checked(self):
        self.assertIsNone(specs.check_span_settings())
        self.assertIsNone(specs.check_span_settings(noise_density=0.5))
        self.assertIsNone(specs.check_span_settings(mean_noise_span_length=1.0, input_length=8))

    @parameterized.named_parameters(
        ("density", dict(noise_density=1.0), r"^--noise_density=1.0 must be in \(0, 1\); the T5 paper uses 0.15$"),
        ("span", dict(mean_noise_span_length=0.99), r"^--mean_noise_span_length=0.99 must be >= 1 \(tokens\); the "
                                                    r"T5 paper uses 3$"),
        ("nan_span", dict(mean_noise_span_length=math.nan), r"^--mean_noise_span_length=nan must be >= 1"),
        ("input", dict(input_length=7), r"^--input_length=7 is too short for span corruption; use >= 8 \(T5: 512\)$"))
    def test_a_flag_is_named(self, settings, message):
        with self.assertRaisesRegex(UsageError, message):
            specs.check_span_settings(**settings)

    def test_a_denoisers_setting_is_named_by_its_item(self):
        with self.assertRaisesRegex(UsageError, r"^--denoisers item 3: noise_density=0.0 must be in \(0, 1\)"):
            specs.check_span_settings(0.0, 3.0, denoiser="--denoisers item 3")
        with self.assertRaisesRegex(UsageError, r"^--denoisers item 3: mean_noise_span_length=0.5 must be >= 1"):
            specs.check_span_settings(0.15, 0.5, denoiser="--denoisers item 3")

    @parameterized.named_parameters(("half", 0.5, True), ("ul2s", 0.25, True), ("above_half", 0.51, False),
                                    ("zero", 0.0, False))
    def test_an_s_denoiser_takes_at_most_half_its_window_as_targets(self, density, accepted):
        if accepted:
            self.assertIsNone(specs.check_span_settings(density, prefix_lm=True, denoiser="--denoisers item 1"))
            return
        with self.assertRaisesRegex(UsageError, rf"^--denoisers item 1: noise_density={density} must be in \(0, "
                                                r"0.5\] for S \(T5's random_prefix_noise_mask\); UL2's S-denoiser "
                                                r"uses 0.25$"):
            specs.check_span_settings(density, prefix_lm=True, denoiser="--denoisers item 1")
        self.assertIsNone(specs.check_span_settings(0.75))  # a span-corruption density may exceed a half


if __name__ == "__main__":
    absltest.main()
