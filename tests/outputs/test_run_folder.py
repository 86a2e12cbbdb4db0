"""outputs/run_folder.py: the names in a run folder, its checkpoint-N folders in step order, the one rule for writing
into a folder that holds a run (refused unless overwritten or resumed; a finished run without a checkpoint is never
restarted over), and an --output_dir refused at once where it is a file, lies under one, or cannot be created."""
import os
from pathlib import Path
from unittest import mock

from absl.testing import absltest, parameterized

from t5kit.errors import UsageError
from t5kit.outputs import run_folder


class CheckpointNamesTest(parameterized.TestCase):

    @parameterized.named_parameters(("step", "checkpoint-20", 20), ("path", "/runs/x/checkpoint-7", 7),
                                    ("zero_padded", "checkpoint-007", 7), ("staged", ".checkpoint-2", None),
                                    ("suffix", "checkpoint-2.tmp", None), ("no_step", "checkpoint-", None),
                                    ("other", "merged", None))
    def test_checkpoint_step(self, name, step):
        self.assertEqual(run_folder.checkpoint_step(name), step)

    def test_checkpoints_are_listed_by_step_not_by_name(self):
        out = Path(self.create_tempdir().full_path)
        for name in ("checkpoint-10", "checkpoint-9", "checkpoint-100", "merged", ".saving"):
            (out / name).mkdir()
        (out / "checkpoint-11").write_text("a file, not a checkpoint")
        self.assertEqual([p.name for p in run_folder.list_checkpoints(out)],
                         ["checkpoint-9", "checkpoint-10", "checkpoint-100"])
        self.assertEqual(run_folder.list_checkpoints(out / "absent"), [])


class OutputDirRuleTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.out = Path(self.create_tempdir().full_path) / "run"

    def test_a_new_or_empty_folder_is_written(self):
        run_folder.check_output_dir(self.out, False, None)  # not there yet
        self.out.mkdir()
        (self.out / run_folder.LOCK_FILE).write_text("")  # the lock of the run now starting is no run
        run_folder.check_output_dir(self.out, False, None)
        self.assertFalse(run_folder.holds_a_run(self.out))

    def test_a_folder_holding_a_run_needs_overwrite_or_resume(self):
        self.out.mkdir()
        (self.out / run_folder.CONFIG_FILE).write_text("seed: 1\n")
        with self.assertRaisesRegex(UsageError, f"^--output_dir {self.out} is not empty; pass --overwrite_output_dir "
                                                "to write into it, --resume_from_checkpoint auto to continue its run, "
                                                "or choose another --output_dir$"):
            run_folder.check_output_dir(self.out, False, "false")
        run_folder.check_output_dir(self.out, True, None)
        run_folder.check_output_dir(self.out, False, "auto")

    def test_a_finished_run_without_a_checkpoint_is_not_restarted_over(self):
        self.out.mkdir()
        (self.out / run_folder.METRICS_FILE).write_text("{}")
        with self.assertRaisesRegex(UsageError, f"^--resume_from_checkpoint auto: --output_dir {self.out} holds a "
                                                r"finished run \(metrics.json\) and no complete checkpoint to continue "
                                                "from; pass --overwrite_output_dir true to replace it"):
            run_folder.check_output_dir(self.out, False, "auto")
        run_folder.check_output_dir(self.out, False, "auto", checkpoint=str(self.out / "checkpoint-4"))
        run_folder.check_output_dir(self.out, True, "auto")

    @parameterized.named_parameters(("none", None, False), ("empty", "", False), ("false", "false", False),
                                    ("False", "False", False), ("auto", "auto", True),
                                    ("path", "/x/checkpoint-2", True))
    def test_asks_to_resume(self, value, asks):
        self.assertEqual(run_folder.asks_to_resume(value), asks)


class FolderPathTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        (self.dir / "notes.txt").write_text("a file\n")

    def test_a_file_is_no_output_dir(self):
        with self.assertRaisesRegex(UsageError, f"^--output_dir {self.dir}/notes.txt is a file; pass a folder path$"):
            run_folder.check_output_dir(self.dir / "notes.txt", True, None)
        with self.assertRaisesRegex(UsageError, f"^--output_dir {self.dir}/notes.txt/run cannot be created: "
                                                f"{self.dir}/notes.txt is a file; pass a folder path$"):
            run_folder.check_folder_path(self.dir / "notes.txt" / "run")

    def test_the_nearest_existing_folder_is_found(self):
        self.assertEqual(run_folder.nearest_existing(self.dir / "a" / "b" / "c"), self.dir)
        self.assertEqual(run_folder.nearest_existing(self.dir / "notes.txt"), self.dir / "notes.txt")

    def test_a_folder_without_write_permission_is_refused_now(self):
        locked = self.dir / "locked"
        locked.mkdir()
        with mock.patch.object(run_folder.os, "access", return_value=False) as access, \
                self.assertRaisesRegex(UsageError, f"^--output_dir {locked}/run/deeper cannot be created: no write "
                                                   f"permission in {locked}; pass a folder you can write to$"):
            run_folder.check_can_create(locked / "run" / "deeper")
        access.assert_called_once_with(locked, os.W_OK | os.X_OK)  # checked, not tried: nothing was made
        self.assertEqual(list(locked.iterdir()), [])
        run_folder.check_can_create(locked / "run")  # writable: accepted

    def test_scripts_that_build_a_whole_folder_refuse_files_in_the_way_and_a_full_folder(self):
        with self.assertRaisesRegex(UsageError, f"^--output_dir {self.dir}/notes.txt is a file; pass a folder$"):
            run_folder.check_new_output_dir(self.dir / "notes.txt", True)
        with self.assertRaisesRegex(UsageError, f"^--output_dir {self.dir}/notes.txt/tok: {self.dir}/notes.txt is a "
                                                "file; pass a folder$"):
            run_folder.check_new_output_dir(self.dir / "notes.txt" / "tok", True)
        with self.assertRaisesRegex(UsageError, f"^--output_dir {self.dir} is not empty; use --overwrite_output_dir "
                                                "to replace it$"):
            run_folder.check_new_output_dir(self.dir, False)
        run_folder.check_new_output_dir(self.dir, True)
        run_folder.check_new_output_dir(self.dir / "new", False)

    def test_the_work_folder_is_made_beside_the_output(self):
        work = run_folder.make_work_dir(self.dir / "deeper" / "tok")
        self.assertEqual(work.parent, self.dir / "deeper")
        self.assertTrue(work.name.startswith(".tok.tmp-") and work.is_dir())

    def test_a_folder_that_cannot_be_made_is_one_line(self):
        with self.assertRaisesRegex(UsageError, r"^--output_dir /proc/nope/tok cannot be created \(No such file or "
                                                r"directory\); pass a folder you can write to$"):
            run_folder.make_work_dir("/proc/nope/tok")


if __name__ == "__main__":
    absltest.main()
