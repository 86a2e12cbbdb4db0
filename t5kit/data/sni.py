"""Super-NaturalInstructions (SNI) as nanoT5 and Tk-Instruct read and format it: a natural-instructions checkout's
task files -> Tk-Instruct inputs and targets, one example per instance.

    check_checkout(spec, ["train", "test"])          # step 1: the checkout, its split files, their task files
    examples = read_sni_split(plan, spec, tokenizer, seed)   # inputs, targets, meta (references), stats

The sources, read exactly (tests/data/test_sni.py transcribes them and compares on the fixture's real tasks):
- nanoT5/utils/ni_dataset.py (PiotrNawrot/nanoT5 @ 1375b38, the same as Tk-Instruct's src/ni_dataset.py)
  `_generate_examples`: a split file names one task a line, task NAME is tasks/NAME.json; the test split takes each
  task's first 100 instances (natural-instructions splits/README.md: the label-balanced instances the benchmark
  evaluates, put first "for reproducibility"); either split is then shuffled and cut to the cap (100 and 100).
- nanoT5/utils/copied_utils.py `DataCollatorForNI` (= Tk-Instruct src/ni_collator.py) with tk_instruct=False: the
  input text "Definition: ...\\n\\n Positive Example 1 -\\nInput: ...\\n Output: ...\\n\\nNow complete the following
  example -\\nInput: ...\\nOutput: ", an example added only while the text fits max_source_length tokens, a text
  still too long cut to its first max_source_length tokens and decoded; the target: random.choice of the outputs.
Where they draw from Python's global random state (the shuffle, the target), we draw from --seed and the task name,
so a run is reproducible: the test split keeps the same 100 instances as theirs (only the order differs), a training
task keeps another random 100 of its instances, and an instance with several outputs trains on one drawn once
rather than redrawn every batch. English tasks only by default: natural-instructions splits/README.md defines the
English track by its tasks' input and output language ("both task input and task output are in English"), and
src/split_tasks.py (@ b00871c, which wrote splits/default) keeps a task whose Input_language and Output_language
name one language, English; is_english applies that rule (Instruction_language is not read), so the tasks it put in
splits/default (119 test tasks) pass, their task files' languages being those it read.
Evaluation scores each prediction against all of the instance's outputs (--sni_metric official, the benchmark's
evaluation), or as nanoT5's train_utils.predict does (--sni_metric nanot5): against the drawn target, after the
tokenizer round trip of nanot5_reference (metrics.score_sni).
"""
import json
import logging
import random
import string
from dataclasses import dataclass
from pathlib import Path

from t5kit.errors import UsageError
from t5kit.specs import TaskDataSpec

logger = logging.getLogger(__name__)

ROW_FORMAT = "sni"  # constants.DATASET_VALS["sni"]["sni"]["row_format"]
TASKS_DIR = "tasks"
DEFAULT_SPLIT_DIR = "splits/default"
SPLIT_FILES = {"train": "train_tasks.txt", "test": "test_tasks.txt"}  # SplitPlan.split -> file in the split folder
TEST_INSTANCES = 100  # ni_dataset.py: `all_instances[:100]` for the test split
LANGUAGE_FIELDS = ("Input_language", "Output_language")  # splits/README.md: the English track's definition
TASK_KEYS = ("Definition", "Positive Examples", "Negative Examples", "Instances", "Categories")
CLONE_HINT = "pass the root of a clone of github.com/allenai/natural-instructions"


@dataclass
class SNIExamples:
    inputs: list  # Tk-Instruct input texts, as the model reads them (already cut to max_source_length)
    targets: list  # one output per instance
    meta: list  # per example: idx None, id, task, category, references (all the instance's outputs)
    stats: dict  # rows (instances kept), malformed (instances without outputs), tasks, non_english_tasks


# --------------------------------------------------------------------------------------------------- the checkout
def checkout_dir(spec: TaskDataSpec) -> Path:
    if not spec.data_dir:
        raise UsageError(f"--benchmark sni reads a natural-instructions checkout: pass --data_dir PATH ({CLONE_HINT})")
    if len(spec.data_dir) > 1:
        raise UsageError(f"--benchmark sni reads one natural-instructions checkout; --data_dir names "
                         f"{len(spec.data_dir)} folders")
    if any(spec.local_files.values()):
        raise UsageError("--benchmark sni reads its tasks from a checkout (--data_dir), not from --train_file/"
                         "--validation_file/--test_file")
    return Path(spec.data_dir[0])


def split_dir(spec) -> Path:
    return Path(spec.sni.split_dir) if spec.sni.split_dir else checkout_dir(spec) / DEFAULT_SPLIT_DIR


