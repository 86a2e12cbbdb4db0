"""data/instructions.py: FLAN's templates on real GLUE/SuperGLUE/BoolQ rows equal FLAN's own code (transcribed
below, its source lines cited), with and without options, zero- and few-shot, in both formats; the keyed template
and exemplar draws; FLAN's answers as label words, mapped back for metrics and leaderboard files; held-out tasks."""
import json
import re

import numpy as np
import pytest
from absl.testing import absltest, parameterized

from metrics import compute_task_metrics
from t5kit.config import parsing
from t5kit.config.finetune_arguments import FineTuneDataArguments
from t5kit.config.script_flags import FINETUNE_FLAG_CLASSES
from t5kit.data import instructions, superglue_formats, task_scoring, task_splits
from t5kit.data.flan_templates import PATTERNS
from t5kit.data.task_format import get_task_vals
from t5kit.data.task_sources import convert_rows, read_split
from t5kit.errors import UsageError
from t5kit.model import building
from t5kit.model.inference import rank_label_words
from t5kit.outputs.predictions import predicted_label, record_entity, submission_value
from t5kit.train.task_trainer import uses_rank_scoring
from tests.helpers import REPO, T5TokenizerTestCase, require

ROWS = 6  # real rows per task and template


# ------------------------------------------------------------------ FLAN's code, transcribed (tf ops -> Python str)
# google-research/FLAN @ e9e4ec6e2701182c7a91af176f705310da541277,
# google/seqio @ b898b9f992877cea2cda40dbc03597ea5cd4b08f
def flan_format_from_feature_dictionary(format_string, feature_dictionary):
    """flan/preprocessors.py lines 51-94 (tf.strings.join of the parts; every feature here is a string)."""
    if not format_string:
        return ''
    to_join = []
    parts = [p for p in re.split(r'({\w*})', format_string) if p]
    for part in parts:
        if part[0] == '{' and part[-1] == '}':
            to_join.append(feature_dictionary[part[1:-1]])
        else:
            to_join.append(part)
    return ''.join(to_join)


def flan_format_options(example):
    """flan/preprocessors.py lines 146-153 (format_options)."""
    example['options_'] = ''.join(['OPTIONS:\n- ', '\n- '.join(example['options'])])
    return example


def one_hot_answer(options, label):
    """tasks.py's `tf.boolean_mask(options, tf.one_hot(label, len(options)))[0]`."""
    return [option for index, option in enumerate(options) if index == int(label)][0]


def flan_process(task, example):
    """flan/tasks.py _process_rte (lines 138-149), _process_sst2 (1848-1855), _process_glue_mrpc (1163-1173),
    _process_boolq (107-116), _process_wsc (171-180); the glm_* features, which no template reads, left out."""
    if task == 'rte':
        options = ['yes', 'no']
        return {'premise': example['premise'], 'hypothesis': example['hypothesis'], 'options': options,
                'answer': one_hot_answer(options, example['label'])}
    if task == 'sst2':
        options = ['negative', 'positive']
        return {'sentence': example['sentence'], 'options': options,
                'answer': one_hot_answer(options, example['label'])}
    if task == 'glue_mrpc':
        options = ['no', 'yes']
        return {'sentence1': example['sentence1'], 'sentence2': example['sentence2'], 'options': options,
                'label': example['label'], 'answer': one_hot_answer(options, example['label'])}
    if task == 'record':  # _process_record (lines 291-328): tf.strings.split(x, sep)[0][i] is x.split(sep)[i]
        query_left = example['query'].split('@placeholder')[0].strip(' \t\n\v\f\r')
        query_right = example['query'].split('@placeholder')[1]
        options = [entity + query_right for entity in example['entities']]
        answers = [answer + query_right for answer in example['answers']]
        options_str = ''.join(['OPTIONS:\n- ', '\n- '.join(options)])
        passage = example['passage'].split('\n@highlight')[0]
        return {'answer': answers[0], 'passage': passage, 'query': query_left, 'answers': answers,
                'options_str': options_str, 'options': options}
    if task == 'copa':  # _process_copa (lines 1229-1243); glm_premise, which no template reads, left out
        options = [example['choice1'], example['choice2']]
        return {'premise': example['premise'], 'question': example['question'], 'options': options,
                'label': example['label'], 'answer': one_hot_answer(options, example['label'])}
    if task == 'wsc':
        options = ['no', 'yes']
        return {'context': example['text'], 'text1': example['span1_text'], 'text2': example['span2_text'],
                'options': options, 'answer': one_hot_answer(options, example['label'])}
    options = ['no', 'yes']  # bool_q
    return {'title': example['title'], 'text': example['passage'], 'question': example['question'],
            'options': options, 'answer': one_hot_answer(options, example['answer'])}


