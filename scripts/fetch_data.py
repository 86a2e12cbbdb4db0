"""Fetch the public data the examples read, from the Hugging Face hub, into the layout `--data_dir` and the configs
read: `make data` runs it on a machine with internet.

    python -m scripts.fetch_data                      # everything below, into data/; prints each file with its rows
    python -m scripts.fetch_data --tasks glue/rte super_glue/wic wikitext2 --output_dir data

What it writes, the layout of ../shared/data that tests, benches and configs read from $T5_DATA_DIR (`written_files()`):
    glue/CoLA/{train,dev,test}.tsv ... glue/MNLI/dev_matched.tsv ... glue/diagnostic/diagnostic.tsv
    superglue/BoolQ/{train,val,test}.jsonl ... superglue/AX-b/AX-b.jsonl, superglue/AX-g/AX-g.jsonl
    wikitext-2-raw/wiki.{train,valid,test}.raw       gutenberg/<NLTK's file name>.txt (13 books)
    t5_spiece/spiece.model, tokenizer.json            the T5 tokenizer (google-t5/t5-small)
    translation/multi30k/, translation/wmt14_en_de_newstest2014_tok/, boolq/dev.jsonl   (scripts/fetch_extra_data.py)

Two halves. The hub calls (`load_*`) return rows per split as `datasets` gives them (GLUE and SuperGLUE labels as
ClassLabel ids; MultiRC, ReCoRD and WSC flattened one row per answer / query, as TFDS does). The writers turn them back
into the official files: a label id becomes the file's label text (`file_label_map` read backwards), a renamed column
gets the file's name back, MultiRC / ReCoRD / WSC rows are nested again, a test split (label -1 on every row) has no
label. Columns the hub lacks (CoLA's source, MRPC's sentence ids, MNLI's parse trees) are left out or empty, so the
files read as the official ones without being byte-identical (tests/scripts/test_fetch_data.py).

A file that exists is never replaced: a source whose files are all there is skipped without a hub call, so a re-run
after an interrupted fetch fetches only what is missing. Every file is written under a temporary name and renamed.
"""
import collections
import functools
import json
import logging
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import datasets
from huggingface_hub import hf_hub_download

from constants import DATASET_VALS, NO_LABEL
from scripts import fetch_extra_data
from t5kit import cli
from t5kit.config import parsing
from t5kit.data.superglue_formats import WSC_SPAN_KEYS
from t5kit.data.task_format import get_task_vals
from t5kit.errors import UsageError, did_you_mean
from t5kit.outputs.atomic_files import atomic_write
from t5kit.outputs.run_folder import creating_output_dir, refuse_a_file_in_the_way

logger = logging.getLogger(__name__)

BENCHMARK_FOLDERS = {"glue": "glue", "super_glue": "superglue"}  # folder names as in ../shared/data
WIKITEXT_HUB = ("Salesforce/wikitext", "wikitext-2-raw-v1")
WIKITEXT_FILES = {"train": "wiki.train.raw", "validation": "wiki.valid.raw", "test": "wiki.test.raw"}  # the zip's names
WIKITEXT_FOLDER = "wikitext-2-raw"
# English Gutenberg books with the licence header and footer removed; METADATA is a JSON string holding text_id.
GUTENBERG_HUB = ("sedthh/gutenberg_english", None)
# NLTK's Gutenberg selection (the books of ../shared/data/gutenberg): Project Gutenberg ebook number, and a word its
# title holds (checked, so that a number that names another book is refused, not written under this name).
GUTENBERG_BOOKS = {
    "austen-emma.txt": (158, "Emma"), "austen-persuasion.txt": (105, "Persuasion"),
    "austen-sense.txt": (161, "Sense and Sensibility"), "blake-poems.txt": (574, "Blake"),
    "chesterton-ball.txt": (5265, "Ball and the Cross"), "chesterton-brown.txt": (223, "Father Brown"),
    "chesterton-thursday.txt": (1695, "Thursday"), "melville-moby_dick.txt": (2701, "Moby"),
    "milton-paradise.txt": (26, "Paradise Lost"), "shakespeare-caesar.txt": (2263, "Caesar"),
    "shakespeare-hamlet.txt": (2265, "Hamlet"), "shakespeare-macbeth.txt": (2264, "Macbeth"),
    "whitman-leaves.txt": (1322, "Leaves of Grass"),
}
T5_TOKENIZER_HUB = "google-t5/t5-small"
T5_TOKENIZER_FILES = ("spiece.model", "tokenizer.json")
T5_TOKENIZER_FOLDER = "t5_spiece"
TSV_BREAKS = re.compile(r"[\t\r\n]")  # a tab or line break inside a field would split the TSV row
OTHER_SOURCES = ("wikitext2", "gutenberg", "t5_spiece", *fetch_extra_data.SOURCES)
ALL_SOURCES = (*BENCHMARK_FOLDERS, *OTHER_SOURCES)  # what --tasks fetches by default


