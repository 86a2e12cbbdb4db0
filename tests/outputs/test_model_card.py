"""outputs/model_card.py: README.md in the output folder of a fine-tuning and a pre-training run is a Hugging Face
model card: its YAML metadata parses back with huggingface_hub, its numbers are metrics.json's, it renders as
Markdown, and its usage snippet runs."""
import contextlib
import io
import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
import yaml
from absl.testing import absltest, parameterized
from huggingface_hub import ModelCard
from markdown_it import MarkdownIt

from t5kit.data import objectives
from t5kit.outputs import pretraining_card
from t5kit.specs import ObjectiveSpec
from tests.helpers import fine_tune, pre_train, require, tiny_flags, tiny_run_flags

FINE_TUNE_SECTIONS = ["Results", "Model", "Data", "Objective", "Training", "Training results", "How to use",
                      "Reproduce", "Framework versions"]


def python_block(card_text):
    return re.search(r"```python\n(.*?)```", card_text, flags=re.S).group(1)


def run_snippet(code):
    """Runs a card's usage snippet as a user would paste it; returns what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "<model card>", "exec"), {})  # our own generated snippet
    return printed.getvalue()


def rendered_tokens(card_text):
    """markdown-it's tokens of the card body (GitHub-style tables on, as the hub renders them)."""
    body = card_text.split("\n---\n", 1)[1]
    return MarkdownIt("commonmark").enable("table").parse(body)


class CardTestCase(parameterized.TestCase):
    """Runs once per class into a temporary folder; the tests read its README.md and metrics.json."""

    @classmethod
    def run_into(cls, out):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # One torch thread, as helpers.OneThreadTestCase: two threads on a shared 2-core machine run slower.
        cls.threads = torch.get_num_threads()
        torch.set_num_threads(1)
        cls.tmp = Path(tempfile.mkdtemp())
        cls.out = cls.tmp / "run"
        cls.run_into(cls.out)
        cls.text = (cls.out / "README.md").read_text()
        cls.card = ModelCard.load(cls.out / "README.md")
        cls.metrics = json.loads((cls.out / "metrics.json").read_text())

    @classmethod
    def tearDownClass(cls):
        torch.set_num_threads(cls.threads)
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def test_metadata_is_the_hub_format(self):
        data = self.card.data
        self.assertEqual((data.library_name, data.pipeline_tag), ("transformers", "text2text-generation"))
        self.assertContainsSubset(["t5", "text2text-generation", "t5kit"], data.tags)
        self.assertEqual(data.model_name, "run")
        self.assertTrue(self.text.startswith("---\n"))

    def test_renders_as_markdown_without_raw_html(self):
        tokens = rendered_tokens(self.text)
        self.assertEmpty([t for t in tokens if t.type == "html_block"])
        inline = [child for t in tokens if t.type == "inline" for child in t.children or []]
        self.assertEmpty([t.content for t in inline if t.type == "html_inline"])  # <extra_id_0> would vanish
        self.assertEqual([t.info for t in tokens if t.type == "fence"], ["python", "bash", "bash"])
        self.assertEqual([t.attrGet("src") for t in inline if t.type == "image"], ["loss_curve.png"])
        headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
        self.assertEqual(headings, ["run", *self.sections])
        self.assertGreaterEqual(len([t for t in tokens if t.type == "table_open"]), 4)


