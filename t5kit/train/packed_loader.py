"""--packing's training data loader: batches from data/packed_batches.py's sampler, packed by its collator.

    class TaskTrainer(..., PaddingReportMixin, PackedLoaderMixin, Seq2SeqTrainer): ...
    trainer = TaskTrainer(..., packed_batches=(sampler, collator))   # None: Trainer's own loader

A packed batch holds a variable number of examples, so it needs a batch sampler, which Trainer's loader does not
take from a subclass (only its own BatchRebalanceSampler). The loader built here is prepared by accelerate as
Trainer's is: with several processes, process i takes batches i, i + n, ... (BatchSamplerShard); a resumed run
skips the batches it trained on by replaying the sampler (skip_first_batches); Trainer sets the sampler's epoch
before each epoch. Evaluation keeps the Trainer's (unpacked) data_collator.
"""
from functools import partial

import datasets
from torch.utils.data import DataLoader
from transformers.trainer_utils import seed_worker


class PackedLoaderMixin:
    """Takes `packed_batches=(sampler, collator)` (or None) and builds the training loader from them (module doc)."""

    def __init__(self, *args, packed_batches=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.packed_batches = packed_batches

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
