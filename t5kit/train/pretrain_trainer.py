"""The pre-training trainer: Seq2SeqTrainer with atomic checkpoints, the non-finite guard and exact stream resume,
and the evaluation metric that goes with span corruption.

    trainer = PretrainTrainer(model=model, args=training_args, ..., compute_metrics=token_accuracy,
                              preprocess_logits_for_metrics=predicted_token_ids)
"""
import numpy as np
from transformers import Seq2SeqTrainer

from t5kit.optim import grouped_adafactor
from t5kit.train.checkpointing import SafeCheckpointMixin
from t5kit.train.nonfinite_guard import NonFiniteGuardMixin
from t5kit.train.stream_resume import StreamResumeMixin

EVAL_METRIC = "token_accuracy"


class PretrainTrainer(SafeCheckpointMixin, NonFiniteGuardMixin, StreamResumeMixin, Seq2SeqTrainer):
    """Atomic checkpoints and save-and-exit on SIGTERM/SIGUSR1 (checkpointing.py), --nan_policy
    (nonfinite_guard.py), streams that resume where they stopped (stream_resume.py), and Adafactor's update in
    stacks of same-shaped parameters (optim/grouped_adafactor.py)."""

    get_optimizer_cls_and_kwargs = staticmethod(grouped_adafactor.optimizer_cls_and_kwargs)


def predicted_token_ids(logits, labels):
    """Keeps only the argmax ids of eval logits, (B, target_length), so evaluation holds no vocab-sized arrays."""
    logits = logits[0] if isinstance(logits, tuple) else logits
    return logits.argmax(dim=-1)


def token_accuracy(eval_prediction):
    """Fraction of target tokens (span tokens, sentinels and EOS) the model predicts exactly."""
    predictions, labels = eval_prediction.predictions, eval_prediction.label_ids
    scored = labels != -100
    return {EVAL_METRIC: float(np.mean(predictions[scored] == labels[scored]))}