def flan_remove_input_patterns_options(input_pattern):
    """flan/utils.py lines 173-177."""
    no_options_pattern = input_pattern.replace('{options_}', '')
    no_options_pattern = no_options_pattern.replace('{options_str}', '').strip()
    return no_options_pattern


def flan_templated(task, example, pattern, options):
    """The task's preprocessors, then reformat_passthrough (preprocessors.py 161-168) with the pattern, or with
    remove_input_patterns_options's pattern (tasks.py 2345-2361: the *_score_flan_no_options tasks)."""
    features = flan_process(task, example)
    if task != 'record':  # ReCoRD's preprocessors are _process_record alone (tasks.py line 340)
        features = flan_format_options(features)
    inputs_pattern = pattern[0] if options else flan_remove_input_patterns_options(pattern[0])
    return (flan_format_from_feature_dictionary(inputs_pattern, features),
            flan_format_from_feature_dictionary(pattern[1], features))


# few_shot.py register_few_shot_version_of_task's defaults (lines 47-51) and the arguments of tasks.py
# register_few_shot_versions_of_continuations_task (lines 2239-2243).
DIALOG = dict(x_y_delimiter=' X ', inputs_prefix='0 ', targets_prefix='1 ', example_separator=' X ',
              final_suffix=' FLAN')
CONTINUATIONS = dict(x_y_delimiter=' ', inputs_prefix='', targets_prefix='', example_separator='\n\n', final_suffix='')


def flan_zero_shot(task, example, pattern, options, dialog):
    """get_flan_formatter (preprocessors.py 211-222): the template, then reformat_with_flan_dialog_prompt (195-201)."""
    inputs, targets = flan_templated(task, example, pattern, options)
    if dialog:
        inputs = flan_format_from_feature_dictionary('0 {inputs} X 1 FLAN', {'inputs': inputs, 'targets': targets})
    return inputs, targets


def flan_few_shot(task, query, exemplars, pattern, options, dialog):
    """few_shot.py: each example templated without the dialog prompt, add_delimiter_after_x (93-97), seqio's
    fewshot_preprocessor (experimental.py 443-469), remove_trailing_spaces (preprocessors.py 432-437: tf.strings.strip,
    ASCII whitespace), then '{inputs}' + final_suffix where the dialog prompt was removed (few_shot.py 140-147)."""
    args = DIALOG if dialog else CONTINUATIONS
    train = [flan_templated(task, example, pattern, options) for example in exemplars]
    train_inputs = [inputs + args['x_y_delimiter'] for inputs, _ in train]
    train_examples = [[args['inputs_prefix'] + inputs, args['targets_prefix'] + targets + args['example_separator']]
                      for inputs, (_, targets) in zip(train_inputs, train)]
    shots = ''.join(item for pair in train_examples for item in pair)
    eval_inputs, eval_targets = flan_templated(task, query, pattern, options)
    inputs = shots + args['inputs_prefix'] + eval_inputs + args['x_y_delimiter'] + args['targets_prefix'].rstrip()
    inputs = inputs.strip(' \t\n\v\f\r')
    if dialog:
        inputs = flan_format_from_feature_dictionary('{inputs}' + args['final_suffix'], {'inputs': inputs})
    return inputs, eval_targets


def tfds_super_glue_wsc(row):
    """tensorflow_datasets text/super_glue.py `_generate_examples` for the config FLAN reads, super_glue/wsc (flan/
    tasks.py line 185, 'super_glue/wsc:1.0.2'): the nested spans flattened, no `_fix_wst` (wsc.fixed only), the label
    through `_cast_label` ("True"/"False") into ClassLabel(names=["False", "True"])."""
    row = dict(row)
    row.update(row["target"])
    example = {feature: row[feature] for feature in ("text", "span1_index", "span2_index", "span1_text", "span2_text")}
    example["idx"] = row["idx"]
    example["label"] = ["False", "True"].index("True" if row["label"] else "False")
    return example


