"""Fine-tuning data: task rows -> T5 examples -> token ids, one `TaskSplit` per task and split.

Rows come from local files, an official GLUE / SuperGLUE folder or the hub, in hub form (task_sources.py); each row
becomes one or more T5 examples (input, target, metadata) in its task's format: T5's `glue` format, or the format
of its `row_format` (superglue_formats.py: one example per ReCoRD answer, WSC's marked pronoun, ...). Rows that
cannot be formatted (a WSC pronoun index that names another word) are counted as malformed with the rest.
"""
import contextlib
import logging
from dataclasses import dataclass, field

import datasets

from constants import INSTRUCTION_FORMATS, STSB_TARGET_RESOLUTION, WNLI_AS_WSC
from t5kit.data import sni
from t5kit.data.instructions import flan_task_vals, instructor
from t5kit.data.superglue_formats import EXAMPLES, SPLIT_CHECKS
from t5kit.data.task_format import build_task_vals, format_stsb_target, get_task_vals, split_result_key
from t5kit.data.task_sources import FILE_FLAGS, convert_rows, read_split, report_dropped
from t5kit.errors import UsageError
from t5kit.specs import TaskDataSpec, TaskSelection

logger = logging.getLogger(__name__)

GENERATION_TARGET_LENGTH = 128  # default --max_target_length of generation tasks (HF run_summarization.py)
FREE_TEXT_TASK_TYPES = ("generation", "qa", "referent")  # targets are texts, not a fixed set of words
STSB_MAX_SCORE = 5  # STS-B scores lie in [0, 5]
ROLE_FLAGS = {"train": "--do_train", "eval": "--do_eval", "predict": "--do_predict"}
LEADERBOARD_BENCHMARKS = ("glue", "super_glue")  # their test predictions become server files, keyed by idx


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
    meta: list  # per example: "idx" (the file's index/idx, else the 0-based example), and what its format adds
    dataset: datasets.Dataset  # input_ids, attention_mask (+ labels when labeled)
    stats: dict  # rows read, malformed, unlabeled, used (examples), truncated inputs/targets
    max_target_length: int

    @property
    def indices(self):
        """The idx of each example: leaderboard files are keyed by it."""
        return [meta["idx"] for meta in self.meta]

    @property
    def task_vals(self):
        return self.plan.task_vals

    @property
    def key(self):
        return self.plan.key


# --------------------------------------------------------------------------------------------------- tasks, plan
def resolve_tasks(selection: TaskSelection) -> list:
    """The registry entries (or the YAML-declared task) the run trains on; unknown names raise UsageError."""
    if selection.custom_task is not None:
        return [build_task_vals(selection.custom_task, name=f"custom/{selection.dataset_name}")]
    return registry_tasks(selection.tasks or (selection.dataset_name,), selection)


def registry_tasks(names, selection: TaskSelection) -> list:
    """The registry entries of "benchmark/task" names (a bare name is in selection.benchmark), WNLI read as WSC
    where --wnli_format says so."""
    tasks = []
    for name in names:
        benchmark, _, task = name.rpartition("/")
        task_vals = get_task_vals(benchmark or selection.benchmark, task)
        if task_vals["name"] == "glue/wnli" and selection.wnli_format == "wsc_simple":
            task_vals.update(WNLI_AS_WSC)
        tasks.append(task_vals)
    duplicates = {t["name"] for t in tasks if [u["name"] for u in tasks].count(t["name"]) > 1}
    if duplicates:
        raise UsageError(f"--tasks names {sorted(duplicates)[0]} twice; list each task once")
    return tasks


def resolve_run_tasks(selection: TaskSelection) -> list:
    """resolve_tasks' tasks, then the --eval_tasks the run only evaluates and predicts (held out: never trained on);
    with --instruction_templates, each in FLAN's format (instructions.py). A task in both raises UsageError."""
    tasks = resolve_tasks(selection)
    if selection.eval_tasks:
        held_out = [dict(task_vals, held_out=True) for task_vals in registry_tasks(selection.eval_tasks, selection)]
        both = sorted({t["name"] for t in tasks} & {t["name"] for t in held_out})
        if both:
            raise UsageError(f"--tasks and --eval_tasks both name {both[0]}; a held-out task goes in --eval_tasks only")
        tasks += held_out
    if selection.instruction_templates == INSTRUCTION_FORMATS[0]:
        return tasks
    return [flan_task_vals(task_vals, selection.instruction_templates, selection.instruction_options,
                           selection.few_shot) for task_vals in tasks]