def split_task_names(spec, split) -> list:
    """The task names a split file lists, in file order; each must have its task file (ni_dataset.py opens
    tasks/NAME.json for every line)."""
    path, tasks = split_dir(spec) / SPLIT_FILES[split], checkout_dir(spec) / TASKS_DIR
    names = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        name = line.strip()
        if not name:
            continue
        if not (tasks / f"{name}.json").is_file():
            raise UsageError(f"{path} line {number} names task {name}, which has no task file {tasks / name}.json; "
                             "remove the line or pass the checkout the split file belongs to")
        names.append(name)
    if not names:
        raise UsageError(f"{path} lists no task; it should name one task a line (e.g. task1159_bard_analogical_"
                         "reasoning_containers)")
    return names


def check_checkout(spec, splits) -> None:
    """Refuses, before anything is loaded or written, a --data_dir that is no natural-instructions checkout (naming
    the first file or folder it lacks) and a split file naming a task that has no task file."""
    root = checkout_dir(spec)
    if not (root / TASKS_DIR).is_dir():
        raise UsageError(f"--data_dir {root} is not a natural-instructions checkout: {root / TASKS_DIR}/ is missing; "
                         f"{CLONE_HINT}")
    for split in splits:
        path = split_dir(spec) / SPLIT_FILES[split]
        if not path.is_file():
            raise UsageError(f"--data_dir {root}: the split file {path} is missing (the {split} tasks, one a line); "
                             f"{CLONE_HINT}, or pass --sni_split_dir FOLDER holding "
                             f"{' and '.join(SPLIT_FILES.values())}")
        split_task_names(spec, split)


def load_task(path) -> dict:
    """A task file as json.loads reads it (NaN included, which some task files hold), its keys checked."""
    try:
        task = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise UsageError(f"{path} is not valid JSON ({err}); restore it from the natural-instructions repository") \
            from None
    missing = [key for key in TASK_KEYS if key not in task] if isinstance(task, dict) else list(TASK_KEYS)
    if missing:
        raise UsageError(f"{path} is no natural-instructions task file: it lacks {', '.join(missing)}")
    return task


def is_english(task) -> bool:
    """split_tasks.py: `languages = set(Input_language + Output_language)`, English when it holds one language and
    that one lower-cased is "english" (["English", "English"] and ["english"] are English, ["English", "english"]
    is not)."""
    languages = {language for field in LANGUAGE_FIELDS for language in task.get(field) or []}
    return len(languages) == 1 and next(iter(languages)).lower() == "english"


def category_of(task) -> str:
    """The task's category as the official evaluation groups it: its first category (create_reference_file.py)."""
    return task["Categories"][0] if task["Categories"] else "uncategorized"


def select_instances(instances, split, cap, rng) -> list:
    """ni_dataset.py: the test split's first 100 instances, then either split shuffled and cut to `cap`."""
    instances = list(instances[:TEST_INSTANCES] if split == "test" else instances)
    if cap is not None and cap >= 0:
        rng.shuffle(instances)
        instances = instances[:cap]
    return instances


# ------------------------------------------------------------------------------------------ the Tk-Instruct format
def period(text: str) -> str:
    """DataCollatorForNI's `if not text[-1] in string.punctuation: text += "."`."""
    return text if text[-1] in string.punctuation else text + "."


def example_text(kind, number, example, add_explanation) -> str:
    """One demonstration: " Positive Example 1 -\\nInput: ...\\n Output: ...\\n[ Explanation: ...\\n]\\n"."""
    text = period(f" {kind} Example {number} -\nInput: {example['input'].strip()}") + "\n"
    text = period(text + f" Output: {example['output'].strip()}") + "\n"
    if add_explanation and "explanation" in example:
        text = period(text + f" Explanation: {example['explanation'].strip()}") + "\n"
    return text + "\n"


def tk_instruct_input(task, name, instance, tokenizer, max_source_length, settings) -> tuple:
    """(input text, cut): DataCollatorForNI.__call__ for one instance with tk_instruct=False. settings: an SNISpec
    (add_task_name, add_task_definition, num_pos_examples, num_neg_examples, add_explanation)."""
    def fits(text):
        return len(tokenizer(text, verbose=False)["input_ids"]) <= max_source_length

    task_input = period(f"Now complete the following example -\nInput: {instance['input'].strip()}") + "\nOutput: "
    task_name = name + ". " if settings.add_task_name else ""
    definition = ""
    if settings.add_task_definition:
        text = task["Definition"][0] if isinstance(task["Definition"], list) else task["Definition"]
        definition = period("Definition: " + text.strip()) + "\n\n"
    positives = []
    for number, example in enumerate(task["Positive Examples"][:settings.num_pos_examples], start=1):
        text = example_text("Positive", number, example, settings.add_explanation)
        if not fits(definition + " ".join(positives) + text + task_input):
            break
        positives.append(text)
    negatives = []
    for number, example in enumerate(task["Negative Examples"][:settings.num_neg_examples], start=1):
        text = example_text("Negative", number, example, settings.add_explanation)
        if not fits(definition + " ".join(positives) + " ".join(negatives) + text + task_input):
            break
        negatives.append(text)
    source = task_name + definition + "".join(positives) + "".join(negatives) + task_input
    ids = tokenizer(source, verbose=False)["input_ids"]
    if len(ids) <= max_source_length:
        return source, False
    return tokenizer.decode(ids[:max_source_length], skip_special_tokens=True), True


