"""scripts/fetch_data.py without the hub: rows the project reads from official files (../shared/data and the SuperGLUE
fixtures), put in the shape the hub gives them, go through the writers `make data` uses; the project's readers then
read the written folder back to the same T5 examples. The hub calls are replaced by loaders that return those rows.
Last, the fetch writes every data path that tests, benches and configs read (parsed from their source)."""
import ast
import contextlib
import difflib
import io
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from absl.testing import absltest, parameterized

from constants import DATASET_VALS
from scripts import fetch_data, fetch_extra_data
from t5kit import cli
from t5kit.config import parsing
from t5kit.config.finetune_arguments import FineTuneDataArguments
from t5kit.data import task_sources, task_splits
from t5kit.data.superglue_formats import FILE_ROWS
from t5kit.data.task_format import get_task_vals, text_columns
from tests.helpers import REPO, SHARED_DATA, require

FIXTURES = REPO / "tests" / "fixtures" / "superglue"


def split_role(task_vals, split):
    """Test splits are read as for prediction (unlabelled rows kept); the others as for evaluation (every labelled
    row kept: the training role would drop WSC's non-referents)."""
    return "predict" if split in task_vals["test_splits"] else "eval"


def read_task(task_vals, split, data_dir):
    """(rows in hub form, T5 examples, malformed lines, lines that give no example) of one split of an official
    folder, as fine-tuning reads it."""
    plan = task_splits.SplitPlan(task_vals, split, split_role(task_vals, split), task_vals["name"])
    benchmark, task = task_vals["name"].split("/")
    args = FineTuneDataArguments(dataset_name=task, benchmark=benchmark, data_dir=[str(data_dir)])
    raw, columns, where, from_files = task_sources.read_split(plan, args.task_data())
    rows, malformed, _ = task_sources.convert_rows(plan, raw, columns, where, from_files)
    examples, unformatted, _ = task_splits.format_examples(plan, rows)
    return [row for _, row in rows], [example for _, example in examples], malformed, unformatted


def as_hub_row(task_vals, position, row):
    """A row read from an official file in the columns the hub has: the task's text columns under the hub's names,
    its label as the registry id, and idx. MultiRC, ReCoRD and WSC rows are flattened as the hub flattens them
    already; SuperGLUE's hub keeps the official names (AX-b's sentence1/sentence2), GLUE's are the registry's."""
    if task_vals.get("row_format") in FILE_ROWS:
        return row
    label = task_vals["label_column_name"]
    to_hub = {} if task_vals["name"].startswith("glue/") else \
        {ours: theirs for theirs, ours in task_vals["file_column_map"].items() if ours != label}
    hub_row = {to_hub.get(column, column): row[column] for column in [*text_columns(task_vals), label]}
    return dict(hub_row, idx=int(row.get("index", row.get("idx", position))))


def hub_rows(task_vals, split, data_dir):
    rows, _, _, _ = read_task(task_vals, split, data_dir)
    return [as_hub_row(task_vals, position, row) for position, row in enumerate(rows)]


def has_file(task_vals, split, data_dir):
    return (Path(data_dir) / task_vals["data_files"][split]).is_file()


def rows_loader(task_vals, data_dir, calls=None):
    """A stand-in for fetch_data.load_hub_rows: the task's rows read from data_dir, put in the hub's shape (no rows
    for a split data_dir lacks, such as QNLI's train.tsv)."""
    def load(hub_name, splits, cache_dir=None):
        assert hub_name == task_vals["hub_name"], hub_name
        if calls is not None:
            calls.append(list(splits))
        return {split: hub_rows(task_vals, split, data_dir) if has_file(task_vals, split, data_dir) else []
                for split in splits}
    return load


def official_tasks(benchmark, base):
    """(task, task) for every task of the benchmark with an official file in the folder (named parameters)."""
    return [(task, task) for task, task_vals in DATASET_VALS[benchmark].items()
            if any(has_file(task_vals, split, base / task_vals["data_dir_name"])
                   for split in fetch_data.hub_splits(task_vals))]