@pytest.mark.train_class  # fine-tunes in setUpClass
class FineTuneCardTest(CardTestCase):
    sections = FINE_TUNE_SECTIONS

    @classmethod
    def run_into(cls, out):
        fine_tune(tiny_flags(str(out)))

    def test_model_index_values_are_those_of_metrics_json(self):
        (result,) = self.card.data.eval_results
        self.assertEqual((result.task_type, result.dataset_type, result.dataset_config, result.dataset_split,
                          result.dataset_name, result.metric_type),
                         ("text-classification", "nyu-mll/glue", "rte", "validation", "glue/rte", "accuracy"))
        self.assertEqual(result.metric_value, self.metrics["per_task_metrics"]["rte"]["accuracy"])
        self.assertEqual(result.metric_value, self.metrics["eval_accuracy"])
        self.assertEqual(self.card.data.datasets, ["nyu-mll/glue"])

    def test_the_body_shows_the_same_numbers(self):
        rte = self.metrics["per_task_metrics"]["rte"]
        self.assertIn(f"| glue/rte | validation | accuracy | {rte['accuracy']:.4f} |", self.text)
        self.assertIn(f"| glue/rte | validation | invalid_rate | {rte['invalid_rate']:.4f} |", self.text)
        stats = self.metrics["data"]["rte/validation"]
        self.assertIn(f"| rte/validation | {stats['rows']} | {stats['used']} | {stats['malformed']} | "
                      f"{stats['truncated_inputs']} |", self.text)
        self.assertIn(f"| parameters | {self.metrics_parameters():,} (1.07M) |", self.text)

    def metrics_parameters(self):
        return yaml.safe_load((self.out / "config.yaml").read_text())["derived"]["parameters"]

    def test_the_task_is_recorded_for_predict(self):
        section = self.card.data.to_dict()["t5kit"]
        self.assertEqual((section["script"], section["tasks"], section["custom_tasks"], section["max_source_length"],
                          section["label_scoring"]), ("fine_tune_t5.py", ["glue/rte"], {}, 64, "generate"))

    def test_the_usage_snippet_runs_the_generate_call_with_the_task_prefix(self):
        code = python_block(self.text)
        self.assertIn("inputs = tokenizer(['rte sentence1: ", code)
        self.assertIn("outputs = model.generate(**inputs, max_new_tokens=", code)
        printed = run_snippet(code)
        self.assertTrue(printed.startswith("[") and printed.rstrip().endswith("]"), printed)

    def test_reproduce_names_the_command_and_the_run_record(self):
        self.assertIn(f"python fine_tune_t5.py --output_dir {self.out} --model_size t5-tiny", self.text)
        self.assertIn(f"python fine_tune_t5.py {self.out}/config.yaml --output_dir {self.out}_rerun", self.text)
        self.assertIn("- `glue/rte` (classification): input `rte sentence1: ... sentence2: ...`, target "
                      "`entailment`, `not_entailment`", self.text)


class ObjectiveTextTest(parameterized.TestCase):

    @parameterized.parameters(("word_vectors", True), ("random", False))
    def test_word_vector_embeddings_are_said(self, init, said):
        record = {"objective": "span_corruption", "init_embeddings": init}
        objective = objectives.build(ObjectiveSpec("span_corruption", input_length=64, noise_density=0.5,
                                                   mean_noise_span_length=3.0))
        text = pretraining_card.objective_text(record, objective)
        self.assertIn("50% of them in noise spans of mean length 3.0", text)
        self.assertEqual("started from word vectors counted from the training corpus" in text, said)


