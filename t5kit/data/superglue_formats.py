"""T5's text-to-text formats of the tasks that are not plain `glue` rows (MultiRC, ReCoRD, WSC, WNLI as WSC,
AX-g pairs), and the official files' nested rows flattened as TFDS's super_glue builder flattens them.

Sources: google-research/text-to-text-transfer-transformer t5/data/preprocessors.py (`glue` with MultiRC's markup
removal, `record`, `wsc_simple` with `_wsc_inputs`, `wnli_simple`) and t5/data/glue_utils.py (feature orders);
tensorflow_datasets' super_glue builder (`_generate_examples`, `_get_record_entities`, `_get_record_answers`) for
how a row of an official jsonl file becomes rows in hub form (the HF hub's aps/super_glue has the same columns).

`FILE_ROWS[row_format](raw, labelled)` turns one row of an official file into hub-form rows, or None when it is
malformed (the caller counts it); `EXAMPLES[row_format](task_vals, row)` turns one hub-form row into Examples: the T5
input, the target (None where the row has no label) and the metadata that metrics and leaderboard files need;
`SPLIT_CHECKS[row_format](rows, where)` refuses a split whose rows do not hold together (AX-g pairs).
    record_examples(task_vals, {"passage": "A\\n@highlight\\nB", "query": "@placeholder won", "entities": ["B"],
                                "answers": ["B"], "idx": {"passage": 0, "query": 0}})
    -> [Example("record query: @placeholder won entities: B passage: A. B", "B", {...})]
"""
import collections
import re

from constants import NO_LABEL
from t5kit.data.task_format import format_input, format_target, is_no_label
from t5kit.errors import UsageError

Example = collections.namedtuple("Example", ["input", "target", "meta"])

# --------------------------------------------------------------------------------------------------- MultiRC
# preprocessors.glue(benchmark_name="multirc"): the joined text loses the paragraph's HTML markup.
MULTIRC_MARKUP = ((re.compile(r"<br>"), " "), (re.compile(r"<(/)?b>"), ""))


def multirc_rows(raw, labelled):
    """One row per (paragraph, question, answer), as TFDS flattens MultiRC; None when a question has no answers
    or a field is missing. Test answers carry no label (NO_LABEL)."""
    passage = raw.get("passage")
    if not isinstance(passage, dict) or not isinstance(passage.get("text"), str) or "idx" not in raw \
            or not isinstance(passage.get("questions"), list) or not passage["questions"]:
        return None
    rows = []
    for question in passage["questions"]:
        answers = question.get("answers") if isinstance(question, dict) else None
        if not isinstance(answers, list) or not answers or not isinstance(question.get("question"), str) \
                or "idx" not in question:
            return None
        for answer in answers:
            if not isinstance(answer, dict) or not isinstance(answer.get("text"), str) or "idx" not in answer:
                return None
            label = answer.get("label")
            if label is None and labelled:
                return None
            rows.append({"paragraph": passage["text"], "question": question["question"], "answer": answer["text"],
                         "idx": {"paragraph": raw["idx"], "question": question["idx"], "answer": answer["idx"]},
                         "label": NO_LABEL if label is None else int(bool(label))})
    return rows


def multirc_examples(task_vals, row):
    """"multirc question: Q answer: A paragraph: P" without <br>/<b> markup -> "True"/"False". Exact match is
    scored per question: the group is (paragraph, question) (T5 groups by idx/question, unique per file)."""
    text = format_input(task_vals, row)
    for pattern, replacement in MULTIRC_MARKUP:
        text = pattern.sub(replacement, text)
    idx = row["idx"]
    target = None if row["label"] == NO_LABEL else format_target(task_vals, row)
    return [Example(text, target, {"idx": idx, "group": (idx["paragraph"], idx["question"])})]


# ---------------------------------------------------------------------------------------------------- ReCoRD
# preprocessors.record: a highlight after closing punctuation becomes a space, any other one ". ".
RECORD_HIGHLIGHTS = ((re.compile(r"(\.|\?|\!|\"|\')\n@highlight\n"), r"\1 "), (re.compile(r"\n@highlight\n"), ". "))


def span_text(text, span):
    """text[start:end + 1] (ReCoRD spans end inclusive), or None for a span that is not inside the text."""
    start, end = (span.get("start"), span.get("end")) if isinstance(span, dict) else (None, None)
    if not isinstance(start, int) or not isinstance(end, int) or not 0 <= start <= end < len(text):
        return None
    return text[start:end + 1]


