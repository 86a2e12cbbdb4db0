"""Seq2SeqTrainer that evaluates each task split with that task's metrics, by generation or label-word ranking.

- `evaluate()` runs every validation split in turn (its own compute_metrics, label words and generation
  length), prefixes its metrics with its key when there are several ("eval_rte_accuracy"), and adds
  `eval_average` (the GLUE score when every task is GLUE, else the mean of each task's metric_to_optimize), which
  is what --metric_for_best_model defaults to for multi-split runs.
- `--label_scoring rank` replaces generation for classification tasks: every label word is scored by its
  log-likelihood (model/inference.score_label_words) and the likeliest wins, so no prediction is invalid. FLAN's
  COPA and ReCoRD rank each row's own options (score_row_options): their splits carry a row_index column, which
  the collator batches with the rows, so prediction_step finds every row's options (split.meta) in whichever
  process and batch the row lands, and the predictions are put back by it. Unset, held-out tasks in FLAN's
  templates are ranked and the others generated (data/task_scoring.label_scoring_of, the one rule). Every
  evaluated split logs its invalid rate.
- `--train_sampling_strategy length_buckets` (our default) batches rows of equal input and target length:
  the whole training set is sorted by (input, target) length with ties in random order, cut into batches, and the
  batches are shuffled (the longest goes first, so an out-of-memory error shows at step 1). HF's group_by_length
  only sorts within mega-batches of 50 batches, which leaves ~12 % padding on GLUE (bench/padding.py).
- Evaluation keeps file order (a sequential sampler even when training batches are length-grouped), so the
  predictions line up with the input rows.
"""
import logging

import numpy as np
import torch
from torch.utils.data import Sampler, SequentialSampler
from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer

from metrics import GLUE_SCORE_METRICS, compute_task_metrics, glue_average
from t5kit.data.task_scoring import has_row_options, label_scoring_of
from t5kit.model.inference import best_options, rank_label_words, score_label_words, score_row_options
from t5kit.optim import optimizer_classes
from t5kit.train.checkpointing import SafeCheckpointMixin
from t5kit.train.cpu_fp16 import CpuFp16Mixin
from t5kit.train.nonfinite_guard import NonFiniteGuardMixin
from t5kit.train.packed_loader import PackedLoaderMixin, refuse_packed
from t5kit.train.padding_report import PaddingReportMixin
from t5kit.train.z_loss import ZLossMixin

logger = logging.getLogger(__name__)
AVERAGE_KEY = "average"
LENGTH_BUCKETS = "length_buckets"  # our --train_sampling_strategy, beside HF's random/group_by_length/...
ROW_INDEX = "row_index"  # the dataset column that numbers a per-row-ranked split's rows (its meta's positions)


def average_score(per_key_metrics, splits) -> float:
    """GLUE average (metrics.glue_average) when every task is a GLUE task with all its result keys, else the
    plain mean of each split's metric_to_optimize. Held-out tasks (--eval_tasks) are left out where others are
    evaluated, so that they never pick the checkpoint a zero-shot result is reported for."""
    splits = [split for split in splits if not split.task_vals.get("held_out")] or splits
    tasks = list(dict.fromkeys(split.task_vals["name"] for split in splits))
    glue_tasks = [name.split("/")[1] for name in tasks if name.startswith("glue/")]
    if len(glue_tasks) == len(tasks) and all(task in GLUE_SCORE_METRICS for task in glue_tasks) \
            and all(key in per_key_metrics for task in glue_tasks for key, _ in GLUE_SCORE_METRICS[task]):
        return glue_average(per_key_metrics, tasks=glue_tasks)
    return float(np.mean([per_key_metrics[split.key][split.task_vals["metric_to_optimize"]] for split in splits]))


def uses_rank_scoring(label_scoring, task_vals) -> bool:
    """Whether the task's predictions rank its label words or each row's options (--label_scoring as given, None
    when unset)."""
    return label_scoring_of(label_scoring, task_vals) == "rank"


def ranks_row_options(label_scoring, task_vals) -> bool:
    return uses_rank_scoring(label_scoring, task_vals) and has_row_options(task_vals)


def with_row_index(split, label_scoring):
    """The split's dataset, with ROW_INDEX where each row's own options are ranked."""
    if not ranks_row_options(label_scoring, split.task_vals) or ROW_INDEX in split.dataset.column_names:
        return split.dataset
    return split.dataset.add_column(ROW_INDEX, list(range(len(split.dataset))))


def chosen_options(predictions, meta) -> list:
    """Each row's ranked option from prediction_step's (row index, option index) pairs, placed by row index, so that
    no batch or process order is assumed; a row without options (index -1) predicts ""."""
    texts = [None] * len(meta)
    for row, choice in np.asarray(predictions).reshape(-1, 2).tolist():
        texts[row] = meta[row]["options"][choice] if choice >= 0 else ""
    if None in texts:
        raise RuntimeError(f"row {texts.index(None)} of {len(texts)} came back without a ranked option")
    return texts


