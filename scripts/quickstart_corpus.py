"""Build a small offline English corpus from the Python standard library's own documentation, for `make quickstart`.

    python -m scripts.quickstart_corpus --output_dir data/quickstart      # what make quickstart runs
    python -m scripts.quickstart_corpus --output_dir /tmp/corpus --max_documents 2000 --min_chars 120

Sources, all already on any machine with Python: docstrings of the stdlib's .py sources (read with `ast`, nothing is
imported or run), docstrings of its C modules (imported, except those with import side effects), and
`pydoc_data.topics` (the language reference text behind `help()`). Each prose paragraph is one document; code
(doctest prompts, statements, reST underlines, text that does not end a sentence) and short paragraphs are dropped,
and duplicates are kept once. Output: train.txt and
validation.txt, documents separated by a blank line (`load_dataset("text", sample_by="paragraph")` reads one
document per paragraph). Sorted traversal makes the files identical on every run with the same Python. A re-run
leaves the files if both are this script's (their SHA-256 is in .quickstart_corpus.json, written with them) and
refuses to touch a train.txt or validation.txt it did not write.
"""
import ast
import importlib.machinery
import importlib.util
import inspect
import json
import logging
import os
import re
import sys
import sysconfig
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from t5kit import cli
from t5kit.config import parsing
from t5kit.digests import file_sha256
from t5kit.errors import UsageError
from t5kit.outputs.run_folder import creating_output_dir, refuse_a_file_in_the_way

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation")
MARKER = ".quickstart_corpus.json"  # {file name: sha256} of the files this script wrote: tells its files from a user's
DEFAULT_MIN_CHARS = 80  # about one sentence; shorter docstrings are mostly "Return the foo." one-liners
VALIDATION_EVERY = 20  # every 20th document goes to validation: a deterministic 95/5 split by document
SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}  # test suites: terse, code-heavy text
# C modules whose import has side effects: readline may write terminal escape codes, _tkinter loads Tcl/Tk.
SKIP_C_MODULES = {"readline", "_tkinter"}
C_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)  # .cpython-311-x86_64-linux-gnu.so, .pyd, ...
MIN_LETTER_FRACTION = 0.8  # letters + spaces per character; signatures and tables fall below this
CODE_LINE = re.compile(
    r"^\s*(>>>|\.\.\.|\$ |@\w|(def|class) \w+\s*[(:]|(import \w[\w.]*|from [\w.]+ import \w+)\s*$)"  # doctest, shell
    r"|^\s*[\w.\[\]]+\s*[-+*/|&]?=[^=]"  # assignment
    r"|[;{}]\s*$"
)
SENTENCE_END = re.compile(r"[.!?:][\"')\]]*$")  # prose paragraphs end a sentence; code and tables rarely do


@dataclass
class CorpusArguments:
    output_dir: Optional[str] = field(
        default=None, metadata={"help": "Folder for train.txt and validation.txt (created). Required."}
    )
    min_chars: int = field(
        default=DEFAULT_MIN_CHARS,
        metadata={"help": "Drop paragraphs shorter than this many characters (after collapsing whitespace)."},
    )
    max_documents: Optional[int] = field(
        default=None,
        metadata={"help": f"Keep only the first N documents in sorted module order (default: all). At least "
                          f"{VALIDATION_EVERY}, so validation gets one."},
    )

    def __post_init__(self):
        if not self.output_dir:
            raise UsageError("--output_dir is required: the folder to write train.txt and validation.txt to")
        if self.min_chars < 1:
            raise UsageError(f"--min_chars {self.min_chars} must be >= 1")
        if self.max_documents is not None and self.max_documents < VALIDATION_EVERY:
            raise UsageError(f"--max_documents {self.max_documents} leaves validation empty; use at least "
                             f"{VALIDATION_EVERY}")


def read_source_texts(stdlib_dir):
    """Docstrings and comment blocks of every stdlib .py file outside test folders, in sorted file order."""
    texts = []
    for path in sorted(Path(stdlib_dir).rglob("*.py")):
        if SKIP_DIRS & set(path.relative_to(stdlib_dir).parts):
            continue
        source = path.read_bytes()
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):  # a file this Python cannot parse, e.g. a Python 2 fixture
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                texts.append(ast.get_docstring(node, clean=True) or "")
        texts.append(read_comments(source.decode("utf-8", errors="replace")))
    return texts


def read_comments(source):
    """Full-line comments; a bare `#` or a code line ends a paragraph, so each block reads as prose."""
    lines = []
    for line in source.splitlines():
        match = re.match(r"\s*#+(.*)$", line)
        text = match.group(1).strip() if match and not line.startswith("#!") else ""
        lines.append(text)  # "" = paragraph break in split_paragraphs
    return "\n".join(lines)


