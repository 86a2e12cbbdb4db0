"""bench/word_statistics.py: its model is transfer_parts' random init with the word vectors as embeddings."""
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from absl.testing import absltest, parameterized

from bench.transfer_parts import write_part_models
from bench.word_statistics import write_word_vector_model
from tests.helpers import save_tiny_t5


class WordStatisticsTest(parameterized.TestCase):

    @pytest.mark.slow  # writes the transfer-part models
    def test_the_model_is_transfer_parts_random_init_with_the_vectors_as_embeddings(self):
        from transformers import T5ForConditionalGeneration

        tmp = Path(tempfile.mkdtemp())
        source = save_tiny_t5(tmp / "source")
        config = T5ForConditionalGeneration.from_pretrained(source).config
        vectors = np.random.default_rng(1).normal(size=(config.vocab_size, config.d_model))
        vectors[7] = 0  # an id the counts never saw
        written = T5ForConditionalGeneration.from_pretrained(
            write_word_vector_model(source, vectors, tmp / "word_vectors")).state_dict()
        write_part_models(source, tmp / "parts", ["none"])
        random_init = T5ForConditionalGeneration.from_pretrained(tmp / "parts" / "none").state_dict()

        torch.testing.assert_close(written["encoder.block.0.layer.0.SelfAttention.q.weight"],
                                   random_init["encoder.block.0.layer.0.SelfAttention.q.weight"])
        embeddings = written["shared.weight"]
        # the vectors' directions, at the random init's mean row norm
        direction = torch.as_tensor(vectors[5] / np.linalg.norm(vectors[5]), dtype=embeddings.dtype)
        torch.testing.assert_close(embeddings[5] / embeddings[5].norm(), direction)
        torch.testing.assert_close(embeddings[7], random_init["shared.weight"][7])
        self.assertAlmostEqual(embeddings[5].norm().item(), random_init["shared.weight"].norm(dim=1).mean().item(),
                               places=3)
        self.assertTrue((tmp / "word_vectors" / "tokenizer.json").is_file())


if __name__ == "__main__":
    absltest.main()
