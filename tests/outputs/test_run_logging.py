"""outputs/run_logging.py: OUTPUT_DIR/out.log holds what the run logged with rank and time, starts only once the run
is accepted, appends after a marked boundary on resume, and never holds a secret."""
import contextlib
import io
import logging
import os
import re
from types import SimpleNamespace
from unittest import mock

import pytest
from absl.testing import absltest, parameterized

from t5kit import cli
from t5kit.outputs import run_logging
from tests.helpers import OneThreadTestCase, pre_train

FAKE_HF_TOKEN = "hf_FakeTokenForTestsOnly0123456789abcdef"
FAKE_WANDB_KEY = "0123456789abcdef0123456789abcdef01234567"  # 40 hex digits, the shape of a W&B API key
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d rank (\d+) (INFO|WARNING|ERROR|CRITICAL) ([\w.]+): ")


def fake_args(output_dir, process_index=0):
    """What open_run_log reads of the training arguments."""
    return SimpleNamespace(output_dir=str(output_dir), process_index=process_index,
                           main_process_first=lambda **_: contextlib.nullcontext())


class MaskingTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("hf_token", {"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz012345"}, "hf_abcdefghijklmnopqrstuvwxyz012345"),
        ("legacy_hub_token", {"HUGGING_FACE_HUB_TOKEN": "legacy-token-value"}, "legacy-token-value"),
        ("wandb_key", {"WANDB_API_KEY": "not-hex-but-set-as-key"}, "not-hex-but-set-as-key"),
        ("any_token_suffix", {"GITLAB_TOKEN": "glpat-abcdefgh"}, "glpat-abcdefgh"),
        ("any_key_suffix", {"S3_ACCESS_KEY": "AKIAEXAMPLEKEY"}, "AKIAEXAMPLEKEY"),
        ("any_secret_suffix", {"DB_SECRET": "hunter2hunter2"}, "hunter2hunter2"))
    def test_values_of_secret_variables_are_masked(self, environ, secret):
        secrets = run_logging.secret_values(environ)
        self.assertEqual(run_logging.mask_secrets(f"token={secret}; next", secrets), "token=***; next")

    def test_token_shapes_are_masked_even_when_no_variable_holds_them(self):
        text = f"login {FAKE_HF_TOKEN} key {FAKE_WANDB_KEY} sha256 {'ab' * 32}"
        self.assertEqual(run_logging.mask_secrets(text, []), f"login *** key *** sha256 {'ab' * 32}")

    def test_short_values_and_other_variables_are_not_secrets(self):
        environ = {"HF_TOKEN": "1", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5", "TOKENIZERS_PARALLELISM": "false",
                   "MY_KEY": "longenough-value"}
        self.assertEqual(run_logging.secret_values(environ), ["longenough-value"])

    def test_the_formatter_masks_arguments_and_tracebacks(self):
        with mock.patch.dict(os.environ, {"HF_TOKEN": FAKE_HF_TOKEN.upper()}):
            formatter = run_logging.MaskingFormatter("%(message)s")
        try:
            raise ValueError(f"bad token {FAKE_HF_TOKEN.upper()}")
        except ValueError:
            record = logging.LogRecord("x", logging.ERROR, "f.py", 1, "using %s", (FAKE_HF_TOKEN.upper(),),
                                       exc_info=__import__("sys").exc_info())
        text = formatter.format(record)
        self.assertNotIn(FAKE_HF_TOKEN.upper(), text)
        self.assertTrue(text.startswith("using ***\nTraceback"))
        self.assertTrue(text.endswith("ValueError: bad token ***"))


class RunLogHandlerTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.create_tempdir().full_path
        self.logger = logging.getLogger(f"test_run_log.{self._testMethodName}")
        self.logger.propagate = False
        self.logger.setLevel(logging.INFO)

    def attach(self, process_index=0):
        handler = run_logging.RunLogHandler(process_index)
        self.logger.addHandler(handler)
        self.addCleanup(self.logger.removeHandler, handler)
        self.addCleanup(handler.close)
        return handler

    def lines(self):
        with open(os.path.join(self.dir, "out.log")) as handle:
            return handle.read().splitlines()

    def test_records_wait_in_memory_until_open_then_come_first_in_order(self):
        handler = self.attach()
        self.logger.info("before %d", 1)
        self.logger.warning("before %d", 2)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out.log")))
        handler.open(os.path.join(self.dir, "out.log"), "w")
        self.logger.info("after")
        self.assertEqual([LINE.sub("", line) for line in self.lines()], ["before 1", "before 2", "after"])
        self.assertEqual([LINE.match(line).group(1, 2) for line in self.lines()],
                         [("0", "INFO"), ("0", "WARNING"), ("0", "INFO")])

    def test_other_ranks_write_only_warnings_and_errors(self):
        handler = self.attach(process_index=3)
        handler.open(os.path.join(self.dir, "out.log"), "w")
        self.logger.info("rank 3 info")
        self.logger.error("rank 3 error")
        (line,) = self.lines()
        self.assertEqual(LINE.match(line).group(1, 2), ("3", "ERROR"))
        self.assertTrue(line.endswith("test_run_log.test_other_ranks_write_only_warnings_and_errors: rank 3 error"))

    def test_a_fresh_run_starts_anew_a_resumed_one_appends_after_a_boundary(self):
        with open(os.path.join(self.dir, "out.log"), "w") as handle:
            handle.write("an earlier run's line\n")
        for checkpoint, message in ((None, "fresh"), (f"{self.dir}/checkpoint-4", "resumed")):
            handler = self.attach()
            with mock.patch.object(run_logging, "current_handler", return_value=handler):
                run_logging.open_run_log(fake_args(self.dir), checkpoint=checkpoint)
            self.logger.info(message)
            self.logger.removeHandler(handler)
            handler.close()
        fresh, boundary, resumed = self.lines()
        self.assertRegex(boundary, rf"^===== resumed from {self.dir}/checkpoint-4 at \d{{4}}-\d\d-\d\d "
                                   r"\d\d:\d\d:\d\d =====$")
        self.assertEqual((LINE.sub("", fresh), LINE.sub("", resumed)), ("fresh", "resumed"))


@pytest.mark.slow  # pre-training runs, one resumed
class RunLogEndToEndTest(OneThreadTestCase):
    """A tiny pre-training run, then its resume: out.log in the run folder, a marked boundary, no secret in any
    file of the folder."""

    def test_run_logging_of_a_run_and_its_resume(self):
        out = self.dir / "run"
        secrets = {"HF_TOKEN": FAKE_HF_TOKEN, "WANDB_API_KEY": FAKE_WANDB_KEY, "MY_SERVICE_SECRET": "s3cr3t-value"}
        with mock.patch.dict(os.environ, secrets):
            pre_train(self.run_flags(out))
            first = (out / "out.log").read_text().splitlines()
            pre_train(self.run_flags(out, max_steps=6, resume_from_checkpoint="auto"))
        lines = (out / "out.log").read_text().splitlines()
        self.assertEqual(lines[:len(first)], first)
        boundary = lines[len(first)]
        self.assertRegex(boundary, rf"^===== resumed from {out}/checkpoint-4 at .* =====$")
        for part in (first, lines[len(first) + 1:]):
            starts = [line for line in part if "process rank 0 of 1, device cpu" in line]
            self.assertLen(starts, 1)
            self.assertEqual(LINE.match(starts[0]).group(1, 2, 3), ("0", "WARNING", "t5kit.outputs.run_logging"))
        steps = [re.search(r"step (\d+)/(\d+): \{\"loss\"", line) for line in lines]
        self.assertEqual([m.group(1, 2) for m in steps if m], [("1", "4"), ("2", "4"), ("3", "4"), ("4", "4"),
                                                              ("5", "6"), ("6", "6")])
        self.assertTrue(any("***** Running training *****" in line for line in lines))  # transformers' own lines
        for path in out.rglob("*"):
            if path.is_file():
                content = path.read_bytes()
                for secret in secrets.values():
                    self.assertNotIn(secret.encode(), content, path)

    def test_a_run_refused_after_logging_started_writes_no_out_log(self):
        """The corpus is refused in step 6, with records already held for out.log: none reaches the disk, and the
        error line is printed once, on stderr."""
        out, short = self.dir / "refused", self.dir / "short.txt"
        short.write_text("Too short.\n")
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit):
            cli.run_cli(lambda: pre_train(self.run_flags(out, train_files=str(short), validation_files=str(short))))
        self.assertFalse(out.exists())
        self.assertLen([line for line in stderr.getvalue().splitlines() if line.startswith("error:")], 1)
        self.assertNotIn("error:", stdout.getvalue())


if __name__ == "__main__":
    absltest.main()
