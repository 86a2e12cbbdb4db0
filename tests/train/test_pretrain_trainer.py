"""train/pretrain_trainer.py's evaluation metrics: content tokens (not sentinels, not EOS) counted apart."""
import numpy as np
import torch
from absl.testing import absltest
from transformers import EvalPrediction

from t5kit.train.pretrain_trainer import SpanCorruptionMetrics, predicted_ids_and_losses, special_target_ids
from tests.helpers import in_memory_t5_tokenizer

SENTINEL_0, SENTINEL_1, EOS = 99, 98, 1  # a toy vocabulary of 100 ids


class SpanCorruptionMetricsTest(absltest.TestCase):

    def test_content_accuracy_and_loss_count_only_span_tokens(self):
        # Targets: <s0> 5 6 <s1> 7 </s> and a padded row <s0> 8 </s> -100 -100 -100.
        labels = np.array([[SENTINEL_0, 5, 6, SENTINEL_1, 7, EOS], [SENTINEL_0, 8, EOS, -100, -100, -100]])
        predicted = np.array([[SENTINEL_0, 5, 9, SENTINEL_1, 9, EOS], [SENTINEL_0, 8, 3, 0, 0, 0]])
        losses = np.array([[0.1, 1.0, 2.0, 0.1, 3.0, 0.2], [0.1, 4.0, 0.3, 9.0, 9.0, 9.0]])
        metrics = SpanCorruptionMetrics([SENTINEL_0, SENTINEL_1, EOS])(EvalPrediction((predicted, losses), labels))
        self.assertAlmostEqual(metrics["token_accuracy"], 6 / 9)  # 9 scored tokens, 6 right
        self.assertAlmostEqual(metrics["content_accuracy"], 2 / 4)  # content 5 6 7 8: 5 and 8 right
        self.assertAlmostEqual(metrics["content_loss"], (1.0 + 2.0 + 3.0 + 4.0) / 4)
        self.assertAlmostEqual(metrics["content_share"], 4 / 9)

    def test_losses_are_the_cross_entropy_of_each_label(self):
        logits = torch.randn(2, 3, 10)
        labels = torch.tensor([[1, 2, 3], [4, -100, -100]])
        ids, losses = predicted_ids_and_losses(logits, labels)
        torch.testing.assert_close(ids, logits.argmax(-1))
        expected = -logits.log_softmax(-1)[0, torch.arange(3), torch.tensor([1, 2, 3])]
        torch.testing.assert_close(losses[0], expected)
        self.assertEqual(tuple(losses.shape), (2, 3))

    def test_special_ids_are_the_sentinels_and_eos(self):
        tokenizer = in_memory_t5_tokenizer()
        special = special_target_ids(tokenizer)
        self.assertLen(special, 101)
        self.assertEqual(special[0], tokenizer.convert_tokens_to_ids("<extra_id_0>"))
        self.assertEqual(special[-1], tokenizer.eos_token_id)


if __name__ == "__main__":
    absltest.main()