def length_bucket_indices(input_lengths, target_lengths, batch_size, generator=None) -> list:
    """Row indices in batches of batch_size rows of (near-)equal input and target length: the longest batch
    first, the shortest (the only partial one, so that the DataLoader's cuts fall between our batches) last, the
    others in random order. Randomness comes from `generator` (seeded from --seed and the epoch, the same on every
    rank)."""
    input_lengths, target_lengths = np.asarray(input_lengths), np.asarray(target_lengths)
    shuffled = torch.randperm(len(input_lengths), generator=generator).numpy()
    ascending = np.lexsort((target_lengths[shuffled], input_lengths[shuffled]))  # stable: ties stay in random order
    by_length = shuffled[ascending[::-1]]  # longest first
    batches = [by_length[start:start + batch_size] for start in range(0, len(by_length), batch_size)]
    middle = (1 + torch.randperm(len(batches) - 2, generator=generator)).tolist() if len(batches) > 2 else []
    order = [0, *middle, len(batches) - 1] if len(batches) > 1 else [0]
    return np.concatenate([batches[i] for i in order]).tolist()


class LengthBucketSampler(Sampler):
    """Draws a new length_bucket_indices order each epoch from (seed, epoch) alone, so a resumed run (Trainer calls
    set_epoch, then skips the consumed batches) replays exactly the order the interrupted epoch used."""

    def __init__(self, input_lengths, target_lengths, batch_size, seed):
        self.input_lengths, self.target_lengths = input_lengths, target_lengths
        self.batch_size, self.seed, self.epoch = batch_size, seed, 0

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def __len__(self):
        return len(self.input_lengths)

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        yield from length_bucket_indices(self.input_lengths, self.target_lengths, self.batch_size, generator)


def row_lengths(dataset, column) -> list:
    return [len(ids) for ids in dataset[column]] if column in dataset.column_names else [0] * len(dataset)


class TaskCollator(DataCollatorForSeq2Seq):
    """DataCollatorForSeq2Seq (dynamic padding, labels padded with -100) that leaves `labels` out of unlabeled
    batches: it sets labels=None, which Seq2SeqTrainer.prediction_step takes for labels present and then fails
    computing a loss on a test split (transformers 5.23)."""

    def __call__(self, features, return_tensors=None):
        batch = super().__call__(features, return_tensors)
        if batch.get("labels") is None:
            batch.pop("labels", None)
        return batch


