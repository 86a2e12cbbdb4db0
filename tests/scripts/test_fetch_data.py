"""scripts/fetch_data.py without the hub: rows the project reads from official files (../shared/data and the SuperGLUE
fixtures), put in the shape the hub gives them, go through the writers `make data` uses; the project's readers then
read the written folder back to the same T5 examples. The hub calls are replaced by loaders that return those rows."""
import contextlib
import io
import json
import subprocess
from pathlib import Path

from absl.testing import absltest, parameterized

from constants import DATASET_VALS
from scripts import fetch_data
from t5kit import cli
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
    raw, columns, where, from_files = task_sources.read_split(plan, args, None)
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


if __name__ == "__main__":
    absltest.main()