def record_rows(raw, labelled):
    """One row per query, as TFDS flattens ReCoRD: the passage, the query, the passage's distinct entities and the
    query's distinct answers, both sorted. None when an entity or answer span lies outside the passage, or a
    query of a labelled split has no answers."""
    passage = raw.get("passage")
    if not isinstance(passage, dict) or not isinstance(passage.get("text"), str) or "idx" not in raw \
            or not isinstance(passage.get("entities"), list) or not isinstance(raw.get("qas"), list):
        return None
    text = passage["text"]
    entities = [span_text(text, entity) for entity in passage["entities"]]
    if None in entities or not raw["qas"]:
        return None
    rows = []
    for qa in raw["qas"]:
        if not isinstance(qa, dict) or not isinstance(qa.get("query"), str) or "idx" not in qa:
            return None
        answers = qa.get("answers", [])
        if not isinstance(answers, list) or (labelled and not answers):
            return None
        for answer in answers:
            if not isinstance(answer, dict) or not isinstance(answer.get("text"), str) \
                    or ("start" in answer and span_text(text, answer) is None):
                return None
        rows.append({"passage": text, "query": qa["query"], "entities": sorted(set(entities)),
                     "answers": sorted({answer["text"] for answer in answers}),
                     "idx": {"passage": raw["idx"], "query": qa["idx"]}})
    return rows


def record_examples(task_vals, row):
    """"record query: Q entities: E1, E2 passage: P" -> one example per answer (T5 trains on each; its metric
    keeps one prediction per query and scores it against all answers); a query without answers (test) gives one
    example without a target."""
    passage = row["passage"]
    for pattern, replacement in RECORD_HIGHLIGHTS:
        passage = pattern.sub(replacement, passage)
    text = " ".join([task_vals["prefix"], row["query"], "entities:", ", ".join(row["entities"]), "passage:",
                     passage])
    idx = row["idx"]
    meta = {"idx": idx, "group": (idx["passage"], idx["query"]), "answers": list(row["answers"])}
    return [Example(text, answer, meta) for answer in row["answers"]] or [Example(text, None, meta)]


# ------------------------------------------------------------------------------------------------------- WSC
WSC_SPAN_KEYS = ("span1_index", "span2_index", "span1_text", "span2_text")
# _wsc_inputs' two special cases, where span2_index does not point at the pronoun (train idx 137, 453 and 533: word
# 22 is 'him,"'; validation idx 42: word 30 is 'use'). Both texts are byte for byte T5's (preprocessors.py @ 84f8bcc)
# and the official files'; a row whose text differs in any byte is checked like every other row instead.
WSC_SPECIAL_INPUTS = {
    "The boy continued to whip the pony , and eventually the pony threw him over. John laughed out quite loud. "
    "\"Good for him,\" he said. ":
        "The boy continued to whip the pony , and eventually the pony threw him over. John laughed out quite "
        "loud. \"Good for X ,\" he said.",
    "When they had eventually calmed down a bit , and had gotten home, Mr. Farley put the magic pebble in an iron "
    "safe . Some day they might want to use it , but really for now, what more could they wish for?":
        "When they had eventually calmed down a bit , and had gotten home, Mr. Farley put the magic pebble in an "
        "iron safe . Some day they might want to use X , but really for now, what more could they wish for?",
}


def wsc_rows(raw, labelled, fixed=True):
    """The official file nests the spans under "target"; TFDS flattens them and, in wsc.fixed (the config T5
    reads, as the hub's), repairs span texts that are not in the text (`_fix_wst`, see wsc_fixed_span). fixed=False:
    TFDS's super_glue/wsc config (FLAN's source, flan/tasks.py), the span texts as the file publishes them."""
    target = raw.get("target")
    if not isinstance(target, dict) or any(key not in target for key in WSC_SPAN_KEYS) \
            or not isinstance(raw.get("text"), str) or "idx" not in raw or (labelled and raw.get("label") is None):
        return None
    spans = {key: target[key] for key in WSC_SPAN_KEYS}
    for span in ("span1", "span2") if fixed else ():
        spans[f"{span}_text"] = wsc_fixed_span(raw["text"], spans[f"{span}_text"], spans[f"{span}_index"])
    if None in spans.values():
        return None
    label = raw.get("label")
    return [{"text": raw["text"], **spans, "idx": raw["idx"], "label": NO_LABEL if label is None else int(bool(label))}]


# Spans TFDS leaves as they are: their words are not adjacent in the text.
WSC_UNFIXABLE_SPANS = ("Kamenev and Zinoviev", "Kamenev, Zinoviev, and Stalin")


