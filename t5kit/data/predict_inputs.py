"""predict_t5.py's inputs and span filling: a file's rows -> the texts the model reads, and sentinel predictions ->
the filled text.

- .txt: one example a line; .jsonl/.json/.csv/.tsv: one a row (tsv read with csv.QUOTE_NONE, as the GLUE files
  need); a registry task's official file (its name in the task's `data_files`, e.g. CoLA's header-less dev.tsv)
  is read with the task's own column names, and every file's columns are renamed by the task's file_column_map.
- With a task, each row becomes `task_format.format_input`'s text ("rte sentence1: ... sentence2: ..."); without,
  the line or the --text_column value is fed as it is.
- Blank lines and malformed rows (wrong field count, an empty text field) are dropped, counted and logged; each
  example keeps its line number, which the output carries.
"""
import csv
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from constants import NO_TASK
from t5kit.data.task_format import find_task, format_input, text_columns
from t5kit.data.task_sources import read_delimited, read_local_file
from t5kit.data.task_splits import GENERATION_TARGET_LENGTH, default_target_length
from t5kit.errors import UsageError, did_you_mean

logger = logging.getLogger(__name__)

TXT_COLUMN = "text"  # the one column of a .txt file's rows
SENTINEL = re.compile(r"<extra_id_(\d+)>")
DROPPED_EXAMPLES_LOGGED = 3


@dataclass
class PredictInputs:
    lines: list  # the file line of each example, in input order
    texts: list  # what the model reads
    dropped: list  # line numbers of blank or malformed rows


def official_split(task_vals, path):
    """The split whose official file `path` is named as (glue/CoLA "dev.tsv" -> "validation"), else None."""
    for split, name in (task_vals.get("data_files") or {}).items():
        if isinstance(name, str) and Path(path).name == name:
            return split
    return None


def read_rows(path, task_vals):
    """(line number, row) pairs and the column names, columns renamed as the task's files name them."""
    path = Path(path)
    try:
        if path.suffix.lower() == ".txt":
            lines = path.read_text(encoding="utf-8").splitlines()
            return [(number, {TXT_COLUMN: line}) for number, line in enumerate(lines, start=1)], [TXT_COLUMN]
        split = official_split(task_vals, path) if task_vals else None
        if split and path.suffix.lower() == ".tsv":
            rows, columns = read_delimited(path, "\t", csv.QUOTE_NONE, task_vals["tsv_columns"].get(split))
        else:
            rows, columns = read_local_file(path)
    except UnicodeDecodeError as err:
        raise UsageError(f"--input_file {path} is not UTF-8 text (byte {err.start}); convert it to UTF-8") from None
    except json.JSONDecodeError as err:
        raise UsageError(f"--input_file {path} is not valid JSON (line {err.lineno}); give a JSON array or one "
                         "object a line (.jsonl)") from None
    rename = (task_vals or {}).get("file_column_map") or {}
    columns = [rename.get(column.lstrip("\ufeff"), column.lstrip("\ufeff")) for column in columns]
    rows = [(number, None if row is None or None in row else
             {rename.get(key.lstrip("\ufeff"), key.lstrip("\ufeff")): value for key, value in row.items()})
            for number, row in rows]
    return rows, columns


def input_columns(path, columns, task_vals, text_column):
    """{file column: the column formatting reads}: the task's text columns (--text_column standing in for a task's
    one column), or --text_column alone without a task. Refuses a column the file lacks, naming the closest."""
    suffix = Path(path).suffix.lower()
    needed = text_columns(task_vals) if task_vals else [TXT_COLUMN if suffix == ".txt" else text_column]
    if task_vals and suffix == ".txt":
        if len(needed) > 1:
            raise UsageError(f"--input_file {path}: task {task_vals['name']} reads columns {', '.join(needed)}, and a "
                             ".txt file holds one text a line; give a .jsonl/.csv/.tsv file with those columns")
        return {TXT_COLUMN: needed[0]}
    if text_column and task_vals and len(needed) > 1:
        raise UsageError(f"--text_column names the one text column of a single-column task; task "
                         f"{task_vals['name']} reads {', '.join(needed)}: give the file those columns")
    if needed == [None]:
        raise UsageError(f"--input_file {path} has columns {', '.join(map(str, columns))}; pass --text_column NAME "
                         "(the column to feed the model) or --task")
    mapping = {text_column: needed[0]} if text_column and suffix != ".txt" else {column: column for column in needed}
    for column in mapping:
        if column not in columns:
            flag = "--text_column" if column == text_column else f"task {task_vals['name']}'s column"
            raise UsageError(f"--input_file {path} has no column {column!r} ({flag}){did_you_mean(column, columns)}")
    return mapping


