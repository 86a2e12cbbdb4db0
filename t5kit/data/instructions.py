"""FLAN's instruction templates on our tasks: `--instruction_templates flan` turns each example of a task FLAN covers
into one of FLAN's templates filled with the row's fields, FLAN's "OPTIONS:" list is filled in unless
`--instruction_options false` (FLAN trains and evaluates with it), `--few_shot K` puts K training exemplars before it
in FLAN's few-shot format.

Sources, google-research/FLAN at e9e4ec6 (Apache-2.0): flan/templates.py (data/flan_templates.py), flan/tasks.py
`_process_<task>` (each task's fields and options; FLAN indexes the options by the label id, so a label's answer is
options[label]), flan/preprocessors.py `format_from_feature_dictionary` (fills a pattern), `format_options`
("OPTIONS:\\n- a\\n- b"), `reformat_with_flan_dialog_prompt` ("0 {inputs} X 1 FLAN"), `remove_trailing_spaces` (strip);
flan/utils.py `remove_input_patterns_options` (a pattern without options); flan/few_shot.py
`register_few_shot_version_of_task` over google/seqio's experimental.fewshot_preprocessor (the K-shot input).

Two formats (--instruction_templates):
  flan          the filled template as it is; K-shot "x1 y1\\n\\nx2 y2\\n\\nx", the arguments FLAN registers its
                few-shot tasks without dialog markers with (tasks.py register_few_shot_versions_of_continuations_task).
  flan_dialog   FLAN v1's dialog markers, which its decoder-only base model was pre-trained on: "0 x X 1 FLAN";
                K-shot "0 x1 X 1 y1 X 0 x X 1 FLAN" (few_shot.py's default arguments).
The templates used are those whose target is the task's answer and whose input holds every source field: FLAN's
reversed templates ("Generate a context and a hypothesis.") give no example the task's metrics can score, and
BoolQ's title template needs a title SuperGLUE's BoolQ rows lack. One is drawn per example, and K exemplars from the
task's training rows (never the example itself), by a keyed hash of (seed, task, split, example position), as
data_collator.window_keys draws masks: the same draw in every run with that seed, whatever the batch size, process
count or resumption. Exemplars take the example's template, as in FLAN's few-shot tasks.
Label words become FLAN's answers (task_vals["labels"] maps each label id to its option), so metrics (which score
class indices) and --label_scoring rank (which ranks the label words) work unchanged; leaderboard files keep T5's
words (task_vals["t5_labels"]). Three tasks differ from T5's format in kind, as FLAN casts them: WSC becomes a yes/no
question on every row (classification, not T5's referent target), on super_glue/wsc's span texts as published (T5
reads wsc.fixed, whose repairs change 88 train and 8 validation rows); ReCoRD gives one example per query whose
target and answers carry the rest of the query (meta["answers"], ["query_right"]); COPA's answers are the row's own
choices, which metrics and leaderboard files read per row. Rank scoring ranks each row's own options of both
(task_vals["row_options"], meta["options"]: COPA's two choices, ReCoRD's entities each followed by the rest of the
query), as FLAN's scoring tasks do (flan/preprocessors.py rank_classification_from_options over _process_copa's and
_process_record's `options`).
"""
import collections
import logging
import re
import zlib

import numpy as np

from constants import NO_LABEL
from data_collator import splitmix64
from t5kit.data.flan_templates import PATTERNS
from t5kit.data.superglue_formats import Example
from t5kit.errors import UsageError

logger = logging.getLogger(__name__)
PLACEHOLDER = re.compile(r"{(\w*)}")
TF_WHITESPACE = " \t\n\v\f\r"  # what tf.strings.strip removes (absl's ASCII whitespace), no other Unicode space
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def cnn_article(article):
    """FLAN's _process_cnn_dailymail: tf.compat.v1 strings.split of a scalar gives one row, so [-1][0] keeps the
    text before the first occurrence of each separator in turn (a DailyMail byline ending "2013 . " keeps only
    what precedes the date)."""
    for separator in ("2013 . ", "2014 . ", "2012 . ", ") -- "):
        article = article.split(separator)[0]
    return article


