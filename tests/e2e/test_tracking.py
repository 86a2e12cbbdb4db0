"""Tracking: W&B (offline) gets the resolved flags and no secret; TensorBoard writes event files; both at once."""
import os
from pathlib import Path
from unittest import mock

import pytest
import yaml
from absl.testing import absltest

from t5kit.errors import UsageError
from tests.helpers import pre_train, require, tiny_run_flags

pytestmark = pytest.mark.slow  # a pre-training run per test

SECRET = "hf_TopSecretToken123"


class TrackingTest(absltest.TestCase):
    # wandb fixes its directory at the first run of a process, so all tests share one and tell runs apart by
    # which run folders appeared during the test.
    WANDB_DIR = Path(absltest.get_default_test_tmpdir()) / "wandb_runs"

    def wandb_runs(self):
        return set((self.WANDB_DIR / "wandb").glob("offline-run-*"))

    def setUp(self):
        super().setUp()
        self.WANDB_DIR.mkdir(parents=True, exist_ok=True)
        self.dir = Path(self.create_tempdir().full_path)
        self.corpus = str(require("gutenberg/austen-persuasion.txt"))

    def tearDown(self):
        import wandb
        wandb.finish()  # HF's WandbCallback re-uses an unfinished run; one run per test, as one per process
        super().tearDown()

    def test_wandb_offline_run_has_resolved_flags_and_no_secret(self):
        env = {"WANDB_MODE": "offline", "WANDB_DIR": str(self.WANDB_DIR), "HF_TOKEN": SECRET,
               "WANDB_RUN_GROUP": "tests"}
        before = self.wandb_runs()
        with mock.patch.dict(os.environ, env):
            pre_train(tiny_run_flags(str(self.dir / "out"), self.corpus, max_steps=2, report_to="wandb",
                                             run_name="tiny-wandb"))
        import wandb
        config = dict(wandb.run.config)
        record = yaml.safe_load((self.dir / "out" / "config.yaml").read_text())
        # The W&B run config holds what config.yaml holds: every flag as the run used it, and the derived values.
        for key, value in record.items():
            self.assertEqual(config[key], value, key)
        self.assertEqual((config["input_length"], config["noise_density"], config["run_name"]),
                         (64, 0.15, "tiny-wandb"))
        self.assertEqual(config["train_files"], [self.corpus])
        self.assertEqual(config["derived"]["global_batch_size"], 4)
        wandb.finish()  # as at process exit: the run folder is complete now
        run_dirs = list(self.wandb_runs() - before)
        self.assertLen(run_dirs, 1)
        for path in [*run_dirs[0].rglob("*"), *(self.dir / "out").rglob("*")]:
            if path.is_file():
                self.assertNotIn(SECRET.encode(), path.read_bytes(), path)

    def test_tensorboard_and_wandb_together(self):
        before = self.wandb_runs()
        with mock.patch.dict(os.environ, {"WANDB_MODE": "offline", "WANDB_DIR": str(self.WANDB_DIR)}):
            pre_train(tiny_run_flags(str(self.dir / "out"), self.corpus, max_steps=2,
                                             report_to="tensorboard,wandb"))
        self.assertNotEmpty(list((self.dir / "out").rglob("events.out.tfevents.*")))
        self.assertLen(self.wandb_runs() - before, 1)
        self.assertTrue((self.dir / "out" / "loss_curve.png").is_file())

    def test_hub_token_flag_is_refused(self):
        with self.assertRaisesRegex(UsageError, "--hub_token would be recorded with the run.*HF_TOKEN"):
            pre_train(tiny_run_flags(str(self.dir / "out"), self.corpus, hub_token=SECRET))
        self.assertFalse((self.dir / "out").exists())


if __name__ == "__main__":
    absltest.main()
