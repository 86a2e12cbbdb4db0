"""Tracking: W&B (offline) gets the resolved flags and no secret; TensorBoard writes event files; both at once."""
import os
from pathlib import Path
from unittest import mock

from absl.testing import absltest

import pre_train_t5
from flags import UsageError
from shared_data import require
from test_pre_train_t5 import tiny_run_flags

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
            pre_train_t5.main(tiny_run_flags(str(self.dir / "out"), self.corpus, max_steps=2, report_to="wandb",
                                             run_name="tiny-wandb"))
        import wandb
        flags = dict(wandb.run.config["flags"])
        self.assertEqual((flags["input_length"], flags["noise_density"], flags["run_name"]), (64, 0.15, "tiny-wandb"))
        self.assertEqual(flags["train_files"], [self.corpus])
        wandb.finish()  # as at process exit: the run folder is complete now
        run_dirs = list(self.wandb_runs() - before)
        self.assertLen(run_dirs, 1)
        for path in [*run_dirs[0].rglob("*"), *(self.dir / "out").rglob("*")]:
            if path.is_file():
                self.assertNotIn(SECRET.encode(), path.read_bytes(), path)

    def test_tensorboard_and_wandb_together(self):
        before = self.wandb_runs()
        with mock.patch.dict(os.environ, {"WANDB_MODE": "offline", "WANDB_DIR": str(self.WANDB_DIR)}):
            pre_train_t5.main(tiny_run_flags(str(self.dir / "out"), self.corpus, max_steps=2,
                                             report_to="tensorboard,wandb"))
        self.assertNotEmpty(list((self.dir / "out").rglob("events.out.tfevents.*")))
        self.assertLen(self.wandb_runs() - before, 1)
        self.assertTrue((self.dir / "out" / "loss_curve.png").is_file())

    def test_hub_token_flag_is_refused(self):
        with self.assertRaisesRegex(UsageError, "--hub_token would be recorded with the run.*HF_TOKEN"):
            pre_train_t5.main(tiny_run_flags(str(self.dir / "out"), self.corpus, hub_token=SECRET))
        self.assertFalse((self.dir / "out").exists())


if __name__ == "__main__":
    absltest.main()
