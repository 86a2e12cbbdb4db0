"""Text-to-text fine-tuning and evaluation of T5: one task, a multi-task mixture, or a task declared in YAML.

    python fine_tune_t5.py configs/finetune_rte_quickstart.yaml                      # offline, CPU, minutes
    python fine_tune_t5.py configs/glue/sst2.yaml --model_name_or_path google-t5/t5-small   # hub data
    python fine_tune_t5.py --do_train false --model_name_or_path runs/finetune_rte_quickstart \\
        --dataset_name rte --data_dir ../shared/data/glue/RTE --output_dir runs/rte_eval   # evaluate only
    python fine_tune_t5.py configs/glue/base.yaml --tasks glue/sst2,glue/rte,glue/cola --data_dir ../shared/data/glue \\
        --model_name_or_path runs/quickstart --output_dir runs/glue_mix                    # multi-task

Outputs (rank 0): config.yaml, metrics.json (per-task metrics, their average, data counts), a predictions file per
split, glue_submission/<Task>.tsv for GLUE test splits (--do_predict), loss_curve.png and the best model.
"""
import logging
import sys

from transformers import set_seed

import eval_log
import fine_tune_data
import flags
import modeling
import output_dir
import param_groups
import run_logging
from flags import UsageError
from loss_plot import plot_loss_curve
from run_flags import FineTuneDataArguments, FineTuneTrainingArguments, ModelArguments
from task_format import combines_metrics
from task_mixture import mix_task_datasets
from task_predictions import write_glue_submission, write_predictions
from task_trainer import AVERAGE_KEY, TaskCollator, TaskTrainer, average_score

logger = logging.getLogger(__name__)
FLAG_CLASSES = (ModelArguments, FineTuneDataArguments, FineTuneTrainingArguments)
MIXED_PRECISION_PAD_MULTIPLE = 8  # tensor cores want dimensions in multiples of 8 under bf16/fp16
SPLIT_METRICS = ("loss", "invalid_count", "invalid_rate")  # reported for every split besides the task's metrics


def check_model_to_evaluate(model_args, training_args):
    """Evaluating without training needs a trained model: a random --model_size init would score chance."""
    if not training_args.do_train and model_args.model_name_or_path is None:
        raise UsageError("--do_train false evaluates an existing model: pass --model_name_or_path (a folder or hub "
                         "name), or drop --do_train false to fine-tune first")


def check_label_scoring(data_args, tasks):
    """Rank scoring needs label words: refused when no task has them, noted when only some do."""
    if data_args.label_scoring != "rank":
        return
    without = [t["name"] for t in tasks if t["task_type"] != "classification"]
    if len(without) == len(tasks):
        raise UsageError(f"--label_scoring rank scores label words, and {without[0]} is a {tasks[0]['task_type']} "
                         "task without them; use --label_scoring generate")
    if without:
        logger.info("--label_scoring rank applies to classification tasks; %s are evaluated by generation",
                    ", ".join(without))


def reported_metrics(plans) -> list:
    """Metric names evaluation reports (without "eval_"): what --metric_for_best_model may name."""
    evals = [plan for plan in plans if plan.role == "eval"]
    names = []
    for plan in evals:
        task_vals = plan.task_vals
        split_names = list(task_vals["metric_names"]) + ["combined_score"] * combines_metrics(task_vals) \
            + list(SPLIT_METRICS)
        names += split_names if len(evals) == 1 else [f"{plan.key}_{name}" for name in split_names]
    return names + ([AVERAGE_KEY] if len(evals) > 1 else [])


def choose_best_model_metric(training_args, plans):
    """Fills --metric_for_best_model with the task's metric_to_optimize (several splits: their average), or checks
    the one given. Returns the metric name the loss curve plots next to the loss."""
    evals = [plan for plan in plans if plan.role == "eval"]
    if not evals:
        return None
    default = evals[0].task_vals["metric_to_optimize"] if len(evals) == 1 else AVERAGE_KEY
    if training_args.metric_for_best_model_from_task:
        # Set once here, before anything reads it; HF had filled "loss" while the task was unknown.
        training_args.metric_for_best_model, training_args.greater_is_better = default, True
        return default
    chosen = training_args.metric_for_best_model.removeprefix("eval_")
    valid = reported_metrics(plans)
    if chosen not in valid:
        close = flags.closest_names(chosen, valid)
        hint = f"; did you mean {close[0]!r}?" if close else ";"
        raise UsageError(f"--metric_for_best_model {chosen!r} is not reported by this run{hint} choices: "
                         f"{', '.join(valid)}")
    return chosen


def build_train_dataset(train_splits, data_args, seed):
    """The one task's training set, or the T5 mixture of several (task_mixture.py); plus the mixing rates."""
    if len(train_splits) <= 1:
        return (train_splits[0].dataset if train_splits else None), None
    return mix_task_datasets([split.dataset for split in train_splits], [split.key for split in train_splits],
                             data_args.mixture_cap, data_args.mixture_temperature, seed)


def mean_tokens_per_example(splits) -> float:
    """Mean real (unpadded) input + target tokens of the rows, for the throughput log."""
    lengths = [len(ids) for split in splits for column in ("input_ids", "labels")
               if column in split.dataset.column_names for ids in split.dataset[column]]
    rows = sum(len(split.dataset) for split in splits)
    return sum(lengths) / max(rows, 1)