def record_features(row) -> dict:
    """FLAN's _process_record: the query left of @placeholder (stripped) and right of it (kept, and appended to every
    entity and answer), OPTIONS from the entities (`options_str`; `options`, what FLAN's scoring tasks rank), the
    passage before its first "\n@highlight"; the answer is the first answer (+ the query's right part)."""
    pieces = row["query"].split("@placeholder")
    right = pieces[1]
    options = [entity + right for entity in row["entities"]]
    answers = [answer + right for answer in row.get("answers") or []]
    values = {"passage": row["passage"].split("\n@highlight")[0], "query": pieces[0].strip(TF_WHITESPACE),
              "options_str": options_text(options), "options": options, "answers": answers, "query_right": right}
    if answers:
        values["answer"] = answers[0]
    return values


def copa_features(row) -> dict:
    """FLAN's _process_copa: premise and question; the row's two choices are the options (`options`, kept for the
    metrics) and the chosen one the answer."""
    options = [row["choice1"], row["choice2"]]
    values = {"premise": row["premise"], "question": row["question"], "options": options,
              "options_": options_text(options)}
    if row.get("label") in (0, 1):
        values["answer"] = options[row["label"]]
    return values


# pattern: FLAN's PATTERNS key; fields: FLAN feature -> our hub-form column; options: FLAN's, in label-id order;
# answer: the target pattern of the templates used; constants: fixed features; transforms: feature -> function.
# build: row -> all of FLAN's features, where they are more than fields (ReCoRD's options and answers per row).
FlanTask = collections.namedtuple("FlanTask", ["pattern", "fields", "options", "answer", "constants", "transforms",
                                               "build"], defaults=("{answer}", {}, {}, None))
_YES_NO, _NO_YES = ("yes", "no"), ("no", "yes")
FLAN_TASKS = {
    "glue/cola": FlanTask("cola", {"sentence": "sentence"}, ("unacceptable", "acceptable")),
    "glue/sst2": FlanTask("sst2", {"sentence": "sentence"}, ("negative", "positive")),
    "glue/mrpc": FlanTask("glue_mrpc", {"sentence1": "sentence1", "sentence2": "sentence2"}, _NO_YES),
    # _process_glue_qqp: tf.regex_replace(question, '""', "'")
    "glue/qqp": FlanTask("glue_qqp", {"question1": "question1", "question2": "question2"}, _NO_YES,
                         transforms={"question1": lambda text: text.replace('""', "'"),
                                     "question2": lambda text: text.replace('""', "'")}),
    "glue/stsb": FlanTask("stsb", {"sentence1": "sentence1", "sentence2": "sentence2"},
                          ("0", "1", "2", "3", "4", "5"), answer="{answer_str}"),
    "glue/mnli": FlanTask("mnli", {"premise": "premise", "hypothesis": "hypothesis"},
                          ("yes", "it is not possible to tell", "no")),
    "glue/qnli": FlanTask("qnli", {"sentence": "sentence", "question": "question"}, _YES_NO),
    "glue/rte": FlanTask("rte", {"premise": "sentence1", "hypothesis": "sentence2"}, _YES_NO),
    "glue/wnli": FlanTask("wnli", {"sentence1": "sentence1", "sentence2": "sentence2"}, _NO_YES),
    "super_glue/boolq": FlanTask("bool_q", {"text": "passage", "question": "question"}, _NO_YES),
    "super_glue/cb": FlanTask("cb", {"premise": "premise", "hypothesis": "hypothesis"},
                              ("Yes", "No", "It's impossible to say")),
    "super_glue/copa": FlanTask("copa", {"premise": "premise", "question": "question"}, None, build=copa_features),
    "super_glue/multirc": FlanTask("multirc", {"paragraph": "paragraph", "question": "question",
                                               "response": "answer"}, _NO_YES),
    "super_glue/record": FlanTask("record", {"passage": "passage", "query": "query"}, None, build=record_features),
    "super_glue/rte": FlanTask("rte", {"premise": "premise", "hypothesis": "hypothesis"}, _YES_NO),
    "super_glue/wsc": FlanTask("wsc", {"context": "text", "text1": "span1_text", "text2": "span2_text"}, _NO_YES),
    "super_glue/wic": FlanTask("wic", {"sentence1": "sentence1", "sentence2": "sentence2", "word": "word"},
                               ("different meanings", "the same meaning")),
    "summarization/cnn_dailymail": FlanTask("cnn_dailymail", {"text": "article", "highlights": "highlights"}, None,
                                            answer="{highlights}", transforms={"text": cnn_article}),
    "translation/multi30k_en_de": FlanTask("wmt16_translate", {"sent1": "en", "sent2": "de"}, None,
                                           answer="{sent2}", constants={"lang1": "English", "lang2": "German"}),
}
# register_few_shot_version_of_task's arguments per format; "wrap" is the zero-shot input.
FORMATS = {
    "flan": dict(x_y_delimiter=" ", inputs_prefix="", targets_prefix="", example_separator="\n\n",
                 final_suffix="", wrap="{}"),
    "flan_dialog": dict(x_y_delimiter=" X ", inputs_prefix="0 ", targets_prefix="1 ", example_separator=" X ",
                        final_suffix=" FLAN", wrap="0 {} X 1 FLAN"),
}


