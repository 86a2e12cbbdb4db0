"""Generated text -> labels -> metrics, per task; the GLUE average; label-word scoring for `--label_scoring rank`.

Conventions (the same for every task, written to metrics.json):
- Every metric is on T5's and the GLUE leaderboard's 0-100 scale (t5/evaluation/metrics.py multiplies by 100);
  `invalid_rate` is a percentage too, `invalid_count` a count.
- A generation maps to a label only when it equals a label word after `task_format.normalize_text` (outer
  whitespace stripped, inner runs collapsed, case kept). Anything else is invalid: counted, and scored as wrong,
  never as some label. Predicted labels are class indices (the order of `labels`), invalid ones INVALID = -1:
  accuracy and MCC see -1 as a class no reference has (T5's sklearn wrappers do the same); binary F1 flips an
  invalid prediction to the opposite of its reference, as T5's `f1_score_with_invalid` does, because a -1 would
  otherwise count as a correct negative; multi-class F1 (CB) averages over the real classes only, so -1 is a
  miss for the reference's class (T5 `mean_multiclass_f1`).
- Regression (STS-B): a generation that is no finite float is invalid and scored as -1.0 (T5 `string_to_float`'s
  default), below every real score. An undefined correlation (under 2 rows, or constant predictions, common early
  in training) is 0.0 with a warning, so best-model selection never compares NaN.
- Generation tasks: an empty generation is counted as invalid and still scored (ROUGE/BLEU give it 0).
- Classification and regression tasks with two metrics also report COMBINED_SCORE, their mean: the GLUE
  server's task score (HF run_glue.py's "combined_score"); so do MultiRC and ReCoRD, whose two numbers SuperGLUE
  averages too. AX-g's COMBINED_SCORE (accuracy and gender_parity) is ours alone (T5 gives AX-g no metric, the
  leaderboard shows both numbers): it gives AX-g's metric_to_optimize one number.
- SuperGLUE's own metrics (t5/evaluation/metrics.py, t5/data/postprocessors.py): MultiRC exact_match is
  `mean_group_metric(all_match)` over questions and its f1 `multirc_f1_over_all_answers` (F1a, the binary f1
  here); ReCoRD is `deduplicate_metric(squad)`: one prediction per query, exact match and token F1 after SQuAD's
  normalisation, maximised over the query's answers, as the official ReCoRD script; WSC (and WNLI as WSC) map a
  generation to "names the candidate referent or not" with `postprocessors.wsc_simple` and score accuracy against
  the label; AX-g's gender_parity is the share of Winogender pairs whose two predictions agree (SuperGLUE paper),
  a pair being the rows idx 2k and 2k + 1 (superglue_formats.axg_examples).
  These take per-row metadata (TaskSplit.meta: groups, answers, labels, referents).
"""
import collections
import functools
import logging
import math
import re
import string

import numpy as np
import sacrebleu
import scipy.stats

from constants import COMBINED_SCORE, SNI_METRICS
from t5kit.data.sni import nanot5_text
from t5kit.data.task_format import combines_metrics, normalize_text

logger = logging.getLogger(__name__)

# GLUE score (Wang et al. 2019, sec. 4): a task with two metrics scores their mean, MNLI the mean of matched and
# mismatched accuracy (the "MNLI" group of t5/evaluation/eval_utils.py METRIC_NAMES); the benchmark score is the
# unweighted mean over tasks. Each task maps to (result key, metric name) pairs; result keys are task names, or
# task_format.split_result_key(task, split) for split-specific results. The GLUE server averages all nine tasks;
# T5 and BERT leave WNLI out (pass `tasks=` to metrics.glue_average).
GLUE_SCORE_METRICS = {
    "cola": (("cola", "matthews_correlation"),),
    "sst2": (("sst2", "accuracy"),),
    "mrpc": (("mrpc", "f1"), ("mrpc", "accuracy")),
    "stsb": (("stsb", "pearson"), ("stsb", "spearmanr")),
    "qqp": (("qqp", "f1"), ("qqp", "accuracy")),
    "mnli": (("mnli_matched", "accuracy"), ("mnli_mismatched", "accuracy")),
    "qnli": (("qnli", "accuracy"),),
    "rte": (("rte", "accuracy"),),
    "wnli": (("wnli", "accuracy"),),
}
GLUE_TASKS_WITH_TWO_METRICS = tuple(task for task, pairs in GLUE_SCORE_METRICS.items() if len(pairs) == 2)