# ---------------------------------------------------------------------------------------------- the real rows
# (our task, FLAN's PATTERNS key, the data folder, how a hub-form row reads as FLAN's TFDS example; None: FLAN's
# example comes from the official file itself, tfds_super_glue_wsc)
TASKS = {
    "rte": ("super_glue/rte", "rte", "superglue/RTE", lambda row: row),  # super_glue/rte: FLAN's own source
    "sst2": ("glue/sst2", "sst2", "glue/SST-2", lambda row: row),
    "glue_mrpc": ("glue/mrpc", "glue_mrpc", "glue/MRPC", lambda row: row),
    # tfds bool_q: the original BoolQ release (question, title, answer, passage); our rows hold answer as label.
    "wsc": ("super_glue/wsc", "wsc", "superglue/WSC", None),
    # ReCoRD: hand-written rows in the official layout (tests/fixtures/superglue/README.md); no official file here
    "record": ("super_glue/record", "record", str(REPO / "tests/fixtures/superglue"), lambda row: row),
    "bool_q": ("super_glue/boolq", "bool_q", "boolq/dev.jsonl", lambda row: dict(row, answer=bool(row["label"]))),
}


def data_args(**overrides):
    return FineTuneDataArguments(**{"dataset_name": "rte", "max_source_length": 512, **overrides})


def hub_rows(name, folder, split="validation", limit=ROWS, task_vals=None):
    """The first rows of a real split in hub form, as fine_tune_t5.py reads them for the task entry task_vals (T5's
    by default)."""
    benchmark, task = name.split("/")
    task_vals = task_vals or get_task_vals(benchmark, task)
    plan = task_splits.SplitPlan(task_vals, split, "predict" if split == "test" else "eval", task)
    # a folder in the official layout (../shared/data, or the fixtures), or one file (BoolQ's original release)
    path = folder if folder.startswith(str(REPO)) else str(require(folder))
    args = data_args(validation_file=path) if path.endswith(".jsonl") else data_args(data_dir=[path])
    rows, columns, where, from_files = read_split(plan, args.task_data())
    return [row for _, row in convert_rows(plan, rows, columns, where, from_files)[0][:limit]]


def flan_vals(name, templates="flan", options=False, few_shot=0):
    return instructions.flan_task_vals(get_task_vals(*name.split("/")), templates, options, few_shot)


WSC_FILES = {"train": "train.jsonl", "validation": "val.jsonl"}


def flan_rows(task, split="validation", limit=ROWS):
    """[(our hub-form row, as FLAN's task entry reads it; FLAN's TFDS example)] of a real split's first rows."""
    name, _, folder, as_tfds = TASKS[task]
    ours = hub_rows(name, folder, split, limit, task_vals=flan_vals(name))
    if as_tfds is None:  # FLAN's example from the official file itself, never from our reading of it
        lines = (require(folder) / WSC_FILES[split]).read_text().splitlines()[:limit]
        return list(zip(ours, [tfds_super_glue_wsc(json.loads(line)) for line in lines], strict=True))
    return [(row, as_tfds(row)) for row in ours]