# ------------------------------------------------------------------------------------------------- templates
def fill(pattern, features) -> str:
    """A pattern with each {name} replaced by its feature (format_from_feature_dictionary)."""
    return PLACEHOLDER.sub(lambda match: features[match.group(1)], pattern)


def without_options(pattern) -> str:
    """flan/utils.py remove_input_patterns_options: the pattern without {options_}/{options_str}, stripped."""
    return pattern.replace("{options_}", "").replace("{options_str}", "").strip()


def options_text(options) -> str:
    """preprocessors.format_options: "OPTIONS:\\n- a\\n- b"."""
    return "OPTIONS:\n- " + "\n- ".join(options)


def usable_templates(flan_task, label_column) -> list:
    """FLAN's (input, target) patterns of the task whose target is the answer and whose input uses every source
    field and no field the rows lack."""
    sources = {name for name, column in flan_task.fields.items() if column != label_column}
    known = set(flan_task.fields) | set(flan_task.constants) | {"options_", "options_str"}
    usable = []
    for inputs, targets in PATTERNS[flan_task.pattern]:
        names = set(PLACEHOLDER.findall(inputs))
        if targets == flan_task.answer and sources <= names <= known:
            usable.append((inputs, targets))
    return usable


def features(flan_task, task_vals, row) -> dict:
    """FLAN's features of one hub-form row (_process_<task>); the answer only for a labelled row."""
    if flan_task.build:
        return flan_task.build(row)
    values = {name: str(row[column]) for name, column in flan_task.fields.items()
              if row.get(column) is not None and not (column == task_vals["label_column_name"]
                                                      and row[column] == NO_LABEL)}
    values = {name: flan_task.transforms.get(name, str)(value) for name, value in values.items()}
    values.update(flan_task.constants)
    label = row.get(task_vals["label_column_name"])
    if flan_task.options:
        values["options_"] = options_text(flan_task.options)
    if task_vals["task_type"] == "classification" and label in task_vals["labels"]:
        values["answer"] = task_vals["labels"][label]
    elif task_vals["task_type"] == "regression" and label is not None and label != NO_LABEL:
        # _process_stsb: tf.strings.as_string(label, precision=0) of the float32 score ("%.0f", half to even)
        values["answer_str"] = f"{np.float32(label):.0f}"
    return values


def few_shot_input(fmt, query, exemplars) -> str:
    """The model input of one example: FLAN's zero-shot wrapping, or (K >= 1) seqio's fewshot_preprocessor over
    exemplars [(x, y)] and the query, each x followed by the x-y delimiter, stripped, then the final suffix."""
    if not exemplars:
        return fmt["wrap"].format(query)
    shots = "".join(f"{fmt['inputs_prefix']}{x}{fmt['x_y_delimiter']}{fmt['targets_prefix']}{y}"
                    f"{fmt['example_separator']}" for x, y in exemplars)
    text = shots + fmt["inputs_prefix"] + query + fmt["x_y_delimiter"] + fmt["targets_prefix"].rstrip()
    return text.strip(TF_WHITESPACE) + fmt["final_suffix"]