def task_label(task_vals, tasks) -> str:
    """Short task name for result keys and file names; benchmark-qualified when two benchmarks share it."""
    benchmark, task = task_vals["name"].split("/")
    clash = sum(t["name"].split("/")[1] == task for t in tasks) > 1
    return f"{benchmark}_{task}" if clash else task


def task_splits(task_vals, files_mode) -> dict:
    """role -> the task's split names. A diagnostic task (train_split None) is never trained, even from local
    files; local files give each role its one split. A held-out task (--eval_tasks) is never trained either."""
    trains = task_vals.get("train_split", "train") is not None and not task_vals.get("held_out")
    if files_mode:
        return {"train": ["train"] if trains else [], "eval": ["validation"], "predict": ["test"]}
    return {"train": [task_vals["train_split"]] if trains else [], "eval": list(task_vals["validation_splits"]),
            "predict": list(task_vals["test_splits"])}


def untrainable_message(tasks):
    names = ", ".join(t["name"] for t in tasks)
    by = ", ".join(dict.fromkeys(t["predicted_by"] for t in tasks if t.get("predicted_by")))
    return (f"--do_train: {names} is only predicted, never trained on (T5 mixes it with rate 0); pass --do_train "
            f"false with --model_name_or_path of a model fine-tuned on {by or 'a related task'}, or add that task to "
            "--tasks")


def sni_task(task_vals, metric) -> dict:
    """The SNI task with the metric its splits are scored with (metrics.score_sni): --sni_metric nanot5 reports
    Rouge-L alone, as nanoT5 does."""
    names = ("rougeL",) if metric == "nanot5" else task_vals["metric_names"]
    return dict(task_vals, sni_metric=metric, metric_names=names)


def plan_splits(tasks, spec: TaskDataSpec, do_train=True, do_eval=True, do_predict=False) -> list:
    """Every split the run will read, checked against the flags before any data or model is loaded. A task without
    a split for a role is left out of that role (logged); a training run without any training split is refused,
    and so is a run left with nothing to read (a diagnostic task evaluated without --do_predict)."""
    if not (do_train or do_eval or do_predict):
        raise UsageError("nothing to do: pass --do_train, --do_eval or --do_predict true")
    if any(task.get("row_format") == sni.ROW_FORMAT for task in tasks):  # its checkout, before anything is written
        sni.check_checkout(spec, ["train"] * do_train + ["test"] * do_eval)
        tasks = [sni_task(t, spec.sni.metric) if t.get("row_format") == sni.ROW_FORMAT else t for t in tasks]
    files = spec.local_files
    files_mode = any(files.values())
    if files_mode and spec.test_file and not do_predict:
        logger.warning("--test_file is read only with --do_predict true; ignoring it")
    plans = []
    for role, wanted in (("train", do_train), ("eval", do_eval), ("predict", do_predict)):
        if not wanted:
            continue
        if files_mode and not files[role]:
            raise UsageError(f"{ROLE_FLAGS[role]} needs {FILE_FLAGS[role]} (this run reads local files); pass "
                             f"it or {ROLE_FLAGS[role]} false" + (" --eval_strategy no" if role == "eval" else ""))
        without = [t for t in tasks if not task_splits(t, files_mode)[role]]
        if role == "train" and len(without) == len(tasks):
            raise UsageError(untrainable_message(tasks))
        if without:
            logger.info("%s: %s %s no %s split; left out of it", ROLE_FLAGS[role],
                        ", ".join(t["name"] for t in without), "has" if len(without) == 1 else "have", role)
        for task_vals in tasks:
            splits = task_splits(task_vals, files_mode)[role]
            label = task_label(task_vals, tasks)
            for split in splits:
                key = label if len(splits) == 1 else split_result_key(label, split)
                plans.append(SplitPlan(task_vals, split, role, key))
    if not plans:
        raise UsageError(f"nothing to do: {', '.join(t['name'] for t in tasks)} has only a test split; pass "
                         "--do_predict true (with --do_train false and a fine-tuned --model_name_or_path)")
    return plans


# ------------------------------------------------------------------------------------------------- tokenisation
def default_target_length(task_vals, tokenizer) -> int:
    """Tokens (EOS included) of the longest possible target: label word, score string or a generation default
    (also for answers and referents)."""
    if task_vals.get("row_options"):  # FLAN's COPA: each row's own choices, free text
        return GENERATION_TARGET_LENGTH
    if task_vals["task_type"] == "classification":
        words = list(task_vals["labels"].values())
    elif task_vals["task_type"] == "regression":
        words = [format_stsb_target(i / STSB_TARGET_RESOLUTION) for i in range(STSB_MAX_SCORE
                                                                               * STSB_TARGET_RESOLUTION + 1)]
    else:
        return GENERATION_TARGET_LENGTH
    return max(len(ids) for ids in tokenizer(words).input_ids)


