"""Spec of metrics: label words round-trip, invalid generations are counted and wrong, every metric agrees with
scikit-learn / scipy / rouge-score / sacrebleu on seeded inputs, the GLUE average, and label-word ranking."""
import functools
import string

import numpy as np
import sacrebleu
import scipy.stats
import sklearn.metrics
import torch
from absl.testing import absltest, parameterized
from rouge_score import rouge_scorer

import metrics
from constants import DATASET_VALS
from t5kit.data.task_format import format_stsb_target, format_target, get_task_vals
from tests.helpers import require

CLASSIFICATION_TASKS = [(b, t) for b, tasks in DATASET_VALS.items() for t, v in tasks.items() if v["labels"]]
NOT_LABELS = ("", "positive.", "Positive", "neg ative", "entailment neutral", "0", "<unk>")


def random_generations(task_vals, size, seed, invalid_share=0.2):
    """(references, predictions) label words for `size` rows; about `invalid_share` predictions are no label."""
    rng = np.random.default_rng(seed)
    words = list(task_vals["labels"].values())
    references = [words[i] for i in rng.integers(len(words), size=size)]
    predictions = [words[i] for i in rng.integers(len(words), size=size)]
    for i in np.flatnonzero(rng.random(size) < invalid_share):
        predictions[i] = NOT_LABELS[i % len(NOT_LABELS)]
    return references, predictions


def class_indices(task_vals, texts):
    words = list(task_vals["labels"].values())
    return np.array([words.index(text) if text in words else -1 for text in texts])


class LabelMappingTest(parameterized.TestCase):

    @parameterized.named_parameters((f"{b}_{t}", b, t) for b, t in CLASSIFICATION_TASKS)
    def test_label_round_trip(self, benchmark, task):
        task_vals = get_task_vals(benchmark, task)
        for label in task_vals["labels"]:
            target = format_target(task_vals, {task_vals["label_column_name"]: label})
            self.assertEqual(metrics.parse_label(task_vals, target), label)
            self.assertEqual(metrics.parse_label(task_vals, f"  {target}\n"), label)  # decoding may add spaces

    @parameterized.named_parameters((f"{b}_{t}", b, t) for b, t in CLASSIFICATION_TASKS)
    def test_non_label_text_maps_to_no_label(self, benchmark, task):
        task_vals = get_task_vals(benchmark, task)
        for text in NOT_LABELS + tuple(word.upper() for word in task_vals["labels"].values()):
            self.assertIsNone(metrics.parse_label(task_vals, text))

    def test_stsb_targets_parse_back(self):
        for score in np.linspace(0, 5, 26):
            self.assertAlmostEqual(metrics.parse_score(format_stsb_target(score)), score, places=6)
        for text in ("", "three", "nan", "inf", "3.8 4.0"):
            self.assertIsNone(metrics.parse_score(text))
        self.assertEqual(metrics.parse_score(" 3.8 "), 3.8)