# ------------------------------------------------------------------------------------------------- keyed draws
def example_key(seed, task_name, split, position) -> np.uint64:
    """The key of one example: its position in the split's file order, the task, the split and the seed."""
    stream = np.uint64(zlib.crc32(f"{task_name}:{split}".encode()))
    base = splitmix64(np.array([seed % 2 ** 64], dtype=np.uint64) ^ stream)
    with np.errstate(over="ignore"):
        return splitmix64(base + np.uint64(position))[0]


def draw_bits(key, count) -> list:
    """count uint64 draws from a key: splitmix64(key + j * golden) for j = 0 .. count - 1."""
    with np.errstate(over="ignore"):
        return [int(value) for value in splitmix64(key + np.arange(count, dtype=np.uint64) * _GOLDEN)]


def draw_exemplars(bits, pool_size, count, exclude=None) -> list:
    """count distinct indices of range(pool_size), never `exclude`: a partial Fisher-Yates shuffle (one swap per
    pick, kept in a dict, so a pool of 400k rows costs nothing)."""
    size = pool_size - (exclude is not None)
    swapped, picks = {}, []
    for step, value in enumerate(bits[:count]):
        other = step + value % (size - step)
        pick = swapped.get(other, other)
        swapped[other] = swapped.get(step, step)
        picks.append(pick + (exclude is not None and pick >= exclude))
    return picks


# ------------------------------------------------------------------------------------------------- examples
def flan_task_vals(task_vals, templates, options, few_shot) -> dict:
    """The task entry with FLAN's settings and answers as label words; UsageError for a task FLAN has no
    templates for here (its list named)."""
    name = task_vals["name"]
    if name not in FLAN_TASKS or task_vals.get("row_format") == "wnli_simple":
        why = " (as WSC under --wnli_format wsc_simple)" if name == "glue/wnli" else ""
        raise UsageError(f"--instruction_templates {templates}: FLAN has no templates for {name}{why}; it formats "
                         f"{', '.join(FLAN_TASKS)}. Drop the task or pass --instruction_templates none")
    flan_task = FLAN_TASKS[name]
    if name == "super_glue/wsc":  # _process_wsc: is span2 span1? yes/no on every row, not T5's referent target;
        # FLAN reads tfds super_glue/wsc (not T5's wsc.fixed): the span texts as the files publish them
        task_vals = dict(task_vals, task_type="classification", labels={0: "False", 1: "True"},
                         train_only_referents=False, example_format="glue", row_format="wsc",
                         hub_name=(task_vals["hub_name"][0], "wsc"))
    task_vals = dict(task_vals, instructions={"format": templates, "options": bool(options),
                                              "few_shot": few_shot, "flan_pattern": flan_task.pattern})
    if name == "super_glue/copa":  # each row's answers are its own choices: metrics read them from the row's meta
        if not options:
            raise UsageError(f"--instruction_templates {templates} for super_glue/copa needs FLAN's OPTIONS list: its "
                             "answers are each row's two choices, which only the list shows; drop "
                             "--instruction_options false")
        task_vals["row_options"] = True
    elif name == "super_glue/record":  # ranked over the row's entities, as FLAN ranks it (utils.is_classification)
        task_vals["row_options"] = True
    elif task_vals["task_type"] == "classification":
        task_vals["t5_labels"] = task_vals["labels"]
        task_vals["labels"] = dict(zip(task_vals["labels"], flan_task.options))
    return task_vals


