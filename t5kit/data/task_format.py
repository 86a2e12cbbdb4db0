"""Task rows -> T5 text-to-text pairs: look up a registry entry, format inputs and targets, check custom tasks.

The format is T5's (google-research/text-to-text-transfer-transformer, t5/data/preprocessors.py `glue`, `stsb`,
`summarize`, `translate`); constants.DATASET_VALS describes each task. For example
    format_input(get_task_vals("glue", "mnli"), {"premise": "A man eats.", "hypothesis": "Nobody eats."})
    -> "mnli hypothesis: Nobody eats. premise: A man eats."
Rows use the hub's column names and integer label ids; `convert_file_row` maps rows read from the official
GLUE TSV / SuperGLUE jsonl files (--data_dir) to that form.
"""
import copy
import logging
from collections.abc import Mapping

import numpy as np

from constants import COMBINED_SCORE, DATASET_VALS, NO_LABEL, NO_LABEL_TARGET, STSB_TARGET_RESOLUTION
from t5kit.errors import UsageError, closest_names, did_you_mean

logger = logging.getLogger(__name__)

# Metrics each task type can report (metrics.py computes them; names as HF `evaluate`'s glue/rouge metrics).
# "qa": a generated answer scored against every acceptable answer (ReCoRD, T5's squad metric); "referent": a
# generated referent scored by T5's wsc_simple postprocessor against the row's label (WSC, WNLI as WSC).
# exact_match of a classification task is T5's mean_group_metric(all_match) over questions (MultiRC), and
# gender_parity the share of Winogender pairs predicted alike (AX-g): both need the groups of their row_format.
METRIC_NAMES_BY_TASK_TYPE = {
    "classification": ("accuracy", "f1", "matthews_correlation", "exact_match", "gender_parity"),
    "regression": ("pearson", "spearmanr"),
    "generation": ("rouge1", "rouge2", "rougeL", "rougeLsum", "bleu", "exact_match"),
    "qa": ("exact_match", "f1"),
    "referent": ("accuracy",),
}
GROUPED_METRICS = ("exact_match", "gender_parity")  # classification metrics over the row groups of a row_format
CUSTOM_TASK_TYPES = ("classification", "regression", "generation")  # what a task declared in YAML may be

TASK_TYPES = tuple(METRIC_NAMES_BY_TASK_TYPE)
DEFAULT_BENCHMARK = "glue"  # where a bare task name is looked up first (fine_tune_t5.py's --benchmark default)
REQUIRED_KEYS = ("task_type", "prefix", "text_column_name", "label_column_name", "labels", "metric_names",
                 "metric_to_optimize")
# Keys a YAML-declared task may set (the registry's data-location keys are for built-in tasks only).
CUSTOM_TASK_KEYS = REQUIRED_KEYS
ROW_FORMAT_GROUPS = {"multirc": "exact_match", "axg": "gender_parity"}  # the grouped metric each row format feeds


def get_task_vals(benchmark: str, task: str, registry: Mapping = DATASET_VALS) -> dict:
    """A copy of registry[benchmark][task] plus its "name" ("glue/sst2"); unknown names raise UsageError naming the
    one closest name (the choices follow: "superglue" is super_glue, and offering glue too would only blur that)."""
    if benchmark not in registry:
        raise UsageError(f"unknown --benchmark '{benchmark}'{did_you_mean(benchmark, registry)}")
    if task not in registry[benchmark]:
        raise UsageError(f"unknown task '{task}' for --benchmark {benchmark}"
                         f"{did_you_mean(task, registry[benchmark])}")
    return dict(copy.deepcopy(registry[benchmark][task]), name=f"{benchmark}/{task}")


