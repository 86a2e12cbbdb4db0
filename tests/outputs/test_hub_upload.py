"""outputs/hub_upload.py: --push_to_hub uploads the finished run folder once, at the end, at the huggingface_hub
boundary (HfApi mocked: no network here): which repo, which commit message, exactly which files; a missing token or
an unreachable hub is one `error:` line after the model is saved, the run folder whole."""
import contextlib
import io
import os
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import huggingface_hub
import pytest
from absl.testing import absltest, parameterized
from huggingface_hub.hf_api import DEFAULT_IGNORE_PATTERNS
from huggingface_hub.utils import filter_repo_objects

from t5kit import cli
from t5kit.errors import UsageError
from t5kit.outputs import hub_upload
from tests.helpers import OneThreadTestCase, fine_tune, pre_train, tiny_flags, training_args

FAKE_TOKEN = "hf_FakeTokenForTestsOnly0123456789abcdef"
REPO_ID = "t5kit-tests/tiny"
RUN_FILES = ["README.md", "config.json", "config.yaml", "generation_config.json", "loss_curve.png", "metrics.json",
             "model.safetensors", "tokenizer.json", "tokenizer_config.json"]


def uploaded_files(upload_kwargs):
    """The paths upload_folder would upload, filtered as huggingface_hub filters them."""
    folder = Path(upload_kwargs["folder_path"])
    paths = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    return sorted(filter_repo_objects(paths, allow_patterns=upload_kwargs["allow_patterns"],
                                      ignore_patterns=upload_kwargs["ignore_patterns"] + DEFAULT_IGNORE_PATTERNS))


def checkpoint_files(out, name):
    return sorted(f"{name}/{p.name}" for p in (Path(out) / name).iterdir())


@contextlib.contextmanager
def mocked_hub():
    """HfApi replaced at the boundary: create_repo answers with the repo id the hub would give."""
    with mock.patch.object(hub_upload, "HfApi") as api_class:
        api_class.return_value.create_repo.side_effect = lambda repo_id, **_: SimpleNamespace(repo_id=repo_id)
        yield api_class


@pytest.mark.slow  # a real run per test
class PushEndToEndTest(OneThreadTestCase):

    def push_flags(self, out, **overrides):
        return self.run_flags(out, push_to_hub=True, hub_model_id=REPO_ID, **overrides)

    def test_fine_tuning_pushes_the_final_model_card_and_record_in_one_commit(self):
        out = self.dir / "rte"
        with mock.patch.dict(os.environ, {"HF_TOKEN": FAKE_TOKEN}), mocked_hub() as api_class:
            fine_tune(tiny_flags(str(out), push_to_hub=True, hub_model_id=REPO_ID))
        api_class.assert_called_once_with(token=FAKE_TOKEN)
        api = api_class.return_value
        api.create_repo.assert_called_once_with(REPO_ID, private=None, exist_ok=True)  # after training, not before
        (_, upload), = api.upload_folder.call_args_list
        self.assertEqual((upload["repo_id"], upload["folder_path"], upload["commit_message"], upload["revision"]),
                         (REPO_ID, str(out), "End of training (fine_tune_t5.py, step 4)", None))
        self.assertEqual(uploaded_files(upload), RUN_FILES)
        self.assertTrue(any(p.name.startswith("checkpoint-") for p in out.iterdir()))  # kept, not uploaded
        self.assertIn("push_to_hub: true", (out / "config.yaml").read_text())  # the flag as given

    @parameterized.named_parameters(("end", "end", []), ("every_save", "every_save", []),
                                    ("checkpoint", "checkpoint", ["checkpoint-4"]),
                                    ("all_checkpoints", "all_checkpoints", ["checkpoint-2", "checkpoint-4"]))
    def test_checkpoints_are_uploaded_only_when_hub_strategy_asks(self, strategy, checkpoints):
        out = self.dir / strategy
        with mock.patch.dict(os.environ, {"HF_TOKEN": FAKE_TOKEN}), mocked_hub() as api_class:
            pre_train(self.push_flags(out, hub_strategy=strategy))
        (_, upload), = api_class.return_value.upload_folder.call_args_list
        expected = sorted(RUN_FILES + [f for name in checkpoints for f in checkpoint_files(out, name)])
        self.assertEqual(uploaded_files(upload), expected)
        self.assertEqual(upload["commit_message"], "End of training (pre_train_t5.py, step 4)")

    def test_missing_token_is_one_line_after_the_model_is_saved(self):
        out = self.dir / "no_token"
        environ = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
        stderr = io.StringIO()
        with mock.patch.dict(os.environ, environ, clear=True), mocked_hub() as api_class, \
                contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit) as exit_info:
            cli.run_cli(lambda: pre_train(self.push_flags(out)))
        self.assertEqual(exit_info.exception.code, 2)
        api_class.assert_not_called()
        (error,) = [line for line in stderr.getvalue().splitlines() if line.startswith("error:")]
        self.assertEqual(error, f"error: --push_to_hub: HF_TOKEN is not set, so nothing was uploaded to {REPO_ID}; "
                                f"the run is saved in {out}; upload it later with `HF_TOKEN=... hf upload {REPO_ID} "
                                f"{out} --exclude 'checkpoint-*' --exclude out.log`")
        for name in ("model.safetensors", "README.md", "metrics.json", "config.yaml", "loss_curve.png"):
            self.assertTrue((out / name).is_file(), name)
        log = (out / "out.log").read_text().splitlines()
        self.assertTrue(any("--push_to_hub true but HF_TOKEN is not set" in line for line in log))
        self.assertIn(f"ERROR t5kit.cli: {error}", log[-1])

    def test_an_offline_hub_is_one_line_after_the_model_is_saved(self):
        """The real HfApi, with HF_HUB_OFFLINE=1 as every test runs: huggingface_hub refuses the request."""
        out = self.dir / "offline"
        with mock.patch.dict(os.environ, {"HF_TOKEN": FAKE_TOKEN}), \
                self.assertRaisesRegex(UsageError, f"^--push_to_hub: the upload to {REPO_ID} failed .*offline mode is "
                                                   f"enabled.*; the run is saved in {out}; upload it later"):
            pre_train(self.push_flags(out))
        self.assertTrue((out / "model.safetensors").is_file())
        self.assertTrue((out / "README.md").is_file())


class PushUnitTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.out = Path(self.create_tempdir().full_path)
        for name in ("model.safetensors", "out.log", "checkpoint-10/model.safetensors", "checkpoint-9/x.json",
                     ".saving/checkpoint-11/model.safetensors", "README.md"):
            (self.out / name).parent.mkdir(parents=True, exist_ok=True)
            (self.out / name).write_text("x")

    @parameterized.named_parameters(("end", "end", []), ("checkpoint", "checkpoint", ["checkpoint-10"]),
                                    ("all", "all_checkpoints", ["checkpoint-9", "checkpoint-10"]))
    def test_checkpoint_folders_by_step_not_by_name(self, strategy, expected):
        self.assertEqual(hub_upload.checkpoint_folders(self.out, strategy), expected)

    def test_the_trainer_gets_a_copy_with_hf_push_off(self):
        args = training_args("--push_to_hub", "true", "--hub_model_id", REPO_ID)
        copy = hub_upload.trainer_arguments(args)
        self.assertEqual((copy.push_to_hub, args.push_to_hub, copy.hub_model_id), (False, True, REPO_ID))
        plain = training_args()
        self.assertIs(hub_upload.trainer_arguments(plain), plain)

    def test_an_unreachable_hub_is_one_line(self):
        """No mock: huggingface_hub online, pointed at a closed local port (nothing leaves the machine)."""
        args = SimpleNamespace(hub_model_id=REPO_ID, output_dir=str(self.out), hub_private_repo=None,
                               hub_revision=None, hub_strategy="end")
        with mock.patch.dict(os.environ, {"HF_TOKEN": FAKE_TOKEN}), \
                mock.patch.object(huggingface_hub.constants, "HF_HUB_OFFLINE", False), \
                mock.patch.object(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9"), \
                self.assertRaisesRegex(UsageError, f"^--push_to_hub: the upload to {REPO_ID} failed \\(.*\\); the "
                                                   f"run is saved in {self.out}") as raised:
            hub_upload.push_run_folder(args, "msg")
        self.assertNotIn("\n", str(raised.exception))
        self.assertNotIn(FAKE_TOKEN, str(raised.exception))

    @parameterized.named_parameters(
        ("no_repo", ["--push_to_hub", "true"], "--push_to_hub true needs --hub_model_id NAME"),
        ("hub_token", ["--push_to_hub", "true", "--hub_model_id", REPO_ID, "--hub_token", FAKE_TOKEN],
         "--hub_token would be recorded"))
    def test_push_flags_refused_at_start(self, argv, message):
        with self.assertRaisesRegex(UsageError, message):
            training_args(*argv)


if __name__ == "__main__":
    absltest.main()