def task_names():
    """Every GLUE and SuperGLUE task the registry holds, as benchmark/task."""
    return [f"{benchmark}/{task}" for benchmark in BENCHMARK_FOLDERS for task in DATASET_VALS[benchmark]]


def expand_sources(names):
    """--tasks as a list of sources: a benchmark name stands for all its tasks; an unknown name is refused."""
    choices = [*BENCHMARK_FOLDERS, *OTHER_SOURCES, *task_names()]
    sources = []
    for name in names:
        if name not in choices:
            raise UsageError(f"--tasks: unknown source {name!r}{did_you_mean(name, choices)}")
        sources += [task for task in task_names() if task.startswith(f"{name}/")] if name in BENCHMARK_FOLDERS \
            else [name]
    return list(dict.fromkeys(sources))


@dataclass
class FetchArguments:
    output_dir: str = field(default="data", metadata={
        "help": "Folder to write into (created), in ../shared/data's layout: glue/, superglue/, wikitext-2-raw/, "
                "gutenberg/, t5_spiece/, translation/, boolq/. Files already there are kept, never replaced."})
    tasks: list[str] = field(default_factory=lambda: list(ALL_SOURCES), metadata={
        "help": "What to fetch: glue, super_glue (every registered task of each), a task such as glue/rte, "
                "wikitext2, gutenberg, t5_spiece, multi30k, newstest2014, boolq_dev. Default: all of them."})
    cache_dir: Optional[str] = field(default=None, metadata={
        "help": "The datasets cache (default: HF's, ~/.cache/huggingface)."})

    def __post_init__(self):
        expand_sources(self.tasks)  # refuses an unknown name before anything is fetched


# ------------------------------------------------------------------------------------------------- hub calls
def load_hub_rows(hub_name, splits, cache_dir=None):
    """{split: rows} of a hub dataset, as `datasets` gives them (ClassLabel columns as ids)."""
    path, config = hub_name
    return {split: datasets.load_dataset(path, config, split=split, cache_dir=cache_dir).to_list() for split in splits}


def load_gutenberg_rows(ebooks, cache_dir=None):
    """{ebook number: row} of the wanted books, streaming the hub dataset until each has been seen."""
    wanted, found = set(ebooks), {}
    for row in datasets.load_dataset(*GUTENBERG_HUB, split="train", streaming=True, cache_dir=cache_dir):
        ebook = int(json.loads(row["METADATA"])["text_id"])
        if ebook in wanted:
            found[ebook] = row
            if len(found) == len(wanted):
                break
    return found


def load_t5_tokenizer_files(cache_dir=None):
    """{file name: local path} of T5's tokenizer files, downloaded from the model hub."""
    return {name: hf_hub_download(T5_TOKENIZER_HUB, name, cache_dir=cache_dir) for name in T5_TOKENIZER_FILES}


HUB_LOADERS = {"rows": load_hub_rows, "gutenberg": load_gutenberg_rows, "t5_tokenizer": load_t5_tokenizer_files}


# ------------------------------------------------------------------------------------------------- task files
def task_folder(task_vals, out):
    benchmark = task_vals["name"].split("/")[0]
    return Path(out) / BENCHMARK_FOLDERS[benchmark] / task_vals["data_dir_name"]