GLUE_TASKS = official_tasks("glue", SHARED_DATA / "glue")
SUPERGLUE_SHARED_TASKS = official_tasks("super_glue", SHARED_DATA / "superglue")
SUPERGLUE_FIXTURE_TASKS = official_tasks("super_glue", FIXTURES)


@pytest.mark.slow  # reads and rewrites the real GLUE and SuperGLUE files
class RoundTripTest(parameterized.TestCase):
    """Official file -> project rows -> hub-shaped rows -> fetch_data's writer -> the project reads the same."""

    def round_trip(self, benchmark, task, source):
        """Every split the source folder holds; returns their names."""
        task_vals = get_task_vals(benchmark, task)
        out = Path(self.create_tempdir().full_path)
        fetch_data.fetch([f"{benchmark}/{task}"], out, {"rows": rows_loader(task_vals, source)})
        splits = [split for split in fetch_data.hub_splits(task_vals) if has_file(task_vals, split, source)]
        for split in splits:
            _, before, _, unformatted = read_task(task_vals, split, source)
            _, after, malformed, unformatted_after = read_task(task_vals, split, fetch_data.task_folder(task_vals, out))
            self.assertEmpty(malformed, split)
            self.assertLen(unformatted_after, len(unformatted), split)  # WSC rows whose pronoun index is off
            self.assertNotEmpty(before, split)
            self.assertEqual([(e.input, e.target) for e in after], [(e.input, e.target) for e in before], split)
            # Leaderboard files key predictions by idx: it survives where the official file has one.
            self.assertEqual([str(a.meta["idx"]) for a, b in zip(after, before) if b.meta["idx"] is not None],
                             [str(b.meta["idx"]) for b in before if b.meta["idx"] is not None], split)
        return splits

    @parameterized.named_parameters(*GLUE_TASKS)
    def test_glue(self, task):
        self.round_trip("glue", task, require(f"glue/{DATASET_VALS['glue'][task]['data_dir_name']}"))

    @parameterized.named_parameters(*SUPERGLUE_SHARED_TASKS)
    def test_superglue_shared_data(self, task):
        self.round_trip("super_glue", task, require(f"superglue/{DATASET_VALS['super_glue'][task]['data_dir_name']}"))

    @parameterized.named_parameters(*SUPERGLUE_FIXTURE_TASKS)
    def test_superglue_fixtures(self, task):
        self.round_trip("super_glue", task, FIXTURES / DATASET_VALS["super_glue"][task]["data_dir_name"])

    def test_the_round_trips_cover_the_formats(self):
        """Header-less TSV (CoLA), renamed columns and a BOM (MRPC, AX), scores (STS-B), word labels, test splits
        without labels, flat and nested jsonl: every GLUE task with a file here, every SuperGLUE task."""
        require("glue"), require("superglue")
        self.assertContainsSubset(["cola", "sst2", "mrpc", "stsb", "qnli", "rte", "wnli", "ax"],
                                  [task for task, _ in GLUE_TASKS])
        self.assertEqual({task for task, _ in SUPERGLUE_SHARED_TASKS + SUPERGLUE_FIXTURE_TASKS},
                         set(DATASET_VALS["super_glue"]))


class WrittenFilesTest(parameterized.TestCase):
    """What the writers put in the files, on a few hub rows as `datasets` gives them."""

    def test_glue_test_split_has_no_label_and_an_index(self):
        rows = [{"sentence1": "A\tcat.", "sentence2": "A dog.", "label": -1, "idx": 7}]
        header, lines = fetch_data.glue_tsv_lines(get_task_vals("glue", "rte"), "test", rows)
        self.assertEqual((header, lines), (["index\tsentence1\tsentence2\n"], ["7\tA cat.\tA dog.\n"]))

    def test_glue_labels_and_columns_as_the_file_writes_them(self):
        rows = [{"premise": "P", "hypothesis": "H", "label": 2, "idx": 0}]
        header, lines = fetch_data.glue_tsv_lines(get_task_vals("glue", "mnli"), "train", rows)
        self.assertEqual((header, lines), (["index\tsentence1\tsentence2\tgold_label\n"],
                                           ["0\tP\tH\tcontradiction\n"]))

    @parameterized.named_parameters(("boolq", "boolq", 1, True), ("cb", "cb", 2, "neutral"), ("copa", "copa", 1, 1))
    def test_superglue_labels(self, task, label, expected):
        _, lines = fetch_data.superglue_jsonl_lines(get_task_vals("super_glue", task), "train",
                                                     [{"idx": 0, "label": label}])
        written = json.loads(lines[0])["label"]
        self.assertEqual((written, type(written)), (expected, type(expected)))  # true, not 1


