"""A training step reads no tensor value on the host except through deferred_read.DeferredRead, one step late: on a
GPU such a read (item, bool, float, int, tolist, cpu, numpy) waits for all queued work and lets the GPU run dry.
Checked on CPU by recording every such read from the first on_step_begin to the last on_step_end of tiny runs: the
steps and what runs between them (fetching the next batch, copying it, callbacks)."""
import traceback
from unittest import mock

import pytest
import torch
from absl.testing import absltest, parameterized
from torch.overrides import TorchFunctionMode
from transformers import TrainerCallback

from t5kit.train import task_trainer
from t5kit.train.deferred_read import DeferredRead
from t5kit.train.nonfinite_guard import NonFiniteLossError
from t5kit.train.pretrain_trainer import PretrainTrainer
from tests.helpers import OneThreadTestCase, fine_tune, nan_loss_at, pre_train, tiny_flags

HOST_READS = {"item", "__bool__", "__float__", "__int__", "__index__", "tolist", "cpu", "numpy"}


def caller():
    """file:line of the code that read the value (the innermost frame outside torch and this file)."""
    frames = [f for f in traceback.extract_stack() if "/torch/" not in f.filename and f.filename != __file__]
    return f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno} {frames[-1].line}"


class StepRecorder(TrainerCallback, TorchFunctionMode):
    """Host reads of tensor values from the first step's start to the last step's end, and the step each
    DeferredRead was made and read in."""

    def __init__(self):
        TrainerCallback.__init__(self)
        TorchFunctionMode.__init__(self)
        self.step, self.in_step, self.recording = 0, False, False
        self.reads = []  # caller() of each host read while recording, outside deferred_read.py
        self.deferred = []  # (step made, step read, read inside a step)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in HOST_READS:
            where = caller()
            if not where.startswith("deferred_read.py"):
                self.reads.append(where)
        return func(*args, **(kwargs or {}))

    def on_step_begin(self, args, state, control, **kwargs):
        if not self.recording:
            self.__enter__()
            self.recording = True
        self.in_step = True

    def on_step_end(self, args, state, control, **kwargs):
        self.in_step = False
        self.step += 1
        if state.global_step >= state.max_steps:
            self.stop_recording()

    def stop_recording(self):
        if self.recording:
            self.__exit__(None, None, None)
            self.recording = False

    def watch_deferred_reads(self):
        """Patches DeferredRead (shared by every module that imports it) to note when each is made and read."""
        recorder, make, read = self, DeferredRead.__init__, DeferredRead.read

        def noting_make(deferred, tensor):
            make(deferred, tensor)
            deferred.made_at = recorder.step

        def noting_read(deferred):
            recorder.deferred.append((deferred.made_at, recorder.step, recorder.in_step))
            return read(deferred)
        return mock.patch.multiple(DeferredRead, __init__=noting_make, read=noting_read)


def run_recorded(recorder, trainer_cls, run):
    """run() with `recorder` added to every trainer_cls built; returns the recorder."""
    init = trainer_cls.__init__

    def init_with_recorder(trainer, *args, **kwargs):
        init(trainer, *args, **kwargs)
        trainer.add_callback(recorder)  # last: its on_step_end closes the step after every other callback
    try:
        with mock.patch.object(trainer_cls, "__init__", init_with_recorder), recorder.watch_deferred_reads():
            run()
    finally:
        recorder.stop_recording()  # a step that raised never reached the last on_step_end: leave no mode behind
    return recorder


@pytest.mark.slow  # pre-training runs under a recorder
class HostReadTest(OneThreadTestCase):

    def run_recorded(self, recorder=None, **flags):
        argv = self.run_flags(self.dir / "run", **{"max_steps": 6, "logging_steps": 100, "save_strategy": "no",
                                                   **flags})
        return run_recorded(recorder or StepRecorder(), PretrainTrainer, lambda: pre_train(argv))

    @parameterized.named_parameters(
        ("stop", {}), ("skip", {"nan_policy": "skip"}), ("accumulation", {"gradient_accumulation_steps": 2}),
        ("streaming", {"streaming": True, "max_eval_samples": 8}), ("adafactor_stop", {"optim": "adafactor"}))
    def test_steps_read_nothing_on_the_host_and_each_verdict_a_step_later(self, flags):
        recorder = self.run_recorded(**flags)
        self.assertEqual(recorder.reads, [])
        self.assertEqual(recorder.step, 6)
        inside = [(made, read) for made, read, in_step in recorder.deferred if in_step]
        self.assertNotEmpty(inside)
        self.assertTrue(all(read == made + 1 for made, read in inside), inside)

    def test_unfused_optimizer_under_skip_reads_the_verdict_in_its_own_step(self):
        """Adafactor cannot skip an update on the device (no found_inf): under `skip` the verdict is read at once."""
        recorder = self.run_recorded(optim="adafactor", nan_policy="skip")
        verdicts_read_at_once = [(made, read) for made, read, in_step in recorder.deferred if in_step and made == read]
        self.assertLen(verdicts_read_at_once, 6)

    def test_stop_is_raised_a_step_later_before_that_steps_update(self):
        """Without a log or save at the bad step, `stop` comes from the next step's first micro-batch."""
        recorder = StepRecorder()
        with nan_loss_at(3), self.assertRaisesRegex(NonFiniteLossError, r"non-finite loss \(nan\) at step 3;"):
            self.run_recorded(recorder)
        self.assertEqual(recorder.step, 3)  # steps 1-3 ended; the error came from inside step 4
        self.assertEqual(recorder.deferred[-1], (2, 3, True))


@pytest.mark.slow  # a fine-tuning run under a recorder
class FineTuneHostReadTest(OneThreadTestCase):
    """Fine-tuning batches are padded. transformers reads the padding mask on the host in its SDPA mask function
    (padding_mask.all(), to drop a mask that masks nothing; skipped under torch.compile); t5_flex's mask function
    keeps such a mask instead (t5_flex_attention.t5_flex_mask)."""

    @parameterized.named_parameters(("sdpa", "sdpa", 2), ("t5_flex", "t5_flex", 0))
    def test_reads_per_step(self, attn_implementation, reads_per_step):
        argv = tiny_flags(str(self.dir / "run"), optim="adafactor", eval_strategy="no", save_strategy="no",
                          logging_steps=100, attn_implementation=attn_implementation)
        recorder = run_recorded(StepRecorder(), task_trainer.TaskTrainer, lambda: fine_tune(argv))
        self.assertEqual(recorder.step, 4)
        self.assertLen(recorder.reads, reads_per_step * recorder.step)
        self.assertTrue(all(read.startswith("masking_utils.py") for read in recorder.reads), recorder.reads)


class DeferredReadTest(absltest.TestCase):

    def test_reads_the_value_the_tensor_had_when_made(self):
        tensor = torch.tensor([1.0, float("nan")])
        pending = DeferredRead(tensor)
        tensor.zero_()
        self.assertEqual(str(pending.read()), "[1.0, nan]")


if __name__ == "__main__":
    absltest.main()