def main(argv=None):
    # 1. Flags, the tasks and the splits they need: all checked before any model or data is loaded.
    (model_args, data_args, training_args), resolved = flags.parse_flags(
        FLAG_CLASSES, sys.argv[1:] if argv is None else argv)
    tasks = fine_tune_data.resolve_tasks(data_args)
    plans = fine_tune_data.plan_splits(tasks, data_args, training_args)
    best_metric = choose_best_model_metric(training_args, plans)

    # 2. Logging
    run_logging.setup_logging(training_args)
    check_model_to_evaluate(model_args, training_args)
    check_label_scoring(data_args, tasks)
    if best_metric and training_args.metric_for_best_model_from_task:
        logger.info("--metric_for_best_model defaults to %s (%s)", best_metric,
                    "the average over splits" if best_metric == AVERAGE_KEY else "the task's metric_to_optimize")

    # 3. Output dir, last checkpoint: refuse to clobber a previous run before spending any time.
    checkpoint = output_dir.prepare_output_dir(training_args)

    # 4. Seed, before the model is built so that it controls a random initialisation.
    set_seed(training_args.seed)

    # 5. Tokenizer, model (load_pretrained_t5 refuses a folder that is not an encoder-decoder).
    tokenizer, model = modeling.load_tokenizer_and_model(model_args, training_args.use_cpu)
    output_dir.check_checkpoint_fits(checkpoint, model)
    optimizer = param_groups.create_optimizer(model, training_args)  # None: Trainer builds its default

    # 6. Data: rows -> "prefix field: value ..." -> ids; unknown labels, missing columns, empty splits refused.
    splits = fine_tune_data.build_task_splits(plans, data_args, training_args, tokenizer, model_args.cache_dir)
    train_dataset, mixing_rates = build_train_dataset(splits["train"], data_args, training_args.seed)
    # Saved with the model, so that a plain model.generate() decodes as far as evaluation does (+1: the decoder
    # start token counts towards max_length).
    model.generation_config.max_length = 1 + max(split.max_target_length for role in splits.values()
                                                 for split in role)
    tokens_per_example = mean_tokens_per_example(splits["train"] or splits["eval"] or splits["predict"])
    run_logging.log_run_summary(resolved, modeling.count_parameters(model), round(tokens_per_example),
                                training_args)

    # 7. Collator: each batch padded to its own longest row (dynamic padding; labels padded with -100).
    mixed_precision = training_args.bf16 or training_args.fp16
    collator = TaskCollator(tokenizer, model=model,
                            pad_to_multiple_of=MIXED_PRECISION_PAD_MULTIPLE if mixed_precision else None)

    # 8. Trainer. The resolved flags are saved only now, once every input has been checked, so a refused run
    # leaves the output folder as it was.
    if training_args.should_save:
        output_dir.write_resolved_config(training_args.output_dir, resolved)
    tokens_per_step = run_logging.global_batch_size(training_args) * tokens_per_example
    trainer = TaskTrainer(
        model=model, args=training_args, train_dataset=train_dataset, eval_splits=splits["eval"],
        data_collator=collator, processing_class=tokenizer, label_scoring=data_args.label_scoring,
        optimizers=(optimizer, None),
        callbacks=[run_logging.ThroughputCallback(tokens_per_step), run_logging.WandbConfigCallback(resolved),
                   eval_log.EvalLogCallback()])

    # 9. Train (best checkpoint by best_metric), evaluate, predict, write outputs (rank 0 only writes).
    results = {}
    if training_args.do_train:
        train_result = trainer.train(resume_from_checkpoint=checkpoint)
        trainer.save_model()
        results.update(train_result.metrics)
    evaluation = predict_splits(trainer, splits["eval"], "eval")
    prediction = predict_splits(trainer, splits["predict"], "predict")
    results.update(evaluation["metrics"], **prediction["metrics"])
    trainer.log_metrics("all", results)
    if trainer.is_world_process_zero():
        write_run_outputs(trainer, data_args, splits, evaluation, prediction, results, best_metric, mixing_rates)
    return results


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


def write_run_outputs(trainer, data_args, splits, evaluation, prediction, results, best_metric, mixing_rates):
    """Predictions files, GLUE submissions, metrics.json and loss_curve.png next to the saved model."""
    out = trainer.args.output_dir
    written = []
    for role, outcome in (("eval", evaluation), ("predict", prediction)):
        for split in splits[role]:
            written.append(write_predictions(out, split, outcome["texts"][split.key], data_args.predictions_format))
            if role == "predict":
                written.append(write_glue_submission(out, split, outcome["texts"][split.key]))
    summary = {
        **results,
        "per_task_metrics": evaluation["per_task"],
        "metric_for_best_model": best_metric,
        "best_metric": trainer.state.best_metric, "best_model_checkpoint": trainer.state.best_model_checkpoint,
        "data": {f"{split.key}/{split.plan.split}": split.stats for role in splits.values() for split in role},
        "log_history": trainer.state.log_history,
    }
    if f"eval_{AVERAGE_KEY}" in results:
        summary[AVERAGE_KEY] = results[f"eval_{AVERAGE_KEY}"]
    if mixing_rates:
        summary["mixing_rates"] = mixing_rates
    output_dir.write_json(f"{out}/{output_dir.METRICS_FILE}", summary)
    if trainer.args.do_train:
        plot_loss_curve(trainer.state.log_history, f"{out}/{output_dir.LOSS_CURVE_FILE}", best_metric)
        trainer.save_state()
    logger.info("wrote %s: config.yaml, metrics.json%s, %s", out, ", loss_curve.png, model" *
                trainer.args.do_train, ", ".join(str(path) for path in written if path))


if __name__ == "__main__":
    flags.run_cli(main)