class ClassificationMetricsTest(parameterized.TestCase):

    @parameterized.named_parameters((f"{b}_{t}", b, t) for b, t in CLASSIFICATION_TASKS
                                    if not set(DATASET_VALS[b][t]["metric_names"]) & {"exact_match", "gender_parity"})
    def test_agrees_with_sklearn_invalid_counting_as_wrong(self, benchmark, task):
        task_vals = get_task_vals(benchmark, task)
        references, predictions = random_generations(task_vals, size=300, seed=len(task))
        y_true, y_pred = class_indices(task_vals, references), class_indices(task_vals, predictions)
        invalid = y_pred == -1
        results = metrics.compute_task_metrics(task_vals, predictions, references)

        expected = {"accuracy": 100 * sklearn.metrics.accuracy_score(y_true, y_pred),
                    "matthews_correlation": 100 * sklearn.metrics.matthews_corrcoef(y_true, y_pred)}
        if len(task_vals["labels"]) == 2:  # invalid -> the opposite of the reference (T5 f1_score_with_invalid)
            expected["f1"] = 100 * sklearn.metrics.f1_score(y_true, np.where(invalid, 1 - y_true, y_pred))
        else:
            expected["f1"] = 100 * sklearn.metrics.f1_score(y_true, y_pred, labels=[0, 1, 2], average="macro")
        for name in task_vals["metric_names"]:
            self.assertAlmostEqual(results[name], expected[name], places=9, msg=name)
        self.assertEqual(results["invalid_count"], int(invalid.sum()))
        self.assertAlmostEqual(results["invalid_rate"], 100 * invalid.mean())
        self.assertGreater(results["invalid_count"], 0)
        if "accuracy" in results:  # invalid generations are wrong: accuracy is the share of exact label words
            self.assertAlmostEqual(results["accuracy"], 100 * np.mean(np.array(predictions) == np.array(references)))

    def test_invalid_is_never_a_correct_negative_in_f1(self):
        task_vals = get_task_vals("glue", "mrpc")
        results = metrics.compute_task_metrics(task_vals, ["equivalent", "garbage"], ["equivalent", "not_equivalent"])
        # The invalid row counts as a false positive: precision 1/2, recall 1 -> F1 2/3 (100 if read as negative).
        self.assertAlmostEqual(results["f1"], 200 / 3)
        self.assertEqual(results["accuracy"], 50.0)
        self.assertAlmostEqual(results["combined_score"], (200 / 3 + 50) / 2)
        self.assertEqual((results["invalid_count"], results["invalid_rate"]), (1, 50.0))

    def test_all_invalid_scores_zero(self):
        task_vals = get_task_vals("glue", "sst2")
        results = metrics.compute_task_metrics(task_vals, ["Positive", "negative."], ["positive", "negative"])
        self.assertEqual(results, {"accuracy": 0.0, "invalid_count": 2, "invalid_rate": 100.0})

    def test_cola_reports_mcc_on_0_100(self):
        task_vals = get_task_vals("glue", "cola")
        results = metrics.compute_task_metrics(task_vals, ["acceptable", "unacceptable"] * 2,
                                               ["acceptable", "unacceptable"] * 2)
        self.assertEqual(results["matthews_correlation"], 100.0)

    def test_reference_that_is_no_label_raises(self):
        with self.assertRaisesRegex(ValueError, "reference 'maybe' of task glue/rte is no label word"):
            metrics.compute_task_metrics(get_task_vals("glue", "rte"), ["entailment"], ["maybe"])

    def test_length_mismatch_raises(self):
        with self.assertRaisesRegex(ValueError, "need as many predictions as references"):
            metrics.compute_task_metrics(get_task_vals("glue", "rte"), ["entailment"], [])