def read_c_module_docstrings():
    """Docstrings of stdlib modules written in C (builtins, math, ...), which have no .py source to parse."""
    texts = []
    for name in sorted(sys.stdlib_module_names - SKIP_C_MODULES):
        if name.startswith(("_test", "xx")):  # CPython's own test helpers
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or not (spec.origin == "built-in" or str(spec.origin).endswith(C_SUFFIXES)):
            continue
        try:
            with warnings.catch_warnings():  # audioop, nis, ...: deprecated, but their docs are still English
                warnings.simplefilter("ignore", DeprecationWarning)
                module = importlib.import_module(name)
        except ImportError:  # built without its system library
            continue
        texts.append(inspect.getdoc(module) or "")
        for obj in (vars(module)[attr] for attr in sorted(vars(module))):
            if inspect.isclass(obj) or inspect.isroutine(obj):
                texts.append(inspect.getdoc(obj) or "")
            if inspect.isclass(obj):
                texts += [inspect.getdoc(m) or "" for _, m in sorted(vars(obj).items()) if inspect.isroutine(m)]
    return texts


def read_reference_topics():
    """The Python language reference as plain text, shipped for `help()` in pydoc_data.topics."""
    from pydoc_data.topics import topics  # a dict of strings; importing runs no other code

    return [topics[key] for key in sorted(topics)]


def looks_like_code(lines):
    """Doctest, statements, reST underlines: any such line marks the paragraph as code, not prose."""
    return any(CODE_LINE.search(line) or (line.strip() and not re.search(r"\w", line)) for line in lines)


def split_paragraphs(text, min_chars):
    """Blank-line separated prose paragraphs, each on one line with whitespace collapsed."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", inspect.cleandoc(text)):
        paragraph = " ".join(block.split())
        if len(paragraph) < min_chars or looks_like_code(block.splitlines()) or not SENTENCE_END.search(paragraph):
            continue
        letters = sum(c.isalpha() or c == " " for c in paragraph)
        if letters >= MIN_LETTER_FRACTION * len(paragraph):
            paragraphs.append(paragraph)
    return paragraphs


def collect_documents(min_chars=DEFAULT_MIN_CHARS, max_documents=None, source_dir=None):
    """Prose paragraphs, deduplicated in first-seen order; deterministic for one Python build.

    `source_dir` (default: the stdlib) is the folder whose .py files are read; tests pass one package for speed.
    """
    texts = read_source_texts(source_dir or sysconfig.get_paths()["stdlib"]) + read_c_module_docstrings()
    texts += read_reference_topics()
    documents = list(dict.fromkeys(p for text in texts for p in split_paragraphs(text, min_chars)))
    if len(documents) < VALIDATION_EVERY:
        raise UsageError(f"only {len(documents)} documents have --min_chars {min_chars} characters; lower it")
    return documents[:max_documents]


def split_documents(documents):
    """Deterministic 95/5 split by document; texts are unique, so the splits are disjoint."""
    validation = documents[VALIDATION_EVERY - 1::VALIDATION_EVERY]
    train = [doc for i, doc in enumerate(documents) if (i + 1) % VALIDATION_EVERY]
    return {"train": train, "validation": validation}


def write_text(path, documents):
    """One document per paragraph; written to a temp file and renamed, so a crash leaves no partial file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def existing_corpus(out, paths):
    """True if both files are this script's; raises if any existing one is not (it may be the user's data)."""
    try:
        written = json.loads((out / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # no marker (or a garbled one): nothing here is known to be ours
        written = {}
    for path in paths.values():
        if os.path.lexists(path) and not (path.is_file() and written.get(path.name) == file_sha256(path)):
            raise UsageError(f"--output_dir {out}: {path.name} was not written by quickstart_corpus.py; move it "
                             "away or pass another --output_dir")
    return all(path.exists() for path in paths.values())


def build_corpus(output_dir, min_chars=DEFAULT_MIN_CHARS, max_documents=None):
    """Writes OUTPUT_DIR/{train,validation}.txt unless both are already this script's; returns split -> path."""
    out = Path(output_dir)
    paths = {split: out / f"{split}.txt" for split in SPLITS}
    refuse_a_file_in_the_way(out)  # before the slow collection
    if existing_corpus(out, paths):
        logger.info("corpus already in %s, leaving it (delete the files to rebuild)", out)
        return paths
    start = time.time()
    splits = split_documents(collect_documents(min_chars, max_documents))
    with creating_output_dir(out):
        out.mkdir(parents=True, exist_ok=True)
    for split, path in paths.items():
        write_text(path, splits[split])
        logger.info("%s: %d documents, %d characters (%.1f MB) -> %s", split, len(splits[split]),
                    sum(map(len, splits[split])), path.stat().st_size / 1e6, path)
    # Written last: a build that stops early leaves files without a marker, which a re-run refuses, not trusts.
    marker = json.dumps({path.name: file_sha256(path) for path in paths.values()}, indent=1)
    write_text(out / MARKER, [marker])
    logger.info("built the corpus from Python %s's standard library in %.1f s", sys.version.split()[0],
                time.time() - start)
    return paths


def main(argv=None):
    # 1. Flags
    (args,) = parsing.parse_flags((CorpusArguments,), sys.argv[1:] if argv is None else argv)
    # 2. Logging
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    logger.info("flags: %s", args)
    # 3. Corpus
    return build_corpus(args.output_dir, args.min_chars, args.max_documents)


if __name__ == "__main__":
    cli.run_cli(main)  # UsageError -> one `error: ...` line on stderr, exit code 2