class FetchTest(parameterized.TestCase):
    """fetch(): folders in ../shared/data's layout, a report of what was written, nothing replaced on a re-run."""

    def test_rerun_keeps_every_file_and_asks_the_hub_nothing(self):
        task_vals = get_task_vals("glue", "rte")
        source, calls = require("glue/RTE"), []
        out = Path(self.create_tempdir().full_path) / "data"
        loaders = {"rows": rows_loader(task_vals, source, calls)}
        first = fetch_data.fetch(["glue/rte"], out, loaders)
        self.assertEqual(calls, [["train", "validation", "test"]])
        self.assertEqual([(r.path.relative_to(out).as_posix(), r.rows) for r in first],
                         [("glue/RTE/train.tsv", 2490), ("glue/RTE/dev.tsv", 277), ("glue/RTE/test.tsv", 3000)])
        (out / "glue/RTE/dev.tsv").write_text("mine\n")
        (out / "glue/RTE/test.tsv").unlink()
        second = fetch_data.fetch(["glue/rte"], out, loaders)
        self.assertEqual(calls[1:], [["test"]])
        self.assertEqual([r.kept for r in second], [True, True, False])
        self.assertEqual((out / "glue/RTE/dev.tsv").read_text(), "mine\n")
        report = fetch_data.report(second, out).splitlines()
        self.assertEqual(report, ["glue/RTE/train.tsv  kept (already there)", "glue/RTE/dev.tsv  kept (already there)",
                                  "glue/RTE/test.tsv  3,000 rows", f"1 files written, 2 kept, in {out}"])

    def test_wikitext_lines_round_trip(self):
        lines = require("wikitext-2-raw/wiki.test.raw").read_text(encoding="utf-8").splitlines()
        rows = [{"text": line + "\n"} for line in lines] + [{"text": ""}]  # the hub's empty line is ""
        out = Path(self.create_tempdir().full_path)
        loaders = {"rows": lambda hub_name, splits, cache_dir=None: {split: rows for split in splits}}
        results = fetch_data.fetch(["wikitext2"], out, loaders)
        self.assertEqual([r.path.name for r in results], ["wiki.train.raw", "wiki.valid.raw", "wiki.test.raw"])
        self.assertEqual((out / "wikitext-2-raw/wiki.test.raw").read_text(encoding="utf-8").split("\n"),
                         [*lines, "", ""])
        self.assertEqual(results[-1].rows, len(lines) + 1)

    def gutenberg_loader(self, text, asked, titles=None):
        """A stand-in for load_gutenberg_rows: every wanted book, its TEXT led by its number, titled as expected."""
        titles = titles or {ebook: word for ebook, word in fetch_data.GUTENBERG_BOOKS.values()}

        def load(ebooks, cache_dir=None):
            asked.extend(ebooks)
            return {ebook: {"TEXT": f"{ebook}\n{text}", "METADATA": json.dumps({"text_id": ebook,
                                                                                "title": f"The {titles[ebook]}"})}
                    for ebook in ebooks}
        return load

    def test_gutenberg_books_by_ebook_number(self):
        text = require("gutenberg/austen-persuasion.txt").read_text(encoding="utf-8")
        asked = []
        out = Path(self.create_tempdir().full_path)
        results = fetch_data.fetch(["gutenberg"], out, {"gutenberg": self.gutenberg_loader(text, asked)})
        self.assertEqual(sorted(asked), sorted(ebook for ebook, _ in fetch_data.GUTENBERG_BOOKS.values()))
        self.assertEqual(sorted(p.name for p in (out / "gutenberg").iterdir()), sorted(fetch_data.GUTENBERG_BOOKS))
        self.assertEqual((out / "gutenberg/austen-persuasion.txt").read_text(encoding="utf-8"), f"105\n{text}")
        self.assertEqual(len(results), 13)

    def test_a_book_under_another_title_is_refused_and_nothing_is_written(self):
        out = Path(self.create_tempdir().full_path) / "data"
        titles = {ebook: word for ebook, word in fetch_data.GUTENBERG_BOOKS.values()} | {2263: "Coriolanus"}
        with self.assertRaisesRegex(fetch_data.UsageError, r"ebook 2263 \(shakespeare-caesar.txt\) is 'The "
                                                           "Coriolanus' in sedthh/gutenberg_english"):
            fetch_data.fetch(["gutenberg"], out, {"gutenberg": self.gutenberg_loader("text", [], titles)})
        self.assertFalse(out.exists())

    def test_a_book_the_hub_lacks_is_one_line_and_nothing_is_written(self):
        out = Path(self.create_tempdir().full_path) / "data"
        with self.assertRaisesRegex(fetch_data.UsageError, r"gutenberg: ebook 158 \(austen-emma.txt\) not found in"):
            fetch_data.fetch(["gutenberg"], out, {"gutenberg": lambda ebooks, cache_dir=None: {}})
        self.assertFalse(out.exists())

    def test_main_prints_each_file_with_its_rows(self):
        task_vals = get_task_vals("glue", "wnli")
        out = Path(self.create_tempdir().full_path) / "data"
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            fetch_data.main(["--tasks", "glue/wnli", "--output_dir", str(out)],
                            loaders={"rows": rows_loader(task_vals, require("glue/WNLI"))})
        self.assertEqual(stdout.getvalue().splitlines(), [
            "glue/WNLI/train.tsv  635 rows", "glue/WNLI/dev.tsv  71 rows", "glue/WNLI/test.tsv  146 rows",
            f"3 files written, 0 kept, in {out}"])

    def test_t5_tokenizer_files_are_copied_whole(self):
        source = require("t5_spiece")
        out = Path(self.create_tempdir().full_path)
        files = {name: source / name for name in fetch_data.T5_TOKENIZER_FILES}
        results = fetch_data.fetch(["t5_spiece"], out, {"t5_tokenizer": lambda cache_dir=None: files})
        self.assertEqual([(r.path.name, r.kept) for r in results], [("spiece.model", False), ("tokenizer.json", False)])
        for name in fetch_data.T5_TOKENIZER_FILES:
            self.assertEqual((out / "t5_spiece" / name).read_bytes(), (source / name).read_bytes())

    def test_unknown_task_exits_2_with_one_line(self):
        out = Path(self.create_tempdir().full_path) / "data"
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit) as stop:
            cli.run_cli(lambda: fetch_data.main(["--tasks", "glue/sst", "--output_dir", str(out)]))
        self.assertEqual(stop.exception.code, 2)
        self.assertStartsWith(stderr.getvalue(), "error: --tasks: unknown source 'glue/sst'; did you mean 'glue/sst2'")
        self.assertFalse(out.exists())

    def test_make_data_runs_the_script_online_into_data(self):
        """The one make target that must reach the hub: no HF_*_OFFLINE in its command."""
        printed = subprocess.run(["make", "-n", "data"], cwd=REPO, capture_output=True, text=True,
                                 check=True).stdout.splitlines()
        (command,) = [line for line in printed if "scripts.fetch_data" in line]
        self.assertTrue(command.endswith("-m scripts.fetch_data --output_dir data"), command)
        self.assertNotIn("OFFLINE", command)

    def test_benchmark_names_stand_for_every_registered_task(self):
        sources = fetch_data.expand_sources(["super_glue", "super_glue/rte", "wikitext2"])
        self.assertEqual(sources, [f"super_glue/{task}" for task in DATASET_VALS["super_glue"]] + ["wikitext2"])
        self.assertContainsSubset(["super_glue/axb", "super_glue/axg"], sources)


