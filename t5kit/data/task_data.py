"""Fine-tuning data: task rows -> T5 text pairs -> token ids, one `TaskSplit` per task and split.

Rows come from one of three sources, in this order of precedence:
- local files (--train_file/--validation_file/--test_file: .csv, .tsv, .json, .jsonl), one task;
- folders in the official GLUE / SuperGLUE layout (--data_dir): the registry's `data_files`, TSVs read with
  csv.QUOTE_NONE as HF's glue.py does, rows mapped by task_format.convert_file_row;
- the hub dataset of the registry entry (`hub_name`, its split names).
Malformed rows (wrong field count, a needed field missing, an empty label) are dropped, counted and logged; an
unknown label, a missing column or an empty split is a UsageError naming the file and the fix.
"""
import csv
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import yaml

from constants import NO_LABEL, STSB_TARGET_RESOLUTION
from metrics import split_result_key
from t5kit.data.task_format import (
    build_task_vals,
    convert_file_row,
    format_input,
    format_stsb_target,
    format_target,
    get_task_vals,
    is_no_label,
    missing_fields,
    text_columns,
)
from t5kit.errors import UsageError

logger = logging.getLogger(__name__)

GENERATION_TARGET_LENGTH = 128  # default --max_target_length of generation tasks (HF run_summarization.py)
STSB_MAX_SCORE = 5  # STS-B scores lie in [0, 5]
FILE_FLAGS = {"train": "--train_file", "eval": "--validation_file", "predict": "--test_file"}
ROLE_FLAGS = {"train": "--do_train", "eval": "--do_eval", "predict": "--do_predict"}
MALFORMED_EXAMPLES_LOGGED = 3


@dataclass(frozen=True)
class SplitPlan:
    """One split a run reads: which task, which split name, what for, and its result key in metrics.json."""
    task_vals: dict = field(hash=False, compare=False)
    split: str  # hub split name: "train", "validation", "validation_matched", "test"
    role: str  # "train" | "eval" | "predict"
    key: str  # result key ("rte", "mnli_matched"); metrics and file names use it


@dataclass
class TaskSplit:
    plan: SplitPlan
    inputs: list  # formatted input texts, in file order
    targets: list  # target texts; None for unlabeled rows (test splits)
    indices: list  # the file's "index"/"idx" value (else the 0-based row): GLUE submissions are keyed by it
    dataset: datasets.Dataset  # input_ids, attention_mask (+ labels when labeled)
    stats: dict  # rows read, malformed, unlabeled, used, truncated inputs/targets
    max_target_length: int

    @property
    def task_vals(self):
        return self.plan.task_vals

    @property
    def key(self):
        return self.plan.key


# --------------------------------------------------------------------------------------------------- tasks, plan
def resolve_tasks(data_args) -> list:
    """The registry entries (or the YAML-declared task) the run trains/evaluates; unknown names raise UsageError."""
    if data_args.custom_task is not None:
        spec = data_args.custom_task
        if isinstance(spec, str):  # given on the command line as YAML/JSON text
            try:
                spec = yaml.safe_load(spec)
            except yaml.YAMLError:
                raise UsageError("--custom_task is not valid YAML/JSON; pass a mapping like "
                                 "'{prefix: \"review:\", text_column_name: text, ...}'") from None
        return [build_task_vals(spec, name=f"custom/{data_args.dataset_name}")]
    names = [name.strip() for name in data_args.tasks.split(",")] if data_args.tasks else [data_args.dataset_name]
    tasks = []
    for name in names:
        benchmark, _, task = name.rpartition("/")
        tasks.append(get_task_vals(benchmark or data_args.benchmark, task))
    duplicates = {t["name"] for t in tasks if [u["name"] for u in tasks].count(t["name"]) > 1}
    if duplicates:
        raise UsageError(f"--tasks names {sorted(duplicates)[0]} twice; list each task once")
    return tasks


def task_label(task_vals, tasks) -> str:
    """Short task name for result keys and file names; benchmark-qualified when two benchmarks share it."""
    benchmark, task = task_vals["name"].split("/")
    clash = sum(t["name"].split("/")[1] == task for t in tasks) > 1
    return f"{benchmark}_{task}" if clash else task


