"""--packing in both trainers, one owner: it checks that the model can take packed rows and installs their
segment masks (packed_attention.py), builds the training batches' sampler and collator (data/packed_batches.py),
and reports the rows' shape, the tokens a row holds and its padding (the log line, the model card). Off, each method
does nothing and reports nothing, so the entry scripts call it the same way either way.

    packing = packed_training.Packing(training_args.packing)
    packing.prepare_model(model)                      # refuses LongT5 or flash attention; installs the masks
    packing.pack_windows(train_dataset, objective_collator, objective.row_shape, batch_size, seed)  # pre-training
    packing.pack_task_examples(train_dataset, max_source_length, max_target_length, batch_size, seed, ...)
    trainer = TaskTrainer(..., packing=packing)       # its training loader takes packing.batches

Evaluation and prediction stay unpacked: the trainers' collators are left as they are.
"""
from t5kit.data import packed_batches
from t5kit.model import packed_attention


class Packing:
    """The --packing feature of one run (module doc)."""

    def __init__(self, enabled):
        self.enabled = bool(enabled)
        self.sampler = self.collator = None

    def prepare_model(self, model):
        """Refuses a model whose attention cannot keep packed examples apart, then installs the segment-mask hooks
        (before any wrapper: DDP, DeepSpeed and peft forward through them)."""
        if self.enabled:
            packed_attention.check_packable(model)
            packed_attention.install(model)

    def pack_windows(self, dataset, objective_collator, row_shape, rows_per_batch, seed):
        """Pre-training: the objective's corrupted windows, several to a row of row_shape."""
        if self.enabled:
            self.sampler, self.collator = packed_batches.packed_windows(dataset, objective_collator, row_shape,
                                                                        rows_per_batch, seed)
            packed_batches.log_packing(self.sampler, f"windows of {len(dataset[0]['input_ids'])} ids")

    def pack_task_examples(self, dataset, input_length, max_target_length, rows_per_batch, seed, pad_id,
                           decoder_start_token_id):
        """Fine-tuning: the tokenised training examples (none when the run does not train) in rows of input_length
        inputs and a fitted number of targets."""
        if self.enabled and dataset is not None:
            self.sampler, self.collator = packed_batches.packed_task_examples(
                dataset, input_length, max_target_length, rows_per_batch, seed, pad_id, decoder_start_token_id)
            packed_batches.log_packing(self.sampler, f"{len(dataset):,} training examples")

    @property
    def batches(self):
        """(sampler, collator) for the trainer's training loader, or None: the Trainer's own loader."""
        return (self.sampler, self.collator) if self.sampler is not None else None

    def epoch_followers(self) -> list:
        """What must follow the training epoch (the sampler's keyed order): callbacks.CollatorEpochCallback's."""
        return [self.sampler] if self.sampler is not None else []

    def tokens_per_example(self, unpacked: float) -> float:
        """The real tokens a training row holds: a packed row's mean in epoch 0, else the unpacked examples'."""
        return packed_batches.real_tokens_per_row(self.sampler) if self.sampler is not None else unpacked

    def derived(self) -> dict:
        """config.yaml's derived values: the packed rows' shape (pre-training's is the objective's too)."""
        if self.sampler is None:
            return {}
        return {"input_length": self.sampler.row_shape[0], "target_length": self.sampler.row_shape[1]}

    def card_note(self) -> str:
        """The model card's sentence on how the training rows were packed ("" unpacked)."""
        if self.sampler is None:
            return ""
        encoder, decoder = self.sampler.expected_padding()
        inputs, targets = self.sampler.row_shape
        return (f"Training rows were packed (`--packing`): several examples to a row of {inputs} inputs and {targets} "
                f"targets, kept apart by segment ids; padding {100 * encoder:.1f} % of input slots and "
                f"{100 * decoder:.1f} % of target slots (epoch 0).")