def hub_splits(task_vals):
    """The task's hub splits, each with its official file name."""
    splits = [task_vals["train_split"], *task_vals["validation_splits"], *task_vals["test_splits"]]
    return {split: task_vals["data_files"][split] for split in splits if split is not None}


def source_files(source, out=""):
    """{split, book or file name: out / path} of the files a source writes, from the tables alone (no hub call)."""
    files = {"wikitext2": {split: f"{WIKITEXT_FOLDER}/{name}" for split, name in WIKITEXT_FILES.items()},
             "gutenberg": {name: f"gutenberg/{name}" for name in GUTENBERG_BOOKS},
             "t5_spiece": {name: f"{T5_TOKENIZER_FOLDER}/{name}" for name in T5_TOKENIZER_FILES},
             **{name: {path: path for path in spec.files} for name, spec in fetch_extra_data.SOURCES.items()}}
    if source not in files:
        task_vals = get_task_vals(*source.split("/"))
        files[source] = {split: task_folder(task_vals, "") / name for split, name in hub_splits(task_vals).items()}
    return {key: Path(out) / path for key, path in files[source].items()}


def written_files(names=ALL_SOURCES):
    """Every path (relative to --output_dir) that fetching the --tasks names writes; by default all sources."""
    return [path.as_posix() for source in expand_sources(names) for path in source_files(source).values()]


def is_unlabelled(value):
    return not isinstance(value, bool) and value == NO_LABEL


def file_label(task_vals, value):
    """The label as the official file writes it: the registry's file_label_map read backwards (a float or text as
    it is where the task has none)."""
    to_file = {label: raw for raw, label in (task_vals.get("file_label_map") or {}).items()}
    return to_file.get(value, value)


def tsv_field(value):
    return TSV_BREAKS.sub(" ", str(value))


def glue_tsv_lines(task_vals, split, rows):
    """One GLUE split as the official TSV's (header, lines): the file's column names (file_column_map read
    backwards), the hub's idx as "index" (the leaderboard files key rows by it), no label column in a test split; a
    header-less file (CoLA train/dev) gets its columns in the official order, those the hub lacks empty."""
    label = task_vals["label_column_name"]
    labelled = any(not is_unlabelled(row[label]) for row in rows)
    to_file = {ours: theirs for theirs, ours in task_vals["file_column_map"].items()}
    records = []
    for row in rows:
        record = {"index": row["idx"]} if "idx" in row else {}
        for column, value in row.items():
            if column == label and labelled:
                record[to_file.get(column, column)] = file_label(task_vals, value)
            elif column not in (label, "idx"):
                record[to_file.get(column, column)] = value
        records.append(record)
    positional = task_vals["tsv_columns"].get(split)
    columns = list(positional or (records[0] if records else []))
    header = [] if positional else ["\t".join(columns) + "\n"]
    return header, ["\t".join(tsv_field(record.get(column, "")) for column in columns) + "\n" for record in records]


def superglue_row(task_vals, row):
    """A flat SuperGLUE hub row as the official jsonl writes it: the same fields, the label as the file's text."""
    label = task_vals["label_column_name"]
    record = {key: value for key, value in row.items() if key != label}
    if not is_unlabelled(row[label]):
        record[label] = file_label(task_vals, row[label])
    return record


def nest_multirc(task_vals, rows):
    """One official row per paragraph: its questions, each with its answers (and their labels)."""
    paragraphs = {}
    for row in rows:
        idx = row["idx"]
        paragraph = paragraphs.setdefault(idx["paragraph"], {"idx": idx["paragraph"], "text": row["paragraph"],
                                                             "questions": {}})
        question = paragraph["questions"].setdefault(idx["question"], {"question": row["question"],
                                                                       "idx": idx["question"], "answers": []})
        answer = {"text": row["answer"], "idx": idx["answer"]}
        if not is_unlabelled(row["label"]):
            answer["label"] = file_label(task_vals, row["label"])
        question["answers"].append(answer)
    return [{"idx": p["idx"], "passage": {"text": p["text"], "questions": list(p["questions"].values())}}
            for p in paragraphs.values()]