def plan_splits(tasks, data_args, training_args) -> list:
    """Every split the run will read, checked against the flags before any data or model is loaded."""
    if not (training_args.do_train or training_args.do_eval or training_args.do_predict):
        raise UsageError("nothing to do: pass --do_train, --do_eval or --do_predict true")
    files = {"train": data_args.train_file, "eval": data_args.validation_file, "predict": data_args.test_file}
    files_mode = any(files.values())
    if files_mode and data_args.test_file and not training_args.do_predict:
        logger.warning("--test_file is read only with --do_predict true; ignoring it")
    plans = []
    for task_vals in tasks:
        label = task_label(task_vals, tasks)
        splits = {"train": ["train"], "eval": ["validation"], "predict": ["test"]} if files_mode else {
            "train": [task_vals["train_split"]], "eval": list(task_vals["validation_splits"]),
            "predict": list(task_vals["test_splits"])}
        for role, wanted in (("train", training_args.do_train), ("eval", training_args.do_eval),
                             ("predict", training_args.do_predict)):
            if not wanted:
                continue
            if files_mode and not files[role]:
                raise UsageError(f"{ROLE_FLAGS[role]} needs {FILE_FLAGS[role]} (this run reads local files); pass "
                                 f"it or {ROLE_FLAGS[role]} false" + (" --eval_strategy no" if role == "eval" else ""))
            for split in splits[role]:
                key = label if len(splits[role]) == 1 else split_result_key(label, split)
                plans.append(SplitPlan(task_vals, split, role, key))
    return plans


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


def read_split(plan, data_args, cache_dir):
    """(rows, columns, where, from_task_files): raw rows of one split from files, a GLUE folder or the hub."""
    task_vals = plan.task_vals
    if data_args.train_file or data_args.validation_file or data_args.test_file:
        path = {"train": data_args.train_file, "eval": data_args.validation_file,
                "predict": data_args.test_file}[plan.role]
        rows, columns = read_local_file(path)
        return rows, columns, f"{FILE_FLAGS[plan.role]} {path}", False
    if data_args.data_dir:
        folder, name = find_task_file(data_args.data_dir, task_vals, plan.split)
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
        dataset = datasets.load_dataset(path, config, split=plan.split, cache_dir=cache_dir)
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
    if task_vals["task_type"] == "generation" or is_no_label(value):
        return row
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
    """Hub-form rows of a split plus counts; malformed and (for train/eval) unlabeled rows are dropped."""
    task_vals = plan.task_vals
    has_label_column = check_columns(plan, columns, where)
    kept, malformed, unlabeled = [], [], 0
    for number, raw in rows:
        try:
            row = (convert_file_row(task_vals, raw) if raw is not None else None) if from_task_files else \
                convert_local_row(task_vals, raw, has_label_column)
        except UsageError as err:
            raise UsageError(f"{where} line {number}: {err}") from None
        if row is None or missing_fields(task_vals, row, with_target=False):
            malformed.append(number)
        elif plan.role != "predict" and is_no_label(row.get(task_vals["label_column_name"])):
            unlabeled += 1
        else:
            kept.append((number, row))
    if malformed:
        logger.warning("%s: dropped %d malformed row(s) of %d (wrong field count, a missing field or an empty "
                       "label), e.g. line(s) %s", where, len(malformed), len(rows),
                       ", ".join(map(str, malformed[:MALFORMED_EXAMPLES_LOGGED])))
    if unlabeled:
        logger.warning("%s: dropped %d unlabeled row(s) (label %d) from the %s split", where, unlabeled, NO_LABEL,
                       plan.split)
    if not kept:
        raise UsageError(f"{where}: the {plan.split} split of {task_vals['name']} has no usable rows ({len(rows)} "
                         f"read, {len(malformed)} malformed, {unlabeled} unlabeled); check the file")
    stats = {"rows": len(rows), "malformed": len(malformed), "unlabeled": unlabeled}
    return kept, stats


# ------------------------------------------------------------------------------------------------- tokenisation
def default_target_length(task_vals, tokenizer) -> int:
    """Tokens (EOS included) of the longest possible target: label word, score string or a generation default."""
    if task_vals["task_type"] == "classification":
        words = list(task_vals["labels"].values())
    elif task_vals["task_type"] == "regression":
        words = [format_stsb_target(i / STSB_TARGET_RESOLUTION) for i in range(STSB_MAX_SCORE
                                                                               * STSB_TARGET_RESOLUTION + 1)]
    else:
        return GENERATION_TARGET_LENGTH
    return max(len(ids) for ids in tokenizer(words).input_ids)


