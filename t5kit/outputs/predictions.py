"""Predictions files: one per task split (input, target, prediction, correct), GLUE leaderboard submissions, and
predict_t5.py's output file.

GLUE submission files (gluebenchmark.com/faq, and the GLUE baselines' `write_preds`) are named by task
("SST-2.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "STS-B.tsv") with the columns `index` and `prediction`: label strings for
the NLI tasks MNLI, QNLI and RTE, the label id (0/1) for CoLA, SST-2, MRPC, QQP and WNLI, a float for STS-B.
"""
import csv
import json
import logging
from pathlib import Path

from metrics import parse_label, parse_score
from t5kit.data.task_format import normalize_text
from t5kit.outputs.atomic_files import atomic_write

logger = logging.getLogger(__name__)

GLUE_STRING_LABEL_TASKS = ("mnli", "qnli", "rte")  # the leaderboard expects label words for these
GLUE_SPLIT_SUFFIXES = {"test_matched": "-m", "test_mismatched": "-mm"}  # MNLI-m.tsv, MNLI-mm.tsv
STSB_SCORE_RANGE = (0.0, 5.0)
SUBMISSION_DIR = "glue_submission"
PREDICTION_COLUMNS = ("input", "target", "prediction", "correct")


def prediction_rows(split, predictions) -> list:
    """One dict per row; `correct` is None for unlabeled rows, else whether the normalised texts are equal."""
    return [{"input": text, "target": target, "prediction": prediction,
             "correct": None if target is None else normalize_text(prediction) == normalize_text(target)}
            for text, target, prediction in zip(split.inputs, split.targets, predictions)]


def predictions_path(output_dir, split, fmt) -> Path:
    return Path(output_dir) / f"predictions_{split.key}_{split.plan.split}.{fmt}"


def write_predictions(output_dir, split, predictions, fmt) -> Path:
    """jsonl (one object a line) or tsv (csv-quoted where a field holds a tab, quote or newline)."""
    path = predictions_path(output_dir, split, fmt)
    rows = prediction_rows(split, predictions)
    with atomic_write(path) as handle:
        if fmt == "jsonl":
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        else:
            writer = csv.DictWriter(handle, fieldnames=PREDICTION_COLUMNS, delimiter="\t", lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    return path


def submission_value(task_vals, text):
    """(value for the GLUE file, valid): an invalid generation gets the first label / the lowest score."""
    task = task_vals["name"].split("/")[1]
    if task_vals["task_type"] == "regression":
        score = parse_score(text)
        low, high = STSB_SCORE_RANGE
        return f"{low if score is None else min(max(score, low), high):.3f}", score is not None
    label = parse_label(task_vals, text)
    valid = label is not None
    label = label if valid else next(iter(task_vals["labels"]))
    return (task_vals["labels"][label] if task in GLUE_STRING_LABEL_TASKS else str(label)), valid


def write_glue_submission(output_dir, split, predictions):
    """SUBMISSION_DIR/<Task>.tsv for a GLUE test split; None for other benchmarks."""
    task_vals = split.task_vals
    if not task_vals["name"].startswith("glue/") or "data_dir_name" not in task_vals:
        return None
    name = task_vals["data_dir_name"] + GLUE_SPLIT_SUFFIXES.get(split.plan.split, "") + ".tsv"
    path = Path(output_dir) / SUBMISSION_DIR / name
    values = [submission_value(task_vals, text) for text in predictions]
    invalid = sum(not valid for _, valid in values)
    if invalid:
        logger.warning("%s: %d of %d test predictions named no label; wrote the first label (or score %.1f) for "
                       "them. --label_scoring rank never produces invalid predictions", name, invalid, len(values),
                       STSB_SCORE_RANGE[0])
    with atomic_write(path) as handle:
        handle.write("index\tprediction\n")
        handle.writelines(f"{index}\t{value}\n" for index, (value, _) in zip(split.indices, values))
    return path


def write_predict_file(path, rows, columns):
    """predict_t5.py's output: one row per example in input order, as .jsonl (one object a line) or .tsv (a header,
    csv-quoted where a field holds a tab, quote or newline); written atomically, so an interrupted run leaves no
    half file."""
    path = Path(path)
    with atomic_write(path) as handle:
        if path.suffix.lower() == ".jsonl":
            handle.writelines(json.dumps({column: row[column] for column in columns}, ensure_ascii=False) + "\n"
                              for row in rows)
        else:
            writer = csv.DictWriter(handle, fieldnames=columns, delimiter="\t", lineterminator="\n",
                                    extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    return path
