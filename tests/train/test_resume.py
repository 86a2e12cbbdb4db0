"""train/resume.py: the one resume point of a run, found at step 3. A finished run stays finished (exit 0, its folder
byte for byte and mtime for mtime as it was), and one optimizer step runs its events in the order
docs/architecture.md states."""
import json
import re
import shutil
import types
from pathlib import Path
from unittest import mock

import pytest
import torch
import transformers
from absl.testing import absltest, parameterized

from t5kit.outputs import run_folder
from t5kit.train import checkpointing, resume
from t5kit.train.checkpointing import SafeCheckpointMixin
from t5kit.train.nonfinite_guard import NonFiniteGuardMixin
from t5kit.train.preemption import PreemptionCallback
from tests.forked import run_forked
from tests.helpers import REPO, OneThreadTestCase, pre_train, tiny_run_flags


def snapshot_with_times(folder):
    """{relative path: (bytes or None for a folder, mtime in ns)} of folder and everything under it."""
    paths = [Path(folder), *sorted(Path(folder).rglob("*"))]
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None, p.stat().st_mtime_ns)
            for p in paths}


def flags_of(**values):
    """The training arguments find_resume_point and finished_run read."""
    return types.SimpleNamespace(**{"resume_from_checkpoint": "auto", "overwrite_output_dir": False,
                                    "max_steps": -1, "num_train_epochs": 3.0, **values})


@pytest.mark.train_class  # a run to step 20 in setUpClass
class FinishedRunTest(OneThreadTestCase):
    """One run to --max_steps 20 (checkpoint-10, checkpoint-20, the final model and metrics.json), reused by each
    test through a copy."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.template = Path(absltest.get_default_test_tmpdir()) / "finished_run_template"
        shutil.rmtree(cls.template, ignore_errors=True)
        cls.argv = tiny_run_flags(str(cls.template), cls.corpus, max_steps=20, save_strategy="steps", save_steps=10,
                                  logging_steps=5)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            pre_train(cls.argv)
        finally:
            torch.set_num_threads(threads)

    def setUp(self):
        super().setUp()
        self.out = self.dir / "run"
        shutil.copytree(self.template, self.out, copy_function=shutil.copy2)
        self.argv = [str(self.out) if arg == str(self.template) else arg for arg in self.argv]

    def test_auto_on_a_finished_run_exits_0_and_touches_nothing(self):
        self.assertEqual(sorted(p.name for p in run_folder.list_checkpoints(self.out)),
                         ["checkpoint-10", "checkpoint-20"])
        before = snapshot_with_times(self.out)
        result = run_forked("pre_train_t5", [*self.argv, "--resume_from_checkpoint", "auto"])  # a process of its own
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertRegex(result.stdout + result.stderr,
                         rf"--resume_from_checkpoint auto: {self.out} holds a finished run \(\S*checkpoint-20 is at "
                         r"step 20, --max_steps 20\); nothing to do")
        self.assertEqual(snapshot_with_times(self.out), before)

    def test_the_final_model_counts_where_the_final_checkpoint_is_gone(self):
        """checkpoint-20 deleted (a user freeing space): the newest checkpoint is 10, but metrics.json records the
        run's end at step 20, so resuming from checkpoint-10 would redo finished work and overwrite its outputs."""
        shutil.rmtree(self.out / "checkpoint-20")
        before = snapshot_with_times(self.out)
        with self.assertLogs("t5kit.train.resume", "INFO") as logs:
            self.assertEqual(pre_train([*self.argv, "--resume_from_checkpoint", "auto"]), {})
        self.assertRegex("\n".join(logs.output), r"holds a finished run \(metrics.json is at step 20, --max_steps 20\)")
        self.assertEqual(snapshot_with_times(self.out), before)

    def test_a_raised_max_steps_resumes_from_the_last_checkpoint(self):
        point = resume.find_resume_point(flags_of(output_dir=str(self.out), max_steps=30))
        self.assertIsNone(point.finished)
        self.assertEqual((Path(point.checkpoint).name, point.global_step), ("checkpoint-20", 20))

    def test_a_run_stopped_before_its_outputs_resumes_to_write_them(self):
        """Killed during the final evaluation: checkpoint-20 is at the end, but there is no metrics.json yet."""
        (self.out / "metrics.json").unlink()
        point = resume.find_resume_point(flags_of(output_dir=str(self.out), max_steps=20))
        self.assertIsNone(point.finished)
        self.assertEqual(Path(point.checkpoint).name, "checkpoint-20")


@pytest.mark.slow  # real runs
class FinishedEpochRunTest(OneThreadTestCase):

    def test_a_run_of_one_and_a_half_epochs_is_finished_by_its_epoch(self):
        """20 documents make 33 training windows: 9 steps an epoch, so 1.5 epochs end at step 14 (HF rounds the
        steps up), at epoch 1 + 5/9. The end is told from the epoch HF records, as the steps of an epoch are not
        known before the data is loaded."""
        out = self.dir / "run"
        argv = self.run_flags(out, max_steps=-1, num_train_epochs=1.5, max_train_samples=20, max_eval_samples=4,
                              save_steps=7)
        pre_train(argv)
        point = resume.find_resume_point(flags_of(output_dir=str(out), max_steps=-1, num_train_epochs=2.0))
        self.assertEqual((Path(point.checkpoint).name, point.global_step), ("checkpoint-14", 14))
        self.assertAlmostEqual(point.epoch, 1 + 5 / 9)
        self.assertIsNone(point.finished)  # a second epoch asked for: it trains on
        before = snapshot_with_times(out)
        self.assertEqual(pre_train([*argv, "--resume_from_checkpoint", "auto"]), {})
        self.assertEqual(snapshot_with_times(out), before)


class ReachedEndTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("steps_reached", 20, 0.5, {"max_steps": 20}, "--max_steps 20"),
        ("steps_short", 19, 0.5, {"max_steps": 20}, None),
        ("max_steps_wins_over_epochs", 20, 0.5, {"max_steps": 30, "num_train_epochs": 0.1}, None),
        ("epochs_reached", 30, 3.0, {"num_train_epochs": 3.0}, "epoch 3 of --num_train_epochs 3"),
        ("fraction_of_an_epoch_reached", 8, 2.6666666666666665, {"num_train_epochs": 2.5},
         "epoch 2.66667 of --num_train_epochs 2.5"),
        ("one_micro_batch_short", 29, 2.9999, {"num_train_epochs": 3.0}, None),
    )
    def test_the_end_of_steps_and_of_epochs(self, step, epoch, flags, expected):
        self.assertEqual(resume.reached_end(step, epoch, flags_of(**flags)), expected)


class ResumePointTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.out = Path(self.create_tempdir().full_path)

    def checkpoint(self, step, epoch, **files):
        folder = self.out / f"checkpoint-{step}"
        folder.mkdir()
        history = [{"step": step, "loss": 1.0, "skipped_nonfinite_steps": 2}]
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "epoch": epoch,
                                                               "log_history": history}))
        for name, value in files.items():
            (folder / name).write_text(json.dumps(value))
        checkpointing.write_manifest(folder)
        return folder

    def test_one_read_holds_everything_a_resume_restores(self):
        position = {"window": 16, "epoch": 0, "state": {}}
        folder = self.checkpoint(4, 0.5, **{"stream_position.json": position})
        point = resume.find_resume_point(flags_of(output_dir=str(self.out), max_steps=8))
        self.assertEqual(point, resume.ResumePoint(checkpoint=str(folder), global_step=4, epoch=0.5,
                                                   stream_position=position, skipped_nonfinite_steps=2))

    def test_a_fresh_start_is_the_empty_resume_point(self):
        self.assertEqual(resume.find_resume_point(flags_of(output_dir=str(self.out / "new"))),
                         resume.ResumePoint())

    @parameterized.named_parameters(
        ("epochs_done", 3.0, {"num_train_epochs": 3.0}, True),
        ("more_epochs_asked", 3.0, {"num_train_epochs": 4.0}, False),
    )
    def test_an_epoch_based_run_is_finished_by_its_epoch(self, epoch, flags, finished):
        self.checkpoint(30, epoch)
        (self.out / "metrics.json").write_text(json.dumps({"log_history": [
            {"step": 30, "epoch": epoch, "train_runtime": 1.0}]}))
        point = resume.find_resume_point(flags_of(output_dir=str(self.out), **flags))
        self.assertEqual(point.finished is not None, finished, point.finished)

    def test_an_evaluation_only_run_is_not_a_finished_training(self):
        self.checkpoint(30, 3.0)
        (self.out / "metrics.json").write_text(json.dumps({"log_history": [{"step": 30, "eval_loss": 1.0}]}))
        self.assertIsNone(resume.find_resume_point(flags_of(output_dir=str(self.out))).finished)


# The events of one optimizer step that logs, evaluates and saves, in the order they run: (name, owner, attribute,
# which calls count).
EVENTS = (
    ("verdict", NonFiniteGuardMixin, "_get_grad_norm", None),
    ("pre-emption", PreemptionCallback, "on_step_end", None),
    ("log", NonFiniteGuardMixin, "log", lambda trainer, logs, *_: "loss" in logs),
    ("evaluate", transformers.Seq2SeqTrainer, "evaluate", None),
    ("save", transformers.Trainer, "_save_checkpoint", None),
    ("manifest", checkpointing, "write_manifest", None),
    ("commit", checkpointing, "commit", None),
    ("rotate", SafeCheckpointMixin, "rotate", None),
)


@pytest.mark.slow  # a run with every event of a step
class StepTimelineTest(OneThreadTestCase):

    def test_one_optimizer_step_runs_its_events_in_the_order_the_architecture_page_states(self):
        page = (REPO / "docs" / "architecture.md").read_text()
        section = page.split("### One optimizer step, in order", 1)[1].split("\n#", 1)[0]
        stated = re.findall(r"^\d+\. \*\*([a-z-]+)\*\*", section, re.MULTILINE)
        self.assertEqual(sorted(stated), sorted(name for name, *_ in EVENTS))

        events = []
        patches = [mock.patch.object(owner, attribute, recording(events, name, getattr(owner, attribute), when))
                   for name, owner, attribute, when in EVENTS]
        for patch in patches:
            patch.start()
            self.addCleanup(patch.stop)
        pre_train(self.run_flags(self.dir / "run", max_steps=4, logging_steps=2, eval_strategy="steps", eval_steps=2,
                                 save_steps=2, save_total_limit=1))
        steps = split_at(events, "verdict")
        self.assertLen(steps, 4)
        self.assertEqual(steps[1], stated)  # step 2 logs, evaluates and saves
        self.assertEqual(steps[0], ["verdict", "pre-emption"])  # step 1 does neither


def recording(events, name, original, when=None):
    def wrapper(*args, **kwargs):
        if when is None or when(*args, **kwargs):
            events.append(name)
        return original(*args, **kwargs)
    return wrapper


def split_at(events, first):
    """events cut into runs that each start with `first` (what comes before the first one is dropped)."""
    runs = []
    for event in events:
        if event == first:
            runs.append([])
        if runs:
            runs[-1].append(event)
    return runs


if __name__ == "__main__":
    absltest.main()