def entity_spans(text, entities):
    """ReCoRD's entity spans (end inclusive) for entity texts: where each first occurs in the passage."""
    spans = []
    for entity in entities:
        start = text.find(entity)
        if start < 0:
            raise ValueError(f"ReCoRD entity {entity!r} is not in its passage")
        spans.append({"start": start, "end": start + len(entity) - 1})
    return spans


def nest_record(task_vals, rows):
    """One official row per passage: its entities as spans, its queries with their answers (none in test)."""
    passages = {}
    for row in rows:
        idx = row["idx"]
        passage = passages.setdefault(idx["passage"], {
            "idx": idx["passage"], "passage": {"text": row["passage"],
                                               "entities": entity_spans(row["passage"], row["entities"])},
            "qas": []})
        qa = {"query": row["query"], "idx": idx["query"]}
        if row["answers"]:
            qa["answers"] = [{"text": answer} for answer in row["answers"]]
        passage["qas"].append(qa)
    return list(passages.values())


def nest_wsc(task_vals, rows):
    """The official rows hold the spans under "target" and the label as true/false."""
    records = []
    for row in rows:
        record = {"text": row["text"], "target": {key: row[key] for key in WSC_SPAN_KEYS}, "idx": row["idx"]}
        if not is_unlabelled(row["label"]):
            record["label"] = bool(row["label"])
        records.append(record)
    return records


NESTED_ROWS = {"multirc": nest_multirc, "record": nest_record, "wsc_simple": nest_wsc}


def superglue_jsonl_lines(task_vals, split, rows):
    nest = NESTED_ROWS.get(task_vals.get("row_format"))
    records = nest(task_vals, rows) if nest else [superglue_row(task_vals, row) for row in rows]
    # ASCII with \u escapes, as the official files: a raw U+2028 or U+0085 would end the line for str.splitlines().
    return [], [json.dumps(record) + "\n" for record in records]


def task_file_lines(task_vals, split, rows):
    """(header, lines) of one official task file, from the hub's rows of its split."""
    to_lines = glue_tsv_lines if task_vals["file_format"] == "tsv" else superglue_jsonl_lines
    return to_lines(task_vals, split, rows)


# ------------------------------------------------------------------------------------------------- writing
Fetched = collections.namedtuple("Fetched", ["path", "rows", "kept"])  # rows: data lines written, else None


def write_lines(path, header, lines):
    """Writes a file atomically; returns what it wrote."""
    with atomic_write(path) as handle:
        handle.writelines(header + lines)
    return Fetched(path, len(lines), False)


def kept(path):
    return Fetched(path, None, True)


def from_hub(source, load, *args):
    """A loader's result; a hub that cannot be reached (or HF_*_OFFLINE set) is one line naming the source."""
    try:
        return load(*args)
    except (OSError, ConnectionError) as err:
        raise UsageError(f"cannot fetch {source} from the hub ({str(err).splitlines()[0] or type(err).__name__}); "
                         "this needs internet, with HF_HUB_OFFLINE and HF_DATASETS_OFFLINE unset") from None


def fetch_task(name, out, loaders, cache_dir=None):
    """A task's official files, each split's from the hub unless its file is there."""
    task_vals = get_task_vals(*name.split("/"))
    files = source_files(name, out)
    todo = [split for split, path in files.items() if not path.exists()]
    rows = from_hub(name, loaders["rows"], task_vals["hub_name"], todo, cache_dir) if todo else {}
    return [write_lines(path, *task_file_lines(task_vals, split, rows[split])) if split in rows else kept(path)
            for split, path in files.items()]


def fetch_wikitext(out, loaders, cache_dir=None):
    """WikiText-2 (raw) under its zip's file names; a hub row is a line (an empty line is "")."""
    files = source_files("wikitext2", out)
    todo = [split for split, path in files.items() if not path.exists()]
    rows = from_hub("wikitext2", loaders["rows"], WIKITEXT_HUB, todo, cache_dir) if todo else {}
    return [write_lines(path, [], [row["text"].rstrip("\n") + "\n" for row in rows[split]]) if split in rows
            else kept(path) for split, path in files.items()]


