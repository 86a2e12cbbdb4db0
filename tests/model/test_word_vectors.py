"""model/word_vectors.py and --init_embeddings word_vectors: co-occurring words get close vectors, a new model
starts from them (rows at the random init's scale), and the flag is refused where it cannot apply."""
import numpy as np
import pytest
import torch
from absl.testing import absltest, parameterized
from safetensors.torch import load_file

from t5kit.config import parsing
from t5kit.config.script_flags import PRETRAIN_FLAG_CLASSES
from t5kit.errors import UsageError
from t5kit.model.word_vectors import cooccurrence, init_embeddings_from_windows, ppmi_vectors
from tests.helpers import TinyRunTestCase, pre_train, require, tiny_run_flags


def check_flags(init, model, streaming):
    """pre_train_t5.py's flags parsed with --init_embeddings init (config/pretrain_arguments.check_init_embeddings
    runs with the other cross-group checks)."""
    parsing.parse_flags(PRETRAIN_FLAG_CLASSES, tiny_run_flags(
        "/tmp/unused", str(require("gutenberg/austen-persuasion.txt")), init_embeddings=init,
        model_name_or_path=model, streaming=streaming))


def cosine(vectors, a, b):
    return float(vectors[a] @ vectors[b] / np.linalg.norm(vectors[a]) / np.linalg.norm(vectors[b]))


def two_topic_ids(seed=0):
    """ids 0/1 appear beside 10-14, ids 2/3 beside 15-19."""
    rng = np.random.default_rng(seed)
    return np.concatenate([[word, *rng.choice(np.arange(10, 15) if word < 2 else np.arange(15, 20), 3)]
                           for word in rng.integers(0, 4, 400)])


class WordVectorsTest(parameterized.TestCase):

    def test_cooccurrence_weights_pairs_by_distance_both_ways(self):
        counts = cooccurrence(np.array([0, 1, 2]), vocab_size=3, window=2).toarray()
        np.testing.assert_allclose(counts, [[0, 1, 0.5], [1, 0, 1], [0.5, 1, 0]])

    def test_words_sharing_contexts_get_close_vectors(self):
        vectors = ppmi_vectors(cooccurrence(two_topic_ids(), vocab_size=20, window=2), dim=4)
        self.assertEqual(vectors.shape, (20, 4))
        self.assertGreater(cosine(vectors, 0, 1), cosine(vectors, 0, 2) + 0.5)
        self.assertGreater(cosine(vectors, 2, 3), cosine(vectors, 1, 3) + 0.5)

    def test_embeddings_take_the_vectors_at_the_random_rows_scale(self):
        embedding = torch.nn.Embedding(24, 4)  # 4 rows more than the counted ids: a padded vocabulary
        model = torch.nn.Module()
        model.get_input_embeddings, model.config = (lambda: embedding), type("Config", (), {"d_model": 4})
        before = embedding.weight.detach().clone()
        windows = two_topic_ids().reshape(-1, 8)  # ids 0-3 and 10-19; 4-9 and 20-23 never occur
        self.assertEqual(init_embeddings_from_windows(model, windows, window=2), 14)
        after = embedding.weight.detach()
        counted = torch.tensor([*range(4), *range(10, 20)])
        unseen = torch.tensor([*range(4, 10), *range(20, 24)])
        torch.testing.assert_close(after[unseen], before[unseen])
        torch.testing.assert_close(after[counted].norm(dim=1), torch.full((14,), before.norm(dim=1).mean().item()))
        self.assertGreater(cosine(after.numpy(), 0, 1), cosine(after.numpy(), 0, 2) + 0.5)

    @parameterized.named_parameters(
        ("with_a_model", "word_vectors", "t5-small", False, "--init_embeddings word_vectors starts a new model"),
        ("streamed", "word_vectors", None, True, "--init_embeddings word_vectors counts the whole training corpus"))
    def test_refused(self, init, model, streaming, message):
        with self.assertRaisesRegex(UsageError, message):
            check_flags(init, model, streaming)

    def test_random_init_is_never_refused(self):
        """Random init takes any model and corpus flags, the very ones word vectors are refused with."""
        for model, streaming in (("t5-small", False), (None, True), ("t5-small", True)):
            with self.subTest(model=model, streaming=streaming):
                self.assertIsNone(check_flags("random", model, streaming))
                with self.assertRaises(UsageError):
                    check_flags("word_vectors", model, streaming)
        self.assertIsNone(check_flags("word_vectors", None, False))  # the one case word vectors take


@pytest.mark.slow  # two pre-training runs
class InitEmbeddingsRunTest(TinyRunTestCase):

    def test_a_run_starts_from_word_vectors(self):
        """With a vanishing learning rate the saved embeddings are the starting ones: every id of the corpus at the
        same norm (word vectors at the random rows' mean), where random init's rows vary."""
        norms = {}
        for init in ("random", "word_vectors"):
            out = self.dir / init
            pre_train(tiny_run_flags(str(out), self.corpus, max_steps=1, learning_rate=1e-12, init_embeddings=init))
            norms[init] = load_file(out / "model.safetensors")["shared.weight"].norm(dim=1)
        seen = norms["word_vectors"] != norms["random"]
        self.assertGreater(int(seen.sum()), 1000)  # the book's ids
        counted = norms["word_vectors"][seen]
        self.assertLess((counted.std() / counted.mean()).item(), 1e-3)
        self.assertGreater((norms["random"].std() / norms["random"].mean()).item(), 0.05)
        self.assertAlmostEqual(counted.mean().item(), norms["random"].mean().item(), delta=0.02 * counted.mean().item())


if __name__ == "__main__":
    absltest.main()