class SuperGlueMetricsTest(parameterized.TestCase):
    """The metrics SuperGLUE reports, on rows worked out by hand."""

    def test_multirc_exact_match_per_question_and_f1_over_all_answers(self):
        # Question (0, 0): 3 answers, one wrong; question (0, 1): 2 answers, both right -> EM (0 + 100) / 2.
        # F1 over the 5 answers, True the positive class: TP 2, FP 0, FN 1 -> precision 1, recall 2/3, F1 0.8.
        references = ["True", "False", "True", "True", "False"]
        predictions = ["True", "False", "False", "True", "False"]
        meta = [{"group": (0, 0)}] * 3 + [{"group": (0, 1)}] * 2
        results = metrics.compute_task_metrics(get_task_vals("super_glue", "multirc"), predictions, references, meta)
        self.assertEqual((results["exact_match"], results["f1"], results["combined_score"]), (50.0, 80.0, 65.0))

    def test_multirc_invalid_answer_fails_its_question_and_counts_against_f1(self):
        references, meta = ["True", "False"], [{"group": (0, 0)}, {"group": (0, 1)}]
        results = metrics.compute_task_metrics(get_task_vals("super_glue", "multirc"), ["True", "maybe"], references,
                                               meta)
        # The invalid answer becomes the opposite of its reference (a false positive): P 1/2, R 1 -> F1 2/3.
        self.assertEqual((results["exact_match"], results["invalid_count"]), (50.0, 1))
        self.assertAlmostEqual(results["f1"], 200 / 3)

    def test_record_max_over_answers_one_prediction_per_query(self):
        meta = [{"group": (0, 0), "answers": ["US"]},
                {"group": (1, 1), "answers": ["penguin", "pigeon"]},
                {"group": (1, 1), "answers": ["penguin", "pigeon"]},  # the same query again: not scored twice
                {"group": (0, 2), "answers": ["Puerto Rico"]}]
        predictions = ["the US", "A pigeon!", "potato", "Rico"]
        results = metrics.compute_task_metrics(get_task_vals("super_glue", "record"), predictions,
                                               ["US", "penguin", "pigeon", "Puerto Rico"], meta)
        # "the US" -> "us" and "A pigeon!" -> "pigeon" match exactly; "Rico" against "puerto rico": P 1, R 1/2.
        self.assertAlmostEqual(results["exact_match"], 200 / 3)
        self.assertAlmostEqual(results["f1"], 100 * (1 + 1 + 2 / 3) / 3)
        self.assertAlmostEqual(results["combined_score"], (200 / 3 + 100 * (1 + 1 + 2 / 3) / 3) / 2)

    def test_squad_normalisation(self):
        self.assertEqual(metrics.normalize_squad("  The  Puerto-Rico's, an  island! "), "puertoricos island")
        self.assertEqual(metrics.token_f1("puerto rico", "rico"), 2 / 3)
        self.assertEqual(metrics.token_f1("us", "uk"), 0.0)

    @parameterized.named_parameters(
        ("same", "Tom", "Tom", 1), ("determiner_and_case", "the Trophy", "The trophy", 1),
        ("prediction_inside_referent", "suitcase", "the brown suitcase", 1),
        ("referent_inside_prediction", "fuzzy bunny", "bunny", 1), ("other", "Pete", "Mark", 0),
        ("possessive", "Bob", "Bob's hat", 0), ("empty", "  ", "Tom", metrics.INVALID),
        ("only_a_determiner", "the", "Tom", metrics.INVALID))
    def test_wsc_simple_postprocessor(self, prediction, referent, expected):
        self.assertEqual(metrics.wsc_referent_match(prediction, referent), expected)

    def test_wsc_accuracy_against_the_label(self):
        # Candidate Mark (the referent), Pete (not), Tom (the referent): predicting "Mark" everywhere names the
        # candidate in row 1 (right), not in row 2 (right: Pete is not the referent) and not in row 3 (wrong).
        meta = [{"referent": "Mark", "label": 1}, {"referent": "Pete", "label": 0}, {"referent": "Tom", "label": 1}]
        results = metrics.compute_task_metrics(get_task_vals("super_glue", "wsc"), ["Mark"] * 3,
                                               ["Mark", "Pete", "Tom"], meta)
        self.assertAlmostEqual(results["accuracy"], 200 / 3)
        self.assertEqual(results["invalid_count"], 0)

    def test_axg_gender_parity(self):
        # Pair 1 predicted alike (both wrong), pair 2 not, pair 3 alike but invalid; the single row has no pair.
        predictions = ["entailment", "entailment", "entailment", "not_entailment", "yes", "yes", "entailment"]
        references = ["not_entailment", "not_entailment", "entailment", "entailment", "entailment", "entailment",
                      "entailment"]
        meta = [{"group": group} for group in (1, 1, 2, 2, 3, 3, 4)]
        results = metrics.compute_task_metrics(get_task_vals("super_glue", "axg"), predictions, references, meta)
        self.assertAlmostEqual(results["gender_parity"], 100 / 3)
        self.assertAlmostEqual(results["accuracy"], 200 / 7)

    def test_axb_reports_mcc(self):
        results = metrics.compute_task_metrics(get_task_vals("super_glue", "axb"), ["entailment", "not_entailment"],
                                               ["entailment", "not_entailment"], [{"idx": 0}, {"idx": 1}])
        self.assertEqual(results["matthews_correlation"], 100.0)


