"""Predictions files: one per task split (input, target, prediction, correct), the leaderboard files, and
predict_t5.py's output file.

GLUE submission files (gluebenchmark.com/faq, and the GLUE baselines' `write_preds`) are named by task
("SST-2.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "STS-B.tsv", "AX.tsv") with the columns `index` and `prediction`: label
strings for the NLI tasks MNLI, QNLI, RTE and AX, the label id (0/1) for CoLA, SST-2, MRPC, QQP and WNLI, a float
for STS-B.

SuperGLUE submission files (super.gluebenchmark.com; the label values of jiant's SuperGLUE prediction writers) are
`<Task>.jsonl`, one `{"idx": ..., "label": ...}` per line: "true"/"false" for BoolQ and WiC, "True"/"False" for
WSC, the label word for CB, RTE, AX-b and AX-g, the choice id (0/1) for COPA, the answer text per query for
ReCoRD, and for MultiRC one line per paragraph, `{"idx": p, "passage": {"questions": [{"idx": q, "answers":
[{"idx": a, "label": 0|1}]}]}}`. (The lower/upper case of the boolean words is as we know jiant's writers; the
server is not reachable from here to confirm it.)
"""
import csv
import json
import logging
from pathlib import Path

from metrics import (
    INVALID,
    normalize_squad,
    parse_label,
    parse_score,
    row_option_index,
    sni_exact_match,
    wsc_referent_match,
)
from t5kit.data.task_format import normalize_text
from t5kit.outputs.atomic_files import atomic_write

logger = logging.getLogger(__name__)

GLUE_STRING_LABEL_TASKS = ("mnli", "qnli", "rte", "ax")  # the leaderboard expects label words for these
GLUE_SPLIT_SUFFIXES = {"test_matched": "-m", "test_mismatched": "-mm"}  # MNLI-m.tsv, MNLI-mm.tsv
STSB_SCORE_RANGE = (0.0, 5.0)
SUBMISSION_DIR = "glue_submission"
SUPERGLUE_SUBMISSION_DIR = "superglue_submission"
# SuperGLUE server label values by task (label id -> value); tasks not listed take their label words.
SUPERGLUE_LABEL_VALUES = {"boolq": ("false", "true"), "wic": ("false", "true"), "wsc": ("False", "True"),
                          "copa": (0, 1), "multirc": (0, 1)}
PREDICTION_COLUMNS = ("input", "target", "prediction", "correct")


def is_correct(task_vals, target, prediction, meta):
    """None for an unlabeled row; else whether the prediction is right as the task's metric sees it: the target
    text (after whitespace normalisation), any of a ReCoRD query's answers (SQuAD normalisation), or for WSC
    whether naming / not naming the candidate agrees with the label."""
    if target is None:
        return None
    if task_vals.get("row_format") == "sni":  # any of the instance's outputs, after SNI's normalisation
        return bool(sni_exact_match(prediction, meta["references"]))
    if task_vals["task_type"] == "referent":
        return wsc_referent_match(prediction, meta["referent"]) == meta["label"]
    if task_vals["task_type"] == "qa":
        return normalize_squad(prediction) in {normalize_squad(answer) for answer in meta["answers"]}
    return normalize_text(prediction) == normalize_text(target)