INVALID = -1  # predicted class index of a generation that is no label word
STSB_INVALID_SCORE = -1.0  # t5/data/postprocessors.py string_to_float(default=-1.)
PERCENT = 100.0


def label_indices(task_vals) -> dict:
    """Normalised label word -> class index (the order of task_vals["labels"])."""
    return {normalize_text(word): index for index, word in enumerate(task_vals["labels"].values())}


def parse_label(task_vals, text: str):
    """The label id a generation names, or None when it names no label."""
    index = label_indices(task_vals).get(normalize_text(text))
    return None if index is None else list(task_vals["labels"])[index]


def parse_score(text: str):
    """The float a regression generation holds, or None when it is no finite number ("nan" included)."""
    try:
        value = float(normalize_text(text))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def to_class_indices(task_vals, texts, what: str, meta=None) -> np.ndarray:
    """(N,) class indices; INVALID where a prediction names no label. References must all be label words. Rows
    whose meta lists their own answers (FLAN's COPA: "options", the row's two choices) map to that order."""
    if meta and "options" in meta[0]:
        values = np.array([row_option_index(row["options"], text) for text, row in zip(texts, meta)], dtype=np.int64)
    else:
        indices = label_indices(task_vals)
        values = np.array([indices.get(normalize_text(text), INVALID) for text in texts], dtype=np.int64)
    if what == "references" and (values == INVALID).any():
        bad = texts[int(np.argmax(values == INVALID))]
        raise ValueError(f"reference {bad!r} of task {task_vals.get('name', 'custom')} is no label word; "
                         f"references must be format_target outputs")
    return values


def row_option_index(options, text) -> int:
    """The index of the row's answer a text names, INVALID for none."""
    names = [normalize_text(option) for option in options]
    return names.index(normalize_text(text)) if normalize_text(text) in names else INVALID


def to_scores(texts, what: str) -> np.ndarray:
    """(N,) floats; STSB_INVALID_SCORE where a prediction is no number. References must all be numbers."""
    values = [parse_score(text) for text in texts]
    if what == "references" and None in values:
        raise ValueError(f"reference {texts[values.index(None)]!r} is not a number")
    return np.array([STSB_INVALID_SCORE if value is None else value for value in values], dtype=np.float64)


def accuracy(references, predictions) -> float:
    import sklearn.metrics  # here, not at the top: ~1 s of every script start
    return PERCENT * float(sklearn.metrics.accuracy_score(references, predictions))


def f1(references, predictions, num_labels: int) -> float:
    """Binary F1 of class 1 (GLUE's positive class: "equivalent", "duplicate"), or the mean F1 over classes."""
    import sklearn.metrics  # here, not at the top: ~1 s of every script start
    references, predictions = np.asarray(references), np.array(predictions)
    if num_labels == 2:
        invalid = predictions == INVALID
        predictions[invalid] = 1 - references[invalid]
        return PERCENT * float(sklearn.metrics.f1_score(references, predictions, pos_label=1, zero_division=0.0))
    return PERCENT * float(sklearn.metrics.f1_score(
        references, predictions, labels=list(range(num_labels)), average="macro", zero_division=0.0))


def matthews_correlation(references, predictions) -> float:
    import sklearn.metrics  # here, not at the top: ~1 s of every script start
    return PERCENT * float(sklearn.metrics.matthews_corrcoef(references, predictions))


def correlation_defined(references, predictions, name: str) -> bool:
    if len(references) >= 2 and np.ptp(references) > 0 and np.ptp(predictions) > 0:
        return True
    logger.warning("%s is undefined for %d rows with constant predictions or references; reporting 0.0",
                   name, len(references))
    return False


def pearson(references, predictions) -> float:
    if not correlation_defined(references, predictions, "pearson"):
        return 0.0
    return PERCENT * float(scipy.stats.pearsonr(references, predictions).statistic)


def spearmanr(references, predictions) -> float:
    if not correlation_defined(references, predictions, "spearmanr"):
        return 0.0
    return PERCENT * float(scipy.stats.spearmanr(references, predictions).statistic)


@functools.cache
def rouge_scorer(rouge_types, use_stemmer=False):
    from rouge_score.rouge_scorer import RougeScorer  # on first use: it imports nltk, ~2 s of every script start
    return RougeScorer(list(rouge_types), use_stemmer=use_stemmer)