def hub_loader(rows_by_hub, asked=None):
    """A stand-in for fetch_data.load_hub_rows: {(hub_name, split): rows}, none for a split not given."""
    def load(hub_name, splits, cache_dir=None):
        if asked is not None:
            asked.extend((hub_name, split) for split in splits)
        return {split: rows_by_hub.get((hub_name, split), []) for split in splits}
    return load


def text_lines(relative_path):
    return (SHARED_DATA / relative_path).read_text(encoding="utf-8").splitlines()


class ExtraSourcesTest(parameterized.TestCase):
    """Multi30k, newstest2014 and BoolQ dev: ../shared/data's files, as hub rows, written back byte for byte."""

    def setUp(self):
        super().setUp()
        require("translation/multi30k"), require("translation/wmt14_en_de_newstest2014_tok"), require("boolq/dev.jsonl")
        self.out = Path(self.create_tempdir().full_path) / "data"

    def assert_same_bytes(self, relative_paths):
        for path in relative_paths:
            self.assertEqual((self.out / path).read_bytes(), (SHARED_DATA / path).read_bytes(), path)

    def test_multi30k_round_trip_and_a_rerun_asks_nothing(self):
        hub_name, asked, folder = DATASET_VALS["translation"]["multi30k_en_de"]["hub_name"], [], "translation/multi30k"
        rows = {(hub_name, split): [{"en": en, "de": de} for en, de in zip(text_lines(f"{folder}/{stem}.en"),
                                                                         text_lines(f"{folder}/{stem}.de"))]
                for split, stem in [("validation", "val"), ("test", "test")]}
        results = fetch_data.fetch(["multi30k"], self.out, {"rows": hub_loader(rows, asked)})
        self.assertEqual(asked, [(hub_name, "train"), (hub_name, "validation"), (hub_name, "test")])
        self.assertEqual([(r.path.relative_to(self.out).as_posix(), r.rows) for r in results], [
            ("translation/multi30k/train.en", 0), ("translation/multi30k/train.de", 0),
            ("translation/multi30k/val.en", 1014), ("translation/multi30k/val.de", 1014),
            ("translation/multi30k/test.en", 1000), ("translation/multi30k/test.de", 1000)])
        self.assert_same_bytes([f"translation/multi30k/{name}" for name in ("val.en", "val.de", "test.en", "test.de")])
        (self.out / "translation/multi30k/test.de").unlink()
        again = fetch_data.fetch(["multi30k"], self.out, {"rows": hub_loader(rows, asked)})
        self.assertEqual([r.kept for r in again], [True] * 5 + [False])
        self.assert_same_bytes(["translation/multi30k/test.de"])
        fetch_data.fetch(["multi30k"], self.out, {"rows": hub_loader({}, asked)})
        self.assertLen(asked, 6)  # all there: no hub call

    def test_newstest2014_round_trip(self):
        folder = "translation/wmt14_en_de_newstest2014_tok"
        rows = [{"translation": {"de": de, "en": en}}
                for en, de in zip(text_lines(f"{folder}/test.en"), text_lines(f"{folder}/test.de"))]
        results = fetch_data.fetch(["newstest2014"], self.out,
                                   {"rows": hub_loader({(fetch_extra_data.NEWSTEST_HUB, "test"): rows})})
        self.assertEqual([r.rows for r in results], [2737, 2737])
        self.assert_same_bytes([f"{folder}/test.en", f"{folder}/test.de"])

    def boolq_rows(self):
        """google/boolq's rows and SuperGLUE's rows of the same dev set ("title -- passage"), from the original file."""
        records = [json.loads(line) for line in text_lines("boolq/dev.jsonl")]
        rows = [{"question": r["question"], "answer": r["answer"], "passage": r["passage"]} for r in records]
        titled = [{"question": r["question"], "passage": f"{r['title']} -- {r['passage']}", "idx": i,
                   "label": int(r["answer"])} for i, r in enumerate(records)]
        return {(fetch_extra_data.BOOLQ_HUB, "validation"): rows,
                (fetch_extra_data.BOOLQ_TITLED_HUB, "validation"): titled}

    def test_boolq_dev_round_trip(self):
        results = fetch_data.fetch(["boolq_dev"], self.out, {"rows": hub_loader(self.boolq_rows())})
        self.assertEqual([(r.path.relative_to(self.out).as_posix(), r.rows) for r in results],
                         [("boolq/dev.jsonl", 3270)])
        self.assert_same_bytes(["boolq/dev.jsonl"])

    def test_boolq_rows_that_do_not_pair_up_are_refused_and_nothing_is_written(self):
        rows = self.boolq_rows()
        titled = rows[(fetch_extra_data.BOOLQ_TITLED_HUB, "validation")]
        titled[5] = dict(titled[5], question="another question")
        with self.assertRaisesRegex(fetch_data.UsageError, r"boolq_dev: validation row 5 of google/boolq \(.*\) has "
                                                           "no titled twin in aps/super_glue boolq"):
            fetch_data.fetch(["boolq_dev"], self.out, {"rows": hub_loader(rows)})
        with self.assertRaisesRegex(fetch_data.UsageError, "google/boolq has 3270 validation rows, aps/super_glue "
                                                           "boolq 3269"):
            fetch_data.fetch(["boolq_dev"], self.out, {"rows": hub_loader({
                **rows, (fetch_extra_data.BOOLQ_TITLED_HUB, "validation"): titled[1:]})})
        self.assertFalse(self.out.exists())

    def test_a_line_break_inside_a_sentence_keeps_the_files_aligned(self):
        self.assertEqual(fetch_extra_data.sentence_lines(["a\nb\u2028c", "d\n"]), ["a b c\n", "d\n"])


