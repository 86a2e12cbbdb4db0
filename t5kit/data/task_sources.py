"""Task rows from where they live, in hub form: local files (--train_file/--validation_file/--test_file), folders in
the official GLUE / SuperGLUE layout (--data_dir) or the hub dataset of the registry entry.

    rows, columns, where, from_task_files = read_split(plan, spec)
    kept, malformed, unlabeled = convert_rows(plan, rows, columns, where, from_task_files)  # [(line, row)], ...

TSVs are read with csv.QUOTE_NONE as HF's glue.py does; official rows are mapped by task_format.convert_file_row,
and the nested rows of MultiRC, ReCoRD and WSC files are flattened as TFDS does (superglue_formats.FILE_ROWS).
Malformed rows (wrong field count, a needed field missing, an empty label, a nested row that does not hold
together) are dropped, counted and logged; an unknown label, a missing column or an empty split is a UsageError
naming the file and the fix.
"""
import csv
import json
import logging
from pathlib import Path

import datasets

from constants import NO_LABEL
from t5kit.data.superglue_formats import FILE_ROWS, is_unlabeled
from t5kit.data.task_format import convert_file_row, is_no_label, missing_fields, text_columns
from t5kit.errors import UsageError
from t5kit.specs import TaskDataSpec

logger = logging.getLogger(__name__)

FILE_FLAGS = {"train": "--train_file", "eval": "--validation_file", "predict": "--test_file"}
MALFORMED_EXAMPLES_LOGGED = 3
REFERENT_LABELS = {"true": 1, "1": 1, "false": 0, "0": 0}  # str() of the JSON booleans and ids WSC rows hold


# ------------------------------------------------------------------------------------------------------ reading
def read_delimited(path, delimiter, quoting, fieldnames=None):
    """(line number, row) pairs and the column names; a row with extra/missing fields holds None markers."""
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle, delimiter=delimiter, quoting=quoting, fieldnames=fieldnames)
        rows = [(reader.line_num, row) for row in reader]
        return rows, list(reader.fieldnames or [])


def read_json_lines(path):
    """(line number, row) pairs and the union of keys; an unparsable or non-object line becomes None."""
    text = Path(path).read_text(encoding="utf-8")
    if Path(path).suffix.lower() == ".json" and text.lstrip().startswith("["):
        records = list(enumerate(json.loads(text), start=1))
    else:
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    records.append((number, json.loads(line)))
                except json.JSONDecodeError:
                    records.append((number, None))
    rows = [(number, row if isinstance(row, dict) else None) for number, row in records]
    columns = list(dict.fromkeys(key for _, row in rows if row for key in row))
    return rows, columns


def read_parallel_text(folder, files):
    """Line-aligned raw text files ({column: file}, e.g. Multi30k val.en / val.de) as rows."""
    lines = {column: (folder / name).read_text(encoding="utf-8").splitlines() for column, name in files.items()}
    lengths = {column: len(values) for column, values in lines.items()}
    if len(set(lengths.values())) > 1:
        raise UsageError(f"--data_dir {folder}: files {files} are not line-aligned ({lengths} lines)")
    rows = [(i + 1, dict(zip(lines, values))) for i, values in enumerate(zip(*lines.values()))]
    return rows, list(lines)


def read_local_file(path):
    suffix = Path(path).suffix.lower()
    if suffix == ".tsv":  # QUOTE_NONE: GLUE text holds bare quote characters
        return read_delimited(path, "\t", csv.QUOTE_NONE)
    if suffix == ".csv":
        return read_delimited(path, ",", csv.QUOTE_MINIMAL)
    return read_json_lines(path)


def find_task_file(data_dirs, task_vals, split):
    """The split's file in the first --data_dir that is the task folder or holds it (data_dir_name)."""
    name = task_vals["data_files"][split]
    probe = next(iter(name.values())) if isinstance(name, dict) else name
    candidates = [folder for data_dir in data_dirs for folder in (Path(data_dir) / task_vals["data_dir_name"],
                                                                   Path(data_dir))]
    for folder in candidates:
        if (folder / probe).is_file():
            return folder, name
    raise UsageError(f"--data_dir {' '.join(data_dirs)}: no {probe} for the {split} split of {task_vals['name']} "
                     f"(looked in {', '.join(map(str, dict.fromkeys(candidates)))}); pass the official "
                     f"{task_vals['data_dir_name']} folder")


def read_split(plan, spec: TaskDataSpec):
    """(rows, columns, where, from_task_files): raw rows of one split from files, a GLUE folder or the hub."""
    task_vals = plan.task_vals
    if any(spec.local_files.values()):
        path = spec.local_files[plan.role]
        rows, columns = read_local_file(path)
        return rows, columns, f"{FILE_FLAGS[plan.role]} {path}", False
    if spec.data_dir:
        folder, name = find_task_file(spec.data_dir, task_vals, plan.split)
        if task_vals["file_format"] == "parallel_text":
            rows, columns = read_parallel_text(folder, name)
            return rows, columns, f"{folder}/{'+'.join(name.values())}", False
        if task_vals["file_format"] == "tsv":
            rows, columns = read_delimited(folder / name, "\t", csv.QUOTE_NONE,
                                           task_vals["tsv_columns"].get(plan.split))
        else:
            rows, columns = read_json_lines(folder / name)
        return rows, columns, str(folder / name), True
    path, config = task_vals["hub_name"]
    try:
        dataset = datasets.load_dataset(path, config, split=plan.split, cache_dir=spec.cache_dir)
    except (OSError, ConnectionError, ValueError) as err:
        raise UsageError(f"cannot load {task_vals['name']} split {plan.split} from the hub ({path}, {config}): "
                         f"{str(err).splitlines()[0] if str(err) else type(err).__name__}; offline, pass --data_dir "
                         "(official GLUE/SuperGLUE folders) or --train_file/--validation_file") from None
    return list(enumerate(dataset.to_list(), start=1)), dataset.column_names, f"hub {path}/{config}:{plan.split}", False


