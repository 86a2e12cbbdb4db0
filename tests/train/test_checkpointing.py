"""train/checkpointing.py: broken checkpoints are skipped or refused, rotation keeps the best and the resumed-from
checkpoint. (NaN losses that stop or are skipped: tests/train/test_nonfinite_guard.py; SIGTERM/SIGUSR1 and the
requeue script: tests/launch/test_preemption.py.)"""
import logging
import shutil
import types
from pathlib import Path

import pytest
import torch
from absl.testing import absltest, parameterized

from t5kit.errors import UsageError
from t5kit.outputs import run_folder
from t5kit.train import checkpointing
from tests.helpers import OneThreadTestCase, pre_train, snapshot, tiny_run_flags


@pytest.mark.train_class  # pre-trains the checkpoints it breaks
class BrokenCheckpointTest(OneThreadTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.template = Path(absltest.get_default_test_tmpdir()) / "checkpointing_template"
        shutil.rmtree(cls.template, ignore_errors=True)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:  # one real run with checkpoint-2 and checkpoint-4, copied by each test
            pre_train(tiny_run_flags(str(cls.template), cls.corpus, max_steps=4, save_strategy="steps",
                                             save_steps=2))
        finally:
            torch.set_num_threads(threads)

    def setUp(self):
        super().setUp()
        self.out = self.dir / "run"
        shutil.copytree(self.template, self.out)

    def test_complete_checkpoints_have_a_manifest_and_nothing_is_left_staged(self):
        self.assertEqual([p.name for p in run_folder.list_checkpoints(self.out)],
                         ["checkpoint-2", "checkpoint-4"])
        for folder in run_folder.list_checkpoints(self.out):
            self.assertIsNone(checkpointing.find_problem(folder))
            self.assertTrue((folder / "model.safetensors").is_file())
            self.assertEmpty(list(folder.glob("pytorch_model*.bin")))  # weights as safetensors only
        self.assertFalse((self.out / checkpointing.STAGING_DIR).exists())

    @parameterized.named_parameters(
        ("flipped_byte", "model.safetensors", "flip", "model.safetensors does not match its sha256"),
        ("truncated", "optimizer.pt", "truncate", "optimizer.pt has .* bytes, the manifest says"),
        ("missing_file", "scheduler.pt", "delete", "scheduler.pt is missing"),
        ("missing_manifest", "manifest.json", "delete", "no manifest.json"),
    )
    def test_auto_skips_a_broken_latest_checkpoint_with_a_warning(self, name, damage, reason):
        damage_file(self.out / "checkpoint-4" / name, damage)
        with self.assertLogs(checkpointing.logger, logging.WARNING) as logs:
            chosen = checkpointing.resolve_checkpoint(str(self.out), "auto")
        self.assertEqual(Path(chosen).name, "checkpoint-2")
        self.assertRegex(logs.output[0], f"skipping checkpoint {self.out / 'checkpoint-4'}: {reason}")

    def test_an_explicit_broken_path_is_refused_and_nothing_is_written(self):
        damage_file(self.out / "checkpoint-4" / "model.safetensors", "flip")
        before = snapshot(self.out)
        with self.assertRaisesRegex(UsageError, "checkpoint-4 is not a complete checkpoint: model.safetensors"):
            pre_train(self.run_flags(self.out, resume_from_checkpoint=str(self.out / "checkpoint-4")))
        self.assertEqual(snapshot(self.out), before)

    def test_rotation_keeps_the_new_best_and_resumed_from_checkpoints(self):
        for step in (2, 4, 6, 8, 10):
            (self.dir / f"checkpoint-{step}").mkdir()
        best, resumed = str(self.dir / "checkpoint-4"), str(self.dir / "checkpoint-6")
        trainer = types.SimpleNamespace(args=types.SimpleNamespace(save_total_limit=2), resumed_from=resumed,
                                        state=types.SimpleNamespace(best_model_checkpoint=best))
        checkpointing.SafeCheckpointMixin.rotate(trainer, self.dir, self.dir / "checkpoint-10")
        self.assertEqual([p.name for p in run_folder.list_checkpoints(self.dir)],
                         ["checkpoint-4", "checkpoint-6", "checkpoint-10"])


def damage_file(path, how):
    if how == "delete":
        path.unlink()
    elif how == "truncate":
        path.write_bytes(path.read_bytes()[:-100])
    else:  # flip one byte in the middle: same size, different hash
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))


if __name__ == "__main__":
    absltest.main()