# ------------------------------------------------------------------------------------------------- coverage
DATA_PATH = re.compile(r"[\w.-]+(/[\w.-]+)*")
CONFIG_DATA_PATH = re.compile(re.escape(f"${{{parsing.DATA_DIR_VARIABLE}}}") + r"/([^\s]+)")


def module_constants(tree):
    """NAME = "text" at a module's top level."""
    return {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for target in node.targets if isinstance(target, ast.Name)}


def path_pattern(node, constants):
    """A regex for a path given as a literal, a module constant or an f-string (each {...} stands for text without a
    slash); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.escape(node.value)
    if isinstance(node, ast.Name) and node.id in constants:
        return re.escape(constants[node.id])
    if isinstance(node, ast.JoinedStr):
        return "".join(re.escape(part.value) if isinstance(part, ast.Constant) else "[^/]+" for part in node.values)
    return None


def joined_to_data(node, constants):
    """`SHARED_DATA / "glue" / "SST-2" / name` -> its leading known parts ("glue/SST-2"), else None."""
    parts = []
    while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        parts.insert(0, node.right)
        node = node.left
    if not (isinstance(node, ast.Name) and node.id == "SHARED_DATA"):
        return None
    known = []
    for part in parts:
        pattern = path_pattern(part, constants)
        if pattern is None:
            break
        known.append(pattern)
    return "/".join(known) or None


def read_data_paths(source, data_folders, task_names):
    """Regexes of the data paths a module reads: each require(...) argument and each SHARED_DATA / ... join. Where
    require() gets a variable (a parameter fed from a table of cases), every string of the module that names a path
    under a folder the fetch writes (glue/RTE, boolq/dev.jsonl; not a task name such as glue/rte, nor a misspelt one
    such as glue/rtee that a refusal test feeds the registry) stands for it."""
    tree = ast.parse(source)
    constants, patterns, indirect = module_constants(tree), [], False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "require" and node.args:
            pattern = path_pattern(node.args[0], constants)
            indirect |= pattern is None
            patterns += [pattern] if pattern is not None else []
        elif isinstance(node, ast.BinOp):
            patterns += [pattern] if (pattern := joined_to_data(node, constants)) else []
    if indirect:
        patterns += [re.escape(node.value) for node in ast.walk(tree) if isinstance(node, ast.Constant)
                     and isinstance(node.value, str) and DATA_PATH.fullmatch(node.value)
                     and node.value.split("/")[0] in data_folders
                     and not difflib.get_close_matches(node.value, task_names, n=1, cutoff=0.9)]
    return patterns


def config_data_paths(value):
    """The paths under ${T5_DATA_DIR} that a loaded YAML value names."""
    if isinstance(value, dict):
        return [path for item in value.values() for path in config_data_paths(item)]
    if isinstance(value, list):
        return [path for item in value for path in config_data_paths(item)]
    return [match.rstrip("/") for match in CONFIG_DATA_PATH.findall(value)] if isinstance(value, str) else []


def written_files_and_folders():
    files = fetch_data.written_files()
    return set(files) | {parent.as_posix() for path in files for parent in Path(path).parents if parent != Path(".")}


TASK_NAMES = {f"{benchmark}/{task}" for benchmark, tasks in DATASET_VALS.items() for task in tasks}


class CoverageTest(parameterized.TestCase):
    """`make data` writes every file or folder that a test, a bench or a config reads from the data folder."""

    def setUp(self):
        super().setUp()
        self.written = written_files_and_folders()
        self.folders = {path.split("/")[0] for path in self.written}

    def unwritten(self, patterns):
        return sorted({p for p in patterns if not any(re.fullmatch(p, path) for path in self.written)})

    def patterns_of(self, files):
        return {path.relative_to(REPO).as_posix(): read_data_paths(path.read_text(), self.folders, TASK_NAMES)
                for path in files}

    def test_every_path_the_tests_require_is_fetched(self):
        found = self.patterns_of(sorted((REPO / "tests").rglob("*.py")))
        self.assertContainsSubset([re.escape("translation/multi30k"), re.escape("boolq/dev.jsonl"),
                                   "glue/[^/]+/train\\.tsv", re.escape("superglue/WSC")],  # literal, f-string, table
                                  [pattern for patterns in found.values() for pattern in patterns])
        self.assertEmpty({name: self.unwritten(patterns) for name, patterns in found.items()
                          if self.unwritten(patterns)})

    def test_every_path_the_benches_read_is_fetched(self):
        found = self.patterns_of(sorted((REPO / "bench").glob("*.py")))
        self.assertIn(re.escape("translation/wmt14_en_de_newstest2014_tok/test.en"), found["bench/predict.py"])
        self.assertEmpty({name: self.unwritten(patterns) for name, patterns in found.items()
                          if self.unwritten(patterns)})

    def test_every_path_the_configs_name_is_fetched(self):
        found = {path.relative_to(REPO).as_posix(): config_data_paths(yaml.safe_load(path.read_text()))
                 for path in sorted((REPO / "configs").rglob("*.yaml"))}
        self.assertEqual(found["configs/pretrain_wikitext2.yaml"], ["t5_spiece", "wikitext-2-raw/wiki.test.raw"])
        self.assertEmpty({name: [p for p in paths if p not in self.written] for name, paths in found.items()
                          if any(p not in self.written for p in paths)})

    @parameterized.named_parameters(
        ("literal", 'require("translation/something_new")', ["translation/something_new"]),
        ("fstring", 'require(f"translation/{name}.txt")', ["translation/[^/]+\\.txt"]),
        ("table", 'CASES = [("glue/rte", "glue/NEW")]\ndef t(folder):\n    require(folder)', ["glue/NEW"]),
        ("bench", 'X = SHARED_DATA / "translation" / "nope.en"', ["translation/nope\\.en"]))
    def test_a_path_the_fetch_does_not_write_is_caught(self, source, unwritten):
        patterns = read_data_paths(source, self.folders, TASK_NAMES)
        self.assertEqual([p.replace("\\", "") for p in self.unwritten(patterns)],
                         [p.replace("\\", "") for p in unwritten])


if __name__ == "__main__":
    absltest.main()