# --------------------------------------------------------------------------------------------------- conversion
def label_id(task_vals, value):
    """The registry label id a raw classification label names: the id itself, its string ("1" in a CSV), its
    label word, or a raw file label (file_label_map); None when it names none."""
    lookup = dict(task_vals.get("file_label_map") or {})
    lookup.update({word: key for key, word in task_vals["labels"].items()})
    lookup.update({str(key): key for key in task_vals["labels"]})
    lookup.update({key: key for key in task_vals["labels"]})
    return lookup.get(value.strip() if isinstance(value, str) else value)


def convert_local_row(task_vals, raw, has_label_column):
    """A row from a local file or the hub in hub form (registry label ids), or None when malformed."""
    if raw is None or None in raw:
        return None
    rename = task_vals.get("file_column_map") or {}
    row = {rename.get(key, key): value for key, value in raw.items()}
    column = task_vals["label_column_name"]
    if not has_label_column:
        return dict(row, **{column: NO_LABEL})
    value = row.get(column)
    if value is None or value == "":
        return None
    if task_vals["task_type"] in ("generation", "qa") or is_no_label(value):
        return row
    if task_vals["task_type"] == "referent":  # WSC: whether span1 is the pronoun's referent
        if str(value).strip().lower() not in REFERENT_LABELS:
            raise UsageError(f"task {task_vals['name']}: label {value!r} is not one of {', '.join(REFERENT_LABELS)} "
                             "(whether the candidate is the referent)")
        return dict(row, **{column: REFERENT_LABELS[str(value).strip().lower()]})
    if task_vals["task_type"] == "regression":
        try:
            return dict(row, **{column: float(value)})
        except (TypeError, ValueError):
            raise UsageError(f"task {task_vals['name']}: label {value!r} is not a number") from None
    label = label_id(task_vals, value)
    if label is None:
        valid = ", ".join(f"{key!r} ({word})" for key, word in task_vals["labels"].items())
        raise UsageError(f"label {value!r} is not one of task {task_vals['name']}'s labels: {valid}; fix the file "
                         "or the task's labels")
    return dict(row, **{column: label})


def check_columns(plan, columns, where):
    """Refuses a split without the task's text columns, or a train/eval split without its label column."""
    task_vals = plan.task_vals
    rename = task_vals.get("file_column_map") or {}
    present = {rename.get(column.lstrip("\ufeff"), column.lstrip("\ufeff")) for column in columns}
    missing = [column for column in text_columns(task_vals) if column not in present]
    if missing:
        raise UsageError(f"{where} lacks column(s) {', '.join(missing)} of task {task_vals['name']}; its columns: "
                         f"{', '.join(map(str, columns))} (rename them, or fix text_column_name)")
    label = task_vals["label_column_name"]
    if plan.role != "predict" and label not in present:
        use = "evaluation compares predictions with labels" if plan.role == "eval" else "training needs targets"
        raise UsageError(f"{where} has no label column '{label}' ({use}); an unlabeled file is only for "
                         "--test_file with --do_predict")
    return label in present


def convert_rows(plan, rows, columns, where, from_task_files):
    """(kept, malformed, unlabeled): [(line, hub-form row)] of a split, the lines of malformed rows, and the count of
    unlabeled rows dropped from a train/eval split. A nested official row (MultiRC passage, ReCoRD passage, WSC
    row) becomes one hub-form row per answer / query, all under its line number."""
    task_vals = plan.task_vals
    nested = FILE_ROWS.get(task_vals.get("row_format")) if from_task_files else None
    has_label_column = True if nested else check_columns(plan, columns, where)
    kept, malformed, unlabeled = [], [], 0
    for number, raw in rows:
        try:
            if nested:
                converted = nested(raw, labelled=plan.role != "predict") if isinstance(raw, dict) else None
            else:
                row = (convert_file_row(task_vals, raw) if raw is not None else None) if from_task_files else \
                    convert_local_row(task_vals, raw, has_label_column)
                converted = None if row is None else [row]
        except UsageError as err:
            raise UsageError(f"{where} line {number}: {err}") from None
        if not converted or any(missing_fields(task_vals, row, with_target=False) for row in converted):
            malformed.append(number)
            continue
        for row in converted:
            if plan.role != "predict" and is_unlabeled(task_vals, row):
                unlabeled += 1
            else:
                kept.append((number, row))
    return kept, malformed, unlabeled


def report_dropped(plan, where, num_rows, malformed, unlabeled, used):
    """Logs the rows a split dropped; refuses a split left without any."""
    if malformed:
        logger.warning("%s: dropped %d malformed row(s) of %d (wrong field count, a missing field, an empty label, "
                       "missing answers or a span outside its text), e.g. line(s) %s", where, len(malformed),
                       num_rows, ", ".join(map(str, malformed[:MALFORMED_EXAMPLES_LOGGED])))
    if unlabeled:
        logger.warning("%s: dropped %d unlabeled row(s) (label %d) from the %s split", where, unlabeled, NO_LABEL,
                       plan.split)
    if not used:
        raise UsageError(f"{where}: the {plan.split} split of {plan.task_vals['name']} has no usable rows ({num_rows} "
                         f"read, {len(malformed)} malformed, {unlabeled} unlabeled); check the file")
