"""Exact resume of --streaming pre-training, without re-reading the consumed stream.

For an IterableDataset HF's Trainer resumes by iterating the data loader past every batch already trained on
(accelerate's skip_first_batches): reading, tokenising, packing and collating them all again, so resuming at step N
costs O(N). Here instead:

1. every training window carries its id (window_stream.WindowStream) through the collator
   (StreamPositionCollator) into the training step, which notes the highest id trained on. The data loader reads
   ahead (accelerate prefetches a batch; rank 0 reads for all ranks), so what the stream has read is not what was
   trained on; the ids are;
2. each checkpoint gets stream_position.json: where the first window not yet trained on (highest id over all ranks,
   plus one) starts. It is written into the staged checkpoint before its manifest (checkpointing.py);
3. on resume (resume.py reads the position at step 3 and the trainer gets it at construction) the stream is put
   at that position and HF is told to skip nothing (`ignore_data_skip`).

The span-corruption masks of a stream use the stream's own epoch (carried with each window), so they are the
uninterrupted run's after a resume, in every epoch. Map-style corpora are untouched: HF skips indices there.
"""
import copy
import logging
from pathlib import Path

import torch

from t5kit.data.window_stream import STREAM_EPOCH, WINDOW_INDEX, WindowStream
from t5kit.outputs.atomic_files import write_json
from t5kit.train.deferred_read import DeferredRead

logger = logging.getLogger(__name__)

POSITION_FILE = "stream_position.json"


class StreamPositionCollator:
    """Wraps the span-corruption collator for stream windows: keeps their ids in the batch (as `window_index`)
    and sets the masks' epoch to the stream's. Evaluation windows carry neither and pass straight through."""

    def __init__(self, collator):
        self.collator = collator

    def __call__(self, features):
        if STREAM_EPOCH in features[0]:
            self.collator.set_epoch(features[0][STREAM_EPOCH])  # one epoch per batch: batches never span two
        batch = self.collator([{"input_ids": feature["input_ids"]} for feature in features])
        if WINDOW_INDEX in features[0]:
            batch[WINDOW_INDEX] = torch.tensor([feature[WINDOW_INDEX] for feature in features])
        return batch


class StreamResumeMixin:
    """Saves and restores the stream position with each checkpoint (see module doc); inert for map-style data."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.last_trained_window = -1
        self._window_range = None  # DeferredRead of the last batch's [lowest, highest] window id
        if self.stream is not None and self.resume_point and self.resume_point.checkpoint:
            self.continue_stream(self.resume_point)

    @property
    def stream(self):
        return self.train_dataset if isinstance(self.train_dataset, WindowStream) else None

    def continue_stream(self, resume_point):
        """Puts the stream where the resume point (resume.ResumePoint, held by SafeCheckpointMixin) left it."""
        position = resume_point.stream_position
        if position is None:
            logger.warning("%s has no %s (saved by a map-style run or an older version): the stream is read again "
                           "from the start to skip the consumed batches", resume_point.checkpoint, POSITION_FILE)
            return
        self.stream.load_position(position)
        self.last_trained_window = position["window"] - 1
        # The stream starts where the checkpoint left it, so HF must skip nothing. The trainer's own copy of the
        # arguments says so: the user's flags, and the run record taken from them, stay as they were.
        self.args = copy.copy(self.args)
        self.args.ignore_data_skip = True
        logger.info("stream resumes at window %d (epoch %d) from %s, nothing re-read", position["window"],
                    position["epoch"], Path(resume_point.checkpoint) / POSITION_FILE)

    def _get_collator_with_removed_columns(self, data_collator, description=None):
        # HF would drop window_index before our collator sees it; stream windows hold nothing the model cannot take.
        return data_collator

    def training_step(self, model, inputs, num_items_in_batch=None):
        window_ids = inputs.pop(WINDOW_INDEX, None)
        self.note_trained_windows()  # the previous batch's
        if window_ids is not None and len(window_ids):
            # The loader has put the ids on the GPU with the batch: read them a step later, never stalling it.
            self._window_range = DeferredRead(torch.stack([window_ids.min(), window_ids.max()]))
        return super().training_step(model, inputs, num_items_in_batch)

    def note_trained_windows(self):
        if self._window_range is not None:
            first, last = self._window_range.read()
            self._window_range = None
            self.last_trained_window = max(self.last_trained_window, last)
            self.stream.forget_before(first)

    def _save_checkpoint(self, model, trial):
        if self.stream is None:
            return super()._save_checkpoint(model, trial)
        self.note_trained_windows()
        # Every rank trains on its own slice of each batch: the stream has been used up to the highest id of all.
        last = torch.tensor([self.last_trained_window], device=self.args.device)
        last_trained = int(self.accelerator.gather(last).max())
        super()._save_checkpoint(model, trial)
        if self.args.should_save:  # inside the staged folder (checkpointing.py), so the manifest covers it
            folder = Path(self._get_output_dir(trial)) / f"checkpoint-{self.state.global_step}"
            position = self.stream.position(last_trained + 1)
            write_json(folder / POSITION_FILE, position)
