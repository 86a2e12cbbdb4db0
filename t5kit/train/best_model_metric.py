"""The metric that picks fine-tuning's best checkpoint, settled in step 1 before any model or data is loaded: the
task's metric_to_optimize (several splits: their average) or the one --metric_for_best_model names, checked against
what evaluation reports; evaluation switched off when no task has a validation split. Set before the run record
is taken, and never changed after."""
import logging

from transformers.trainer_utils import IntervalStrategy

from t5kit.data.task_format import combines_metrics
from t5kit.errors import UsageError, did_you_mean
from t5kit.train.task_trainer import AVERAGE_KEY

logger = logging.getLogger(__name__)

SPLIT_METRICS = ("loss", "invalid_count", "invalid_rate")  # reported for every split besides the task's metrics


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


def turn_off_evaluation_without_splits(training_args, plans):
    """A run whose tasks have no validation split (diagnostic tasks, only predicted) evaluates nothing: evaluation
    and best-checkpoint loading are switched off here, before the run record is taken (the Trainer refuses an
    evaluation strategy without evaluation data)."""
    if any(plan.role == "eval" for plan in plans) or training_args.eval_strategy == "no":
        return
    logger.info("no task of this run has a validation split: --eval_strategy no, --load_best_model_at_end false")
    training_args.do_eval, training_args.eval_strategy = False, IntervalStrategy.NO
    training_args.load_best_model_at_end = False


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
        raise UsageError(f"--metric_for_best_model {chosen!r} is not reported by this run"
                         f"{did_you_mean(chosen, valid)}")
    return chosen
