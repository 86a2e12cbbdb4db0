"""What a run pays in padding: the padding fractions of its training batches, in the logs and the final metrics.

    class TaskTrainer(..., ZLossMixin, PaddingReportMixin, PackedLoaderMixin, Seq2SeqTrainer): ...

- Every training log line gets `encoder_padding` and `decoder_padding`: the share of the input and target slots of
  the batches trained on since the previous line that hold padding (attention_mask 0, labels -100), over all
  processes; packed runs add `examples_per_step` (examples per optimizer step, all processes), since a packed batch
  holds a variable number of examples. train() adds their means over the run (read from the log history, so a
  resumed run's are included) as train_encoder_padding, train_decoder_padding, train_examples_per_step.
- Counting happens in get_batch_samples, in the main process, on the batches as the loop receives them: nothing is
  read back from the device until a line is logged.
"""
import torch

PADDING_LOG_KEYS = ("encoder_padding", "decoder_padding")
EXAMPLES_LOG_KEY = "examples_per_step"
IGNORE_INDEX = -100
# Counted per batch: real input slots, input slots, real target slots, target slots, examples.
COUNTS = 5


def batch_counts(batch):
    """(5,) int64 counts of one batch, on its device (see COUNTS). Sizes are filled on the device, not copied
    there: a copy from the host would wait for the queued steps."""
    input_ids, labels = batch["input_ids"], batch["labels"]

    def constant(value):
        return torch.full((), value, dtype=torch.long, device=labels.device)

    mask, segments = batch.get("attention_mask"), batch.get("encoder_segment_ids")
    real_inputs = constant(input_ids.numel()) if mask is None else mask.sum()
    examples = constant(len(input_ids)) if segments is None else segments.amax(dim=1).sum()
    return torch.stack([real_inputs.long(), constant(input_ids.numel()), (labels != IGNORE_INDEX).sum(),
                        constant(labels.numel()), examples.long()])


def run_mean(log_history, key, unlogged=None, unlogged_steps=0):
    """The mean of a per-step quantity over a run: its log lines (each the mean over the optimizer steps since the
    previous line that has it, as z_loss.mean_logged reads them), plus `unlogged` over the last `unlogged_steps`
    steps; None when there is neither."""
    previous, total, steps = 0, 0.0, 0
    for entry in log_history:
        if key in entry:
            span = entry["step"] - previous
            total, steps, previous = total + entry[key] * span, steps + span, entry["step"]
    if unlogged is not None and unlogged_steps > 0:
        total, steps = total + unlogged * unlogged_steps, steps + unlogged_steps
    return total / steps if steps else None


def data_counts(metrics):
    """metrics.json's `data` entries from train()'s metrics: encoder_padding, decoder_padding (and
    examples_per_step when packed), where the run trained."""
    return {key: metrics[f"train_{key}"] for key in (*PADDING_LOG_KEYS, EXAMPLES_LOG_KEY)
            if f"train_{key}" in metrics}


class PaddingReportMixin:
    """Padding fractions (and packed batches' examples per step) in the logs and the final metrics (module doc)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._packed_seen = False  # whether a counted batch was packed: then examples_per_step is logged too
        self._padding_counts = None  # summed batch_counts since the last log line, on the device
        self._padding_since = None  # the optimizer step those counts start after

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        batch_samples, num_items_in_batch = super().get_batch_samples(epoch_iterator, num_batches, device)
        for batch in batch_samples:
            if "labels" in batch and "input_ids" in batch:
                counts = batch_counts(batch)
                self._packed_seen = self._packed_seen or "encoder_segment_ids" in batch
                if self._padding_counts is None:
                    self._padding_counts, self._padding_since = torch.zeros_like(counts), self.state.global_step
                self._padding_counts += counts
        return batch_samples, num_items_in_batch

    def padding_log(self):
        """{encoder_padding, decoder_padding[, examples_per_step]} over the batches counted since the last call, all
        processes ({} if none), and the optimizer steps they cover. A collective when there are several processes:
        every process must call it."""
        if self._padding_counts is None:
            return {}, 0
        counts = self._padding_counts
        if self.accelerator.num_processes > 1:
            counts = self.accelerator.reduce(counts, reduction="sum")
        real_inputs, inputs, real_targets, targets, examples = counts.tolist()
        steps = self.state.global_step - self._padding_since
        logs = {"encoder_padding": 1 - real_inputs / max(inputs, 1),
                "decoder_padding": 1 - real_targets / max(targets, 1)}
        if self._packed_seen:
            logs[EXAMPLES_LOG_KEY] = examples / max(steps, 1)
        self._padding_counts = None
        return logs, steps

    def log(self, logs, *args, **kwargs):
        if "loss" in logs:  # a training log line: every process gets here
            logs.update(self.padding_log()[0])
        super().log(logs, *args, **kwargs)

    def train(self, *args, **kwargs):
        result = super().train(*args, **kwargs)
        remainder, steps = self.padding_log()  # the batches after the last log line
        for key in (*PADDING_LOG_KEYS, EXAMPLES_LOG_KEY):
            mean = run_mean(self.state.log_history, key, remainder.get(key), steps)
            if mean is not None:
                result.metrics[f"train_{key}"] = mean
        return result
