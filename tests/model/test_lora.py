"""LoRA fine-tuning (--peft lora, t5kit/model/lora.py): adapters on the named layers only, their count logged and
recorded, adapters saved in the run folder and loadable with PeftModel.from_pretrained, --merge_adapters' plain
model, rank scoring and evaluation as in full fine-tuning, and a resumed run bit-identical to an uninterrupted one."""
import json

import pytest
import torch
from absl.testing import absltest, parameterized
from peft import PeftModel
from safetensors.torch import load_file
from transformers import T5ForConditionalGeneration

from t5kit.config import parsing
from t5kit.errors import UsageError
from t5kit.model import building, lora
from t5kit.train import resume
from tests.helpers import OneThreadTestCase, fine_tune, save_tiny_t5, tiny_flags

# t5-tiny: d_model 32, 2 heads of 16 (inner 32); rank 8 on q and v: A (8 x 32) + B (32 x 8) = 512 per layer, on
# 2 encoder self-attentions and 2 decoder self- and 2 cross-attentions: 6 attentions x 2 layers (q, v) = 12.
TINY_LORA_PARAMETERS = 12 * 512


class LoraModuleTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.base = save_tiny_t5(absltest.get_default_test_tmpdir() + "/lora_base")

    def model(self):
        return building.load_pretrained_t5(self.base)

    def test_only_adapters_train(self):
        model = lora.apply_lora(self.model(), 8, 16.0, 0.0, ["q", "v"])
        trainable = [name for name, p in model.named_parameters() if p.requires_grad]
        self.assertLen(trainable, 24)  # lora_A and lora_B on 12 layers
        self.assertTrue(all(".q.lora_" in name or ".v.lora_" in name for name in trainable), trainable)
        self.assertEqual(lora.trainable_parameters(model), TINY_LORA_PARAMETERS)

    @parameterized.named_parameters(
        ("misspelt", ["q", "vv"], r"'vv' matches no layer of the model; its linear layers are k, lm_head, o, q, v, "
                                  r"wi, wo \(e.g. q,v\)"),
        ("not_a_layer", ["encoder.x"], r"'encoder.x' matches no layer"))
    def test_target_that_matches_nothing_is_refused(self, targets, message):
        with self.assertRaisesRegex(UsageError, message):
            lora.apply_lora(self.model(), 8, 16.0, 0.0, targets)

    def test_merged_model_computes_what_the_adapters_do(self):
        model = lora.apply_lora(self.model(), 4, 8.0, 0.0, ["q", "k", "v", "o", "wi", "wo"])
        for name, parameter in model.named_parameters():
            if "lora_B" in name:  # peft starts B at zero (no change); move it so that merging matters
                torch.nn.init.normal_(parameter, std=0.1)
        inputs = {"input_ids": torch.tensor([[5, 6, 7, 1]]), "labels": torch.tensor([[8, 9, 1]])}
        with torch.no_grad():
            expected = model(**inputs).logits
            merged = model.merge_and_unload()
            self.assertIsInstance(merged, T5ForConditionalGeneration)
            torch.testing.assert_close(merged(**inputs).logits, expected, rtol=1e-5, atol=1e-5)

    def test_resume_refuses_a_checkpoint_of_the_other_kind(self):
        folder = self.create_tempdir()
        folder.create_file("adapter_config.json", "{}")
        with self.assertRaisesRegex(UsageError, "holds LoRA adapters, but this run fine-tunes the full model"):
            resume.check_checkpoint_fits(folder.full_path, self.model())
        folder = self.create_tempdir()
        folder.create_file("config.json", "{}")
        with self.assertRaisesRegex(UsageError, "holds a full model, but this run trains LoRA adapters"):
            resume.check_checkpoint_fits(folder.full_path, lora.apply_lora(self.model(), 8, 16.0, 0.0, ["q"]))


@pytest.mark.slow  # fine-tuning runs, one resumed
class LoraRunTest(OneThreadTestCase):

    def lora_flags(self, out, **extra):
        return tiny_flags(str(self.dir / out), model_name_or_path=self.base, peft="lora", **extra)

    def setUp(self):
        super().setUp()
        self.base = save_tiny_t5(self.dir / "base")

    def test_adapters_saved_loadable_and_merged(self):
        results = fine_tune(self.lora_flags("run", merge_adapters=True, label_scoring="rank"))
        out = self.dir / "run"
        adapter_config = json.loads((out / "adapter_config.json").read_text())
        self.assertEqual((adapter_config["r"], adapter_config["lora_alpha"], sorted(adapter_config["target_modules"])),
                         (8, 16.0, ["q", "v"]))
        self.assertEqual(adapter_config["base_model_name_or_path"], self.base)
        self.assertTrue((out / "adapter_model.safetensors").is_file())
        self.assertFalse((out / "model.safetensors").exists())  # the run folder holds adapters, not a full copy
        record = parsing.load_yaml_config(out / "config.yaml")
        self.assertEqual(record["derived"]["trainable_parameters"], TINY_LORA_PARAMETERS)
        self.assertEqual(record["peft"], "lora")
        # Rank scoring and evaluation report as in full fine-tuning.
        self.assertEqual(results["eval_invalid_count"], 0)
        self.assertIn("eval_accuracy", results)
        # PeftModel.from_pretrained on the base gives the merged model's outputs.
        inputs = {"input_ids": torch.tensor([[5, 6, 7, 1]]), "labels": torch.tensor([[8, 9, 1]])}
        with torch.no_grad():
            adapted = PeftModel.from_pretrained(T5ForConditionalGeneration.from_pretrained(self.base), str(out))
            merged = T5ForConditionalGeneration.from_pretrained(out / "merged")
            torch.testing.assert_close(merged(**inputs).logits, adapted(**inputs).logits, rtol=1e-5, atol=1e-5)
        # Only q and v changed: the base is frozen and the adapters were merged into those layers alone.
        base, merged_weights = load_file(f"{self.base}/model.safetensors"), load_file(out / "merged/model.safetensors")
        changed = sorted({name.rsplit(".", 2)[-2] for name in base if not base[name].equal(merged_weights[name])})
        self.assertEqual(changed, ["q", "v"])

    def test_resumed_lora_run_is_bit_identical(self):
        def flags(out, steps, **extra):
            return self.lora_flags(out, max_steps=steps, lr_scheduler_type="constant", load_best_model_at_end=False,
                                   **extra)

        fine_tune(flags("plain", 4))
        fine_tune(flags("resumed", 2))
        fine_tune(flags("resumed", 4, resume_from_checkpoint="auto"))
        expected = load_file(self.dir / "plain/adapter_model.safetensors")
        got = load_file(self.dir / "resumed/adapter_model.safetensors")
        self.assertEqual(sorted(got), sorted(expected))
        for name, tensor in expected.items():
            self.assertTrue(got[name].equal(tensor), f"{name} differs after resuming")


if __name__ == "__main__":
    absltest.main()
