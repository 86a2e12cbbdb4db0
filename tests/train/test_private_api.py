"""Where our trainers hook into transformers' private API (t5kit/train/private_api.py): every hook still exists on
Seq2SeqTrainer with the parameters we use, every private override is listed, the mixin order is the one
docs/architecture.md states, and a version outside the tested range is named in a warning."""
import inspect
import re

from absl.testing import absltest, parameterized
from transformers import Seq2SeqTrainer
from transformers.optimization import Adafactor

from t5kit.train import private_api
from t5kit.train.checkpointing import SafeCheckpointMixin
from t5kit.train.nonfinite_guard import NonFiniteGuardMixin
from t5kit.train.pretrain_trainer import PretrainTrainer
from t5kit.train.stream_resume import StreamResumeMixin
from t5kit.train.task_trainer import TaskTrainer
from tests.helpers import REPO

OUR_CLASSES = (SafeCheckpointMixin, NonFiniteGuardMixin, StreamResumeMixin, PretrainTrainer, TaskTrainer)


def parameter_names(function):
    return [name for name in inspect.signature(function).parameters if name != "self"]


def accepts(function, names):
    """Whether `function` takes every one of `names` (by name, or through *args/**kwargs)."""
    parameters = inspect.signature(function).parameters.values()
    variadic = {p.kind for p in parameters} & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}
    return bool(variadic) or set(names) <= {p.name for p in parameters}


class PrivateHooksTest(parameterized.TestCase):

    @parameterized.named_parameters((name, name, params) for name, params in private_api.PRIVATE_HOOKS.items())
    def test_the_hook_exists_with_the_parameters_we_use(self, name, params):
        self.assertTrue(hasattr(Seq2SeqTrainer, name), f"Seq2SeqTrainer.{name} is gone: our override is dead code")
        self.assertContainsSubset(params, parameter_names(getattr(Seq2SeqTrainer, name)))
        overriding = [cls for cls in OUR_CLASSES if name in vars(cls)]
        self.assertNotEmpty(overriding, f"nothing of ours overrides {name}; drop it from private_api.PRIVATE_HOOKS")
        for cls in overriding:
            self.assertTrue(accepts(vars(cls)[name], params), f"{cls.__name__}.{name}")

    @parameterized.named_parameters((name, name, params) for name, params in private_api.PRIVATE_CALLS.items())
    def test_the_private_methods_we_call_exist(self, name, params):
        self.assertTrue(hasattr(Seq2SeqTrainer, name), f"Seq2SeqTrainer.{name} is gone")
        self.assertEqual(parameter_names(getattr(Seq2SeqTrainer, name)), list(params))

    def test_every_private_override_is_listed(self):
        for cls in OUR_CLASSES:
            for name, member in vars(cls).items():
                if name.startswith("_") and not name.startswith("__") and callable(member) \
                        and hasattr(Seq2SeqTrainer, name):
                    self.assertIn(name, private_api.PRIVATE_HOOKS, f"{cls.__name__}.{name} overrides a private method")

    @parameterized.named_parameters((name, name, params) for name, params in private_api.PRIVATE_PARAMETERS.items())
    def test_public_overrides_take_the_private_parameters_we_pass_on(self, name, params):
        self.assertContainsSubset(params, parameter_names(getattr(Seq2SeqTrainer, name)))
        overriding = [cls for cls in OUR_CLASSES if name in vars(cls)]
        self.assertNotEmpty(overriding,
                            f"nothing of ours overrides {name}; drop it from private_api.PRIVATE_PARAMETERS")
        for cls in overriding:
            self.assertTrue(accepts(vars(cls)[name], params), f"{cls.__name__}.{name}")

    def test_the_adafactor_helper_exists_with_the_parameters_we_use(self):
        for name, params in private_api.ADAFACTOR_PRIVATE.items():
            self.assertEqual(parameter_names(getattr(Adafactor, name)), list(params))


class MixinOrderTest(parameterized.TestCase):
    """docs/architecture.md states each trainer's bases; the order matters (each mixin calls super())."""

    @parameterized.named_parameters(("pretrain", PretrainTrainer), ("task", TaskTrainer))
    def test_bases_are_the_ones_the_architecture_page_states(self, trainer):
        page = (REPO / "docs" / "architecture.md").read_text()
        stated = re.search(rf"`{trainer.__name__}\(([^)]*)\)`", page)
        self.assertIsNotNone(stated, f"docs/architecture.md does not state {trainer.__name__}'s bases")
        self.assertEqual([name.strip() for name in stated.group(1).split(",")],
                         [base.__name__ for base in trainer.__bases__])


class VersionRangeTest(parameterized.TestCase):

    def test_a_version_outside_the_tested_range_is_named(self):
        installed = {"transformers": "5.30.1", "accelerate": "1.15.0", "deepspeed": None}
        self.assertEqual(private_api.untested_versions(installed),
                         [("transformers", "5.30.1", private_api.TESTED_VERSIONS["transformers"])])
        with self.assertLogs("t5kit.train.private_api", "WARNING") as logs:
            private_api.warn_on_untested_versions(installed)
        self.assertLen(logs.output, 1)
        self.assertRegex(logs.output[0], r"transformers 5\.30\.1 is installed, but this toolkit was tested with "
                                         r"transformers 5\.23\.0 to 5\.24\.0")

    def test_versions_inside_the_range_give_no_warning(self):
        installed = {package: high for package, (_, high) in private_api.TESTED_VERSIONS.items()}
        self.assertEmpty(private_api.untested_versions(installed))

    def test_requirements_bound_transformers_by_the_newest_tested_release(self):
        newest = private_api.TESTED_VERSIONS["transformers"][1]
        for name in ("requirements.txt", "conda_environment_slurm.yml"):
            self.assertRegex((REPO / name).read_text(), rf"transformers>=[\d.]+,<={re.escape(newest)}\b", name)


if __name__ == "__main__":
    absltest.main()