def target_length(task_vals, data_args, tokenizer) -> int:
    """--max_target_length, or the task's default; refuses a limit that would cut label words."""
    needed = default_target_length(task_vals, tokenizer)
    if data_args.max_target_length is None:
        logger.info("--max_target_length defaults to %d for %s (%s)", needed, task_vals["name"],
                    "its longest target" if task_vals["task_type"] != "generation" else "generation default")
        return needed
    if task_vals["task_type"] != "generation" and data_args.max_target_length < needed:
        raise UsageError(f"--max_target_length={data_args.max_target_length} would cut the targets of "
                         f"{task_vals['name']} (the longest is {needed} tokens with EOS); raise it or leave it unset")
    return data_args.max_target_length


def truncate(ids_list, max_length, eos_id):
    """Cuts each id list to max_length keeping EOS last (as the tokenizer's truncation does); returns the count cut."""
    cut = sum(len(ids) > max_length for ids in ids_list)
    return [ids if len(ids) <= max_length else ids[:max_length - 1] + [eos_id] for ids in ids_list], cut


def tokenize_split(tokenizer, inputs, targets, max_source_length, max_target_length):
    """Dataset of input_ids/attention_mask (+ labels when every row has a target) and truncation counts."""
    input_ids, inputs_cut = truncate(tokenizer(inputs, verbose=False).input_ids, max_source_length,
                                     tokenizer.eos_token_id)
    columns = {"input_ids": input_ids, "attention_mask": [[1] * len(ids) for ids in input_ids]}
    targets_cut = 0
    if all(target is not None for target in targets):
        columns["labels"], targets_cut = truncate(tokenizer(targets, verbose=False).input_ids, max_target_length,
                                                  tokenizer.eos_token_id)
    return datasets.Dataset.from_dict(columns), {"truncated_inputs": inputs_cut, "truncated_targets": targets_cut}


def limit_rows(rows, plan, data_args):
    limit = {"train": data_args.max_train_samples, "eval": data_args.max_eval_samples,
             "predict": data_args.max_predict_samples}[plan.role]
    return rows if limit is None else rows[:limit]


def build_task_split(plan, data_args, tokenizer, cache_dir=None) -> TaskSplit:
    """Reads, checks, formats and tokenises one split."""
    task_vals = plan.task_vals
    raw_rows, columns, where, from_task_files = read_split(plan, data_args, cache_dir)
    rows, stats = convert_rows(plan, raw_rows, columns, where, from_task_files)
    rows = limit_rows(rows, plan, data_args)
    inputs = [format_input(task_vals, row) for _, row in rows]
    targets = [None if is_no_label(row[task_vals["label_column_name"]]) else format_target(task_vals, row)
               for _, row in rows]
    indices = [row.get("index", row.get("idx", position)) for position, (_, row) in enumerate(rows)]
    max_target = target_length(task_vals, data_args, tokenizer)
    dataset, cut = tokenize_split(tokenizer, inputs, targets, data_args.max_source_length, max_target)
    stats.update(used=len(rows), **cut)
    if cut["truncated_inputs"] or cut["truncated_targets"]:  # a warning: INFO lines are hidden by default
        logger.warning("%s %s: truncated %d of %d inputs to --max_source_length=%d and %d targets to "
                       "--max_target_length=%d; raise them to keep whole examples", task_vals["name"], plan.split,
                       cut["truncated_inputs"], len(rows), data_args.max_source_length, cut["truncated_targets"],
                       max_target)
    logger.info("%s %s (%s): %d rows used of %d read, %d malformed, %d inputs truncated to --max_source_length=%d, "
                "%d targets truncated to %d", task_vals["name"], plan.split, where, len(rows), stats["rows"],
                stats["malformed"], cut["truncated_inputs"], data_args.max_source_length, cut["truncated_targets"],
                max_target)
    return TaskSplit(plan, inputs, targets, indices, dataset, stats, max_target)


def build_task_splits(plans, data_args, training_args, tokenizer, cache_dir=None) -> dict:
    """{"train": [...], "eval": [...], "predict": [...]} TaskSplits, tokenised on the main process first."""
    splits = {"train": [], "eval": [], "predict": []}
    with training_args.main_process_first(desc="reading and tokenising task data"):
        for plan in plans:
            splits[plan.role].append(build_task_split(plan, data_args, tokenizer, cache_dir))
    return splits


def mean_tokens_per_example(splits) -> float:
    """Mean real (unpadded) input + target tokens of the rows, for the throughput log."""
    lengths = [len(ids) for split in splits for column in ("input_ids", "labels")
               if column in split.dataset.column_names for ids in split.dataset[column]]
    rows = sum(len(split.dataset) for split in splits)
    return sum(lengths) / max(rows, 1)