class FlanExactnessTest(parameterized.TestCase):

    @parameterized.named_parameters(*[(f"{task}_{fmt}", task, fmt) for task in TASKS
                                      for fmt in ("flan", "flan_dialog")])
    def test_every_template_with_and_without_options_equals_flans_code(self, task, fmt):
        name, key, _, _ = TASKS[task]
        task_vals = flan_vals(name)
        templates = instructions.usable_templates(instructions.FLAN_TASKS[name], task_vals["label_column_name"])
        # FLAN's templates whose target is the answer and which need no field our rows lack (BoolQ's title).
        self.assertEqual(templates, [p for p in PATTERNS[key] if p[1] == "{answer}" and "{title}" not in p[0]])
        self.assertGreaterEqual(len(templates), 8)
        for row, tfds_row in flan_rows(task):
            for template in templates:
                for options in (False, True):
                    ours = instructions.instruction_example(task_vals, template, row, (), options, fmt)
                    self.assertEqual(ours, flan_zero_shot(key, tfds_row, template, options, fmt != "flan"))

    @parameterized.named_parameters(*[(f"{task}_{fmt}_{shots}", task, fmt, shots) for task in TASKS
                                      for fmt in ("flan", "flan_dialog") for shots in (1, 3)])
    def test_few_shot_format_equals_flans_code(self, task, fmt, shots):
        name, key, _, _ = TASKS[task]
        rows = flan_rows(task, limit=shots + 2)
        task_vals = flan_vals(name)
        for template in instructions.usable_templates(instructions.FLAN_TASKS[name], "label")[:3]:
            for options in (False, True):
                ours = instructions.instruction_example(task_vals, template, rows[0][0], [r for r, _ in rows[2:]],
                                                        options, fmt)
                theirs = flan_few_shot(key, rows[0][1], [t for _, t in rows[2:]], template, options, fmt != "flan")
                self.assertEqual(ours, theirs)

    @parameterized.named_parameters(("train", "train"), ("validation", "validation"))
    def test_wsc_reads_super_glue_wsc_as_published_and_t5_keeps_wsc_fixed(self, split):
        """FLAN's WSC renders every official row as FLAN's code renders tfds super_glue/wsc; T5's format keeps TFDS
        wsc.fixed's repairs, which change exactly the rows with a span text that is not in the text."""
        name, key, folder, _ = TASKS["wsc"]
        pairs = flan_rows("wsc", split, limit=None)
        lines = (require(folder) / WSC_FILES[split]).read_text().splitlines()
        self.assertLen(pairs, len(lines))
        templates = instructions.usable_templates(instructions.FLAN_TASKS[name], "label")
        for row, tfds_row in pairs:
            for template in templates:
                self.assertEqual(instructions.instruction_example(flan_vals(name), template, row, (), True),
                                 flan_zero_shot(key, tfds_row, template, True, dialog=False))
        t5_rows = hub_rows(name, folder, split, limit=None)
        repaired = [t5["span1_text"] != flan["span1_text"] or t5["span2_text"] != flan["span2_text"]
                    for t5, (flan, _) in zip(t5_rows, pairs, strict=True)]
        not_in_text = [row["span1_text"] not in row["text"] or row["span2_text"] not in row["text"]
                       for _, row in pairs]
        unfixable = [row["span1_text"] in superglue_formats.WSC_UNFIXABLE_SPANS for _, row in pairs]
        self.assertEqual(repaired, [gap and not skip for gap, skip in zip(not_in_text, unfixable)])
        self.assertEqual(sum(repaired), {"train": 88, "validation": 8}[split])  # the figures docs/data.md gives

    def test_a_real_rte_row_in_one_template_with_options_and_one_shot(self):
        rows = hub_rows("super_glue/rte", "superglue/RTE", limit=2)
        template = PATTERNS["rte"][2]  # "{premise}\n\nCan we draw the following conclusion?\n{hypothesis}..."
        text, target = instructions.instruction_example(flan_vals("super_glue/rte"), template, rows[0], rows[1:],
                                                        options=True)
        exemplar = f"{rows[1]['premise']}\n\nCan we draw the following conclusion?\n{rows[1]['hypothesis']}"
        answer = "yes" if rows[1]["label"] == 0 else "no"
        self.assertTrue(text.startswith(f"{exemplar}\n\nOPTIONS:\n- yes\n- no {answer}\n\n"))
        self.assertTrue(text.endswith(f"{rows[0]['hypothesis']}\n\nOPTIONS:\n- yes\n- no"))
        self.assertEqual(target, ("yes", "no")[rows[0]["label"]])


