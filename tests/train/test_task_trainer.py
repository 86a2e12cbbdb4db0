"""train/task_trainer.py's length-bucket sampler: batches of equal lengths, longest first, as little padding as
sorting gives."""
import numpy as np
import torch
from absl.testing import absltest

from t5kit.train.task_trainer import length_bucket_indices


class LengthBucketTest(absltest.TestCase):

    def test_batches_hold_equal_lengths_longest_first(self):
        rng = np.random.default_rng(0)
        inputs, targets = rng.integers(5, 40, size=1000), rng.integers(2, 4, size=1000)
        order = length_bucket_indices(inputs, targets, 32, torch.Generator().manual_seed(0))
        self.assertEqual(sorted(order), list(range(1000)))
        batches = [order[i:i + 32] for i in range(0, 1000, 32)]
        self.assertEqual(inputs[batches[0]].max(), inputs.max())
        self.assertLen(batches[-1], 1000 % 32)
        # As little input padding as any batching can give: that of cutting the sorted lengths into batches.
        def padding(lengths_per_batch):
            return sum(len(b) * b.max() - b.sum() for b in lengths_per_batch)
        descending = np.sort(inputs)[::-1]
        self.assertEqual(padding([inputs[b] for b in batches]),
                         padding([descending[i:i + 32] for i in range(0, 1000, 32)]))


if __name__ == "__main__":
    absltest.main()
