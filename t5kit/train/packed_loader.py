"""--packing in the trainers: the training loader over model/packed_training.py's sampler and collator, and
evaluation kept honest.

    class TaskTrainer(..., PaddingReportMixin, PackedLoaderMixin, Seq2SeqTrainer): ...
    trainer = TaskTrainer(..., packed_batches=packing.batches)   # None: Trainer's own loader

A packed batch holds a variable number of examples, so it needs a batch sampler, which Trainer's loader does not
take from a subclass (only its own BatchRebalanceSampler). The loader built here is prepared by accelerate as
Trainer's is: with several processes, process i takes batches i, i + n, ... (BatchSamplerShard); a resumed run
skips the batches it trained on by replaying the sampler (skip_first_batches); Trainer sets the sampler's epoch
before each epoch. Evaluation keeps the Trainer's (unpacked) data_collator.

Training needs nothing else: the segment-mask hooks (installed by Packing.prepare_model before the trainer is
built) take the batch's segment keys, and T5's loss is already the mean over the batch's real target tokens
(labels != -100), packed or not, as is --z_loss's term. Evaluation by the forward (pre-training's losses and token
metrics) is exact on a packed batch for the same reason. Generation and label-word ranking decode each row as one
example, so a packed batch there is refused.
"""
from functools import partial

import datasets
from torch.utils.data import DataLoader
from transformers.trainer_utils import seed_worker

from t5kit.model import packed_attention


def refuse_packed(inputs, what):
    if packed_attention.is_packed(inputs):
        raise ValueError(f"{what} reads each row as one example, but this evaluation batch is packed (it has "
                         f"{packed_attention.ENCODER_SEGMENTS}); evaluation and prediction take unpacked batches")


class PackedLoaderMixin:
    """Takes `packed_batches=(sampler, collator)` (or None) and builds the training loader from them; refuses a
    packed batch where evaluation generates (module doc)."""

    def __init__(self, *args, packed_batches=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.packed_batches = packed_batches
        if packed_batches is not None and not packed_attention.installed(self.model):
            # without the hooks the examples of a row would attend to each other: a silently wrong run
            raise ValueError("packed batches need the model's segment masks: call Packing.prepare_model(model) "
                             "before building the trainer")

    def get_train_dataloader(self):
        if self.packed_batches is None:
            return super().get_train_dataloader()
        sampler, collator = self.packed_batches
        dataset, args = self.train_dataset, self.args
        if isinstance(dataset, datasets.Dataset):  # as Trainer does: the columns the model does not take go
            dataset = self._remove_unused_columns(dataset, description="Training")
        loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collator,
                            num_workers=args.dataloader_num_workers, pin_memory=args.dataloader_pin_memory,
                            persistent_workers=args.dataloader_persistent_workers,
                            prefetch_factor=args.dataloader_prefetch_factor,
                            worker_init_fn=partial(seed_worker, num_workers=args.dataloader_num_workers,
                                                   rank=args.process_index))
        return self.accelerator.prepare(loader)

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None, **gen_kwargs):
        if self.args.predict_with_generate and not prediction_loss_only:
            refuse_packed(inputs, "generation")
        return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys, **gen_kwargs)
