"""--z_loss: T5X's auxiliary z-loss, which keeps the softmax normaliser log Z of the logits near 0 so that the logits
do not drift (what bf16 training cannot represent well).

    class TaskTrainer(SafeCheckpointMixin, NonFiniteGuardMixin, ZLossMixin, Seq2SeqTrainer): ...

T5X's `cross_entropy_with_logits` (t5x/losses.py) adds z_loss * log_z^2 to each token's cross-entropy, where log_z is
the logsumexp of that token's logits over the vocabulary, and weights and normalises the sum exactly as the
cross-entropy. Our T5 averages its cross-entropy over a micro-batch's target tokens (labels != -100; model/building.py
sets accepts_loss_kwargs False, so Trainer passes no num_items_in_batch), so the term is the mean of z_loss * log_z^2
over the same tokens, added to the model's loss before Trainer divides it by the gradient-accumulation steps. Only
training adds it: eval_loss stays the plain cross-entropy, comparable across runs with and without --z_loss.

The logged `loss` is what the optimizer minimised (cross-entropy + term, as T5X logs it); `z_loss` beside it is the
term alone, averaged over the same optimizer steps as `loss` (cross-entropy = loss - z_loss), and `train_z_loss` in
the final metrics is its mean over the run, read from the log history (a resumed run's included). Nothing is kept
outside the log history, so a resumed run goes on as if it had not stopped.
"""
import torch

Z_LOSS_LOG_KEY = "z_loss"
IGNORE_INDEX = -100  # labels T5's cross-entropy ignores (padding of the targets)


def z_loss_term(logits, labels, z_loss):
    """z_loss * mean over the target tokens (labels != -100) of logsumexp(logits)^2, in float32 as T5X computes its
    logits. logits (B, T, V), labels (B, T)."""
    log_z = torch.logsumexp(logits.float(), dim=-1)  # (B, T)
    scored = (labels != IGNORE_INDEX).to(log_z.dtype)
    return z_loss * (log_z.square() * scored).sum() / scored.sum().clamp(min=1)


def mean_logged(log_history, key):
    """The mean of a logged training term over the optimizer steps its log lines cover (each line is the mean over
    the steps since the previous one), or None when no line has it."""
    previous, total, steps = 0, 0.0, 0
    for entry in log_history:
        if key in entry:
            span = entry["step"] - previous
            total, steps, previous = total + entry[key] * span, steps + span, entry["step"]
    return total / steps if steps else None


class ZLossMixin:
    """--z_loss for a Trainer (see module doc): adds the term to the training loss and logs it as `z_loss`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.z_loss = getattr(self.args, "z_loss", 0.0)
        self._z_sum = None  # the term summed over the micro-batches since the last log, on the device
        self._z_since = None  # the optimizer step that sum starts after

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if not (self.z_loss and model.training):
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        labels = inputs["labels"]  # read first: with label smoothing Trainer pops them from inputs
        loss, outputs = super().compute_loss(model, inputs, True, num_items_in_batch)
        term = z_loss_term(outputs.logits, labels, self.z_loss)
        self._add_to_log(term.detach())
        loss = loss + term
        return (loss, outputs) if return_outputs else loss

    def _add_to_log(self, term):
        # Trainer divides each micro-batch's loss by the accumulation steps before summing it for its log.
        accumulation = getattr(self, "current_gradient_accumulation_steps", self.args.gradient_accumulation_steps)
        if self._z_sum is None:
            self._z_sum, self._z_since = torch.zeros((), device=term.device), self.state.global_step
        self._z_sum += term.float() / accumulation

    def log(self, logs, *args, **kwargs):
        if "loss" in logs and self._z_sum is not None:  # a training log line: every process gets here
            total = self._z_sum
            if self.accelerator.num_processes > 1:
                total = self.accelerator.reduce(total, reduction="mean")
            logs[Z_LOSS_LOG_KEY] = total.item() / max(self.state.global_step - self._z_since, 1)
            self._z_sum = None
        super().log(logs, *args, **kwargs)

    def train(self, *args, **kwargs):
        result = super().train(*args, **kwargs)
        mean = mean_logged(self.state.log_history, Z_LOSS_LOG_KEY) if self.z_loss else None
        if mean is not None:
            result.metrics[f"train_{Z_LOSS_LOG_KEY}"] = mean
        return result