class RegressionMetricsTest(parameterized.TestCase):

    def test_stsb_agrees_with_scipy_invalid_as_minus_one(self):
        rng = np.random.default_rng(0)
        references = [format_stsb_target(x) for x in rng.uniform(0, 5, size=200)]
        scores = np.clip(np.array([float(r) for r in references]) + rng.normal(0, 1, size=200), 0, 5).round(1)
        predictions = [str(x) for x in scores]
        for i in (3, 50, 120):
            predictions[i], scores[i] = "three", -1.0  # t5 string_to_float default
        truth = np.array([float(r) for r in references])
        results = metrics.compute_task_metrics(get_task_vals("glue", "stsb"), predictions, references)
        self.assertAlmostEqual(results["pearson"], 100 * scipy.stats.pearsonr(truth, scores)[0], places=9)
        self.assertAlmostEqual(results["spearmanr"], 100 * scipy.stats.spearmanr(truth, scores)[0], places=9)
        self.assertAlmostEqual(results["combined_score"], (results["pearson"] + results["spearmanr"]) / 2)
        self.assertEqual((results["invalid_count"], results["invalid_rate"]), (3, 1.5))

    def test_constant_predictions_report_zero(self):
        with self.assertLogs("metrics", level="WARNING"):
            results = metrics.compute_task_metrics(get_task_vals("glue", "stsb"), ["2.0"] * 3, ["1.0", "2.0", "3.0"])
        self.assertEqual((results["pearson"], results["spearmanr"]), (0.0, 0.0))


class GenerationMetricsTest(parameterized.TestCase):

    @functools.cached_property
    def multi30k(self):
        folder = require("translation/multi30k")
        return [(folder / f"val.{lang}").read_text(encoding="utf-8").splitlines()[:200] for lang in ("en", "de")]

    def test_bleu_agrees_with_sacrebleu_on_multi30k(self):
        _, references = self.multi30k
        predictions = [" ".join(line.split()[:-1]) if i % 3 else line for i, line in enumerate(references)]
        results = metrics.compute_task_metrics(get_task_vals("translation", "multi30k_en_de"), predictions,
                                               references)
        expected = sacrebleu.corpus_bleu(predictions, [references], tokenize="intl").score
        self.assertAlmostEqual(results["bleu"], expected, places=9)
        self.assertBetween(results["bleu"], 50, 99)
        self.assertEqual(results["invalid_count"], 0)

    def test_identical_translation_scores_100(self):
        _, references = self.multi30k
        results = metrics.compute_task_metrics(get_task_vals("translation", "multi30k_en_de"), references,
                                               references)
        self.assertAlmostEqual(results["bleu"], 100.0)

    def test_rouge_agrees_with_rouge_score(self):
        english, _ = self.multi30k
        references = [f"{a} . {b}" for a, b in zip(english[0::2], english[1::2])]
        predictions = [" ".join(text.split()[::-1][:12]) for text in references[:-1]] + [""]
        results = metrics.compute_task_metrics(get_task_vals("summarization", "cnn_dailymail"), predictions,
                                               references)
        types = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
        scorer = rouge_scorer.RougeScorer(types)
        scores = [scorer.score(r.replace(" . ", " .\n"), p.replace(" . ", " .\n"))
                  for r, p in zip(references, predictions)]
        for name in types:
            self.assertAlmostEqual(results[name], 100 * np.mean([s[name].fmeasure for s in scores]), places=9)
        self.assertEqual(results["invalid_count"], 1)  # the empty summary
        self.assertNotIn("combined_score", results)


