"""bench/packed_equivalence.py, the GPU check's packed_equivalence section, run on CPU (tiny): its figures say packed
rows compute what their examples compute unpacked, for every attention implementation, and they would show it if the
segment masks were missing."""
from unittest import mock

import pytest
from absl.testing import absltest

from bench import packed_equivalence


@pytest.mark.slow  # the bench's padded and packed training runs
class PackedEquivalenceTest(absltest.TestCase):

    def test_packed_rows_match_the_examples_unpacked(self):
        figures = packed_equivalence.main(["--device", "cpu", "--tiny"])
        self.assertEqual(list(figures["attentions"]), list(packed_equivalence.ATTENTIONS))
        for name, result in figures["attentions"].items():
            self.assertLess(result["rows"], result["examples"], name)  # rows do hold several examples
            self.assertLess(result["max_token_loss_diff"], 1e-5, name)
            self.assertLess(result["loss_diff"], 1e-5, name)
            self.assertLess(result["max_relative_grad_diff"], 1e-4, name)

    def test_without_the_segment_masks_the_figures_show_it(self):
        with mock.patch.object(packed_equivalence.packed_attention, "install", lambda model: model):
            figures = packed_equivalence.main(["--device", "cpu", "--tiny"])
        for name, result in figures["attentions"].items():
            self.assertGreater(result["max_token_loss_diff"], 1e-2, name)


if __name__ == "__main__":
    absltest.main()
