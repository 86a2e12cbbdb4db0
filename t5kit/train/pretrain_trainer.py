"""The pre-training trainer: Seq2SeqTrainer with atomic checkpoints, the non-finite guard and exact stream resume,
and the evaluation metric that goes with span corruption.

    trainer = PretrainTrainer(model=model, args=training_args, ...,
                              compute_metrics=SpanCorruptionMetrics(special_target_ids(tokenizer)),
                              preprocess_logits_for_metrics=predicted_ids_and_losses,
                              resume_point=resume_point)  # resume.find_resume_point's, step 3
"""
import numpy as np
import torch.nn.functional as F
from transformers import Seq2SeqTrainer

from constants import NUM_SENTINELS
from t5kit.optim import optimizer_classes
from t5kit.train.checkpointing import SafeCheckpointMixin
from t5kit.train.cpu_fp16 import CpuFp16Mixin
from t5kit.train.nonfinite_guard import NonFiniteGuardMixin
from t5kit.train.packed_loader import PackedLoaderMixin
from t5kit.train.padding_report import PaddingReportMixin
from t5kit.train.stream_resume import StreamResumeMixin
from t5kit.train.z_loss import ZLossMixin

EVAL_METRIC = "content_accuracy"  # what the loss curve plots beside the losses


class PretrainTrainer(SafeCheckpointMixin, NonFiniteGuardMixin, StreamResumeMixin, ZLossMixin, PaddingReportMixin,
                      PackedLoaderMixin, CpuFp16Mixin, Seq2SeqTrainer):
    """Atomic checkpoints (checkpointing.py; `resume_point=`, resume.py), --nan_policy (nonfinite_guard.py), streams
    that resume where they stopped (stream_resume.py), T5X's --z_loss (z_loss.py), padding in the logs
    (padding_report.py), --packing's loader (`packed_batches=`, packed_loader.py), --fp16 on a CPU (cpu_fp16.py),
    and our optimizers: Adafactor on stacks of same-shaped parameters, nanoT5's AdamWScale
    (optim/optimizer_classes.py). Save-and-exit on
    SIGTERM/SIGUSR1 is a callback the entry script lists (preemption.py)."""

    get_optimizer_cls_and_kwargs = staticmethod(optimizer_classes.optimizer_cls_and_kwargs)


def predicted_ids_and_losses(logits, labels):
    """(argmax ids, token losses -log p(label)), both (B, target_length): what the metrics need of the logits, so
    evaluation holds no vocabulary-sized arrays. Positions labelled -100 get a loss too; the metrics skip them."""
    logits = logits[0] if isinstance(logits, tuple) else logits
    losses = F.cross_entropy(logits.transpose(1, 2).float(), labels.clamp(min=0), reduction="none")  # (B, T)
    return logits.argmax(dim=-1), losses


def special_target_ids(tokenizer):
    """The ids a span-corruption target holds besides content: the sentinels <extra_id_N> and EOS."""
    sentinels = tokenizer.convert_tokens_to_ids([f"<extra_id_{i}>" for i in range(NUM_SENTINELS)])
    return np.asarray([*sentinels, tokenizer.eos_token_id], dtype=np.int64)


class SpanCorruptionMetrics:
    """Evaluation metrics of span corruption. token_accuracy counts every target token; most of those are sentinels
    and EOS, which a model learns to place long before it learns language (a model that learned nothing scores ~0.28
    at T5's settings). content_accuracy and content_loss count only the tokens of the corrupted spans: the text the
    model must fill in."""

    def __init__(self, special_ids):
        self.special_ids = np.asarray(special_ids)

    def __call__(self, eval_prediction):
        (predicted, losses), labels = eval_prediction.predictions, eval_prediction.label_ids
        scored = labels != -100
        content = scored & ~np.isin(labels, self.special_ids)
        return {"token_accuracy": float(np.mean(predicted[scored] == labels[scored])),
                EVAL_METRIC: float(np.mean(predicted[content] == labels[content])),
                "content_loss": float(np.mean(losses[content])),
                "content_share": float(content.sum() / max(scored.sum(), 1))}