def prepare_summary(summary: str) -> str:
    # t5/evaluation/metrics.py rouge(): one sentence per line, so rougeLsum scores sentence by sentence.
    return summary.replace(" . ", " .\n")


def rouge(references, predictions, rouge_types) -> dict:
    """Mean ROUGE F-measure per type, rouge-score's default tokenizer and no stemming (as T5). The plain mean
    replaces T5's BootstrapAggregator, whose resampling is random."""
    scorer = rouge_scorer(tuple(rouge_types))
    scores = [scorer.score(target=prepare_summary(reference), prediction=prepare_summary(prediction))
              for reference, prediction in zip(references, predictions)]
    return {name: PERCENT * float(np.mean([score[name].fmeasure for score in scores])) for name in rouge_types}


def bleu(references, predictions) -> float:
    """Corpus BLEU with T5's sacrebleu settings (t5/evaluation/metrics.py bleu: "intl" tokenizer); 0-100."""
    return float(sacrebleu.corpus_bleu(
        list(predictions), [list(references)], smooth_method="exp", smooth_value=0.0, force=False,
        lowercase=False, tokenize="intl", use_effective_order=False).score)


def group_exact_match(expected, predicted, groups) -> float:
    """T5 mean_group_metric(all_match): 100 for a group whose predictions all equal their targets, else 0; the
    mean over groups (MultiRC questions)."""
    by_group = collections.defaultdict(list)
    for reference, prediction, group in zip(expected, predicted, groups):
        by_group[group].append(reference == prediction)
    return PERCENT * float(np.mean([all(matches) for matches in by_group.values()]))


def gender_parity(predicted, groups) -> float:
    """The share of Winogender pairs predicted alike, an invalid prediction never alike. groups: each row's pair
    number (idx // 2, superglue_formats.axg_examples); a row whose partner is absent (a cut split) is no pair."""
    by_group = collections.defaultdict(list)
    for prediction, group in zip(predicted, groups):
        by_group[group].append(int(prediction))
    pairs = [values for values in by_group.values() if len(values) > 1]
    if not pairs:
        logger.warning("gender_parity needs both rows of a pair; none of the %d rows has its pair, reporting 0.0",
                       len(predicted))
        return 0.0
    return PERCENT * float(np.mean([len(set(values)) == 1 and INVALID not in values for values in pairs]))


def score_classification(task_vals, predictions, references, meta=None):
    predicted = to_class_indices(task_vals, predictions, "predictions", meta)
    expected = to_class_indices(task_vals, references, "references", meta)
    groups = [row["group"] for row in meta] if meta and "group" in meta[0] else None
    metric_fns = {
        "accuracy": lambda: accuracy(expected, predicted),
        "f1": lambda: f1(expected, predicted, num_labels=len(task_vals["labels"])),
        "matthews_correlation": lambda: matthews_correlation(expected, predicted),
        "exact_match": lambda: group_exact_match(expected, predicted, groups),
        "gender_parity": lambda: gender_parity(predicted, groups),
    }
    return {name: metric_fns[name]() for name in task_vals["metric_names"]}, int((predicted == INVALID).sum())


SQUAD_PUNCTUATION = frozenset(string.punctuation)
SQUAD_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_squad(text: str) -> str:
    """t5/evaluation/qa_utils.py normalize_squad, the official SQuAD and ReCoRD scripts' normalisation: lower case,
    punctuation removed, articles removed, whitespace collapsed."""
    text = "".join(char for char in text.lower() if char not in SQUAD_PUNCTUATION)
    return " ".join(SQUAD_ARTICLES.sub(" ", text).split())