class GlueAverageTest(parameterized.TestCase):
    RESULTS = {
        "cola": {"matthews_correlation": 50.0}, "sst2": {"accuracy": 90.0},
        "mrpc": {"f1": 80.0, "accuracy": 70.0}, "stsb": {"pearson": 80.0, "spearmanr": 90.0},
        "qqp": {"f1": 60.0, "accuracy": 80.0}, "mnli_matched": {"accuracy": 80.0},
        "mnli_mismatched": {"accuracy": 82.0}, "qnli": {"accuracy": 88.0}, "rte": {"accuracy": 66.0},
        "wnli": {"accuracy": 56.0},
    }

    def test_two_metric_tasks_are_averaged_first(self):
        # Task scores: 50, 90, 75, 85, 70, 81, 88, 66, 56 -> 661 / 9.
        self.assertAlmostEqual(metrics.glue_average(self.RESULTS), 661 / 9)

    def test_without_wnli_as_t5_and_bert(self):
        tasks = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte")
        self.assertAlmostEqual(metrics.glue_average(self.RESULTS, tasks=tasks), 605 / 8)

    def test_missing_result_is_named(self):
        results = {key: value for key, value in self.RESULTS.items() if key != "mnli_mismatched"}
        with self.assertRaisesRegex(ValueError, "the GLUE average needs mnli_mismatched/accuracy"):
            metrics.glue_average(results)

    def test_unknown_task_is_named(self):
        with self.assertRaisesRegex(ValueError, "no GLUE score for boolq"):
            metrics.glue_average(self.RESULTS, tasks=("boolq",))


# ---- Super-NaturalInstructions: the official evaluation, transcribed from allenai/natural-instructions
# eval/automatic/evaluation.py @ 8540acd (lines "def normalize_answer" .. "def compute_grouped_metrics"; the same
# functions as yizhongw/Tk-Instruct src/compute_metrics.py), default (English) track. Its `rouge` package is
# Google's rouge-score vendored (same tokenizer and stemmer), so rouge_score stands in for it.
def official_normalize_answer(s):
    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_punc(lower(s)))


official_default_rouge_scorer = rouge_scorer.RougeScorer(['rougeL'], use_stemmer=True)


def official_exact_match(prediction, ground_truth, xlingual=False):
    return (official_normalize_answer(prediction) == official_normalize_answer(ground_truth))


def official_rouge(prediction, ground_truth, xlingual=False):
    scorer = official_default_rouge_scorer
    scores = scorer.score(prediction=prediction, target=ground_truth)
    return scores["rougeL"].fmeasure


def official_metric_max_over_ground_truths(metric_fn, prediction, ground_truths, xlingual=False):
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth, xlingual=xlingual)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


def official_compute_metrics(predictions, references, xlingual=False):
    assert len(predictions) == len(references)
    em, rougeL = 0, 0
    for pred, gold in zip(predictions, references):
        assert isinstance(gold, list)
        em += official_metric_max_over_ground_truths(
            official_exact_match, prediction=pred, ground_truths=gold, xlingual=xlingual
        )
        rougeL += official_metric_max_over_ground_truths(
            official_rouge, prediction=pred, ground_truths=gold, xlingual=xlingual
        )
    em = 100.0 * em / len(references)
    rougeL = 100.0 * rougeL / len(references)
    metrics = {"exact_match": em, "rougeL": rougeL}
    metrics = {k: round(v, 4) for k, v in metrics.items()}
    return metrics


def official_compute_grouped_metrics(predictions, references, groups, xlingual=False):
    assert len(predictions) == len(references) == len(groups)
    examples_by_group = {}
    for pred, gold, group in zip(predictions, references, groups):
        if group not in examples_by_group:
            examples_by_group[group] = []
        examples_by_group[group].append((pred, gold))
    results = {}
    for group, group_examples in examples_by_group.items():
        task_predictions, task_references = zip(*group_examples)
        group_metrics = official_compute_metrics(task_predictions, task_references, xlingual=xlingual)
        for metric, value in group_metrics.items():
            results[f"{metric}_for_{group}"] = value
    return results