def describe(task_vals) -> str:
    """How a task's inputs are written, for the model card; "" for T5's format."""
    settings = task_vals.get("instructions")
    if not settings:
        return ""
    flan_task = FLAN_TASKS[task_vals["name"]]
    count = len(usable_templates(flan_task, task_vals["label_column_name"]))
    shots = f", {settings['few_shot']}-shot" if settings["few_shot"] else ", zero-shot"
    return (f"one of {count} FLAN templates (flan/templates.py `{flan_task.pattern}`, --instruction_templates "
            f"{settings['format']}{', with OPTIONS' if settings['options'] else ''}{shots})")


def render(task_vals, template, row, options) -> tuple:
    """(input, target) of one hub-form row in one of FLAN's (input, target) patterns, with or without its OPTIONS
    list; the target is None for an unlabelled row."""
    flan_task = FLAN_TASKS[task_vals["name"]]
    values = features(flan_task, task_vals, row)
    inputs = template[0] if options else without_options(template[0])
    (answer,) = PLACEHOLDER.findall(template[1])
    return fill(inputs, values), (fill(template[1], values) if answer in values else None)


def instruction_example(task_vals, template, row, exemplar_rows=(), options=False, fmt="flan") -> tuple:
    """(model input, target) of a row in a template, after its exemplars rendered in the same template, in the
    format `fmt` (FORMATS)."""
    query, target = render(task_vals, template, row, options)
    exemplars = [render(task_vals, template, exemplar, options) for exemplar in exemplar_rows]
    return few_shot_input(FORMATS[fmt], query, exemplars), target


def instructor(plan, seed, exemplar_rows=None, fits=None):
    """instruct(row, position, examples) -> the examples with FLAN's input and target (meta kept): the template and
    exemplars drawn by example_key. exemplar_rows: the task's training rows [(line, row)] for --few_shot; refuses
    --few_shot larger than they allow. fits(text): whether an input fits --max_source_length; exemplars are dropped
    from the end until it does (FLAN's prune_fewshot_examples_by_length keeps the exemplars that fit, in order)."""
    task_vals = plan.task_vals
    settings = task_vals["instructions"]
    shots = settings["few_shot"]
    templates = usable_templates(FLAN_TASKS[task_vals["name"]], task_vals["label_column_name"])
    pool = [row for _, row in exemplar_rows or []]
    available = len(pool) - (plan.role == "train")
    if shots and shots > available:
        raise UsageError(f"--few_shot {shots}: {task_vals['name']} has {len(pool)} training rows to draw exemplars "
                         f"from{' (an example is never its own)' if plan.role == 'train' else ''}; pass "
                         f"--few_shot {max(available, 0)} or less")
    pruned = []

    def instruct(row, position, examples):
        bits = draw_bits(example_key(seed, task_vals["name"], plan.split, position), shots + 1)
        template = templates[bits[0] % len(templates)]
        exemplars = [pool[index] for index in draw_exemplars(bits[1:], len(pool), shots,
                                                             position if plan.role == "train" else None)]
        while True:
            text, target = instruction_example(task_vals, template, row, exemplars, settings["options"],
                                               settings["format"])
            if not exemplars or fits is None or fits(text):
                break
            exemplars = exemplars[:-1]
            if not pruned:
                logger.info("%s %s: exemplars dropped from inputs longer than --max_source_length (as FLAN prunes "
                            "them); raise it to keep all %d", task_vals["name"], plan.split, shots)
            pruned.append(position)
        if task_vals["task_type"] == "qa":  # ReCoRD: one example per query, FLAN's answers to score it against
            values = features(FLAN_TASKS[task_vals["name"]], task_vals, row)
            # the options to rank, on the splits predicted (100k training queries would hold ~1.3M option texts)
            ranked = {"options": values["options"]} if plan.role != "train" else {}
            examples = [example._replace(meta=dict(example.meta, answers=values["answers"], **ranked,
                                                   query_right=values["query_right"])) for example in examples[:1]]
        elif task_vals.get("row_options"):  # COPA: the row's choices, in label order
            options = features(FLAN_TASKS[task_vals["name"]], task_vals, row)["options"]
            examples = [example._replace(meta=dict(example.meta, options=options)) for example in examples]
        return [Example(text, target if example.target is not None else None, example.meta)
                for example in examples]
    return instruct