def token_f1(target: str, prediction: str) -> float:
    """qa_utils._f1_score: F1 of the bags of whitespace tokens."""
    prediction_tokens, target_tokens = prediction.split(), target.split()
    same = sum((collections.Counter(prediction_tokens) & collections.Counter(target_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(prediction_tokens), same / len(target_tokens)
    return 2 * precision * recall / (precision + recall)


def score_qa(task_vals, predictions, references, meta):
    """deduplicate_metric(squad): the first prediction of each group (ReCoRD query) against all its answers."""
    seen, exact, overlap = set(), [], []
    for prediction, row in zip(predictions, meta):
        if row["group"] in seen:
            continue
        seen.add(row["group"])
        predicted, answers = normalize_squad(prediction), [normalize_squad(answer) for answer in row["answers"]]
        exact.append(max(float(answer == predicted) for answer in answers))
        overlap.append(max(token_f1(answer, predicted) for answer in answers))
    results = {"exact_match": PERCENT * float(np.mean(exact)), "f1": PERCENT * float(np.mean(overlap))}
    invalid = sum(not normalize_text(text) for text in predictions)
    return {name: results[name] for name in task_vals["metric_names"]}, invalid


# Super-NaturalInstructions' official evaluation (allenai/natural-instructions eval/automatic/evaluation.py @ 8540acd,
# the same as Tk-Instruct's src/compute_metrics.py), English track: SQuAD's normalisation without removing articles,
# Rouge-L F with rouge-score's default tokenizer and the Porter stemmer, each the maximum over an instance's
# references; the mean x 100 per group rounded to 4 decimals, overall, per category (the task's first, lower case,
# spaces to "_") and per task, named "<metric>_for_<group>".
SNI_DECIMALS = 4


def normalize_sni(text: str) -> str:
    """evaluation.py normalize_answer: lower case, punctuation removed, whitespace collapsed (articles kept)."""
    return " ".join("".join(char for char in text.lower() if char not in SQUAD_PUNCTUATION).split())


def sni_exact_match(prediction: str, references) -> bool:
    return max(normalize_sni(prediction) == normalize_sni(reference) for reference in references)


def sni_rouge_l(prediction: str, references) -> float:
    scorer = rouge_scorer(("rougeL",), use_stemmer=True)
    return max(scorer.score(target=reference, prediction=prediction)["rougeL"].fmeasure for reference in references)


def sni_average(scores) -> dict:
    """evaluation.py compute_metrics from per-instance (exact match, Rouge-L) pairs, summed in the same order."""
    return {"exact_match": round(PERCENT * sum(exact for exact, _ in scores) / len(scores), SNI_DECIMALS),
            "rougeL": round(PERCENT * sum(rouge_l for _, rouge_l in scores) / len(scores), SNI_DECIMALS)}


# --sni_metric nanot5: nanoT5's figure (train_utils.py predict, transcribed in data/sni.py): evaluate's rouge as nanoT5
# calls it (use_stemmer=True, use_aggregator=False), i.e. this scorer per (reference, prediction), then the plain mean.
NANOT5_ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


def nanot5_rouge_l(predictions, meta) -> float:
    scorer = rouge_scorer(NANOT5_ROUGE_TYPES, use_stemmer=True)
    scores = [scorer.score(row["nanot5_reference"], nanot5_text(text))["rougeL"].fmeasure
              for text, row in zip(predictions, meta)]
    return sum(scores) * 100 / len(scores)  # unrounded, as nanoT5 logs it


def score_sni(task_vals, predictions, references, meta):
    """SNI metrics of a split (references in meta) by --sni_metric: official, or nanot5 (its Rouge-L alone)."""
    invalid = sum(not normalize_text(text) for text in predictions)  # empty generations
    if task_vals.get("sni_metric", SNI_METRICS[0]) == "nanot5":
        return {"rougeL": nanot5_rouge_l(predictions, meta)}, invalid
    scores = [(sni_exact_match(prediction, row["references"]), sni_rouge_l(prediction, row["references"]))
              for prediction, row in zip(predictions, meta)]  # each instance scored once, then grouped
    results = sni_average(scores)
    for key in ("category", "task"):
        groups = ["_".join(row[key].lower().split()) if key == "category" else row[key] for row in meta]
        for group in dict.fromkeys(groups):
            average = sni_average([score for score, name in zip(scores, groups) if name == group])
            results.update({f"{metric}_for_{group}": value for metric, value in average.items()})
    return results, invalid


# postprocessors.wsc_simple ignores case and these words when it compares a prediction with the referent.
WSC_DETERMINERS = frozenset({"a", "an", "few", "her", "his", "each", "every", "many", "much", "my", "our", "some",
                             "that", "the", "their", "these", "this", "those", "which", "whose", "your"})


def wsc_referent_match(prediction: str, referent: str) -> int:
    """T5 postprocessors.wsc_simple: 1 when the prediction names the referent ("fuzzy bunny" and "bunny" both
    match "bunny": either word set contains the other; "Bob" does not match "Bob's hat"), 0 when not, INVALID for
    an empty prediction."""
    def clean(text):
        return " ".join(word for word in text.strip().lower().split(" ") if word not in WSC_DETERMINERS)

    prediction, referent = clean(prediction), clean(referent)
    if not prediction:
        return INVALID
    if ("'" in prediction) != ("'" in referent):
        return 0
    predicted_words, referent_words = set(prediction.split(" ")), set(referent.split(" "))
    return int(predicted_words.issubset(referent_words) or referent_words.issubset(predicted_words))


def score_referent(task_vals, predictions, references, meta):
    """Accuracy of "names the candidate" against the label "the candidate is the referent" (WSC, WNLI as WSC)."""
    predicted = [wsc_referent_match(text, row["referent"]) for text, row in zip(predictions, meta)]
    return {"accuracy": accuracy([row["label"] for row in meta], predicted)}, predicted.count(INVALID)


def score_regression(task_vals, predictions, references):
    predicted, expected = to_scores(predictions, "predictions"), to_scores(references, "references")
    invalid = sum(parse_score(text) is None for text in predictions)
    metric_fns = {"pearson": pearson, "spearmanr": spearmanr}
    return {name: metric_fns[name](expected, predicted) for name in task_vals["metric_names"]}, invalid


def score_generation(task_vals, predictions, references):
    results = {}
    rouge_types = [name for name in task_vals["metric_names"] if name.startswith("rouge")]
    if rouge_types:
        results.update(rouge(references, predictions, rouge_types))
    if "bleu" in task_vals["metric_names"]:
        results["bleu"] = bleu(references, predictions)
    if "exact_match" in task_vals["metric_names"]:  # SNI's normalisation (lower case, no punctuation)
        matches = [sni_exact_match(prediction, [reference]) for prediction, reference in zip(predictions, references)]
        results["exact_match"] = PERCENT * float(np.mean(matches))
    invalid = sum(not normalize_text(text) for text in predictions)
    return {name: results[name] for name in task_vals["metric_names"]}, invalid


def compute_task_metrics(task_vals, predictions, references, meta=None) -> dict:
    """metric_names values (0-100), COMBINED_SCORE for two-metric tasks, invalid_count and invalid_rate (0-100).
    predictions: decoded generations; references: the targets of the same rows; meta: their TaskSplit.meta, which
    the SuperGLUE metrics need (groups, answers, labels, referents)."""
    predictions, references = list(predictions), list(references)
    if len(predictions) != len(references) or not predictions:
        raise ValueError(f"need as many predictions as references (and some): got {len(predictions)} "
                         f"predictions, {len(references)} references")
    scorers = {"classification": lambda: score_classification(task_vals, predictions, references, meta),
               "sni": lambda: score_sni(task_vals, predictions, references, meta),
               "regression": lambda: score_regression(task_vals, predictions, references),
               "generation": lambda: score_generation(task_vals, predictions, references),
               "qa": lambda: score_qa(task_vals, predictions, references, meta),
               "referent": lambda: score_referent(task_vals, predictions, references, meta)}
    kind = "sni" if task_vals.get("row_format") == "sni" else task_vals["task_type"]
    results, invalid = scorers[kind]()
    if combines_metrics(task_vals):
        results[COMBINED_SCORE] = float(np.mean([results[name] for name in task_vals["metric_names"]]))
    results["invalid_count"] = int(invalid)
    results["invalid_rate"] = PERCENT * invalid / len(predictions)
    return results


def glue_average(per_task_metrics, tasks=tuple(GLUE_SCORE_METRICS)) -> float:
    """The GLUE score: each task's metrics (GLUE_SCORE_METRICS) averaged, then the mean over tasks.
    per_task_metrics: result key ("cola", "mnli_matched", ...) -> compute_task_metrics output."""
    unknown = [task for task in tasks if task not in GLUE_SCORE_METRICS]
    if unknown:
        raise ValueError(f"no GLUE score for {', '.join(unknown)}; GLUE tasks: {', '.join(GLUE_SCORE_METRICS)}")
    missing = [f"{key}/{metric}" for task in tasks for key, metric in GLUE_SCORE_METRICS[task]
               if metric not in per_task_metrics.get(key, {})]
    if missing:
        raise ValueError(f"the GLUE average needs {', '.join(missing)}")
    task_scores = [np.mean([per_task_metrics[key][metric] for key, metric in GLUE_SCORE_METRICS[task]])
                   for task in tasks]
    return float(np.mean(task_scores))