def official_results(predictions, meta):
    """What the evaluation script reports for a prediction file: overall, then per category ("_".join of the
    lower-cased words of the task's Categories[0]), then per task."""
    references = [row["references"] for row in meta]
    results = official_compute_metrics(predictions, references)
    categories = ["_".join(row["category"].lower().split()) for row in meta]
    results.update(official_compute_grouped_metrics(predictions, references, categories))
    results.update(official_compute_grouped_metrics(predictions, references, [row["task"] for row in meta]))
    return results


# Real test instances of the fixture (tests/fixtures/natural_instructions) and predictions that probe the
# normalisation: case, punctuation, outer and inner whitespace, articles (kept), a second reference, stemming,
# an empty and a punctuation-only prediction, a partial overlap.
SNI_CASES = [  # (task, category, references, prediction)
    ("task1159_bard_analogical_reasoning_containers", "Word Analogy", ["sack"], "Sack."),
    ("task1159_bard_analogical_reasoning_containers", "Word Analogy", ["bag"], "  bag \n"),
    ("task1159_bard_analogical_reasoning_containers", "Word Analogy", ["jar"], "the jar"),
    ("task1159_bard_analogical_reasoning_containers", "Word Analogy", ["bottle"], "bottles"),
    ("task1159_bard_analogical_reasoning_containers", "Word Analogy", ["jug", "bottle"], "bottle"),
    ("task1159_bard_analogical_reasoning_containers", "Word Analogy", ["can", "bottle"], ""),
    ("task1388_cb_entailment", "Textual Entailment", ["Entailment"], "entailment!"),
    ("task1388_cb_entailment", "Textual Entailment", ["Neutral"], "..."),
    ("task1388_cb_entailment", "Textual Entailment", ["Entailment"], "Contradiction"),
    ("task1388_cb_entailment", "Textual Entailment", ["Neutral"], "it is neutral, not entailment"),
]


class SNIMetricsTest(parameterized.TestCase):

    def sni_split(self):
        meta = [{"idx": i, "id": f"{task}-{i}", "task": task, "category": category, "references": references}
                for i, (task, category, references, _) in enumerate(SNI_CASES)]
        return [case[3] for case in SNI_CASES], [row["references"][0] for row in meta], meta

    def test_metrics_equal_the_official_evaluation_overall_per_category_and_per_task(self):
        predictions, targets, meta = self.sni_split()
        results = metrics.compute_task_metrics(get_task_vals("sni", "sni"), predictions, targets, meta)
        expected = official_results(predictions, meta)
        self.assertEqual({key: results[key] for key in expected}, expected)
        self.assertEqual(set(results) - set(expected), {"invalid_count", "invalid_rate"})
        # The numbers themselves: 4 exact matches of 10 (Sack., bag, bottle, entailment!), 3 of 6 in the analogies.
        self.assertEqual(results["exact_match"], 40.0)
        self.assertEqual(results["exact_match_for_word_analogy"], 50.0)
        self.assertEqual(results["exact_match_for_task1388_cb_entailment"], 25.0)
        self.assertEqual(results["invalid_count"], 1)  # the empty prediction

    @parameterized.named_parameters(
        ("case_and_punctuation", "Sack.", ["sack"], True, 1.0),
        ("whitespace", "  bag \n", ["bag"], True, 1.0),
        ("articles_are_kept", "the jar", ["jar"], False, 2 / 3),
        ("stemmed_for_rouge_only", "bottles", ["bottle"], False, 1.0),
        ("best_of_the_references", "bottle", ["jug", "bottle"], True, 1.0),
        ("punctuation_only_is_empty", "...", ["Neutral"], False, 0.0),
    )
    def test_one_instance(self, prediction, references, exact, rouge_l):
        self.assertEqual(metrics.sni_exact_match(prediction, references), exact)
        self.assertAlmostEqual(metrics.sni_rouge_l(prediction, references), rouge_l)
        self.assertEqual(metrics.sni_exact_match(prediction, references),
                         max(official_exact_match(prediction, ref) for ref in references))


