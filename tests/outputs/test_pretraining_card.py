"""outputs/pretraining_card.py: the model card of a pre-training run (span corruption, UL2, prefix-LM). On real tiny
runs: its metadata parses back with huggingface_hub, its numbers are metrics.json's, its usage snippet fills spans
(or continues a text), and the objective section names the objective and lists every denoiser; the objective section
alone, with the embeddings' start."""
import re

import pytest
from absl.testing import absltest, parameterized

import constants
from t5kit.config.pretrain_arguments import check_denoisers
from t5kit.data import objectives
from t5kit.outputs import pretraining_card
from t5kit.specs import ObjectiveSpec
from tests.helpers import CardTestCase, pre_train, python_block, require, run_snippet, tiny_run_flags


class ObjectiveTextTest(parameterized.TestCase):

    @parameterized.parameters(("word_vectors", True), ("random", False))
    def test_word_vector_embeddings_are_said(self, init, said):
        record = {"objective": "span_corruption", "init_embeddings": init}
        objective = objectives.build(ObjectiveSpec("span_corruption", input_length=64, noise_density=0.5,
                                                   mean_noise_span_length=3.0))
        text = pretraining_card.objective_text(record, objective)
        self.assertIn("50% of them in noise spans of mean length 3.0", text)
        self.assertEqual("started from word vectors counted from the training corpus" in text, said)

    def test_a_mixtures_section_lists_every_denoiser(self):
        objective = objectives.build(ObjectiveSpec("ul2", input_length=64, noise_density=0.15,
                                                   mean_noise_span_length=3.0,
                                                   denoisers=tuple(check_denoisers(constants.UL2_DENOISERS, "ul2"))))
        text = pretraining_card.objective_text({"objective": "ul2"}, objective)
        self.assertStartsWith(text, "UL2 (Tay et al. 2022): a mixture of denoisers, one per window")
        self.assertIn("| paradigm | noise density | mean span | proportion | mode token |", text)
        self.assertEqual(re.findall(r"^\| ([RSX]) \|", text, flags=re.M), ["R", "R", "X", "X", "X", "X", "S"])
        self.assertTrue(text.endswith("| S | 0.25 |  | 0.2 | [S2S] |"), text)  # no word-vector sentence


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
