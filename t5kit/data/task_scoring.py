"""How a fine-tuning run predicts and scores each task's evaluation and test splits: the one rule of --label_scoring
(label_scoring_of: generation, or ranking the label words or each row's own options) and, for
Super-NaturalInstructions, --sni_metric; what config.yaml (derived.evaluation) and metrics.json ("evaluation")
record of them (evaluation_by_split).

    label_scoring_of(None, held_out_flan_rte)   -> "rank"       # FLAN ranks held-out tasks' options
    label_scoring_of("generate", held_out_flan_rte) -> "generate"
"""
import logging

from constants import SNI_METRICS
from t5kit.data import sni
from t5kit.errors import UsageError

logger = logging.getLogger(__name__)


def has_label_words(task_vals) -> bool:
    """Whether the task has one fixed set of answers to rank: a classification task's label words."""
    return task_vals["task_type"] == "classification" and not has_row_options(task_vals)


def has_row_options(task_vals) -> bool:
    """Whether each row has its own answers to rank (meta["options"]): FLAN's COPA (the row's two choices) and ReCoRD
    (the passage's entities, each followed by the rest of the query), the options FLAN's scoring tasks rank
    (flan/preprocessors.py rank_classification_from_options)."""
    return bool(task_vals.get("row_options"))


def has_answers_to_rank(task_vals) -> bool:
    """Whether --label_scoring rank can rank the task's predictions: label words, or each row's own options."""
    return has_label_words(task_vals) or has_row_options(task_vals)


def label_scoring_of(label_scoring, task_vals) -> str:
    """The one rule of how a task's evaluation and test predictions are made, "rank" or "generate". --label_scoring
    given: that, for every task with answers to rank (has_answers_to_rank; others generate). Unset (None): rank a
    held-out task (--eval_tasks) in FLAN's templates, as FLAN scores held-out tasks (flan/tasks.py: the
    *_scoring_eval tasks, rank_classification_from_options over the options, COPA's and ReCoRD's per row); generate
    every other task."""
    if label_scoring is None:
        label_scoring = "rank" if task_vals.get("held_out") and task_vals.get("instructions") else "generate"
    return "rank" if label_scoring == "rank" and has_answers_to_rank(task_vals) else "generate"


def evaluation_of(label_scoring, task_vals) -> dict:
    """How a split is predicted and scored, as config.yaml (derived.evaluation) and metrics.json record it:
    label_scoring (label_scoring_of), and for SNI the metric (--sni_metric)."""
    settings = {"label_scoring": label_scoring_of(label_scoring, task_vals)}
    if task_vals.get("row_format") == sni.ROW_FORMAT:
        settings["sni_metric"] = task_vals.get("sni_metric", SNI_METRICS[0])
    return settings


def evaluation_by_split(label_scoring, plans) -> dict:
    """{result key: evaluation_of} of every split the run evaluates or predicts."""
    return {plan.key: evaluation_of(label_scoring, plan.task_vals) for plan in plans if plan.role != "train"}


def check_label_scoring(label_scoring, tasks):
    """Rank scoring needs answers to rank: refused when no task has them, noted when only some do. Unset, the
    held-out tasks the rule ranks are named, with the flag that generates instead."""
    if label_scoring is None:
        ranked = [t["name"] + (" (each row's own options)" if has_row_options(t) else "") for t in tasks
                  if label_scoring_of(None, t) == "rank"]
        unranked = [t["name"] for t in tasks if t.get("held_out") and t.get("instructions")
                    and not has_answers_to_rank(t)]
        if ranked:
            logger.info("--label_scoring unset: held-out %s ranked by FLAN's answers, as FLAN scores held-out tasks; "
                        "--label_scoring generate generates them", ", ".join(ranked))
        if unranked:
            logger.info("--label_scoring unset: held-out %s generated: no answers to rank (a score or free text)",
                        ", ".join(unranked))
        return
    if label_scoring != "rank":
        return
    without = [t["name"] for t in tasks if not has_answers_to_rank(t)]
    if len(without) == len(tasks):
        raise UsageError(f"--label_scoring rank scores label words, and {without[0]} is a {tasks[0]['task_type']} "
                         "task without them; use --label_scoring generate")
    if without:
        logger.info("--label_scoring rank applies to tasks with answers to rank; %s are evaluated by generation",
                    ", ".join(without))