class FlanTasksTest(T5TokenizerTestCase):

    def split(self, seed=0, role="eval", split="validation", task="rte", folder="glue/RTE", **overrides):
        folder = folder if folder.startswith(str(REPO)) else str(require(folder))
        args = data_args(**{"dataset_name": task, "data_dir": [folder], "instruction_templates": "flan", **overrides})
        (task_vals,) = task_splits.resolve_run_tasks(args.task_selection())
        plan = task_splits.SplitPlan(task_vals, split, role, task)
        return task_splits.build_task_split(plan, args.task_data(), self.tokenizer, seed=seed)

    def test_templates_are_drawn_per_example_by_seed_and_position(self):
        first = self.split(seed=1, max_eval_samples=40)
        self.assertEqual(first.inputs, self.split(seed=1, max_eval_samples=40).inputs)
        self.assertEqual(first.inputs[:10], self.split(seed=1, max_eval_samples=10).inputs)  # position-keyed
        self.assertNotEqual(first.inputs, self.split(seed=2, max_eval_samples=40).inputs)
        rows = hub_rows("glue/rte", "glue/RTE", limit=40)
        templates = instructions.usable_templates(instructions.FLAN_TASKS["glue/rte"], "label")
        used = [next(i for i, t in enumerate(templates)  # FLAN's OPTIONS list is filled in by default
                     if instructions.instruction_example(first.task_vals, t, row, options=True)[0] == text)
                for row, text in zip(rows, first.inputs)]
        self.assertGreaterEqual(len(set(used)), 6)  # 40 draws over 9 templates
        self.assertEqual(set(first.targets), {"yes", "no"})

    @pytest.mark.slow  # FLAN's few-shot templates over a training split
    def test_few_shot_exemplars_come_from_training_rows_never_the_example(self):
        sst2 = dict(task="sst2", folder="glue/SST-2", role="train", split="train", max_train_samples=5)
        train = self.split(few_shot=2, **sst2)
        rows = hub_rows("glue/sst2", "glue/SST-2", split="train", limit=5)
        for row, text in zip(rows, train.inputs):
            self.assertEqual(text.count(row["sentence"].strip()), 1)  # the example itself, once: never an exemplar
            self.assertEqual(sum(other["sentence"].strip() in text for other in rows), 3)
        for position in range(50):
            bits = instructions.draw_bits(instructions.example_key(7, "t", "train", position), 5)
            picks = instructions.draw_exemplars(bits, 6, 5, exclude=position % 6)
            self.assertCountEqual(picks, sorted(set(range(6)) - {position % 6}))
        with self.assertRaisesRegex(UsageError, r"--few_shot 5: glue/sst2 has 5 training rows .*never its own.*"
                                                r"--few_shot 4 or less"):
            self.split(few_shot=5, **sst2)

    def test_exemplars_that_do_not_fit_are_dropped_from_the_end(self):
        sst2 = dict(task="sst2", folder="glue/SST-2", few_shot=3, instruction_options=True, max_eval_samples=20,
                    max_train_samples=200)
        exemplar_end = re.compile(r"\n- positive (?:negative|positive)\n\n")  # an exemplar's options, answer, blank
        whole, cut = self.split(**sst2), self.split(max_source_length=64, **sst2)
        self.assertEqual({len(exemplar_end.findall(text)) for text in whole.inputs}, {3})
        kept = [len(exemplar_end.findall(text)) for text in cut.inputs]
        self.assertLess(min(kept), 3)
        for full, text, shots in zip(whole.inputs, cut.inputs, kept):
            self.assertTrue(shots == 0 or len(self.tokenizer(text).input_ids) <= 64)
            # the same draw with fewer exemplars: the first ones, and the example itself whole
            self.assertEqual(exemplar_end.split(full)[-1], exemplar_end.split(text)[-1])
            self.assertEqual(exemplar_end.split(full)[:shots], exemplar_end.split(text)[:shots])

    def test_flan_answers_are_the_label_words_and_metrics_map_back(self):
        task_vals = flan_vals("glue/rte")
        self.assertEqual(task_vals["labels"], {0: "yes", 1: "no"})
        self.assertEqual(task_vals["t5_labels"], {0: "entailment", 1: "not_entailment"})
        t5 = get_task_vals("glue", "rte")
        references, predictions = [0, 1, 1, 0, 1], [0, 1, 0, 0, "x"]
        flan_metrics = compute_task_metrics(task_vals, [task_vals["labels"].get(p, "maybe") for p in predictions],
                                            [task_vals["labels"][r] for r in references])
        t5_metrics = compute_task_metrics(t5, [t5["labels"].get(p, "maybe") for p in predictions],
                                          [t5["labels"][r] for r in references])
        self.assertEqual(flan_metrics, t5_metrics)
        self.assertEqual(rank_label_words([[-3.0, -1.0]], list(task_vals["labels"].values())), ["no"])
        self.assertEqual(submission_value(task_vals, "yes"), ("entailment", True))  # the GLUE server's words
        cb = flan_vals("super_glue/cb", options=True)
        self.assertEqual(list(cb["labels"].values()), ["Yes", "No", "It's impossible to say"])

    def test_wsc_is_flans_yes_no_question_on_every_row(self):
        train = self.split(task="wsc", folder="superglue", role="train", split="train", benchmark="super_glue")
        self.assertEqual(train.stats["used"], train.stats["rows"])  # not only the referent rows, as T5 trains
        self.assertEqual(set(train.targets), {"yes", "no"})
        self.assertEqual(train.task_vals["task_type"], "classification")
        self.assertIn('Are "', "".join(train.inputs))
        self.assertEqual(train.task_vals["hub_name"], ("aps/super_glue", "wsc"))  # from the hub: not wsc.fixed

    def test_record_gives_one_example_per_query_scored_against_flans_answers(self):
        split = self.split(task="record", folder=TASKS["record"][2], benchmark="super_glue")
        t5_rows = hub_rows("super_glue/record", TASKS["record"][2], limit=None)
        self.assertLen(split.inputs, len(t5_rows))  # T5 makes one example per answer, FLAN one per query
        for target, meta, row in zip(split.targets, split.meta, t5_rows):
            self.assertEqual(target, meta["answers"][0])
            self.assertEqual([answer + meta["query_right"] for answer in row["answers"]], meta["answers"])
            self.assertEqual(record_entity(target, meta), row["answers"][0])  # what the leaderboard file holds
        scores = compute_task_metrics(split.task_vals, split.targets, split.targets, split.meta)
        self.assertEqual((scores["exact_match"], scores["f1"]), (100.0, 100.0))

    def test_record_ranks_the_options_flans_scoring_tasks_rank(self):
        """rank_classification_from_options ranks _process_record's `options` (every entity + the query's right
        part) and counts one in `answers` as right: our meta's options are those, on the splits predicted only."""
        split = self.split(task="record", folder=TASKS["record"][2], benchmark="super_glue")
        self.assertTrue(split.task_vals["row_options"])
        for (_, flan_row), meta, target in zip(flan_rows("record", limit=None), split.meta, split.targets, strict=True):
            flan = flan_process("record", flan_row)
            self.assertEqual(meta["options"], flan["options"])
            self.assertEqual(meta["answers"], flan["answers"])
            self.assertIn(target, meta["options"])  # the answer is one of the options ranked
        train = self.split(task="record", folder=TASKS["record"][2], benchmark="super_glue", role="train",
                           split="train")
        self.assertTrue(train.meta and not any("options" in meta for meta in train.meta))

    def test_copa_answers_are_the_rows_choices(self):
        fixture = str(REPO / "tests/fixtures/superglue")
        rows = [dict(row, label=row["idx"] % 2) for row in hub_rows("super_glue/copa", fixture, split="test")]
        task_vals = flan_vals("super_glue/copa", options=True)
        templates = instructions.usable_templates(instructions.FLAN_TASKS["super_glue/copa"], "label")
        self.assertEqual(templates, [p for p in PATTERNS["copa"] if p[1] == "{answer}"])  # 8 of FLAN's 10
        for row in rows:  # FLAN's code on the fixture rows, each given a label
            for template in templates:
                for options in (False, True):
                    self.assertEqual(instructions.instruction_example(task_vals, template, row, (), options),
                                     flan_zero_shot("copa", row, template, options, dialog=False))
        split = self.split(task="copa", folder=fixture, benchmark="super_glue", role="predict", split="test",
                           instruction_options=True)
        self.assertEqual([meta["options"] for meta in split.meta], [[r["choice1"], r["choice2"]] for r in rows])
        self.assertEqual(split.max_target_length, task_splits.GENERATION_TARGET_LENGTH)
        # scored by the row's own choices: row 0's label is choice1, row 1's choice2
        references = [row["choice1"] if row["label"] == 0 else row["choice2"] for row in rows]
        predictions = [rows[0]["choice1"], "something else"]
        scores = compute_task_metrics(split.task_vals, predictions, references, split.meta)
        self.assertEqual((scores["accuracy"], scores["invalid_count"]), (50.0, 1))
        self.assertEqual(predicted_label(split.task_vals, rows[1]["choice2"], split.meta[1]), (1, True))
        self.assertTrue(uses_rank_scoring("rank", split.task_vals))  # each row's own options ranked

    def test_stsb_targets_are_flans_rounded_scores(self):
        stsb = self.split(task="stsb", folder="glue/STS-B", max_eval_samples=20)
        rows = hub_rows("glue/stsb", "glue/STS-B", limit=20)
        # tasks.py _process_stsb: tf.strings.as_string(label, precision=0), C's "%.0f" of the float32 score
        self.assertEqual(stsb.targets, ["%.0f" % np.float32(row["label"]) for row in rows])
        self.assertTrue(all(target in "012345" and len(target) == 1 for target in stsb.targets))

    def test_translation_templates_translate_english_to_german(self):
        templates = instructions.usable_templates(instructions.FLAN_TASKS["translation/multi30k_en_de"], "de")
        self.assertEqual([PATTERNS["wmt16_translate"].index(t) for t in templates], [0, 4, 5, 6, 7])
        text, target = instructions.instruction_example(flan_vals("translation/multi30k_en_de"), templates[0],
                                                        {"en": "Two dogs run.", "de": "Zwei Hunde rennen."})
        self.assertEqual((text, target), ("Two dogs run.\n\nTranslate to German", "Zwei Hunde rennen."))

    def test_multi30k_and_multirc_splits(self):
        multi30k = self.split(task="multi30k_en_de", folder="translation/multi30k", benchmark="translation",
                              max_eval_samples=5)
        rows = (require("translation/multi30k") / "val.de").read_text().splitlines()[:5]
        self.assertEqual(multi30k.targets, rows)  # the German side, English in the input
        self.assertTrue(all("German" in text for text in multi30k.inputs))
        multirc = self.split(task="multirc", folder=TASKS["record"][2], benchmark="super_glue")
        self.assertEqual(set(multirc.targets), {"yes", "no"})
        self.assertTrue(all("group" in meta for meta in multirc.meta))  # exact match still groups by question
        scores = compute_task_metrics(multirc.task_vals, multirc.targets, multirc.targets, multirc.meta)
        self.assertEqual((scores["exact_match"], scores["f1"]), (100.0, 100.0))

    def test_cnn_article_keeps_the_text_before_each_separator(self):
        # tf.compat.v1 strings.split of a scalar -> one row; FLAN's [-1][0] is its first piece.
        self.assertEqual(instructions.cnn_article("By . Reporter . 2013 . UPDATED: . 2013 . Body text."),
                         "By . Reporter . ")
        self.assertEqual(instructions.cnn_article("LONDON, England (Reuters) -- Body."), "LONDON, England (Reuters")

    @parameterized.named_parameters(
        ("diagnostic", dict(dataset_name="ax"), "FLAN has no templates for glue/ax; it formats glue/cola, "),
        ("axb", dict(benchmark="super_glue", dataset_name="axb"), "no templates for super_glue/axb"),
        ("wnli_as_wsc", dict(dataset_name="wnli", wnli_format="wsc_simple"), r"glue/wnli \(as WSC under"),
    )
    def test_tasks_without_flan_templates_are_refused(self, overrides, message):
        with self.assertRaisesRegex(UsageError, message):
            task_splits.resolve_run_tasks(data_args(instruction_templates="flan", **overrides).task_selection())

    def test_few_shot_from_local_files_needs_the_training_file(self):
        with self.assertRaisesRegex(UsageError, "--few_shot draws exemplars from the training rows: pass --train_file"):
            self.split(few_shot=1, data_dir=None, validation_file=str(require("glue/RTE/dev.tsv")))

    def test_held_out_tasks_are_evaluated_never_trained(self):
        args = data_args(dataset_name=None, tasks="glue/sst2,glue/mrpc", eval_tasks="glue/rte",
                         instruction_templates="flan", instruction_options=True)
        tasks = task_splits.resolve_run_tasks(args.task_selection())
        plans = task_splits.plan_splits(tasks, args.task_data(), do_train=True, do_eval=True, do_predict=False)
        self.assertEqual([(p.key, p.role) for p in plans if p.role == "train"], [("sst2", "train"), ("mrpc", "train")])
        self.assertIn(("rte", "eval"), [(p.key, p.role) for p in plans])
        self.assertTrue(all(t["instructions"]["options"] for t in tasks))
        (_, data_args_, training_args) = parsing.parse_flags(  # the example config says the same
            FINETUNE_FLAG_CLASSES, [str(REPO / "configs/flan/heldout_rte.yaml"), "--model_name_or_path", "x"])
        config_plans = task_splits.plan_splits(task_splits.resolve_run_tasks(data_args_.task_selection()),
                                               data_args_.task_data(), training_args.do_train, training_args.do_eval,
                                               training_args.do_predict)
        self.assertEqual([(p.key, p.role) for p in config_plans], [(p.key, p.role) for p in plans])
        self.assertEqual((data_args_.label_scoring, data_args_.instruction_options), (None, True))  # the defaults
        self.assertEqual(task_scoring.evaluation_by_split(data_args_.label_scoring, config_plans),
                         {"sst2": {"label_scoring": "generate"}, "mrpc": {"label_scoring": "generate"},
                          "rte": {"label_scoring": "rank"}})  # FLAN ranks the held-out task's options
        with self.assertRaisesRegex(UsageError, "--tasks and --eval_tasks both name glue/rte"):
            task_splits.resolve_run_tasks(data_args(dataset_name=None, tasks="glue/rte",
                                                    eval_tasks="glue/rte").task_selection())


