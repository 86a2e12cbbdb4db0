"""train/stream_resume.py: exact resume of --streaming pre-training without re-reading the stream. The collator that
carries each window's id (and the stream's epoch for the masks) into the batch; on a trainer stand-in, the ids noted
a step late, the position written into each staged checkpoint (the highest id any rank trained on, plus one), and a
resumed stream put at its position with HF told to skip nothing, the user's arguments untouched. (Streamed runs
resumed bit for bit: tests/launch/test_resume.py.)"""
import copy
import json
import logging
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import numpy as np
import torch
from absl.testing import absltest, parameterized
from transformers import T5TokenizerFast

from data_collator import DataCollatorForT5SpanCorruption, compute_input_and_target_lengths
from t5kit.data.window_stream import WindowStream
from t5kit.train.stream_resume import POSITION_FILE, StreamPositionCollator, StreamResumeMixin
from tests.helpers import require


class StreamPositionCollatorTest(absltest.TestCase):

    def test_ids_go_into_the_batch_and_the_stream_epoch_sets_the_masks(self):
        tokenizer = T5TokenizerFast.from_pretrained(str(require("t5_spiece")))
        tokens_length, target_length = compute_input_and_target_lengths(64, 0.15, 3.0)
        span = DataCollatorForT5SpanCorruption(tokenizer, noise_density=0.15, mean_noise_span_length=3.0,
                                               input_length=64, target_length=target_length, seed=5)
        collator = StreamPositionCollator(span)
        rng = np.random.default_rng(0)
        windows = [rng.integers(5, 30000, tokens_length) for _ in range(3)]
        batch = collator([{"input_ids": w, "window_index": 10 + i, "stream_epoch": 2} for i, w in enumerate(windows)])
        self.assertEqual(batch["window_index"].tolist(), [10, 11, 12])
        self.assertEqual(span.epoch, 2)
        span.set_epoch(2)
        plain = span([{"input_ids": w} for w in windows])
        self.assertTrue(torch.equal(batch["input_ids"], plain["input_ids"]))  # the masks of epoch 2
        span.set_epoch(0)
        self.assertFalse(torch.equal(span([{"input_ids": w} for w in windows])["input_ids"], plain["input_ids"]))
        evaluation = collator([{"input_ids": w} for w in windows])  # evaluation windows: no ids, epoch unchanged
        self.assertNotIn("window_index", evaluation)
        self.assertEqual(span.epoch, 0)


class TrainerStandIn:
    """What the mixin calls on Trainer: a training step (noting the inputs it gets), the staged save of
    checkpointing.py (SafeCheckpointMixin) and HF's column-dropping collator wrapper."""

    def __init__(self, train_dataset, args, resume_point=None):
        self.train_dataset, self.args, self.resume_point = train_dataset, args, resume_point
        self.state = SimpleNamespace(global_step=4)
        self.accelerator = SimpleNamespace(gather=lambda tensor: torch.cat([tensor, tensor - 3]))  # two ranks
        self.stepped = []

    def training_step(self, model, inputs, num_items_in_batch=None):
        self.stepped.append(dict(inputs))
        return torch.tensor(1.0)

    def _get_output_dir(self, trial):
        return str(Path(self.args.output_dir) / ".saving")

    def _save_checkpoint(self, model, trial):
        (Path(self._get_output_dir(trial)) / f"checkpoint-{self.state.global_step}").mkdir(parents=True)

    def _get_collator_with_removed_columns(self, data_collator, description=None):
        return "HF's wrapper"


class Resuming(StreamResumeMixin, TrainerStandIn):
    pass


def a_stream():
    stream = mock.create_autospec(WindowStream, instance=True)
    stream.position.side_effect = lambda window: {"epoch": 1, "window": window, "documents": 40, "offset": 7}
    return stream


class StreamResumeMixinTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.args = SimpleNamespace(output_dir=self.create_tempdir().full_path, device=torch.device("cpu"),
                                    should_save=True, ignore_data_skip=False)

    def test_a_map_style_corpus_is_left_to_hf(self):
        trainer = Resuming(["window"] * 3, self.args, SimpleNamespace(checkpoint="ckpt", stream_position=None))
        self.assertIsNone(trainer.stream)
        self.assertIs(trainer.args, self.args)
        trainer._save_checkpoint(None, None)
        self.assertEqual([p.name for p in (Path(self.args.output_dir) / ".saving" / "checkpoint-4").iterdir()], [])
        self.assertEqual(trainer._get_collator_with_removed_columns("ours"), "ours")  # window_index kept

    def test_a_resumed_stream_starts_at_its_position_and_hf_skips_nothing(self):
        stream, position = a_stream(), {"epoch": 2, "window": 120, "documents": 55, "offset": 3}
        user_args = copy.copy(self.args)
        with self.assertLogs("t5kit.train.stream_resume", logging.INFO) as logs:
            trainer = Resuming(stream, self.args, SimpleNamespace(checkpoint="run/checkpoint-8",
                                                                  stream_position=position))
        stream.load_position.assert_called_once_with(position)
        self.assertEqual((trainer.last_trained_window, trainer.args.ignore_data_skip), (119, True))
        self.assertEqual(vars(self.args), vars(user_args))  # the run record's arguments stay as given
        self.assertIn("stream resumes at window 120 (epoch 2) from run/checkpoint-8/stream_position.json",
                      logs.output[0])

    def test_a_checkpoint_without_a_position_reads_the_stream_again(self):
        stream = a_stream()
        with self.assertLogs("t5kit.train.stream_resume", logging.WARNING) as logs:
            trainer = Resuming(stream, self.args, SimpleNamespace(checkpoint="run/checkpoint-8",
                                                                  stream_position=None))
        stream.load_position.assert_not_called()
        self.assertIs(trainer.args, self.args)
        self.assertIn("run/checkpoint-8 has no stream_position.json", logs.output[0])
        Resuming(a_stream(), self.args, SimpleNamespace(checkpoint=None, stream_position=None))  # a fresh start

    def test_window_ids_are_noted_a_step_late_and_saved_as_the_next_position(self):
        stream = a_stream()
        trainer = Resuming(stream, self.args)
        trainer.training_step(None, {"input_ids": "batch 1", "window_index": torch.tensor([10, 13, 11])})
        self.assertEqual(trainer.stepped, [{"input_ids": "batch 1"}])  # the model never sees the ids
        self.assertEqual(trainer.last_trained_window, -1)  # read at the next step, not now
        trainer.training_step(None, {"input_ids": "batch 2", "window_index": torch.tensor([14, 16])})
        self.assertEqual(trainer.last_trained_window, 13)
        stream.forget_before.assert_called_once_with(10)
        trainer._save_checkpoint(None, None)  # reads the last batch's ids first
        self.assertEqual(trainer.last_trained_window, 16)
        saved = Path(self.args.output_dir) / ".saving" / "checkpoint-4" / POSITION_FILE
        self.assertEqual(json.loads(saved.read_text()), {"epoch": 1, "window": 17, "documents": 40, "offset": 7})
        stream.position.assert_called_once_with(17)  # the highest id over both ranks (16 and 13), plus one

    def test_only_the_saving_process_writes_the_position(self):
        self.args.should_save = False
        trainer = Resuming(a_stream(), self.args)
        trainer._save_checkpoint(None, None)
        self.assertFalse((Path(self.args.output_dir) / ".saving" / "checkpoint-4" / POSITION_FILE).exists())


if __name__ == "__main__":
    absltest.main()