def wsc_fixed_span(text, span_text, index):
    """TFDS super_glue `_fix_wst`: a span text not found in the text takes the case of the first letter of the word
    at its index (words split on whitespace), loses trailing full stops and has newlines made spaces ("The table"
    -> "the table": 88 train, 8 validation and 5 test rows of the official files). None where the index is no
    word. (_fix_wst's "theyscold" repair is left out: no official row has that text.)"""
    if not isinstance(span_text, str) or not span_text or span_text in text or span_text in WSC_UNFIXABLE_SPANS:
        return span_text
    words = text.split()
    if not isinstance(index, int) or not 0 <= index < len(words):
        return None
    first = span_text[0].lower() if words[index][0].islower() else span_text[0].upper()
    return (first + span_text[1:]).rstrip(".").replace("\n", " ")


def wsc_pronoun_blanked(row):
    """_wsc_inputs: the text with the pronoun at span2_index (words split on single spaces) replaced by X; None
    where span2_index does not name span2_text (T5 asserts it), or names the first word."""
    if row["text"] in WSC_SPECIAL_INPUTS:
        return WSC_SPECIAL_INPUTS[row["text"]]
    words, index = row["text"].split(" "), row["span2_index"]
    if not isinstance(index, int) or not 0 < index < len(words) or words[index] != row["span2_text"]:
        return None
    return " ".join([" ".join(words[:index]), "X", " ".join(words[index + 1:])])


def wsc_examples(task_vals, row):
    """wsc_simple: "wsc: ... *he* ..." -> the candidate referent span1_text (whether or not it is the referent:
    the label says); [] for a row whose pronoun index is wrong (counted as malformed)."""
    blanked = wsc_pronoun_blanked(row)
    if blanked is None:
        return []
    marked = re.sub(" X ", lambda _: f" *{row['span2_text']}* ", blanked)
    return [referent_example(f"{task_vals['prefix']} {marked}", row["span1_text"], row)]


def referent_example(text, referent, row):
    labelled = row["label"] != NO_LABEL
    return Example(text, referent if labelled else None,
                   {"idx": row.get("index", row.get("idx")), "label": row["label"] if labelled else None,
                    "referent": referent})


# ------------------------------------------------------------------------------------- WNLI as WSC (wnli_simple)
WNLI_PRONOUNS = ("he", "she", "they", "it", "her", "his", "their", "them", "him")
PronounMatch = collections.namedtuple("PronounMatch", ["score", "index_in_premise", "candidate"])


def split_clean(text):
    words = [re.sub(r"(\.|,|\?|\!)$", "", word) for word in text.strip().lower().split(" ")]
    return [word for word in words if word]


def post_match_size(hypothesis, words):
    """Length of the longest prefix of words that is a substring of the hypothesis."""
    joined = " ".join(hypothesis)
    for i in range(len(words)):
        if " ".join(words[:i + 1]) not in joined:
            return i
    return len(words)


def pronoun_match(premise, hypothesis, index):
    pre, post = premise[:index], premise[index + 1:]
    pre_size = post_match_size(hypothesis[::-1], pre[::-1])
    post_size = post_match_size(hypothesis, post)
    score = pre_size + post_size
    candidate = ""
    if score:
        pre_match, post_match, joined = pre[-pre_size or len(pre):], post[:post_size], " ".join(hypothesis)
        match = (re.search(" ".join(pre_match + [r"(.+)"] + post_match), joined)
                 or re.search(" ".join([r"^(.+)"] + post_match), joined)  # the candidate starts the hypothesis
                 or re.search(" ".join(pre_match + [r"(.+)$"]), joined))  # the candidate ends it
        if match:
            candidate = match.group(1)
    return PronounMatch(score, index, candidate)


def highlight(sentence, index):
    words = sentence.split(" ")
    word = words[index]
    marked = f"*{word[:-1]}* {word[-1]}" if word[-1] in ".,!?" else f"*{word}*"
    return " ".join(words[:index] + [marked] + words[index + 1:])


def wnli_candidate(candidate, hypothesis):
    """process_candidate: from the last article on, as the hypothesis spells it, not possessive; None where it
    cannot be found (T5 raises)."""
    words = candidate.split(" ")
    candidate = " ".join(words[max([words.index(art) for art in ("a", "an", "the") if art in words] or [0]):])
    pattern = "({})".format(" ".join(rf"{re.escape(word)}(?:\.|,|\?|\!)?" for word in candidate.split(" ")))
    match = re.search(pattern, hypothesis, re.IGNORECASE)
    if not match:
        return None
    candidate = match.group(1)
    if candidate and candidate[-1] in ".,!?":
        candidate = candidate[:-1]
    return candidate[:-1] if candidate.endswith("'") else candidate[:-2] if candidate.endswith("'s") else candidate


