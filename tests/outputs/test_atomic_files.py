"""Files in a run folder get the modes open() and mkdir() would give them under the process umask (0644 and 0755
under umask 022, 0640 and 0750 under 027), whoever writes them: our atomic writer (mkstemp would give 0600),
safetensors (which writes 0600 through its own temporary file), HF, torch, the logger."""
import os
import stat
from pathlib import Path

import pytest
from absl.testing import absltest, parameterized

from t5kit.outputs import atomic_files
from tests.helpers import OneThreadTestCase, entry_main, fine_tune, predict_flags, save_tiny_t5, tiny_flags

# What each run must have written (so that a run writing less cannot pass by having fewer files to check).
PRETRAIN_FILES = ("model.safetensors", "config.yaml", "metrics.json", "README.md", "loss_curve.png", "out.log",
                  "checkpoint-2/model.safetensors", "checkpoint-2/manifest.json", "checkpoint-2/optimizer.pt")
FINETUNE_FILES = ("adapter_model.safetensors", "config.yaml", "metrics.json", "README.md", "loss_curve.png",
                  "predictions_rte_validation.jsonl", "predictions_rte_test.jsonl", "glue_submission/RTE.tsv",
                  "merged/model.safetensors", "checkpoint-2/adapter_model.safetensors", "predict_t5.jsonl")


def wrong_modes(folder, umask):
    """{relative path: octal mode} of everything under `folder` whose mode is not what open()/mkdir() give."""
    file_mode, dir_mode = 0o666 & ~umask, 0o777 & ~umask
    wrong = {}
    for path in sorted(Path(folder).rglob("*")):
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode != (dir_mode if path.is_dir() else file_mode):
            wrong[str(path.relative_to(folder))] = oct(mode)
    return wrong


class UmaskTestCase(OneThreadTestCase):
    umask = 0o022

    def setUp(self):
        super().setUp()
        previous = os.umask(self.umask)
        self.addCleanup(os.umask, previous)


class AtomicWriteModeTest(UmaskTestCase):

    @parameterized.named_parameters(("umask_022", 0o022, 0o644), ("umask_027", 0o027, 0o640),
                                    ("umask_077", 0o077, 0o600))
    def test_a_written_file_has_the_mode_open_gives(self, umask, expected):
        os.umask(umask)
        self.assertEqual(atomic_files.current_umask(), umask)
        atomic_files.write_json(self.dir / "a.json", {"x": 1})
        with open(self.dir / "b.json", "w"):
            pass
        self.assertEqual(stat.S_IMODE((self.dir / "a.json").stat().st_mode), expected)
        self.assertEqual(stat.S_IMODE((self.dir / "b.json").stat().st_mode), expected)
        self.assertEqual(sorted(p.name for p in self.dir.iterdir()), ["a.json", "b.json"])  # no temporary left


@pytest.mark.slow  # real tiny runs, their folders' modes under two umasks
class RunFolderModeTest(UmaskTestCase):
    """Every file and folder of real tiny run folders, checkpoints included."""

    @parameterized.named_parameters(("umask_022", 0o022), ("umask_027", 0o027))
    def test_pre_training_run_folder(self, umask):
        os.umask(umask)
        out = self.dir / "run"
        entry_main("pre_train_t5")(self.run_flags(out, max_steps=2, save_steps=2))
        for name in PRETRAIN_FILES:
            self.assertTrue((out / name).is_file(), name)
        self.assertEqual(wrong_modes(out, umask), {})

    def test_fine_tuning_run_folder_with_adapters_merged_model_and_predictions(self):
        umask = 0o027
        os.umask(umask)
        out = self.dir / "run"
        base = save_tiny_t5(self.dir / "base")
        fine_tune(tiny_flags(str(out), model_name_or_path=base, peft="lora", merge_adapters=True, max_steps=2,
                             do_predict=True, max_predict_samples=4, leaderboard_files=True))
        entry_main("predict_t5")(predict_flags(str(out / "merged"), str(self.corpus), str(out / "predict_t5.jsonl"),
                                               max_predict_samples=2, max_new_tokens=2))
        for name in FINETUNE_FILES:
            self.assertTrue((out / name).is_file(), name)
        self.assertEqual(wrong_modes(out, umask), {})


if __name__ == "__main__":
    absltest.main()
