"""bench/word_statistics.py: PPMI vectors put co-occurring words together; the model carries them, the rest random."""
import tempfile
from pathlib import Path

import numpy as np
import torch
from absl.testing import absltest, parameterized

from bench.transfer_parts import write_part_models
from bench.word_statistics import cooccurrence, ppmi_vectors, write_word_vector_model
from tests.helpers import save_tiny_t5


def cosine(vectors, a, b):
    return float(vectors[a] @ vectors[b] / np.linalg.norm(vectors[a]) / np.linalg.norm(vectors[b]))


class WordStatisticsTest(parameterized.TestCase):

    def test_cooccurrence_weights_pairs_by_distance_both_ways(self):
        counts = cooccurrence(np.array([0, 1, 2]), vocab_size=3, window=2).toarray()
        np.testing.assert_allclose(counts, [[0, 1, 0.5], [1, 0, 1], [0.5, 1, 0]])

    def test_words_sharing_contexts_get_close_vectors(self):
        # ids 0/1 appear beside 10-14, ids 2/3 beside 15-19: 0 must be nearer 1 than 2.
        rng = np.random.default_rng(0)
        rows = [[word, *rng.choice(np.arange(10, 15) if word < 2 else np.arange(15, 20), 3)]
                for word in rng.integers(0, 4, 400)]
        vectors = ppmi_vectors(cooccurrence(np.concatenate(rows), vocab_size=20, window=2), dim=4)
        self.assertEqual(vectors.shape, (20, 4))
        self.assertGreater(cosine(vectors, 0, 1), cosine(vectors, 0, 2) + 0.5)
        self.assertGreater(cosine(vectors, 2, 3), cosine(vectors, 1, 3) + 0.5)

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
