"""Packed batches in both trainers: the model's segment-mask hooks, installed once, and evaluation kept honest.

    class TaskTrainer(SafeCheckpointMixin, NonFiniteGuardMixin, ZLossMixin, PackedBatchMixin, Seq2SeqTrainer): ...

Training needs nothing beyond the hooks (model/packed_attention.py): Trainer calls the (wrapped) model with the
batch, the segment keys reach the stacks, and T5's loss is already the mean over the batch's real target tokens
(labels != -100), packed or not, as is --z_loss's term. Evaluation by the forward (pre-training's losses and
token metrics) is exact on a packed batch for the same reason. Generation and label-word ranking decode each row as
one example, so a packed batch there is refused: evaluation and prediction take unpacked batches.
"""
from t5kit.model import packed_attention


def refuse_packed(inputs, what):
    if packed_attention.is_packed(inputs):
        raise ValueError(f"{what} reads each row as one example, but this evaluation batch is packed (it has "
                         f"{packed_attention.ENCODER_SEGMENTS}); evaluation and prediction take unpacked batches")


class PackedBatchMixin:
    """Installs the segment-mask hooks on the model before any wrapper (a batch without segment ids runs exactly as
    before), and refuses a packed batch where evaluation generates."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        packed_attention.install(self.model)

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None, **gen_kwargs):
        if self.args.predict_with_generate and not prediction_loss_only:
            refuse_packed(inputs, "generation")
        return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys, **gen_kwargs)