def read_inputs(path, task_vals, text_column=None, limit=None) -> PredictInputs:
    """The examples of `path` in file order, formatted for the task (None: as they are)."""
    rows, columns = read_rows(path, task_vals)
    mapping = input_columns(path, columns, task_vals, text_column)
    lines, texts, dropped = [], [], []
    for number, row in rows:
        values = {target: row.get(source) for source, target in mapping.items()} if row is not None else {}
        if row is None or any(value is None or not str(value).strip() for value in values.values()):
            dropped.append(number)
            continue
        lines.append(number)
        texts.append(format_input(task_vals, values) if task_vals else str(next(iter(values.values()))))
    if dropped:
        logger.warning("--input_file %s: dropped %d blank or malformed row(s) of %d, e.g. line(s) %s", path,
                       len(dropped), len(rows), ", ".join(map(str, dropped[:DROPPED_EXAMPLES_LOGGED])))
    if not texts:
        raise UsageError(f"--input_file {path} has no examples ({len(rows)} row(s) read, {len(dropped)} blank or "
                         "malformed); check the file")
    if limit is not None:
        lines, texts = lines[:limit], texts[:limit]
    return PredictInputs(lines, texts, dropped)


def has_sentinels(text) -> bool:
    return bool(SENTINEL.search(text))


def fill_spans(text, prediction) -> str:
    """The input with each sentinel replaced by the span the model generated after the same sentinel
    ("The <extra_id_0> walks" + "<extra_id_0> big dog<extra_id_1>" -> "The big dog walks"); a sentinel the model
    gave no span becomes empty."""
    pieces = SENTINEL.split(prediction)  # [before, number, span, number, span, ...]
    spans = {}
    for number, span in zip(pieces[1::2], pieces[2::2]):
        spans.setdefault(int(number), span.strip())
    return SENTINEL.sub(lambda match: spans.get(int(match.group(1)), ""), text)


def resolve_task(task_flag, card_section):
    """--task, else the one task the model card records (card_section: model_card.read_card_section); None: the
    inputs are fed as they are. Several recorded tasks need --task."""
    custom = card_section.get("custom_tasks") or {}
    if task_flag == NO_TASK:
        return None
    if task_flag:
        return find_task(task_flag, custom)
    recorded = card_section.get("tasks") or []
    if len(recorded) > 1:
        raise UsageError(f"the model card lists {len(recorded)} tasks ({', '.join(recorded)}); pass --task NAME (or "
                         f"--task {NO_TASK})")
    if not recorded:
        logger.info("no --task and none in the model card: each input is fed to the model as it is")
        return None
    logger.info("--task defaults to %s, the task in the model card", recorded[0])
    return find_task(recorded[0], custom)


def check_label_scoring(label_scoring, task_vals):
    if label_scoring == "rank" and (task_vals is None or task_vals["task_type"] != "classification"):
        what = "no task" if task_vals is None else f"task {task_vals['name']}, a {task_vals['task_type']} task"
        raise UsageError(f"--label_scoring rank scores a classification task's label words, and this run has {what}; "
                         "pass --task NAME or use --label_scoring generate")


def generation_length(task_vals, card_section, tokenizer) -> int:
    """--max_new_tokens unset: the longest target of a classification/regression task (EOS included), the card's
    --max_target_length for a generation task or inputs fed as they are, else the generation default."""
    if task_vals is not None and task_vals["task_type"] != "generation":
        return default_target_length(task_vals, tokenizer)
    return card_section.get("max_target_length") or GENERATION_TARGET_LENGTH