def find_task(name: str, custom_tasks: Mapping | None = None, registry: Mapping = DATASET_VALS) -> dict:
    """predict_t5.py's --task: "benchmark/task"; a bare task name, looked up in DEFAULT_BENCHMARK first (as
    fine_tune_t5.py's --benchmark default: "rte" is glue/rte), then in the benchmarks that hold it; or a YAML-declared
    task recorded in the model card (custom_tasks: name -> spec). Unknown names raise UsageError."""
    custom_tasks = custom_tasks or {}
    if name in custom_tasks:
        return build_task_vals(dict(custom_tasks[name]), name=name)
    benchmark, _, task = name.rpartition("/")
    holders = [benchmark] if benchmark in registry else [] if benchmark else \
        sorted(registry, key=lambda b: b != DEFAULT_BENCHMARK)
    holders = [b for b in holders if task in registry[b]]
    if holders:
        return get_task_vals(holders[0], task, registry)
    qualified = {f"{b}/{t}": f"{b}/{t}" for b in registry for t in registry[b]}
    by_bare = {t: f"{b}/{t}" for b in registry for t in registry[b]}
    close = dict.fromkeys(qualified.get(c) or by_bare[c] for c in closest_names(name, [*qualified, *by_bare]))
    recorded = f" (the model card declares {', '.join(custom_tasks)})" if custom_tasks else ""
    fix = f"did you mean {' or '.join(map(repr, close))}? (--task none feeds the inputs as they are)" if close else \
        "name one as benchmark/task (constants.DATASET_VALS), or pass --task none to feed the inputs as they are"
    raise UsageError(f"--task {name!r} is no task of the registry{recorded}; {fix}")


def normalize_text(text: str) -> str:
    """How generations are compared with label words: outer whitespace stripped, inner runs collapsed to one
    space; case kept (T5's `string_label_to_class_id` matches exactly; decoding can add spaces, not case)."""
    return " ".join(str(text).split())


def text_columns(task_vals) -> list:
    column = task_vals["text_column_name"]
    return [column] if isinstance(column, str) else list(column)


def missing_fields(task_vals, row, with_target: bool = True) -> list:
    """Columns formatting needs that the row lacks or holds None in, so loaders can count and drop such rows."""
    needed = text_columns(task_vals) + ([task_vals["label_column_name"]] if with_target else [])
    return [column for column in needed if row.get(column) is None]


def format_input(task_vals, row) -> str:
    """T5 input text: the prefix, then the bare value of a str column or "name: value" per listed column."""
    missing = missing_fields(task_vals, row, with_target=False)
    if missing:
        raise UsageError(f"task {task_vals.get('name', 'custom')} needs column(s) {', '.join(missing)}; the row "
                         f"has: {', '.join(map(str, row))} (set text_column_name to the row's columns)")
    if isinstance(task_vals["text_column_name"], str):
        parts = [str(row[task_vals["text_column_name"]])]
    else:
        parts = [f"{column}: {row[column]}" for column in task_vals["text_column_name"]]
    # Values are kept verbatim (SST-2 sentences end with a space), as T5's tf.strings.join keeps them.
    return " ".join([task_vals["prefix"], *parts] if task_vals["prefix"] else parts)


def format_stsb_target(score: float) -> str:
    """T5 `preprocessors.stsb`: the score rounded to the nearest 0.2 in float32 (half to even), one decimal."""
    resolution = np.float32(STSB_TARGET_RESOLUTION)
    return f"{np.round(np.float32(score) * resolution) / resolution:.1f}"


def is_no_label(value) -> bool:
    # bool is excluded because True/False are labels (BoolQ, WiC); -1 and -1.0 mark unlabeled hub test rows.
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.number)) and value == NO_LABEL


def format_target(task_vals, row) -> str:
    """Target text: the label word, the rounded score string (regression) or the target column (generation)."""
    column = task_vals["label_column_name"]
    if row.get(column) is None:
        raise UsageError(f"task {task_vals.get('name', 'custom')} needs the label column '{column}'; the row has: "
                         f"{', '.join(map(str, row))} (set label_column_name)")
    value = row[column]
    if task_vals["task_type"] == "generation":
        return str(value)
    if is_no_label(value):
        return NO_LABEL_TARGET
    if task_vals["task_type"] == "regression":  # every regression task gets STS-B's 0.2 grid
        try:
            return format_stsb_target(float(value))
        except (TypeError, ValueError):
            raise UsageError(f"label {value!r} of task {task_vals.get('name', 'custom')} is not a number") from None
    try:
        return task_vals["labels"][value]
    except (KeyError, TypeError):
        valid = ", ".join(f"{key!r} ({word})" for key, word in task_vals["labels"].items())
        raise UsageError(f"label {value!r} of task {task_vals.get('name', 'custom')} is not one of its labels: "
                         f"{valid}") from None