# ------------------------------------------------------------------------------------ nanoT5's decoded texts
# --sni_metric nanot5 scores as PiotrNawrot/nanoT5 @ 1375b38 nanoT5/utils/train_utils.py `predict` does: generations
# and batch["labels"] (DataCollatorForNI: one output drawn per instance, tokenized with max_length=max_target_len and
# truncation) decoded with skip_special_tokens and clean_up_tokenization_spaces, stripped; then
# `evaluate.load("rouge").compute(use_stemmer=True, use_aggregator=False)`, which (huggingface/evaluate
# metrics/rouge/rouge.py `_compute`) builds RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=True,
# tokenizer=None) and returns, per type, the F-measure of scorer.score(reference, prediction) for each row (one
# reference a row: not score_multi); nanoT5 logs sum(rougeL) * 100 / len(rougeL), unrounded (metrics.nanot5_rouge_l).
# The one difference: nanoT5 draws the output from Python's global random state at each evaluation; the reference
# here is the split's target, drawn once from --seed and the task (read_sni_split).
def clean_up_tokenization(text: str) -> str:
    """transformers' PreTrainedTokenizerBase.clean_up_tokenization (as transformers 5.24 has it; tests/data/test_sni.py
    compares), which nanoT5's decode(..., clean_up_tokenization_spaces=True) applies to the decoded text (nanoT5 ran
    transformers 4.30.2, assets/env_dump/pip_freeze.txt)."""
    return (text.replace(" .", ".").replace(" ?", "?").replace(" !", "!").replace(" ,", ",").replace(" ' ", "'")
            .replace(" n't", "n't").replace(" 'm", "'m").replace(" 's", "'s").replace(" 've", "'ve")
            .replace(" 're", "'re"))


def nanot5_text(decoded: str) -> str:
    """A text as nanoT5's predict() hands it to the metric: decoded without special tokens (done by the caller),
    spaces cleaned up, stripped (train_utils.py `decode`)."""
    return clean_up_tokenization(decoded).strip()


def nanot5_reference(tokenizer, target, max_target_length) -> str:
    """The reference nanoT5 scores a prediction against: DataCollatorForNI's label (the drawn output, tokenized with
    max_length=max_target_len, truncation=True), then train_utils.predict's decode of batch["labels"]."""
    ids = tokenizer(target, max_length=max_target_length, truncation=True, verbose=False)["input_ids"]
    return nanot5_text(tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False))


# ------------------------------------------------------------------------------------------------------ a split
def read_sni_split(plan, spec: TaskDataSpec, tokenizer, seed) -> SNIExamples:
    """Every instance of the split's tasks as a Tk-Instruct example, tasks in split-file order."""
    split = plan.split
    cap = spec.sni.max_num_instances_per_task if split == "train" else spec.sni.max_num_instances_per_eval_task
    inputs, targets, meta, tasks, non_english = [], [], [], [], []
    rows = malformed = cut = 0
    for name in split_task_names(spec, split):
        task = load_task(checkout_dir(spec) / TASKS_DIR / f"{name}.json")
        if spec.sni.english_only and not is_english(task):
            non_english.append(name)
            continue
        tasks.append(name)
        rng = random.Random(f"{seed}/{name}")  # one stream per task: adding a task changes no other task's draw
        instances = select_instances(task["Instances"], split, cap, rng)
        rows += len(instances)
        for position, instance in enumerate(instances):
            if not instance.get("output"):
                malformed += 1  # DataCollatorForNI has no label for it
                continue
            text, was_cut = tk_instruct_input(task, name, instance, tokenizer, spec.max_source_length, spec.sni)
            inputs.append(text)
            targets.append(rng.choice(instance["output"]))
            meta.append({"idx": None, "id": instance.get("id", f"{name}_{position}"), "task": name,
                         "category": category_of(task), "references": list(instance["output"])})
            cut += was_cut
    if non_english:
        logger.info("sni %s: left out %d task(s) not in English (--sni_english_only), e.g. %s", split,
                    len(non_english), non_english[0])
    if not inputs:
        raise UsageError(f"{split_dir(spec) / SPLIT_FILES[split]}: no usable instance in its tasks "
                         f"({len(tasks)} English, {len(non_english)} not); check the split file or pass "
                         "--sni_english_only false")
    logger.info("sni %s: %d tasks, %d instances (at most %s per task), %d inputs cut to --max_source_length=%d", split,
                len(tasks), len(inputs), cap, cut, spec.max_source_length)
    return SNIExamples(inputs, targets, meta, dict(rows=rows, malformed=malformed, tasks=tasks,
                                                   non_english_tasks=len(non_english)))