@pytest.mark.train_class  # pre-trains in setUpClass
class PretrainCardTest(CardTestCase):
    sections = ["Results", "Model", "Data", "Objective", "Training", "Training results", "How to use", "Reproduce",
                "Framework versions"]

    @classmethod
    def run_into(cls, out):
        pre_train(tiny_run_flags(str(out), str(require("gutenberg/austen-persuasion.txt")), max_steps=4,
                                 eval_strategy="steps", eval_steps=2))

    def test_model_index_values_are_those_of_metrics_json(self):
        results = {r.metric_type: r for r in self.card.data.eval_results}
        self.assertEqual(sorted(results), ["content_accuracy", "content_loss", "loss", "token_accuracy"])
        for name in results:
            self.assertEqual(results[name].metric_value, self.metrics[f"eval_{name}"])
        self.assertEqual((results["loss"].task_type, results["loss"].dataset_name, results["loss"].dataset_type),
                         ("text2text-generation", "austen-persuasion.txt", "text"))

    def test_the_data_rows_are_those_of_metrics_json(self):
        data = self.metrics["data"]
        self.assertEqual(data["windows_seen"], 4 * 4)  # 4 steps x batch 4
        self.assertEqual(data["tokens_seen"], 16 * 70)  # 64-token inputs come from 70-token windows
        for name in ("train_documents", "train_windows", "validation_documents", "validation_windows",
                     "windows_seen", "tokens_seen"):
            self.assertIn(f"| {name.replace('_', ' ')} | {data[name]:,} |", self.text)
        self.assertIn("windows of 70 tokens, 15% of them in noise spans of mean length 3.0", self.text)

    def test_the_usage_snippet_fills_spans(self):
        code = python_block(self.text)
        self.assertIn("inputs = tokenizer(['The <extra_id_0> walks in <extra_id_1> park.']", code)
        self.assertIn("skip_special_tokens=False", code)
        self.assertIn("<pad>", run_snippet(code))  # the raw decoding, sentinels and all
        section = self.card.data.to_dict()["t5kit"]
        self.assertEqual((section["script"], section["tasks"], section["max_source_length"]),
                         ("pre_train_t5.py", [], 64))


class ObjectiveCardTestCase(CardTestCase):
    """A 2-step pre-training run with --objective `objective`."""
    sections = PretrainCardTest.sections
    objective = None

    @classmethod
    def run_into(cls, out):
        pre_train(tiny_run_flags(str(out), str(require("gutenberg/austen-persuasion.txt")), max_steps=2,
                                 objective=cls.objective, eval_strategy="steps", eval_steps=2))


@pytest.mark.train_class  # pre-trains in setUpClass
class UL2CardTest(ObjectiveCardTestCase):
    objective = "ul2"

    def test_the_card_names_the_objective_and_lists_every_denoiser(self):
        self.assertIn("ul2", self.card.data.tags)
        self.assertNotIn("span-corruption", self.card.data.tags)
        self.assertEqual({r.task_name for r in self.card.data.eval_results}, {"UL2 (mixture of denoisers)"})
        self.assertIn("A T5 model pre-trained with UL2 (mixture of denoisers) on austen-persuasion.txt", self.text)
        rows = re.findall(r"^\| ([RSX]) \| (.*) \|$", self.text, flags=re.M)
        self.assertEqual([paradigm for paradigm, _ in rows], ["R", "R", "X", "X", "X", "X", "S"])
        self.assertTrue(rows[0][1].startswith("0.15 | 3.0 | "), rows[0])
        self.assertTrue(rows[0][1].endswith(" | [NLU]"), rows[0])
        self.assertTrue(rows[-1][1].endswith(" | [S2S]"), rows[-1])


@pytest.mark.train_class  # pre-trains in setUpClass
class PrefixLMCardTest(ObjectiveCardTestCase):
    objective = "prefix_lm"

    def test_the_card_shows_continuing_a_text_not_filling_spans(self):
        self.assertIn("prefix-lm", self.card.data.tags)
        self.assertIn("It continues the start of a text; fine-tune it for a task.", self.text)
        self.assertNotIn("fills masked spans", self.text)
        code = python_block(self.text)
        self.assertIn("inputs = tokenizer(['The dog walks in the']", code)
        self.assertIn("skip_special_tokens=True", code)
        self.assertNotIn("<pad>", run_snippet(code))  # special tokens dropped: the continuation's text only
        self.assertIn("--input_file starts.txt --output_file continued.jsonl", self.text)
        usage = self.text.split("## How to use")[1].split("## Reproduce")[0]
        self.assertNotIn("extra_id", usage)


del CardTestCase, ObjectiveCardTestCase  # bases with no run of their own: pytest must not collect them

if __name__ == "__main__":
    absltest.main()
