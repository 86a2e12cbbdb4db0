"""config/output_arguments.py: the groups for the folder a script writes, free of transformers, so that sweep.py
(whose flags are OutputDirArguments and its own) starts an agent without the seconds of the training stack."""
import subprocess
import sys

import pytest
from absl.testing import absltest

from t5kit.config.output_arguments import OutputDirArguments, OverwriteOutputDirArguments
from tests.helpers import REPO


class OutputGroupsTest(absltest.TestCase):

    def test_defaults_leave_the_folder_to_the_script_and_refuse_overwriting(self):
        self.assertIsNone(OutputDirArguments().output_dir)  # each script requires it or picks its own default
        self.assertFalse(OverwriteOutputDirArguments().overwrite_output_dir)

    @pytest.mark.slow  # a second interpreter
    def test_sweep_py_loads_without_torch_the_training_arguments_with_it(self):
        """In a fresh interpreter: sweep.py's imports load no torch and no HF TrainingArguments; the training
        groups (the negative control) load both."""
        code = ("import sys; heavy = lambda: [m for m in ('torch', 'transformers.training_args') if m in sys.modules]; "
                "import sweep; print(heavy()); import t5kit.config.arguments; print(heavy())")
        result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
        self.assertEqual(result.stdout.splitlines(), ["[]", "['torch', 'transformers.training_args']"],
                         result.stderr[-2000:])


if __name__ == "__main__":
    absltest.main()