def prediction_rows(split, predictions) -> list:
    """One dict per row: input, target, prediction, and whether it is correct (None for unlabeled rows). SNI rows
    add what its official evaluation reads (the instance id, its task and all its references) and the reference
    --sni_metric nanot5 scores against (nanot5_reference), so that either metric can score the file."""
    rows = [{"input": text, "target": target, "prediction": prediction,
             "correct": is_correct(split.task_vals, target, prediction, meta)}
            for text, target, prediction, meta in zip(split.inputs, split.targets, predictions, split.meta)]
    if split.task_vals.get("row_format") == "sni":
        for row, meta in zip(rows, split.meta):
            row.update(id=meta["id"], task=meta["task"], references=meta["references"],
                       **{key: meta[key] for key in ("nanot5_reference",) if key in meta})
    return rows


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
            columns = list(rows[0]) if rows else PREDICTION_COLUMNS  # SNI rows hold more
            writer = csv.DictWriter(handle, fieldnames=columns, delimiter="\t", lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    return path


def predicted_label(task_vals, text, meta):
    """(label id, valid) of one prediction: the label a generation names (classification), or whether it names
    the candidate referent (WSC, WNLI as WSC: 1/0). An invalid one gets the first label (0)."""
    if task_vals["task_type"] == "referent":
        match = wsc_referent_match(text, meta["referent"])
        return (0, False) if match == INVALID else (match, True)
    if meta and "options" in meta:  # FLAN's COPA: the row's choices, in label order
        index = row_option_index(meta["options"], text)
        label = None if index == INVALID else list(task_vals["labels"])[index]
    else:
        label = parse_label(task_vals, text)
    return (next(iter(task_vals["labels"])), False) if label is None else (label, True)


def warn_invalid(name, values, fallback):
    invalid = sum(not valid for _, valid in values)
    if invalid:
        logger.warning("%s: %d of %d test predictions named no label; wrote %s for them. --label_scoring rank never "
                       "produces invalid predictions", name, invalid, len(values), fallback)


def submission_value(task_vals, text, meta=None):
    """(value for the GLUE file, valid): an invalid generation gets the first label / the lowest score."""
    task = task_vals["name"].split("/")[1]
    if task_vals["task_type"] == "regression":
        score = parse_score(text)
        low, high = STSB_SCORE_RANGE
        return f"{low if score is None else min(max(score, low), high):.3f}", score is not None
    label, valid = predicted_label(task_vals, text, meta)
    # T5's label words (FLAN's templates replace them in "labels" with its answers: instructions.py)
    words = task_vals.get("t5_labels", task_vals["labels"])
    return (words[label] if task in GLUE_STRING_LABEL_TASKS else str(label)), valid


def write_glue_submission(output_dir, split, predictions):
    """SUBMISSION_DIR/<Task>.tsv for a GLUE test split."""
    task_vals = split.task_vals
    name = task_vals.get("submission_name", task_vals["data_dir_name"]) + \
        GLUE_SPLIT_SUFFIXES.get(split.plan.split, "") + ".tsv"
    path = Path(output_dir) / SUBMISSION_DIR / name
    values = [submission_value(task_vals, text, meta) for text, meta in zip(predictions, split.meta)]
    warn_invalid(name, values, f"the first label (or score {STSB_SCORE_RANGE[0]:.1f})")
    with atomic_write(path) as handle:
        handle.write("index\tprediction\n")
        handle.writelines(f"{index}\t{value}\n" for index, (value, _) in zip(split.indices, values))
    return path


def record_entity(text, meta) -> str:
    """A ReCoRD prediction as the server takes it: the entity, without the rest of the query that FLAN's templates
    append to it (meta["query_right"], instructions.record_features)."""
    label, rest = normalize_text(text), normalize_text(meta.get("query_right", ""))
    return label[:-len(rest)].strip() if rest and label.endswith(rest) else label


def superglue_records(split, predictions) -> list:
    """The lines of a SuperGLUE submission file, in test file order."""
    task_vals, task = split.task_vals, split.task_vals["name"].split("/")[1]
    if task == "record":  # one line per query: its first example's prediction (all of them see the same input)
        first = {}
        for text, meta in zip(predictions, split.meta):
            first.setdefault(meta["group"], {"idx": meta["idx"]["query"], "label": record_entity(text, meta)})
        return list(first.values())
    values = [predicted_label(task_vals, text, meta) for text, meta in zip(predictions, split.meta)]
    warn_invalid(f"{task_vals['data_dir_name']}.jsonl", values, "the first label")
    words = SUPERGLUE_LABEL_VALUES.get(task) or tuple(task_vals.get("t5_labels", task_vals["labels"]).values())
    if task != "multirc":
        return [{"idx": meta["idx"], "label": words[label]} for (label, _), meta in zip(values, split.meta)]
    passages = {}
    for (label, _), meta in zip(values, split.meta):
        questions = passages.setdefault(meta["idx"]["paragraph"], {})
        questions.setdefault(meta["idx"]["question"], []).append({"idx": meta["idx"]["answer"], "label": words[label]})
    return [{"idx": paragraph, "passage": {"questions": [{"idx": question, "answers": answers}
                                                         for question, answers in questions.items()]}}
            for paragraph, questions in passages.items()]


def write_superglue_submission(output_dir, split, predictions):
    """SUPERGLUE_SUBMISSION_DIR/<Task>.jsonl for a SuperGLUE test split."""
    path = Path(output_dir) / SUPERGLUE_SUBMISSION_DIR / f"{split.task_vals['data_dir_name']}.jsonl"
    with atomic_write(path) as handle:
        handle.writelines(json.dumps(record) + "\n" for record in superglue_records(split, predictions))
    return path


def write_leaderboard_file(output_dir, split, predictions):
    """The GLUE or SuperGLUE server's file for a test split of one of their tasks; None for other benchmarks."""
    benchmark = split.task_vals["name"].split("/")[0]
    if "data_dir_name" not in split.task_vals:
        return None
    writers = {"glue": write_glue_submission, "super_glue": write_superglue_submission}
    return writers[benchmark](output_dir, split, predictions) if benchmark in writers else None


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
