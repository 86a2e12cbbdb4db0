"""The T5 family through the same entry scripts: Flan-T5 (T5 v1.1's architecture), mT5 (with a small SentencePiece
vocabulary trained here in place of its 250k one), UMT5, and LongT5 with local and transient-global attention. Tiny
random models of each are built here, saved, loaded with the Auto classes, pre-trained on (continued from the saved
model) with a resume that ends bit-identical, and fine-tuned on RTE in the registry's format."""
import json
from pathlib import Path

import pytest
from absl.testing import absltest, parameterized
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM

from t5kit.errors import UsageError
from t5kit.model import building
from t5kit.train import resume
from tests.helpers import (
    T5_FAMILY,
    OneThreadTestCase,
    fine_tune,
    pre_train,
    require,
    save_tiny_family_model,
    tiny_flags,
    tiny_run_flags,
    train_tokenizer,
)

pytestmark = pytest.mark.train_class  # trains a tokenizer, then runs each family

CLASSES = {"flan_t5": "T5ForConditionalGeneration", "mt5": "MT5ForConditionalGeneration",
           "umt5": "UMT5ForConditionalGeneration", "longt5_local": "LongT5ForConditionalGeneration",
           "longt5_tglobal": "LongT5ForConditionalGeneration"}
FAMILIES = [(family, family) for family in T5_FAMILY]


class T5FamilyTest(OneThreadTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.work = Path(absltest.get_default_test_tmpdir()) / "t5_family"
        cls.tokenizers = {"t5": str(require("t5_spiece")), "mt5": str(cls.work / "mt5_spiece")}
        if not (cls.work / "mt5_spiece" / "tokenizer_config.json").exists():
            # mT5's vocabulary is 250k pieces of 101 languages; a 1,000-piece SentencePiece of English and German
            # (Multi30k) with T5's layout stands in for it.
            translation = require("translation/multi30k")
            train_tokenizer(["--train_files", str(translation / "val.en"), str(translation / "val.de"),
                             "--output_dir", cls.tokenizers["mt5"], "--vocab_size", "1000",
                             "--overwrite_output_dir", "true"])

    def base_model(self, family):
        tokenizer = self.tokenizers["mt5" if family == "mt5" else "t5"]
        return save_tiny_family_model(self.dir / f"{family}_base", family, tokenizer)

    @parameterized.named_parameters(*FAMILIES)
    def test_save_and_load_with_the_auto_classes(self, family):
        folder = self.base_model(family)
        model = building.load_pretrained_t5(folder)
        self.assertEqual(type(model).__name__, CLASSES[family])
        self.assertTrue(building.has_untied_output_layer(model))  # as the released checkpoints
        again = AutoModelForSeq2SeqLM.from_pretrained(folder)
        for (name, expected), got in zip(model.state_dict().items(), again.state_dict().values()):
            self.assertTrue(expected.equal(got), name)
        if family.startswith("longt5"):
            self.assertEqual(model.config.encoder_attention_type, T5_FAMILY[family][1]["encoder_attention_type"])

    @parameterized.named_parameters(*FAMILIES)
    def test_pre_training_continues_and_resumes_bit_identical(self, family):
        """Pre-training continued from the saved random model: a run resumed from the first run's checkpoint-2
        ends with the weights that run ended with at step 4."""
        base = self.base_model(family)

        def flags(out, **extra):
            return tiny_run_flags(str(self.dir / out), self.corpus, model_name_or_path=base,
                                  tokenizer_name_or_path=None, max_steps=4, save_strategy="steps", save_steps=2,
                                  lr_scheduler_type="constant", **extra)

        pre_train(flags("plain"))
        pre_train(flags("resumed", resume_from_checkpoint=str(self.dir / "plain/checkpoint-2")))
        expected = load_file(self.dir / "plain/model.safetensors")
        got = load_file(self.dir / "resumed/model.safetensors")
        self.assertEqual(sorted(got), sorted(expected))
        for name, tensor in expected.items():
            self.assertTrue(got[name].equal(tensor), f"{name} differs after resuming")
        self.assertEqual(type(AutoModelForSeq2SeqLM.from_pretrained(self.dir / "plain")).__name__, CLASSES[family])
        saved = json.loads((self.dir / "plain/config.json").read_text())
        self.assertFalse(saved["tie_word_embeddings"])

    @parameterized.named_parameters(*FAMILIES)
    def test_fine_tuning_in_the_registry_format(self, family):
        results = fine_tune(tiny_flags(str(self.dir / "ft"), model_name_or_path=self.base_model(family),
                                       tokenizer_name_or_path=None, label_scoring="rank"))
        self.assertEqual(results["eval_invalid_count"], 0)
        self.assertIn("eval_accuracy", results)
        model = AutoModelForSeq2SeqLM.from_pretrained(self.dir / "ft")
        self.assertEqual(type(model).__name__, CLASSES[family])
        predictions = (self.dir / "ft/predictions_rte_validation.jsonl").read_text().splitlines()
        self.assertTrue(json.loads(predictions[0])["input"].startswith("rte sentence1: "))

    def test_flan_instruction_prompt_is_an_option(self):
        """configs/flan_rte_example.yaml: RTE with an instruction prompt and yes/no options; T5's format stays the
        default (the test above)."""
        rte = require("glue/RTE")
        fine_tune(["configs/flan_rte_example.yaml", *tiny_flags(
            str(self.dir / "flan"), model_name_or_path=self.base_model("flan_t5"), tokenizer_name_or_path=None,
            dataset_name=None, data_dir=None, train_file=str(rte / "train.tsv"),
            validation_file=str(rte / "dev.tsv"))])
        first = json.loads((self.dir / "flan/predictions_rte_flan_validation.jsonl").read_text().splitlines()[0])
        self.assertTrue(first["input"].startswith("Does the premise entail the hypothesis? Options: yes, no. "
                                                  "sentence1: "), first["input"])
        self.assertIn(first["target"], ("yes", "no"))

    def test_resuming_another_family_is_refused(self):
        t5 = building.load_pretrained_t5(self.base_model("flan_t5"))
        with self.assertRaisesRegex(UsageError, r"holds another model: model_type=umt5 \(this run: t5\)"):
            resume.check_checkpoint_fits(self.base_model("umt5"), t5)

    def test_t5_flex_is_for_t5_models_only(self):
        model = building.load_pretrained_t5(self.base_model("umt5"))
        with self.assertRaisesRegex(UsageError, "--attn_implementation t5_flex applies to t5 models, not umt5"):
            building.choose_attn_implementation(model, "t5_flex")
        longt5 = building.load_pretrained_t5(self.base_model("longt5_local"))
        self.assertEqual(building.choose_attn_implementation(longt5, "sdpa"), "eager")  # no SDPA in LongT5


if __name__ == "__main__":
    absltest.main()