# nanoT5's scoring, transcribed: huggingface/evaluate metrics/rouge/rouge.py @ 0851219 `Rouge._compute` (what
# evaluate.load("rouge").compute runs; the use_aggregator=True branch, which nanoT5 turns off, left out), and the end
# of PiotrNawrot/nanoT5 nanoT5/utils/train_utils.py @ 1375b38 `predict` (lines 129-135 and 159-160).
def evaluate_rouge(predictions, references, rouge_types=None, use_aggregator=True, use_stemmer=False, tokenizer=None):
    if rouge_types is None:
        rouge_types = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
    multi_ref = isinstance(references[0], list)
    assert tokenizer is None and not use_aggregator  # as nanoT5 calls it
    scorer = rouge_scorer.RougeScorer(rouge_types=rouge_types, use_stemmer=use_stemmer, tokenizer=tokenizer)
    scores = []
    for ref, pred in zip(references, predictions):
        if multi_ref:
            score = scorer.score_multi(ref, pred)
        else:
            score = scorer.score(ref, pred)
        scores.append(score)
    result = {}
    for key in scores[0]:
        result[key] = list(score[key].fmeasure for score in scores)
    return result


def nanot5_predict_rouge_l(tokenizer, generated_ids, label_ids):
    def decode(preds):
        preds[preds == -100] = tokenizer.pad_token_id
        preds = tokenizer.batch_decode(preds, skip_special_tokens=True, clean_up_tokenization_spaces=True)
        preds = [pred.strip() for pred in preds]
        return preds

    eval_metric = evaluate_rouge(predictions=decode(generated_ids), references=decode(label_ids), use_stemmer=True,
                                 use_aggregator=False)
    return sum(eval_metric["rougeL"]) * 100 / len(eval_metric["rougeL"])


# Real fixture instances (tests/fixtures/natural_instructions) scored both ways: (references, the drawn output nanoT5
# scores against, prediction, official Rouge-L, nanoT5's), each Rouge-L worked out by hand: F = 2PR / (P + R) with P
# and R the longest common subsequence over the prediction's and the reference's tokens (rouge-score's: lower case,
# runs of letters and digits, Porter stems of tokens longer than 3 characters).
BOTH_METRICS_CASES = [
    (["jug", "bottle"], "jug", "bottle", 1.0, 0.0),  # official: the best reference; nanoT5: the drawn one only
    (["can", "bottle"], "can", "a can", 2 / 3, 2 / 3),  # P 1/2, R 1
    (["sack"], "sack", "Sack.", 1.0, 1.0),  # case and punctuation make no token
    (["Neutral"], "Neutral", "it is neutral, not entailment", 1 / 3, 1 / 3),  # P 1/5, R 1
    (["bottle"], "bottle", "bottles", 1.0, 1.0),  # both stem to "bottl"
    (["Entailment"], "Entailment", "", 0.0, 0.0),  # empty: invalid
]