def convert_file_row(task_vals, raw_row):
    """A row read from the task's files (--data_dir) in hub form: columns renamed by file_column_map, raw labels
    mapped by file_label_map, a missing label column -> NO_LABEL. Returns None for a malformed row (extra or
    missing fields, empty label), which the caller counts; an unknown non-empty label raises UsageError."""
    if None in raw_row or any(value is None for value in raw_row.values()):
        return None  # csv.DictReader's marks for a row with more / fewer fields than the header.
    rename = task_vals.get("file_column_map") or {}
    # lstrip: MRPC's header starts with a UTF-8 BOM when the file is not opened with encoding="utf-8-sig".
    row = {rename.get(key.lstrip("\ufeff"), key.lstrip("\ufeff")): value for key, value in raw_row.items()}
    column = task_vals["label_column_name"]
    if task_vals["task_type"] == "generation":
        return row
    if column not in row:
        return dict(row, **{column: NO_LABEL})
    raw = row[column]
    if raw == "":
        return None
    if task_vals["task_type"] == "regression":
        try:
            return dict(row, **{column: float(raw)})
        except (TypeError, ValueError):
            raise UsageError(f"task {task_vals.get('name', 'custom')}: label {raw!r} in column '{column}' is "
                             "not a number") from None
    file_labels = task_vals.get("file_label_map") or {}
    if raw not in file_labels:
        raise UsageError(f"task {task_vals.get('name', 'custom')}: file label {raw!r} is not one of "
                         f"{', '.join(map(repr, file_labels))} (is this the right task for these files?)")
    return dict(row, **{column: file_labels[raw]})


def validate_task_vals(task_vals, name: str = "custom") -> None:
    """Raises UsageError naming the first problem: a missing key, a wrong type, an unknown metric, duplicate
    label words. Registry entries and YAML-declared tasks go through the same checks."""
    where = f"task {name}"
    for key in REQUIRED_KEYS:
        if key not in task_vals:
            raise UsageError(f"{where} is missing the key '{key}' (a task needs: {', '.join(REQUIRED_KEYS)})")
    task_type = task_vals["task_type"]
    if task_type not in TASK_TYPES:
        raise UsageError(f"{where}: unknown task_type '{task_type}'{did_you_mean(task_type, TASK_TYPES)}")
    if not isinstance(task_vals["prefix"], str):
        raise UsageError(f"{where}: prefix must be a string, got {task_vals['prefix']!r}")
    columns = task_vals["text_column_name"]
    if not (isinstance(columns, str) and columns) and not (
            isinstance(columns, (list, tuple)) and columns and all(isinstance(c, str) and c for c in columns)):
        raise UsageError(f"{where}: text_column_name must be a column name or a list of them, got {columns!r}")
    if not isinstance(task_vals["label_column_name"], str) or not task_vals["label_column_name"]:
        raise UsageError(f"{where}: label_column_name must be a column name, got {task_vals['label_column_name']!r}")
    validate_metrics(task_vals, where)
    validate_labels(task_vals, where)


def validate_metrics(task_vals, where: str) -> None:
    metric_names, task_type = task_vals["metric_names"], task_vals["task_type"]
    known = METRIC_NAMES_BY_TASK_TYPE[task_type]
    if isinstance(metric_names, str) or not isinstance(metric_names, (list, tuple)) or not metric_names:
        raise UsageError(f"{where}: metric_names must be a non-empty list, got {metric_names!r}")
    for metric in metric_names:
        if metric not in known:
            raise UsageError(f"{where}: unknown metric '{metric}' for a {task_type} task{did_you_mean(metric, known)}")
        grouped_by = ROW_FORMAT_GROUPS.get(task_vals.get("row_format"))
        if task_type == "classification" and metric in GROUPED_METRICS and metric != grouped_by:
            raise UsageError(f"{where}: metric '{metric}' scores groups of rows (MultiRC questions, AX-g pairs) that "
                             "only the registry's multirc and axg tasks have; use accuracy, f1 or "
                             "matthews_correlation")
    allowed = list(metric_names) + ([COMBINED_SCORE] if combines_metrics(task_vals) else [])
    if task_vals["metric_to_optimize"] not in allowed:
        raise UsageError(f"{where}: metric_to_optimize '{task_vals['metric_to_optimize']}' is not reported"
                         f"{did_you_mean(task_vals['metric_to_optimize'], allowed)}")


