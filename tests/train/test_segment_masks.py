"""Packed batches in both trainers (t5kit/train/segment_masks.py): the segment-mask hooks are installed once when a
trainer is built; a packed batch's training loss, and its evaluation loss by the forward, are those of the same
examples one per row; evaluation that generates or ranks label words refuses a packed batch."""
import types

import torch
from absl.testing import parameterized
from transformers import T5Config, T5ForConditionalGeneration

from t5kit.data import task_format
from t5kit.model import lora
from t5kit.train.pretrain_trainer import PretrainTrainer
from t5kit.train.task_trainer import TaskTrainer
from tests.helpers import OneThreadTestCase, training_args

# Two examples (input ids with EOS, target ids with EOS) of a 64-word vocabulary; pad 0, EOS 1.
FIRST, SECOND = ([5, 9, 14, 22, 1], [7, 8, 1]), ([30, 31, 1], [40, 41, 42, 1])


def packed_row():
    """FIRST and SECOND in one row of 10 inputs and 8 targets, as the batch contract lays them out."""
    def row(values, length, fill):
        return torch.tensor([values + [fill] * (length - len(values))])

    return {"input_ids": row(FIRST[0] + SECOND[0], 10, 0), "attention_mask": row([1] * 8, 10, 0),
            "labels": row(FIRST[1] + SECOND[1], 8, -100),
            "decoder_input_ids": row([0, *FIRST[1][:-1], 0, *SECOND[1][:-1]], 8, 0),
            "encoder_segment_ids": row([1] * 5 + [2] * 3, 10, 0), "decoder_segment_ids": row([1] * 3 + [2] * 4, 8, 0),
            "encoder_positions": row([0, 1, 2, 3, 4, 0, 1, 2], 10, 0),
            "decoder_positions": row([0, 1, 2, 0, 1, 2, 3], 8, 0)}


def one_per_row():
    return {"input_ids": torch.tensor([FIRST[0], SECOND[0] + [0, 0]]),
            "attention_mask": torch.tensor([[1] * 5, [1] * 3 + [0, 0]]),
            "labels": torch.tensor([FIRST[1] + [-100], SECOND[1]])}


class PackedBatchesTest(OneThreadTestCase):

    def trainer(self, cls, *argv, peft=False, **kwargs):
        torch.manual_seed(0)  # a one-layer T5 without dropout, so that two forwards compare
        model = T5ForConditionalGeneration(T5Config(vocab_size=64, d_model=16, d_ff=32, d_kv=8, num_layers=1,
                                                    num_heads=2, dropout_rate=0.0, decoder_start_token_id=0,
                                                    pad_token_id=0))
        model.accepts_loss_kwargs = False  # as building.build_model sets it
        if peft:  # --peft lora: the trainer holds peft's wrapper, the hooks go on the T5 inside it
            model = lora.apply_lora(model, r=2, alpha=4, dropout=0.0, target_modules=["q", "v"])
        args = training_args("--output_dir", str(self.dir / "out"), "--report_to", "none", *argv)
        return cls(model=model, args=args, **kwargs)

    @parameterized.named_parameters(("pretrain", PretrainTrainer, False), ("task", TaskTrainer, False),
                                    ("task_lora", TaskTrainer, True))
    def test_training_loss_of_a_packed_batch_is_that_of_the_examples_one_per_row(self, cls, peft):
        trainer = self.trainer(cls, peft=peft)
        t5 = trainer.model.get_base_model() if peft else trainer.model
        self.assertLen(t5.encoder._forward_pre_hooks, 1)
        self.assertLen(t5.decoder._forward_pre_hooks, 1)
        trainer.model.train()
        packed = trainer.compute_loss(trainer.model, packed_row())
        torch.testing.assert_close(packed, trainer.compute_loss(trainer.model, one_per_row()), rtol=0, atol=1e-6)

    def test_evaluation_by_the_forward_takes_a_packed_batch(self):
        trainer = self.trainer(PretrainTrainer)
        loss, _, labels = trainer.prediction_step(trainer.model, packed_row(), prediction_loss_only=False)
        plain_loss, _, _ = trainer.prediction_step(trainer.model, one_per_row(), prediction_loss_only=False)
        torch.testing.assert_close(loss, plain_loss, rtol=0, atol=1e-6)
        self.assertEqual(labels.shape, (1, 8))

    def test_generation_refuses_a_packed_batch(self):
        trainer = self.trainer(TaskTrainer, "--predict_with_generate", "true")
        with self.assertRaisesRegex(ValueError, "generation reads each row as one example.*packed"):
            trainer.prediction_step(trainer.model, packed_row(), prediction_loss_only=False)

    def test_label_word_ranking_refuses_a_packed_batch(self):
        trainer = self.trainer(TaskTrainer, label_scoring="rank")
        trainer.current_split = types.SimpleNamespace(task_vals=task_format.get_task_vals("glue", "sst2"))
        with self.assertRaisesRegex(ValueError, "--label_scoring rank reads each row as one example"):
            trainer.prediction_step(trainer.model, packed_row(), prediction_loss_only=False)
