"""The sources `make data` fetches besides the GLUE / SuperGLUE task files, WikiText-2, the Gutenberg books and the
T5 tokenizer: the parallel text and the BoolQ dev set that tests and benches read. scripts/fetch_data.py runs them
(`--tasks multi30k newstest2014 boolq_dev`); this module holds their tables and their writers, which turn the hub's
rows (fetch_data.load_hub_rows, one call per hub split) into the files of ../shared/data, without the network.

    translation/multi30k/{train,val,test}.{en,de}     Multi30k en-de (bentrevett/multi30k): raw text, one sentence
                                                      a line, line-aligned; the registry's multi30k_en_de files
    translation/wmt14_en_de_newstest2014_tok/test.{en,de}   newstest2014 en-de (wmt/wmt14 de-en, split test)
    boolq/dev.jsonl                                   BoolQ's original dev set: question, title, answer, passage

Where the files differ from ../shared/data (PROVENANCE.md):
- Multi30k: ../shared/data holds val and test only (OpenNMT-py's copy); train.{en,de} (29,000 pairs) are written
  too, as --data_dir needs them for training. A line break inside a sentence (none in the official files) becomes a
  space, so the files stay line-aligned for str.splitlines().
- newstest2014: ../shared/data holds OpenNMT-py's demo copy of the filtered newstest2014 as Stanford NMT uses it
  (2737 lines), tokenized (punctuation split off; `doesn &apos;t`, `&quot;` in the English). The hub holds the full
  newstest2014 (3003 sentences), untokenized, with no field to filter it by, so the files hold those 3003 raw
  sentences under the same names (the folder keeps its `_tok` name: bench/predict.py reads test.en from it as English
  input to translate, which needs neither the filter nor the tokens).
- BoolQ: google/boolq has no title; the title comes from SuperGLUE's copy of the same 3270 rows in the same order
  (aps/super_glue boolq, validation), whose passage is "<title> -- <passage>". The lines are json.dumps of the four
  fields, not ASCII-escaped, as the original file (tests/scripts/test_fetch_data.py writes ../shared/data's file
  back byte for byte).
"""
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from constants import DATASET_VALS
from t5kit.errors import UsageError

MULTI30K = DATASET_VALS["translation"]["multi30k_en_de"]
MULTI30K_FOLDER = f"translation/{MULTI30K['data_dir_name']}"
MULTI30K_SPLITS = (MULTI30K["train_split"], *MULTI30K["validation_splits"], *MULTI30K["test_splits"])
NEWSTEST_HUB = ("wmt/wmt14", "de-en")
NEWSTEST_FOLDER = "translation/wmt14_en_de_newstest2014_tok"
NEWSTEST_LANGUAGES = ("en", "de")  # test.en, test.de
BOOLQ_HUB = ("google/boolq", None)
BOOLQ_TITLED_HUB = DATASET_VALS["super_glue"]["boolq"]["hub_name"]  # passage: "<title> -- <passage>"
BOOLQ_TITLE_SEPARATOR = " -- "
BOOLQ_FILE = "boolq/dev.jsonl"
# Every boundary str.splitlines() knows: one inside a sentence would shift the lines after it.
LINE_BREAKS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def sentence_lines(texts):
    """One sentence a line."""
    return [LINE_BREAKS.sub(" ", text.rstrip("\r\n")) + "\n" for text in texts]


def multi30k_lines(*split_rows):
    """{file: lines} of Multi30k, one rows list per split of MULTI30K_SPLITS (hub rows: {"en": ..., "de": ...})."""
    return {f"{MULTI30K_FOLDER}/{name}": sentence_lines(row[language] for row in rows)
            for split, rows in zip(MULTI30K_SPLITS, split_rows)
            for language, name in MULTI30K["data_files"][split].items()}


def newstest_lines(rows):
    """{file: lines} of newstest2014 (hub rows: {"translation": {"de": ..., "en": ...}})."""
    return {f"{NEWSTEST_FOLDER}/test.{language}": sentence_lines(row["translation"][language] for row in rows)
            for language in NEWSTEST_LANGUAGES}


def boolq_lines(rows, titled_rows):
    """{file: lines} of BoolQ's original dev.jsonl: google/boolq's rows (question, answer, passage), each with the
    title that SuperGLUE's copy of the row puts before its passage. Rows that do not pair up are refused."""
    if len(rows) != len(titled_rows):
        raise UsageError(f"boolq_dev: {BOOLQ_HUB[0]} has {len(rows)} validation rows, {BOOLQ_TITLED_HUB[0]} "
                         f"{BOOLQ_TITLED_HUB[1]} {len(titled_rows)}; cannot pair them to take the titles")
    lines = []
    for number, (row, titled) in enumerate(zip(rows, titled_rows)):
        title, separator, _ = titled["passage"].partition(BOOLQ_TITLE_SEPARATOR)
        if titled["question"] != row["question"] or not separator:
            raise UsageError(f"boolq_dev: validation row {number} of {BOOLQ_HUB[0]} ({row['question']!r}) has no "
                             f"titled twin in {BOOLQ_TITLED_HUB[0]} {BOOLQ_TITLED_HUB[1]}")
        record = {"question": row["question"], "title": title, "answer": bool(row["answer"]),
                  "passage": row["passage"]}
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    return {BOOLQ_FILE: lines}


@dataclass(frozen=True)
class Source:
    """What one source reads (hub splits, in the order to_lines takes their rows) and writes (files)."""
    hub_splits: tuple  # ((hub_name, split), ...)
    files: tuple  # relative paths, each a key of what to_lines returns
    to_lines: Callable


SOURCES = {
    "multi30k": Source(tuple((MULTI30K["hub_name"], split) for split in MULTI30K_SPLITS),
                       tuple(f"{MULTI30K_FOLDER}/{name}" for split in MULTI30K_SPLITS
                             for name in MULTI30K["data_files"][split].values()), multi30k_lines),
    "newstest2014": Source(((NEWSTEST_HUB, "test"),),
                           tuple(f"{NEWSTEST_FOLDER}/test.{language}" for language in NEWSTEST_LANGUAGES),
                           newstest_lines),
    "boolq_dev": Source(((BOOLQ_HUB, "validation"), (BOOLQ_TITLED_HUB, "validation")), (BOOLQ_FILE,), boolq_lines),
}
