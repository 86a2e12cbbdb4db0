"""sweep/space.py: every shipped sweep maps onto its program's flags; W&B distributions map exactly; refusals."""
import math
import os
from pathlib import Path
from unittest import mock

import numpy as np
import optuna
import yaml
from absl.testing import absltest, parameterized

from t5kit.config import parsing
from t5kit.errors import UsageError
from t5kit.sweep import space as sweep_space
from t5kit.sweep import study as sweep_study
from t5kit.sweep import trial as sweep_trial
from tests.helpers import REPO, require

SWEEP_FILES = sorted((REPO / "sweeps").glob("*.yaml"))
SAMPLES = 4000
optuna.logging.set_verbosity(optuna.logging.WARNING)


def write_sweep(folder, parameters, **top):
    spec = {"program": "p.py", "method": "random", "metric": {"name": "eval_loss", "goal": "minimize"},
            "parameters": parameters, **top}
    path = Path(folder) / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def sample_flags(sweep_obj, n=SAMPLES, seed=0):
    """n flag values per searched parameter, drawn by Optuna's RandomSampler as sweep.py draws them."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    distributions = {p.name: p.distribution for p in sweep_obj.searched}
    draws = [sweep_space.trial_flags(sweep_obj, study.ask(distributions).params) for _ in range(n)]
    return {name: np.array([d[name] for d in draws]) for name in distributions}


class ShippedSweepsTest(parameterized.TestCase):

    @parameterized.named_parameters((path.stem, path) for path in SWEEP_FILES)
    def test_parses_maps_and_names_program_flags(self, path):
        loaded = sweep_space.load_sweep(path)
        self.assertTrue((REPO / loaded.program).is_file())
        base = [str(REPO / c) for c in sweep_trial.base_config_files(list(loaded.command))]
        flag_classes = sweep_study.load_program_flags(str(REPO / loaded.program))
        sweep_study.check_parameters(loaded, flag_classes, base)  # names are flags; a sample parses
        self.assertIsInstance(sweep_space.build_sampler(loaded), optuna.samplers.BaseSampler)
        self.assertTrue(loaded.metric.startswith("eval_"))
        if loaded.program == "fine_tune_t5.py":
            self.assertEqual(loaded.goal, "maximize")

    @parameterized.named_parameters((path.stem, path) for path in SWEEP_FILES)
    def test_concurrent_wandb_runs_get_their_own_folders(self, path):
        """Two agents on one node: each run's command, parsed as the program parses it in the environment the agent
        gives it (WANDB_RUN_ID), names its own --output_dir; no sweep forces overwriting one."""
        loaded = sweep_space.load_sweep(path)
        self.assertNotIn("overwrite_output_dir", [param.name for param in loaded.params])
        if "pretrain" in path.stem:
            require("wikitext-2-raw")  # the base config's training files
        folders = []
        for run_id in ("agent0-run1", "agent1-run1"):
            constants = {param.name: param.constant for param in loaded.params if param.distribution is None}
            argv, env = sweep_trial.wandb_agent_command(loaded.command, loaded.program, constants, run_id)
            flag_args = argv[argv.index(loaded.program) + 1:]
            with mock.patch.dict(os.environ, env):
                flags_of_run = parsing.parse_flags(sweep_study.load_program_flags(str(REPO / loaded.program)),
                                                 [str(REPO / a) if a.endswith(".yaml") else a for a in flag_args])
            folders.append(flags_of_run[-1].output_dir)
        self.assertEqual(folders, [f"runs/sweeps/{loaded.name}/agent0-run1", f"runs/sweeps/{loaded.name}/agent1-run1"])

    def test_every_glue_task_has_a_sweep(self):
        names = {p.stem for p in SWEEP_FILES}
        for task in ("cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli"):
            self.assertIn(f"glue_{task}_sweep", names)
        self.assertContainsSubset({"pretrain_sweep", "multitask_glue_sweep"}, names)


class DistributionMappingTest(parameterized.TestCase):

    def sample(self, spec):
        return sample_flags(sweep_space.load_sweep(write_sweep(self.create_tempdir().full_path, {"p": spec})))["p"]

    def test_log_uniform_bounds_are_exponents_of_e(self):
        values = self.sample({"distribution": "log_uniform", "min": -2, "max": 1})
        self.assertBetween(values.min(), math.exp(-2), math.exp(-2) * 1.01)
        self.assertBetween(values.max(), math.exp(1) * 0.99, math.exp(1))
        self.assertAlmostEqual(np.mean(np.log(values) < -0.5), 0.5, delta=0.03)  # uniform in log space

    def test_log_uniform_values_bounds_are_values(self):
        values = self.sample({"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-2})
        self.assertBetween(values.min(), 1e-4, 1.1e-4)
        self.assertAlmostEqual(np.mean(values < 1e-3), 0.5, delta=0.03)

    def test_inv_log_uniform(self):
        values = self.sample({"distribution": "inv_log_uniform", "min": 0, "max": 2})  # log(1/X) ~ U(0, 2)
        self.assertBetween(values.min(), math.exp(-2), math.exp(-2) * 1.01)
        self.assertLessEqual(values.max(), 1.0)
        self.assertAlmostEqual(np.mean(-np.log(values) < 1), 0.5, delta=0.03)

    def test_int_uniform_is_inclusive(self):
        values = self.sample({"min": 1, "max": 3})  # int min/max: W&B infers int_uniform
        self.assertEqual(set(values.tolist()), {1, 2, 3})
        self.assertTrue(all(isinstance(v, int) for v in values.tolist()))

    def test_q_uniform_rounds_like_wandb(self):
        values = self.sample({"distribution": "q_uniform", "min": 0.0, "max": 1.0, "q": 0.25})
        counts = {v: np.mean(values == v) for v in (0.0, 0.25, 0.5, 0.75, 1.0)}
        self.assertAlmostEqual(sum(counts.values()), 1.0)
        self.assertAlmostEqual(counts[0.5], 0.25, delta=0.03)
        self.assertAlmostEqual(counts[0.0], 0.125, delta=0.02)  # round(): the end points get half a bin

    def test_q_uniform_with_integers_gives_ints(self):
        values = self.sample({"distribution": "q_uniform", "min": 0, "max": 500, "q": 100})
        self.assertEqual(set(values.tolist()), {0, 100, 200, 300, 400, 500})
        self.assertTrue(all(isinstance(v, int) for v in values.tolist()))

    def test_q_log_uniform_values(self):
        values = self.sample({"distribution": "q_log_uniform_values", "min": 10, "max": 1000, "q": 10})
        np.testing.assert_array_equal(values % 10, 0)
        self.assertBetween(values.min(), 10, 20)

    @parameterized.named_parameters(("normal", "normal", 2.0, 0.5), ("log_normal", "log_normal", -1.0, 0.3))
    def test_normal_by_inverse_cdf(self, distribution, mu, sigma):
        values = self.sample({"distribution": distribution, "mu": mu, "sigma": sigma})
        draws = np.log(values) if distribution == "log_normal" else values
        self.assertAlmostEqual(draws.mean(), mu, delta=0.03)
        self.assertAlmostEqual(draws.std(), sigma, delta=0.03)

    def test_q_normal_rounds(self):
        values = self.sample({"distribution": "q_normal", "mu": 10, "sigma": 3, "q": 2})
        np.testing.assert_array_equal(values % 2, 0)

    def test_categorical_and_constant(self):
        path = write_sweep(self.create_tempdir().full_path, {"a": {"values": ["x", "y"]}, "b": {"value": 7}})
        loaded = sweep_space.load_sweep(path)
        self.assertEqual(set(sample_flags(loaded, n=200)["a"].tolist()), {"x", "y"})
        self.assertEqual(sweep_space.trial_flags(loaded, {"a": "x"}), {"a": "x", "b": 7})


class SamplerPrunerTest(parameterized.TestCase):

    @parameterized.named_parameters(("grid", "grid", optuna.samplers.GridSampler),
                                    ("random", "random", optuna.samplers.RandomSampler),
                                    ("bayes", "bayes", optuna.samplers.TPESampler))
    def test_method_maps_to_sampler(self, method, sampler_type):
        path = write_sweep(self.create_tempdir().full_path, {"a": {"values": [1, 2]}, "b": {"min": 1, "max": 3}},
                           method=method)
        loaded = sweep_space.load_sweep(path)
        self.assertIsInstance(sweep_space.build_sampler(loaded, seed=0), sampler_type)
        self.assertEqual(sweep_space.grid_size(loaded), 6)

    @parameterized.named_parameters(
        ("min_iter", {"type": "hyperband", "min_iter": 2, "eta": 3}, (2, "auto", 3)),
        ("max_iter_s", {"type": "hyperband", "max_iter": 27, "s": 2, "eta": 3}, (3, 27, 3)))
    def test_hyperband(self, spec, expected):
        loaded = sweep_space.load_sweep(write_sweep(self.create_tempdir().full_path, {"a": {"values": [1]}},
                                                    early_terminate=spec))
        settings = loaded.early_terminate
        self.assertEqual((settings["min_resource"], settings["max_resource"], settings["reduction_factor"]), expected)
        self.assertIsInstance(sweep_space.build_pruner(loaded), optuna.pruners.HyperbandPruner)

    def test_wandb_metric_name_maps_to_hf_name(self):
        path = write_sweep(self.create_tempdir().full_path, {"a": {"values": [1]}},
                           metric={"name": "eval/accuracy", "goal": "maximize"})
        self.assertEqual(sweep_space.load_sweep(path).metric, "eval_accuracy")


class RefusalsTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("unknown_method", {"method": "hyperopt"}, {"a": {"values": [1]}}, "unknown method 'hyperopt'"),
        ("unknown_distribution", {}, {"a": {"distribution": "log_unifrom", "min": 1, "max": 2}},
         "unknown distribution 'log_unifrom' in parameter 'a'; did you mean 'log_uniform'"),
        ("min_above_max", {}, {"a": {"distribution": "uniform", "min": 2, "max": 1}}, "min 2 > max 1"),
        ("probabilities", {}, {"a": {"values": [1, 2], "probabilities": [0.2, 0.8]}},
         "unsupported W&B feature: probabilities in parameter 'a'"),
        ("nested", {}, {"a": {"parameters": {"b": {"value": 1}}}}, "nested parameters"),
        ("strict_hyperband", {"early_terminate": {"type": "hyperband", "min_iter": 1, "strict": True}},
         {"a": {"values": [1]}}, "unsupported W&B feature early_terminate.strict"),
        ("envelope", {"early_terminate": {"type": "envelope"}}, {"a": {"values": [1]}}, "type 'envelope'"),
        ("controller", {"controller": {"type": "local"}}, {"a": {"values": [1]}}, "key 'controller'"),
        ("grid_continuous", {"method": "grid"}, {"a": {"distribution": "uniform", "min": 0, "max": 1}},
         "grid cannot enumerate distribution 'uniform'"),
        ("no_metric", {"metric": None}, {"a": {"values": [1]}},
         r"needs metric: \{name: eval_\.\.\., goal: minimize\|maximize\}"),
        ("log_of_zero", {}, {"a": {"distribution": "log_uniform_values", "min": 0, "max": 1}},
         "log_uniform_values needs min > 0, got 0"),
        ("list_value", {}, {"a": {"values": [[1, 2]]}}, "one scalar per flag"),
    )
    def test_refused_by_name(self, top, parameters, message):
        path = write_sweep(self.create_tempdir().full_path, parameters, **top)
        with self.assertRaisesRegex(UsageError, message):
            sweep_space.load_sweep(path)


if __name__ == "__main__":
    absltest.main()