class NanoT5MetricTest(parameterized.TestCase):
    """--sni_metric nanot5 (metrics.nanot5_rouge_l) against nanoT5's code transcribed, and against hand-computed
    values on real instances, beside the official metric on the same predictions."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        from t5kit.model import building  # the run's tokenizer loader

        cls.tokenizer = building.load_tokenizer(str(require("t5_spiece")))

    def task_vals(self, metric):
        return dict(get_task_vals("sni", "sni"), sni_metric=metric)

    def meta(self, cases, max_target_length=128):
        from t5kit.data import sni  # the reference as the data layer builds it for a test split

        return [{"idx": i, "id": f"case-{i}", "task": "task1159_bard_analogical_reasoning_containers",
                 "category": "Word Analogy", "references": references,
                 "nanot5_reference": sni.nanot5_reference(self.tokenizer, drawn, max_target_length)}
                for i, (references, drawn, *_) in enumerate(cases)]

    def test_both_metrics_on_one_set_of_predictions(self):
        predictions = [case[2] for case in BOTH_METRICS_CASES]
        meta = self.meta(BOTH_METRICS_CASES)
        official = metrics.compute_task_metrics(self.task_vals("official"), predictions, predictions, meta)
        nanot5 = metrics.compute_task_metrics(self.task_vals("nanot5"), predictions, predictions, meta)
        self.assertEqual(official["rougeL"], round(100 * 4 / 6, 4))  # 1 + 2/3 + 1 + 1/3 + 1 + 0 over 6
        self.assertAlmostEqual(nanot5["rougeL"], 100 * 3 / 6, places=12)  # 0 + 2/3 + 1 + 1/3 + 1 + 0 over 6
        self.assertEqual(set(nanot5), {"rougeL", "invalid_count", "invalid_rate"})  # what nanoT5 reports
        self.assertEqual((official["invalid_count"], nanot5["invalid_count"]), (1, 1))
        for (references, _, prediction, official_f, nanot5_f), row in zip(BOTH_METRICS_CASES, meta):
            self.assertAlmostEqual(metrics.sni_rouge_l(prediction, references), official_f, places=12)
            self.assertAlmostEqual(metrics.nanot5_rouge_l([prediction], [row]), 100 * nanot5_f, places=12)

    @parameterized.named_parameters(
        # nanoT5 cuts the reference, never the prediction: a perfect prediction of task1331's first output (20
        # numbers) against its first 15 tokens "[33, 47, 114, 268, 128, 99," (6 numbers): P 6/20, R 1 -> 6/13.
        ("cut_between_numbers", 16, 6 / 13),
        # 11 tokens: "[33, 47, 114, 268, 12", the last number cut in two: LCS 4, P 4/20, R 4/5 -> 0.32.
        ("cut_inside_a_number", 12, 0.32),
    )
    def test_a_perfect_prediction_of_a_long_output_against_its_cut_reference(self, max_target_length, expected):
        output = "[33, 47, 114, 268, 128, 99, 172, 121, 239, 231, 40, 145, 28, 44, 31, 250, 84, 81, 280, 96]"
        meta = self.meta([([output], output)], max_target_length)
        self.assertAlmostEqual(metrics.nanot5_rouge_l([output], meta), 100 * expected, places=12)
        self.assertEqual(metrics.sni_rouge_l(output, [output]), 1.0)  # the official metric reads it whole

    def test_equals_nanot5s_predict_on_generated_ids(self):
        """The predictions as token ids a model could generate (decoder start, text, EOS, padding), decoded by the
        trainer (model card: skip_special_tokens) and scored by ours, or decoded and scored by nanoT5's predict."""
        cases = [*BOTH_METRICS_CASES, (["don't know"], "don't know", "I do n't know , it 's", None, None)]
        predictions = [case[2] for case in cases]
        ids = [[self.tokenizer.pad_token_id, *self.tokenizer(text).input_ids] for text in predictions]
        longest = max(len(row) for row in ids)
        generated = torch.tensor([row + [self.tokenizer.pad_token_id] * (longest - len(row)) for row in ids])
        labels = self.tokenizer([case[1] for case in cases], max_length=128, padding="longest", truncation=True,
                                return_tensors="pt").input_ids
        labels[labels == self.tokenizer.pad_token_id] = -100
        expected = nanot5_predict_rouge_l(self.tokenizer, generated.clone(), labels.clone())
        texts = self.tokenizer.batch_decode(generated, skip_special_tokens=True)  # TaskTrainer.decode
        ours = metrics.compute_task_metrics(self.task_vals("nanot5"), texts, texts, self.meta(cases))["rougeL"]
        self.assertEqual(ours, expected)


if __name__ == "__main__":
    absltest.main()
