"""bench/transfer_parts.py: each part's model takes exactly its tensors from the pre-trained model."""
import tempfile
from pathlib import Path

import torch
from absl.testing import absltest, parameterized

from bench.transfer_parts import PARTS, write_part_models
from tests.helpers import save_tiny_t5

# part -> (a tensor that must come from the pre-trained model, a tensor that must not); None: no such tensor
PROBES = {
    "whole": ("decoder.block.0.layer.1.EncDecAttention.q.weight", None),
    "embeddings": ("shared.weight", "encoder.block.0.layer.0.SelfAttention.q.weight"),
    "encoder": ("encoder.block.0.layer.1.DenseReluDense.wi.weight", "decoder.block.0.layer.0.SelfAttention.q.weight"),
    "decoder": ("decoder.block.0.layer.1.EncDecAttention.q.weight", "encoder.final_layer_norm.weight"),
    "none": (None, "shared.weight"),
}


class TransferPartsTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = Path(tempfile.mkdtemp())
        cls.source = save_tiny_t5(cls.tmp / "source")
        from transformers import T5ForConditionalGeneration

        # A "pre-trained" model no random init can equal: every tensor shifted, layer norms included.
        model = T5ForConditionalGeneration.from_pretrained(cls.source)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(0.5)
        model.save_pretrained(cls.source)
        cls.pretrained = model.state_dict()

    def test_every_part_is_probed(self):
        self.assertEqual(set(PROBES), set(PARTS))

    @parameterized.parameters(*PROBES)
    def test_a_part_takes_its_tensors_and_resets_the_rest(self, part):
        from transformers import T5ForConditionalGeneration

        folder = self.tmp / "models" / part
        write_part_models(self.source, self.tmp / "models", [part])
        written = T5ForConditionalGeneration.from_pretrained(folder).state_dict()
        kept, reset = PROBES[part]
        if kept:
            torch.testing.assert_close(written[kept], self.pretrained[kept])
        if reset:
            self.assertGreater((written[reset] - self.pretrained[reset]).abs().mean().item(), 0.1, reset)
        # the tied head follows the shared embeddings, whichever way they went
        torch.testing.assert_close(written["lm_head.weight"], written["shared.weight"])
        self.assertTrue((folder / "tokenizer.json").is_file())


if __name__ == "__main__":
    absltest.main()