def fetch_gutenberg(out, loaders, cache_dir=None):
    """The books of NLTK's selection, one text file each; all or none (a missing or mismatched book is refused)."""
    files = source_files("gutenberg", out)
    todo = [name for name, path in files.items() if not path.exists()]
    wanted = [GUTENBERG_BOOKS[name][0] for name in todo]
    books = from_hub("gutenberg", loaders["gutenberg"], wanted, cache_dir) if todo else {}
    for name in todo:
        ebook, title_word = GUTENBERG_BOOKS[name]
        title = json.loads(books[ebook]["METADATA"]).get("title", "") if ebook in books else None
        if title is None or title_word.lower() not in title.lower():
            found = "not found" if title is None else f"is {title!r}"
            raise UsageError(f"gutenberg: ebook {ebook} ({name}) {found} in {GUTENBERG_HUB[0]}; fetch the rest with "
                             f"--tasks {' '.join(source for source in ALL_SOURCES if source != 'gutenberg')}")
    return [write_lines(path, [], books[GUTENBERG_BOOKS[name][0]]["TEXT"].splitlines(keepends=True)) if name in todo
            else kept(path) for name, path in files.items()]


def fetch_t5_tokenizer(out, loaders, cache_dir=None):
    """T5's SentencePiece model and fast tokenizer file, copied from the hub's cache."""
    files = source_files("t5_spiece", out)
    todo = [name for name, path in files.items() if not path.exists()]
    downloaded = from_hub("t5_spiece", loaders["t5_tokenizer"], cache_dir) if todo else {}
    for name in todo:
        with atomic_write(files[name], "wb") as handle, open(downloaded[name], "rb") as source:
            shutil.copyfileobj(source, handle)
    return [Fetched(path, None, name not in todo) for name, path in files.items()]


def fetch_extra(source, out, loaders, cache_dir=None):
    """A source of scripts/fetch_extra_data.py: each hub split it reads, once one of its files is missing."""
    spec, files = fetch_extra_data.SOURCES[source], source_files(source, out)
    todo = [name for name, path in files.items() if not path.exists()]
    lines = spec.to_lines(*[from_hub(source, loaders["rows"], hub_name, [split], cache_dir)[split]
                            for hub_name, split in spec.hub_splits]) if todo else {}
    return [write_lines(path, [], lines[name]) if name in todo else kept(path) for name, path in files.items()]


FETCHERS = {"wikitext2": fetch_wikitext, "gutenberg": fetch_gutenberg, "t5_spiece": fetch_t5_tokenizer,
            **{source: functools.partial(fetch_extra, source) for source in fetch_extra_data.SOURCES}}


def fetch(sources, output_dir, loaders=None, cache_dir=None):
    """Fetches every source into output_dir; returns a Fetched per file, in source order."""
    loaders = loaders or HUB_LOADERS
    out = Path(output_dir)
    refuse_a_file_in_the_way(out)  # folders are made as their first file is written: a failed fetch leaves none
    results = []
    for source in sources:
        fetcher = FETCHERS.get(source)
        with creating_output_dir(out):
            results += fetcher(out, loaders, cache_dir) if fetcher else fetch_task(source, out, loaders, cache_dir)
        logger.info("%s: done", source)
    return results


def report(results, out):
    """One line per file (rows written, or kept), then the totals."""
    lines = [f"{result.path.relative_to(out)}  " + ("kept (already there)" if result.kept else "written" if
                                                    result.rows is None else f"{result.rows:,} rows")
             for result in results]
    written = sum(not result.kept for result in results)
    return "\n".join(lines + [f"{written} files written, {len(results) - written} kept, in {out}"])


def main(argv=None, loaders=None):
    # 1. Flags
    (args,) = parsing.parse_flags((FetchArguments,), sys.argv[1:] if argv is None else argv)
    # 2. Logging
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    # 3. Fetch, then say what is where
    results = fetch(expand_sources(args.tasks), args.output_dir, loaders, args.cache_dir)
    print(report(results, Path(args.output_dir)))
    return results


if __name__ == "__main__":
    cli.run_cli(main)  # UsageError -> one `error: ...` line on stderr, exit code 2