def target_length(task_vals, spec, tokenizer) -> int:
    """--max_target_length, or the task's default; refuses a limit that would cut label words."""
    needed = default_target_length(task_vals, tokenizer)
    if spec.max_target_length is None:
        logger.info("--max_target_length defaults to %d for %s (%s)", needed, task_vals["name"],
                    "generation default" if task_vals["task_type"] in FREE_TEXT_TASK_TYPES else "its longest target")
        return needed
    free_text = task_vals["task_type"] in FREE_TEXT_TASK_TYPES or task_vals.get("row_options")
    if not free_text and spec.max_target_length < needed:
        raise UsageError(f"--max_target_length={spec.max_target_length} would cut the targets of "
                         f"{task_vals['name']} (the longest is {needed} tokens with EOS); raise it or leave it unset")
    return spec.max_target_length


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


def limit_rows(rows, plan, spec):
    limit = {"train": spec.max_train_samples, "eval": spec.max_eval_samples,
             "predict": spec.max_predict_samples}[plan.role]
    return rows if limit is None else rows[:limit]


def format_examples(plan, rows, seed=0, exemplar_rows=None, fits=None):
    """(examples, malformed lines, filtered count): every row in its task's T5 format, or FLAN's (instructions.py: a
    template drawn by seed and position; exemplar_rows for --few_shot, as many as fits(text) allows). WSC trains only
    on rows whose candidate is the referent (T5's super_glue_wsc_v102_simple_train); a row that gives no example is
    malformed."""
    task_vals = plan.task_vals
    to_examples = EXAMPLES[task_vals.get("example_format", task_vals.get("row_format", "glue"))]
    instruct = instructor(plan, seed, exemplar_rows, fits) if task_vals.get("instructions") else None
    examples, malformed, filtered = [], [], 0
    for position, (number, row) in enumerate(rows):
        produced = to_examples(task_vals, row)
        if instruct:
            produced = instruct(row, position, produced)
        if not produced:
            malformed.append(number)
        if plan.role == "train" and task_vals.get("train_only_referents"):
            filtered += sum(example.meta["label"] != 1 for example in produced)
            produced = [example for example in produced if example.meta["label"] == 1]
        examples += [(number, example) for example in produced]
    return examples, malformed, filtered


def exemplar_rows(plan, rows, spec: TaskDataSpec):
    """--few_shot: the task's training rows [(line, row)] exemplars are drawn from (the split's own rows when it is
    the training split; --max_train_samples applies); None without --few_shot."""
    if not plan.task_vals.get("instructions", {}).get("few_shot"):
        return None
    if plan.role == "train":
        return rows
    if (spec.validation_file or spec.test_file) and not spec.train_file:
        raise UsageError("--few_shot draws exemplars from the training rows: pass --train_file too")
    train = SplitPlan(plan.task_vals, plan.task_vals.get("train_split") or "train", "train", plan.key)
    raw_rows, columns, where, from_task_files = read_split(train, spec)
    return limit_rows(convert_rows(train, raw_rows, columns, where, from_task_files)[0], train, spec)


def check_leaderboard_indices(plan, spec, examples, where):
    """Server files match predictions to test rows by idx: a predicted split of a GLUE/SuperGLUE task must have
    it on every row (T5's formats keep it)."""
    benchmark = plan.task_vals["name"].split("/")[0]
    if plan.role != "predict" or benchmark not in LEADERBOARD_BENCHMARKS or not spec.leaderboard_files:
        return
    for number, example in examples:
        if example.meta["idx"] is None:
            raise UsageError(f"{where} line {number} has no idx (or index), which the {benchmark} server matches "
                             "predictions by; predict the official test file, or pass --leaderboard_files false for "
                             "predictions files only")


