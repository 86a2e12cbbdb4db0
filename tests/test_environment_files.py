"""requirements.txt and conda_environment_slurm.yml describe the same environment; torch stays pinned."""
import re

import yaml
from absl.testing import absltest

from t5kit.model import building
from tests.helpers import REPO


def requirement_lines(lines):
    """{package name: specifier} of pip requirement lines, ignoring comments and options."""
    specs = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            name = re.split(r"[<>=!~ ]", line, maxsplit=1)[0].lower()
            specs[name] = line[len(name):]
    return specs


class EnvironmentFilesTest(absltest.TestCase):

    def test_torch_is_pinned_for_the_local_cpu_wheel(self):
        specs = requirement_lines((REPO / "requirements.txt").read_text().splitlines())
        self.assertEqual(specs["torch"], "==2.13.0")

    def test_every_other_requirement_has_a_lower_bound(self):
        specs = requirement_lines((REPO / "requirements.txt").read_text().splitlines())
        for name, spec in specs.items():
            if name != "torch":
                self.assertTrue(spec.startswith(">="), f"{name} needs a lower bound, has {spec!r}")

    def test_transformers_floor_is_the_one_modeling_warns_below(self):
        """building.warn_if_t5_attention_runs_unfused names the same version requirements.txt asks for."""
        specs = requirement_lines((REPO / "requirements.txt").read_text().splitlines())
        self.assertTrue(specs["transformers"].startswith(f">={building.FUSED_T5_ATTENTION_SINCE},"),
                        specs["transformers"])

    def test_conda_environment_lists_the_same_packages(self):
        conda = yaml.safe_load((REPO / "conda_environment_slurm.yml").read_text())
        self.assertIn("python=3.11", conda["dependencies"])
        pip_lines = next(d["pip"] for d in conda["dependencies"] if isinstance(d, dict))
        self.assertEqual(requirement_lines(pip_lines), requirement_lines(
            (REPO / "requirements.txt").read_text().splitlines()))


if __name__ == "__main__":
    absltest.main()
