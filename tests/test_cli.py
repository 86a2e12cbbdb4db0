"""t5kit/cli.py: a UsageError is one `error:` line and exit 2; a distributed run ends before the interpreter's
teardown; a bug keeps its traceback."""
import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from absl.testing import absltest, parameterized

from t5kit import cli
from t5kit.errors import UsageError
from tests.helpers import ENTRY_SCRIPTS, REPO, entry_main


class HelpTest(parameterized.TestCase):

    @parameterized.parameters(*ENTRY_SCRIPTS)
    def test_help_lists_the_flags_and_exits_0(self, script):
        """argparse formats every help string with %: a bare "6 %" in one help text made --help crash."""
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), self.assertRaises(SystemExit) as exit_info:
            entry_main(script)(["--help"])
        self.assertEqual(exit_info.exception.code, 0)
        self.assertIn("usage:", printed.getvalue())
        self.assertIn("--", printed.getvalue())


class RunCliTest(parameterized.TestCase):

    def test_a_bug_keeps_its_traceback_and_exit_code_1(self):
        """Only UsageError is the user's fault; a TypeError in our code is not disguised as an `error:` line."""
        code = ("from t5kit import cli\n"
                "def main():\n    return len(None)\n"
                "cli.run_cli(main)")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 1)
        self.assertIn("Traceback (most recent call last)", result.stderr)
        self.assertIn("TypeError: object of type 'NoneType' has no len()", result.stderr)
        self.assertNotIn("error:", result.stderr)

    def test_run_cli_turns_usage_error_into_exit_2(self):
        def bad_main():
            raise UsageError("--x is wrong; pass --y")
        with self.assertRaises(SystemExit) as exit_info:
            cli.run_cli(bad_main)
        self.assertEqual(exit_info.exception.code, 2)

    def test_the_error_line_is_written_whole_in_one_write(self):
        """Ranks of one launch share stderr: a line written in two parts (text, then newline) can run into another
        rank's line, as a torchrun refusal test once saw ("...another --output_direrror: ...")."""
        class Writes(io.StringIO):
            def __init__(self):
                super().__init__()
                self.calls = []

            def write(self, text):
                self.calls.append(text)
                return super().write(text)

        def bad_main():
            raise UsageError("--x is wrong; pass --y")
        stderr = Writes()
        with contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit):
            cli.run_cli(bad_main)
        self.assertEqual(stderr.calls, ["error: --x is wrong; pass --y\n"])

    @parameterized.named_parameters(
        ("finished", "return", 0, "process group initialized=False"),
        ("stopped_for_preemption", "raise SystemExit(0)", 0, "process group initialized=False"),
        ("refused", "raise UsageError('--x is wrong; pass --y')", 2, "process group initialized=True"))
    def test_a_distributed_run_ends_before_the_interpreter_teardown_gloo_can_crash(self, end_of_main, code, group):
        """The child holds its group (as DeepSpeed and accelerate do), so destroying it does not stop gloo's threads,
        which still own the tensors of queued all_gathers when main() ends: a teardown would abort it now and then,
        as CI saw. The run must end with its code, its exit handlers run (after it left the group, if it succeeded),
        and no teardown (a module global's __del__ would report one)."""
        child = DISTRIBUTED_CHILD.replace("END_OF_MAIN", end_of_main)
        store = Path(self.create_tempdir().full_path) / "store"
        result = subprocess.run([sys.executable, "-c", child, str(REPO), str(store)], capture_output=True, text=True,
                                timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
        self.assertEqual(result.returncode, code, result.stderr[-2000:])
        self.assertNotIn("terminate called", result.stderr)
        self.assertNotIn("interpreter teardown ran", result.stderr)
        self.assertEqual(result.stdout.splitlines(), ["main done", f"exit handler: {group}"])
        self.assertEqual(result.stderr.strip(), "error: --x is wrong; pass --y" if code else "")



DISTRIBUTED_CHILD = """
import atexit, os, sys
import torch, torch.distributed as dist
from t5kit import cli
from t5kit.errors import UsageError


class TeardownWitness:
    def __del__(self, write=os.write):  # module globals are deleted only by the interpreter's teardown
        write(2, b"interpreter teardown ran\\n")


witness = TeardownWitness()
held = []


def main():
    dist.init_process_group("gloo", init_method=f"file://{sys.argv[2]}", rank=0, world_size=1)
    held.append(dist.distributed_c10d._get_default_group())
    for _ in range(100):  # queued: gloo's threads are still working through them when main() ends
        dist.all_gather([torch.empty(1000)], torch.ones(1000), async_op=True)
    atexit.register(lambda: print(f"exit handler: process group initialized={dist.is_initialized()}"))
    print("main done")
    END_OF_MAIN


cli.run_cli(main)
"""



if __name__ == "__main__":
    absltest.main()