class FlanAnswersTest(parameterized.TestCase):
    """FLAN's answers matched exactly, and FLAN's OPTIONS list on by default with its templates (data/task_scoring.py's
    tests hold the rule that ranks held-out tasks)."""

    def test_cbs_answers_are_matched_exactly_case_kept(self):
        """FLAN's CB answers are "Yes", "No", "It's impossible to say": a generated "no" is no answer (invalid and
        wrong, never lower-cased into one), which ranking FLAN's answers cannot produce."""
        cb = flan_vals("super_glue/cb", options=True)
        references = ["No", "No", "It's impossible to say", "Yes"]
        scores = compute_task_metrics(cb, ["no", "No", "it's impossible to say", " Yes "], references)
        self.assertEqual((scores["accuracy"], scores["invalid_count"], scores["invalid_rate"]), (50.0, 2, 50.0))
        self.assertEqual(rank_label_words([[-2.0, -1.0, -3.0]], list(cb["labels"].values())), ["No"])

    @parameterized.named_parameters(
        ("flan", dict(instruction_templates="flan"), True),
        ("flan_dialog", dict(instruction_templates="flan_dialog"), True),
        ("t5s_format", dict(), False),
        ("flan_without_options", dict(instruction_templates="flan", instruction_options=False), False),
    )
    def test_flans_options_are_on_with_its_templates_unless_turned_off(self, flags, expected):
        self.assertIs(data_args(**flags).instruction_options, expected)

    def test_a_real_wic_row_carries_flans_options_by_default(self):
        args = data_args(dataset_name="wic", benchmark="super_glue", data_dir=[str(require("superglue"))],
                         instruction_templates="flan", max_eval_samples=4)
        (task_vals,) = task_splits.resolve_run_tasks(args.task_selection())
        plan = task_splits.SplitPlan(task_vals, "validation", "eval", "wic")
        split = task_splits.build_task_split(plan, args.task_data(), building.load_tokenizer(str(require("t5_spiece"))))
        for text in split.inputs:  # every WiC template ends with FLAN's options, answers in label order
            self.assertTrue(text.endswith("OPTIONS:\n- different meanings\n- the same meaning"), text)


if __name__ == "__main__":
    absltest.main()