def wnli_examples(task_vals, row):
    """wnli_simple: the premise's pronoun that best matches the hypothesis is marked ("wsc: ... *It* has ...") and
    the hypothesis's words in its place are the candidate referent; [] where T5's procedure finds none."""
    premise, hypothesis = split_clean(row["sentence1"]), split_clean(row["sentence2"])
    try:
        matches = [pronoun_match(premise, hypothesis, i) for i, word in enumerate(premise) if word in WNLI_PRONOUNS]
        if not matches:
            return []
        match = max(matches, key=lambda m: m.score)  # the first of equal scores, as Python's max
        candidate = wnli_candidate(match.candidate, row["sentence2"])
        text = f"{task_vals['prefix']} {highlight(row['sentence1'], match.index_in_premise)}"
    except (re.error, IndexError):  # words that are no valid regex, a pronoun index past the raw words
        return []
    return [] if candidate is None else [referent_example(text, candidate, row)]


# ----------------------------------------------------------------------------------------------------- AX-g
def axg_examples(task_vals, row):
    """RTE's format; the two rows of a Winogender pair (the same sentence with the other gender) share a group for
    gender parity. Pairs are consecutive rows, idx 2k and 2k + 1, in the official AX-g.jsonl and in the hub's rows
    alike: the official file's pair_id is unique to each row and pairs nothing (check_axg_pairs checks the split)."""
    (example,) = glue_examples(task_vals, row)
    return [example._replace(meta={**example.meta, "group": axg_pair(row["idx"])})]


def axg_pair(idx):
    """The pair number of an AX-g row, idx // 2; None for an idx that is no whole number."""
    if isinstance(idx, str) and idx.strip().isdigit():
        idx = int(idx)
    return idx // 2 if isinstance(idx, int) and not isinstance(idx, bool) and idx >= 0 else None


def check_axg_pairs(rows, where):
    """Refuses AX-g rows that do not pair up as the official file does: an idx that is no whole number or comes
    twice, or rows idx 2k and 2k + 1 whose hypotheses differ (a reordered or filtered file would score gender
    parity over rows that are no Winogender pair). rows: [(line, hub-form row)]."""
    first_of_pair, seen = {}, set()
    for number, row in rows:
        idx = row.get("idx")
        pair = axg_pair(idx)
        if pair is None or idx in seen:
            problem = "comes twice" if pair is not None else "is not a whole number"
            raise UsageError(f"{where} line {number}: AX-g idx {idx!r} {problem}; gender parity pairs the rows idx 2k "
                             "and 2k + 1, as the official AX-g.jsonl numbers them")
        seen.add(idx)
        other_idx, hypothesis = first_of_pair.setdefault(pair, (idx, row["hypothesis"]))
        if hypothesis != row["hypothesis"]:
            raise UsageError(f"{where}: AX-g rows idx {other_idx} and {idx} should be one Winogender pair (idx 2k, "
                             "2k + 1, the same hypothesis) but their hypotheses differ; pass the official AX-g.jsonl "
                             "in its released order")


def glue_examples(task_vals, row):
    """preprocessors.glue: the prefix and the task's columns -> the label word (None for unlabeled rows)."""
    target = None if is_no_label(row[task_vals["label_column_name"]]) else format_target(task_vals, row)
    return [Example(format_input(task_vals, row), target, {"idx": row.get("index", row.get("idx"))})]


# "wsc": super_glue/wsc as published (FLAN's WSC, instructions.flan_task_vals); "wsc_simple": wsc.fixed (T5's)
FILE_ROWS = {"multirc": multirc_rows, "record": record_rows, "wsc_simple": wsc_rows,
             "wsc": lambda raw, labelled: wsc_rows(raw, labelled, fixed=False)}
EXAMPLES = {"glue": glue_examples, "multirc": multirc_examples, "record": record_examples,
            "wsc_simple": wsc_examples, "wnli_simple": wnli_examples, "axg": axg_examples}
SPLIT_CHECKS = {"axg": check_axg_pairs}  # row_format -> check of a split's rows as a whole, before formatting


def is_unlabeled(task_vals, row) -> bool:
    """A row without a label: NO_LABEL in its label column (hub test rows), or no answers (ReCoRD test rows)."""
    value = row.get(task_vals["label_column_name"])
    return not value if task_vals.get("row_format") == "record" else is_no_label(value)
