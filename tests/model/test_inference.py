"""model/inference.py's batching: length-sorted batches (longest first, ties in input order), each padded to its
longest row."""
from absl.testing import absltest, parameterized

from t5kit.model import inference


class InferenceTest(parameterized.TestCase):

    def test_length_sorted_batches_longest_first_ties_in_input_order(self):
        self.assertEqual(inference.length_sorted_batches([3, 7, 3, 9, 1], 2), [[3, 1], [0, 2], [4]])

    def test_pad_batch_pads_to_the_batch_longest(self):
        ids, mask = inference.pad_batch([[5, 6, 1], [7, 1]], pad_id=0, device="cpu")
        self.assertEqual(ids.tolist(), [[5, 6, 1], [7, 1, 0]])
        self.assertEqual(mask.tolist(), [[1, 1, 1], [1, 1, 0]])


if __name__ == "__main__":
    absltest.main()
