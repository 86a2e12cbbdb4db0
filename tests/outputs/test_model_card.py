"""outputs/model_card.py: what every model card shares. Metric values as the body shows them, Markdown tables, the
card's name and where the model loads from, the flags table (the run's length by whichever flag decided it), the
reproduce commands (secrets masked, the launch noted), a usage snippet that is Python, README.md written with its
secrets masked and its t5kit section read back, and the CTranslate2 section added once. (The cards of real runs:
tests/outputs/test_finetuning_card.py and test_pretraining_card.py, whose classes also run the checks every card
shares, tests/helpers.CardTestCase.)"""
import ast
import os
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from absl.testing import absltest, parameterized
from huggingface_hub import ModelCard, ModelCardData

from t5kit.outputs import model_card

SECRET = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"  # a token's shape: masked even when no variable holds it
DERIVED = {"global_batch_size": 32, "world_size": 1, "tokens_per_optimizer_step": 16384,
           "versions": {"python": "3.11.9", "torch": "2.13.0", "peft": None}}


class PartsTest(parameterized.TestCase):

    @parameterized.named_parameters(("float", 0.123456, "0.1235"), ("whole_float", 2.0, "2.0000"), ("int", 7, "7"),
                                    ("text", "n/a", "n/a"))
    def test_metric_text(self, value, expected):
        self.assertEqual(model_card.metric_text(value), expected)

    def test_markdown_table_escapes_pipes_in_cells(self):
        self.assertEqual(model_card.markdown_table(("a", "b"), [("x|y", 1), (None, 2.5)]),
                         "| a | b |\n|---|---|\n| x\\|y | 1 |\n| None | 2.5 |")

    def test_the_name_and_where_the_model_loads_from(self):
        local = {"output_dir": "runs/rte", "hub_model_id": None}
        pushed = {"output_dir": "runs/rte", "hub_model_id": "me/t5-rte", "push_to_hub": True}
        self.assertEqual((model_card.card_name(local), model_card.model_location(local)), ("rte", "runs/rte"))
        self.assertEqual((model_card.card_name(pushed), model_card.model_location(pushed)), ("me/t5-rte", "me/t5-rte"))
        named_only = dict(pushed, push_to_hub=False)  # named but not pushed: the folder is where it is
        self.assertEqual(model_card.model_location(named_only), "runs/rte")

    def test_the_base_model_is_a_hub_name_never_a_local_folder(self):
        self.assertEqual(model_card.base_model({"model_name_or_path": "google-t5/t5-small"}), "google-t5/t5-small")
        self.assertIsNone(model_card.base_model({"model_name_or_path": self.create_tempdir().full_path}))
        self.assertIsNone(model_card.base_model({"model_name_or_path": None}))

    @parameterized.named_parameters(("steps", 200, "`--max_steps` | 200", "num_train_epochs"),
                                    ("epochs", -1, "`--num_train_epochs` | 3.0", "max_steps"))
    def test_the_flags_table_shows_what_decided_the_length(self, max_steps, shown, hidden):
        record = {"learning_rate": 0.001, "seed": 42, "max_steps": max_steps, "num_train_epochs": 3.0,
                  "derived": DERIVED}
        table = model_card.flags_table(record, global_step=200)
        self.assertIn(f"| {shown} |", table)
        self.assertNotIn(hidden, table)
        self.assertIn("| global batch | 32 = per device x accumulation x 1 process(es) |", table)
        self.assertIn("| tokens per optimizer step | 16,384 |", table)
        self.assertTrue(table.endswith("| optimizer steps trained | 200 |"))

    def test_reproduce_masks_secrets_and_notes_the_launch(self):
        run = SimpleNamespace(script="pre_train_t5.py", argv=["--output_dir", "runs/my run", "--hub_token", SECRET,
                                                              "--run_name", "mine-topsecretvalue"],
                              record={"output_dir": "runs/my run", "derived": dict(DERIVED, world_size=2)})
        text = model_card.reproduce_commands(run, ["topsecretvalue"])
        self.assertEqual(text.splitlines(), [
            "python pre_train_t5.py --output_dir 'runs/my run' --hub_token *** --run_name mine-***   # as launched, "
            "on 2 processes (torchrun/accelerate launch)",
            "# or from the run record alone, into a new folder:",
            "python pre_train_t5.py 'runs/my run/config.yaml' --output_dir 'runs/my run_rerun'"])

    @parameterized.parameters(True, False)
    def test_the_usage_snippet_is_python(self, keep_sentinels):
        code = model_card.usage_python("me/t5", "rte sentence1: it's \"quoted\"", 5, keep_sentinels)
        ast.parse(code)
        self.assertIn("inputs = tokenizer(['rte sentence1: it\\'s \"quoted\"'], return_tensors=\"pt\")", code)
        self.assertIn(f"skip_special_tokens={not keep_sentinels}", code)

    def test_versions_list_leaves_out_what_is_not_installed(self):
        self.assertEqual(model_card.versions_list({"derived": DERIVED}), "- python 3.11.9\n- torch 2.13.0")


def a_card(**section):
    data = ModelCardData(model_name="run", library_name="transformers", pipeline_tag=model_card.PIPELINE_TAG,
                         **{model_card.CARD_SECTION: section})
    sections = {name: name for name in ("title", "summary", "results", "model_table", "data_table", "objective",
                                        "flags_table", "hyperparameters", "usage_python", "usage_command",
                                        "reproduce", "versions")}
    return model_card.render(data, loss_curve=None, training_results="", **sections)


class CardFileTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def test_written_and_its_section_read_back(self):
        path = model_card.write_model_card(self.dir, a_card(tasks=["glue/rte"], max_source_length=64))
        self.assertEqual(path, self.dir / "README.md")
        self.assertEqual(model_card.read_card_section(self.dir), {"tasks": ["glue/rte"], "max_source_length": 64})
        self.assertEqual(ModelCard.load(path).data.pipeline_tag, "text2text-generation")
        self.assertEqual([p.name for p in self.dir.iterdir()], ["README.md"])  # written atomically

    def test_no_card_or_no_section_reads_as_empty(self):
        self.assertEqual(model_card.read_card_section(self.dir), {})
        (self.dir / "README.md").write_text("# a plain README\n")
        self.assertEqual(model_card.read_card_section(self.dir), {})

    def test_secrets_are_masked_in_the_file(self):
        with mock.patch.dict(os.environ, {"HF_TOKEN": "topsecretvalue"}):
            path = model_card.write_model_card(self.dir, a_card(note="topsecretvalue and " + SECRET))
        text = path.read_text()
        self.assertNotIn("topsecretvalue", text)
        self.assertNotIn(SECRET, text)

    def test_the_export_section_is_added_once_and_replaced(self):
        self.assertIsNone(model_card.add_export_section(self.dir, "ctranslate2", "float32"))  # no card: nothing
        (self.dir / "README.md").write_text("# run\n\nbody\n")
        model_card.add_export_section(self.dir, "ctranslate2", "float32")
        model_card.add_export_section(self.dir, "ctranslate2", "int8")
        text = (self.dir / "README.md").read_text()
        self.assertTrue(text.startswith("# run\n\nbody\n\n" + model_card.EXPORT_HEADING))
        self.assertEqual(text.count(model_card.EXPORT_HEADING), 1)
        self.assertIn("`ctranslate2/` holds this model for CTranslate2 (int8;", text)
        self.assertNotIn("float32", text)
        self.assertIn(f"--model_name_or_path {self.dir} --backend ctranslate2", text)


if __name__ == "__main__":
    absltest.main()