def validate_labels(task_vals, where: str) -> None:
    labels = task_vals["labels"]
    if task_vals["task_type"] != "classification":
        if labels is not None:
            raise UsageError(f"{where}: labels are for classification tasks; a {task_vals['task_type']} task "
                             "takes its targets from label_column_name (remove labels or set task_type)")
        return
    if not isinstance(labels, Mapping) or len(labels) < 2:
        raise UsageError(f"{where}: labels must map each label value to its word, with 2 or more entries, "
                         f"got {labels!r}")
    words = [normalize_text(word) if isinstance(word, str) else word for word in labels.values()]
    if not all(isinstance(word, str) and word for word in words) or len(set(words)) != len(words):
        raise UsageError(f"{where}: label words must be distinct non-empty strings, got {list(labels.values())!r}")
    if NO_LABEL in labels:
        raise UsageError(f"{where}: label value {NO_LABEL} marks unlabeled rows (as on the hub); map it to "
                         "another value")


def combines_metrics(task_vals) -> bool:
    """Whether metrics.py adds COMBINED_SCORE (the mean of metric_names) for this task: every task with several
    metrics but a generation task (ROUGE types are reported side by side)."""
    return task_vals["task_type"] != "generation" and len(task_vals["metric_names"]) > 1


def split_result_key(task: str, split: str) -> str:
    """The per_task_metrics key for one split: "mnli" + "validation_matched" -> "mnli_matched"."""
    for prefix in ("validation", "test"):
        if split.startswith(prefix):
            return task + split[len(prefix):]
    return f"{task}_{split}"


def build_task_vals(spec, name: str = "custom") -> dict:
    """A task entry from a YAML-declared mapping (prefix, text_column_name, label_column_name, metric_names,
    labels or task_type, optional metric_to_optimize), validated like the registry's entries."""
    if not isinstance(spec, Mapping):
        raise UsageError(f"task {name} must be a mapping of {', '.join(CUSTOM_TASK_KEYS)}, got {spec!r}")
    for key in spec:
        if key not in CUSTOM_TASK_KEYS:
            raise UsageError(f"task {name}: unknown key '{key}'{did_you_mean(key, CUSTOM_TASK_KEYS)}")
    task_vals = dict(spec, name=name)
    if task_vals.get("task_type") in set(TASK_TYPES) - set(CUSTOM_TASK_TYPES):
        raise UsageError(f"task {name}: task_type {task_vals['task_type']} needs a registry task's row format (ReCoRD, "
                         f"WSC); a YAML-declared task is one of {', '.join(CUSTOM_TASK_TYPES)}")
    if "task_type" not in task_vals:
        if "labels" not in task_vals:
            raise UsageError(f"task {name} is missing the key 'labels' (or set task_type: regression / generation)")
        task_vals["task_type"] = "classification"
    task_vals.setdefault("labels", None)
    metric_names = task_vals.get("metric_names")
    if "metric_to_optimize" not in task_vals and "metric_names" in task_vals:
        # Bad metric_names keep None here, so that validation names metric_names, not this default.
        usable = isinstance(metric_names, (list, tuple)) and metric_names
        task_vals["metric_to_optimize"] = (
            None if not usable else COMBINED_SCORE if combines_metrics(task_vals) else metric_names[0])
        logger.info("task %s: metric_to_optimize defaults to %s", name, task_vals["metric_to_optimize"])
    validate_task_vals(task_vals, name)
    return task_vals