# atomic checkpoints, --nan_policy, --z_loss, padding in the logs, --packing's loader (`packed_batches=`)
class TaskTrainer(SafeCheckpointMixin, NonFiniteGuardMixin, ZLossMixin, PaddingReportMixin, PackedLoaderMixin,
                  CpuFp16Mixin, Seq2SeqTrainer):
    # stacked Adafactor, AdamWScale
    get_optimizer_cls_and_kwargs = staticmethod(optimizer_classes.optimizer_cls_and_kwargs)

    def __init__(self, *args, eval_splits=(), label_scoring=None, **kwargs):
        self.eval_splits = list(eval_splits)
        self.label_scoring = label_scoring
        self.current_split = None  # the TaskSplit being evaluated: picks metrics, label words, generation length
        eval_dataset = {split.key: split.dataset for split in self.eval_splits} or None
        super().__init__(*args, eval_dataset=eval_dataset, compute_metrics=self.score_predictions, **kwargs)

    def _get_train_sampler(self, train_dataset=None):
        if self.args.train_sampling_strategy != LENGTH_BUCKETS:
            return super()._get_train_sampler(train_dataset)
        dataset = self.train_dataset if train_dataset is None else train_dataset
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        return LengthBucketSampler(row_lengths(dataset, "input_ids"), row_lengths(dataset, "labels"),
                                   self.args.train_batch_size, seed)

    def _set_signature_columns_if_needed(self):
        # Trainer keeps only the columns model.forward takes: ROW_INDEX must reach prediction_step.
        super()._set_signature_columns_if_needed()
        if ROW_INDEX not in self._signature_columns:
            self._signature_columns.append(ROW_INDEX)

    def _get_eval_sampler(self, eval_dataset):
        # Trainer length-groups evaluation too under group_by_length; predictions must stay in file order.
        return SequentialSampler(eval_dataset) if self.args.world_size <= 1 else None

    def generation_kwargs(self, split, gen_kwargs):
        """--generation_max_length when set, else the split's target length (+1: T5's decoder start token counts
        towards max_length; max_new_tokens would clash with the generation config's default max_length)."""
        gen_kwargs = dict(gen_kwargs)
        if gen_kwargs.get("max_length") is None and gen_kwargs.get("max_new_tokens") is None \
                and self.args.generation_max_length is None:
            gen_kwargs["max_length"] = split.max_target_length + 1
        return gen_kwargs

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval", **gen_kwargs):
        """Evaluates self.eval_splits, or the TaskSplits given, one after the other."""
        splits = self.eval_splits if eval_dataset is None else list(eval_dataset)
        metrics, per_key = {}, {}
        for split in splits:
            prefix = metric_key_prefix if len(splits) == 1 else f"{metric_key_prefix}_{split.key}"
            self.current_split = split
            split_metrics = super().evaluate(with_row_index(split, self.label_scoring), ignore_keys, prefix,
                                             **self.generation_kwargs(split, gen_kwargs))
            per_key[split.key] = {name[len(prefix) + 1:]: value for name, value in split_metrics.items()}
            metrics.update(split_metrics)
        if len(splits) > 1:
            average = {f"{metric_key_prefix}_{AVERAGE_KEY}": average_score(per_key, splits)}
            self.log(average)
            metrics.update(average)
        return metrics

    def predict_split(self, split, metric_key_prefix, **gen_kwargs):
        """(predicted texts in row order, metrics): metrics are computed only when the split has targets."""
        self.current_split = split
        output = self.predict(with_row_index(split, self.label_scoring), metric_key_prefix=metric_key_prefix,
                              **self.generation_kwargs(split, gen_kwargs))
        return self.decode(output.predictions, split)[:len(split.inputs)], output.metrics

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None, **gen_kwargs):
        split, rows = self.current_split, inputs.pop(ROW_INDEX, None)
        if prediction_loss_only or split is None or not uses_rank_scoring(self.label_scoring, split.task_vals):
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys, **gen_kwargs)
        refuse_packed(inputs, "--label_scoring rank")
        if has_row_options(split.task_vals) and rows is None:
            raise ValueError(f"ranking {split.task_vals['name']}'s own options needs the {ROW_INDEX} column that "
                             "evaluate() and predict_split() add (with_row_index)")
        inputs = self._prepare_inputs(inputs)
        model = self.accelerator.unwrap_model(model)
        with torch.no_grad():
            loss = model(**inputs).loss.detach() if inputs.get("labels") is not None else None
            if rows is None:
                scores = score_label_words(model, self.processing_class, inputs["input_ids"],
                                           inputs["attention_mask"], list(split.task_vals["labels"].values()))
                return loss, scores, inputs.get("labels")  # scores: (B, n_labels)
            return loss, self.rank_row_options(model, inputs, rows), inputs.get("labels")

    def rank_row_options(self, model, inputs, rows):
        """(B, 2): each row's index and the index of its likeliest option (ties: the first; -1: it has none). Indices,
        not scores: rows with different option counts give scores of different widths, which Trainer would pad
        across batches with -100, a value a real log-likelihood can fall below."""
        options = [self.current_split.meta[row]["options"] for row in rows.tolist()]
        scores = score_row_options(model, self.processing_class, inputs["input_ids"], inputs["attention_mask"],
                                   options)  # (B, most options), -inf past a row's own
        counts = torch.tensor([len(texts) for texts in options], device=scores.device)
        return torch.stack([rows.to(scores.device), best_options(scores, counts)], dim=-1)

    def decode(self, predictions, split) -> list:
        """Label words or each row's options picked by rank scoring, or decoded generations (cross-batch padding
        -100 -> pad)."""
        predictions = predictions[0] if isinstance(predictions, tuple) else predictions
        if ranks_row_options(self.label_scoring, split.task_vals):
            return chosen_options(predictions, split.meta)
        if uses_rank_scoring(self.label_scoring, split.task_vals):
            return rank_label_words(predictions, list(split.task_vals["labels"].values()))
        ids = np.where(predictions < 0, self.processing_class.pad_token_id, predictions)
        return self.processing_class.batch_decode(ids, skip_special_tokens=True)

    def score_predictions(self, eval_prediction):
        split = self.current_split
        texts = self.decode(eval_prediction.predictions, split)[:len(split.targets)]
        metrics = compute_task_metrics(split.task_vals, texts, split.targets, split.meta)
        logger.info("%s %s (%s): %d of %d predictions invalid (%.2f %%)", split.task_vals["name"], split.plan.split,
                    "ranked" if uses_rank_scoring(self.label_scoring, split.task_vals) else "generated",
                    metrics["invalid_count"], len(texts), metrics["invalid_rate"])
        return metrics


def predict_splits(trainer, splits, prefix):
    """Predicts every split in row order: {"metrics": flat, "per_task": {key: metrics}, "texts": {key: [...]}}."""
    flat, per_task, texts = {}, {}, {}
    for split in splits:
        key_prefix = prefix if len(splits) == 1 else f"{prefix}_{split.key}"
        texts[split.key], metrics = trainer.predict_split(split, key_prefix)
        per_task[split.key] = {name[len(key_prefix) + 1:]: value for name, value in metrics.items()}
        flat.update(metrics)
    if prefix == "eval" and len(splits) > 1:
        flat[f"eval_{AVERAGE_KEY}"] = average_score(per_task, splits)
    return {"metrics": flat, "per_task": per_task, "texts": texts}