def build_task_split(plan, spec: TaskDataSpec, tokenizer, seed=0) -> TaskSplit:
    """Reads, checks, formats and tokenises one split (seed: the draws of SNI's instances and targets, and of
    FLAN's templates and exemplars)."""
    task_vals = plan.task_vals
    if task_vals.get("row_format") == sni.ROW_FORMAT:
        return build_sni_split(plan, spec, tokenizer, seed)
    raw_rows, columns, where, from_task_files = read_split(plan, spec)
    rows, malformed, unlabeled = convert_rows(plan, raw_rows, columns, where, from_task_files)
    rows = limit_rows(rows, plan, spec)
    if task_vals.get("row_format") in SPLIT_CHECKS:
        SPLIT_CHECKS[task_vals["row_format"]](rows, where)
    exemplars = exemplar_rows(plan, rows, spec)
    max_length = spec.max_source_length
    examples, unformatted, filtered = format_examples(
        plan, rows, seed, exemplars, lambda text: len(tokenizer(text, verbose=False).input_ids) <= max_length)
    report_dropped(plan, where, len(raw_rows), malformed + unformatted, unlabeled, len(examples))
    if filtered:
        logger.info("%s %s: trains on the %d rows whose candidate is the referent, not the %d others (T5's "
                    "correct_referent_only)", task_vals["name"], plan.split, len(examples), filtered)
    check_leaderboard_indices(plan, spec, examples, where)
    inputs = [example.input for _, example in examples]
    targets = [example.target for _, example in examples]
    meta = [dict(example.meta, idx=position if example.meta["idx"] is None else example.meta["idx"])
            for position, (_, example) in enumerate(examples)]
    max_target = target_length(task_vals, spec, tokenizer)
    dataset, cut = tokenize_split(tokenizer, inputs, targets, spec.max_source_length, max_target)
    stats = dict(rows=len(raw_rows), malformed=len(malformed) + len(unformatted), unlabeled=unlabeled,
                 used=len(examples), **cut)
    if filtered:
        stats["not_referent"] = filtered
    if cut["truncated_inputs"] or cut["truncated_targets"]:  # a warning: INFO lines are hidden by default
        logger.warning("%s %s: truncated %d of %d inputs to --max_source_length=%d and %d targets to "
                       "--max_target_length=%d; raise them to keep whole examples", task_vals["name"], plan.split,
                       cut["truncated_inputs"], len(examples), spec.max_source_length, cut["truncated_targets"],
                       max_target)
    logger.info("%s %s (%s): %d examples used of %d rows read, %d malformed, %d inputs truncated to "
                "--max_source_length=%d, %d targets truncated to %d", task_vals["name"], plan.split, where,
                len(examples), stats["rows"], stats["malformed"], cut["truncated_inputs"],
                spec.max_source_length, cut["truncated_targets"], max_target)
    return TaskSplit(plan, inputs, targets, meta, dataset, stats, max_target)


def build_sni_split(plan, spec, tokenizer, seed) -> TaskSplit:
    """The split's SNI tasks in the Tk-Instruct format (data/sni.py), tokenised like every split; its stats name
    the tasks."""
    examples = sni.read_sni_split(plan, spec, tokenizer, seed)
    limit = {"train": spec.max_train_samples, "eval": spec.max_eval_samples}.get(plan.role)
    if limit is not None:  # --max_train_samples / --max_eval_samples: the first N examples, tasks in file order
        examples.inputs, examples.targets, examples.meta = (values[:limit] for values in
                                                            (examples.inputs, examples.targets, examples.meta))
    max_target = target_length(plan.task_vals, spec, tokenizer)
    dataset, cut = tokenize_split(tokenizer, examples.inputs, examples.targets, spec.max_source_length,
                                  max_target)
    if plan.role != "train":  # the reference --sni_metric nanot5 scores against: the target as nanoT5 decodes it
        examples.meta = [dict(row, nanot5_reference=sni.nanot5_reference(tokenizer, target, max_target))
                         for row, target in zip(examples.meta, examples.targets)]
    stats = dict(examples.stats, unlabeled=0, used=len(examples.inputs), **cut)
    return TaskSplit(plan, examples.inputs, examples.targets, examples.meta, dataset, stats, max_target)


def build_task_splits(plans, spec: TaskDataSpec, tokenizer, seed=0, main_process_first=None) -> dict:
    """{"train": [...], "eval": [...], "predict": [...]} TaskSplits, tokenised on the main process first
    (main_process_first(desc=...): the training arguments' context; None: one process)."""
    splits = {"train": [], "eval": [], "predict": []}
    desc = "reading and tokenising task data"
    with contextlib.nullcontext() if main_process_first is None else main_process_first(desc=desc):
        for plan in plans:
            splits[plan.role].append(build_task_split(plan, spec, tokenizer, seed))
    return splits


def mean_tokens_per_example(splits) -> float:
    """Mean real (unpadded) input + target tokens of the rows, for the throughput log."""
    lengths = [len(ids) for split in splits for column in ("input_ids", "labels")
               if column in split.dataset.column_names for ids in split.dataset[column]]
    rows = sum(len(split.dataset) for split in splits)
    return sum(lengths) / max(rows, 1)
