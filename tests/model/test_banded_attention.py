"""model/banded_attention.py: packed rows' SDPA band by band. The key ranges and bands of a known layout, the bands
dropped where they would not pay or off the CPU, the band masks (position bias where allowed, the dtype's minimum
elsewhere, built once per stack), the key-slice gradient equal to autograd's, band-by-band attention equal to the
dense masked SDPA, and "sdpa" still transformers' function for any call without bands. (Whole packed models, banded
against dense: tests/model/test_packed_attention.py.)"""
from unittest import mock

import torch
import torch.nn.functional as F
from absl.testing import absltest, parameterized
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from t5kit.model import banded_attention
from tests.helpers import attention_module

# Two rows: three examples and padding; three examples filling the row.
ENCODER = torch.tensor([[1, 1, 1, 2, 2, 3, 0, 0], [1, 2, 2, 2, 3, 3, 3, 3]])
DECODER = torch.tensor([[1, 1, 2, 3, 0, 0], [1, 2, 2, 3, 3, 3]])


class KeyRangesTest(parameterized.TestCase):

    def test_encoder_self_attention_sees_its_segment(self):
        lo, hi = banded_attention.key_ranges(ENCODER, ENCODER, causal=False)
        self.assertEqual(lo.tolist(), [[0, 0, 0, 3, 3, 5, 6, 6], [0, 1, 1, 1, 4, 4, 4, 4]])
        self.assertEqual(hi.tolist(), [[3, 3, 3, 5, 5, 6, 8, 8], [1, 4, 4, 4, 8, 8, 8, 8]])

    def test_decoder_self_attention_stops_at_itself(self):
        lo, hi = banded_attention.key_ranges(DECODER, DECODER, causal=True)
        self.assertEqual(lo.tolist(), [[0, 0, 2, 3, 4, 4], [0, 1, 1, 3, 3, 3]])
        self.assertEqual(hi.tolist(), [[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]])

    def test_cross_attention_sees_the_same_example_of_the_inputs(self):
        lo, hi = banded_attention.key_ranges(DECODER, ENCODER, causal=False)
        self.assertEqual(lo.tolist()[1], [0, 1, 1, 4, 4, 4])
        self.assertEqual(hi.tolist()[1], [1, 4, 4, 8, 8, 8])


class BandsTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.enter_context(mock.patch.object(banded_attention, "QUERY_BLOCK", 2))
        self.enter_context(mock.patch.object(banded_attention, "BAND_SHARE", 1.0))

    def test_each_block_spans_every_row_it_needs(self):
        bands = banded_attention.bands(*banded_attention.key_ranges(ENCODER, ENCODER, False), 8)
        # queries 0-1: row 0 sees keys 0-2, row 1 keys 0-3; queries 6-7: padding of row 0 (6-7), row 1's 4-7.
        self.assertEqual(bands, [(0, 2, 0, 4), (2, 4, 0, 5), (4, 6, 3, 8), (6, 8, 4, 8)])

    def test_a_ragged_last_block(self):
        bands = banded_attention.bands(*banded_attention.key_ranges(ENCODER[:, :7], ENCODER[:, :7], False), 7)
        self.assertEqual(bands[-1], (6, 7, 4, 7))

    def test_decoder_padding_takes_no_part_and_a_padding_only_block_gets_the_last_input(self):
        decoder = torch.tensor([[1, 1, 2, 2, 0, 0]])
        encoder = torch.tensor([[1, 1, 1, 2, 2, 2, 2, 0]])
        bands = banded_attention.stack_bands(encoder, decoder)
        self.assertEqual(bands.cross_attention, [(0, 2, 0, 3), (2, 4, 3, 7), (4, 6, 7, 8)])
        self.assertEqual(bands.self_attention, [(0, 2, 0, 2), (2, 4, 2, 4), (4, 6, 4, 6)])

    def test_no_bands_off_the_cpu(self):  # a GPU keeps the dense masks: the bands would sync it (module doc)
        self.assertIsNotNone(banded_attention.stack_bands(ENCODER, DECODER))
        self.assertIsNone(banded_attention.stack_bands(ENCODER.to("meta"), DECODER.to("meta")))
        self.assertIsNone(banded_attention.stack_bands(ENCODER.to("meta")))

    def test_bands_over_the_share_are_not_used(self):
        one_example = torch.ones((2, 8), dtype=torch.long)
        self.assertIsNotNone(banded_attention.bands(*banded_attention.key_ranges(one_example, one_example, False), 8))
        with mock.patch.object(banded_attention, "BAND_SHARE", 0.75):
            self.assertIsNone(banded_attention.bands(*banded_attention.key_ranges(one_example, one_example, False),
                                                     8))
            self.assertIsNotNone(banded_attention.bands(*banded_attention.key_ranges(ENCODER, ENCODER, False), 8))


class KeyBandsTest(parameterized.TestCase):

    def test_gradient_equals_autograds_slices(self):
        ranges = [(0, 5), (3, 9), (7, 12), (11, 12)]
        tensor = torch.randn(2, 3, 12, 4, dtype=torch.float64, requires_grad=True)
        weights = [torch.randn(2, 3, k1 - k0, 4, dtype=torch.float64) for k0, k1 in ranges]
        sum((band * w).sum() for band, w in zip(banded_attention.KeyBands.apply(tensor, ranges), weights)).backward()
        banded, tensor.grad = tensor.grad, None
        sum((tensor[:, :, k0:k1] * w).sum() for (k0, k1), w in zip(ranges, weights)).backward()
        torch.testing.assert_close(banded, tensor.grad, rtol=0, atol=1e-12)


class SdpaPassThroughTest(parameterized.TestCase):

    def test_sdpa_is_registered_and_a_call_without_bands_is_transformers(self):
        self.assertIs(ALL_ATTENTION_FUNCTIONS["sdpa"], banded_attention.attention_forward)
        with mock.patch.object(banded_attention, "sdpa_attention_forward", return_value=("out", None)) as plain:
            result = banded_attention.attention_forward(mock.Mock(), "q", "k", "v", "mask", scaling=0.5,
                                                        position_bias="bias")
        self.assertEqual(result, ("out", None))
        plain.assert_called_once_with(mock.ANY, "q", "k", "v", "mask", dropout=0.0, scaling=0.5,
                                      position_bias="bias")



def same_segment(query_segments, key_segments, causal=False):
    """The dense boolean mask [batch, 1, query, key] the bands stand for: a query sees the keys of its segment."""
    mask = query_segments[:, :, None] == key_segments[:, None, :]
    if causal:
        mask &= torch.ones(mask.shape[1:], dtype=torch.bool).tril()
    return mask[:, None]


class AttentionForwardTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.enter_context(mock.patch.object(banded_attention, "QUERY_BLOCK", 2))
        self.enter_context(mock.patch.object(banded_attention, "BAND_SHARE", 1.0))
        generator = torch.Generator().manual_seed(0)
        self.query, self.key, self.value = (torch.randn(2, 3, 8, 4, dtype=torch.float64, generator=generator)
                                            for _ in range(3))
        self.bias = torch.randn(1, 3, 8, 8, dtype=torch.float64, generator=generator)

    def dense(self, mask, bias):
        """transformers' merge of mask and bias (create_position_bias_mask), then one SDPA over the square."""
        merged = torch.where(mask, bias, torch.finfo(torch.float64).min)
        return F.scaled_dot_product_attention(self.query, self.key, self.value, attn_mask=merged,
                                              scale=0.5).transpose(1, 2)


    def test_cross_attention_is_the_decoders_non_causal_attention(self):
        self.assertTrue(banded_attention.is_cross_attention(attention_module(True, is_causal=False)))
        self.assertFalse(banded_attention.is_cross_attention(attention_module(True, is_causal=True)))
        self.assertFalse(banded_attention.is_cross_attention(attention_module(False)))

    def test_encoder_bands_give_the_dense_masked_attention(self):
        mask = same_segment(ENCODER, ENCODER)
        bands = banded_attention.stack_bands(ENCODER)
        with mock.patch.object(banded_attention, "banded_attention", wraps=banded_attention.banded_attention) as spy:
            output, weights = banded_attention.attention_forward(attention_module(False), self.query, self.key,
                                                                 self.value, mask, scaling=0.5,
                                                                 position_bias=self.bias, segment_bands=bands)
        self.assertEqual(spy.call_args.args[3], bands.self_attention)  # four bands of two queries, not the square
        self.assertIsNone(weights)
        torch.testing.assert_close(output, self.dense(mask, self.bias), rtol=0, atol=1e-12)

    def test_decoder_self_attention_bands_are_causal(self):
        decoder = torch.tensor([[1, 1, 1, 2, 2, 3, 3, 0], [1, 1, 2, 2, 2, 2, 3, 3]])
        mask = same_segment(decoder, decoder, causal=True)
        bands = banded_attention.StackBands(banded_attention.bands(*banded_attention.key_ranges(decoder, decoder,
                                                                                                True), 8))
        output, _ = banded_attention.attention_forward(attention_module(True, is_causal=True), self.query, self.key,
                                                       self.value, mask, scaling=0.5, position_bias=self.bias,
                                                       segment_bands=bands)
        torch.testing.assert_close(output, self.dense(mask, self.bias), rtol=0, atol=1e-12)

    def test_band_masks_merge_the_bias_and_are_built_once_per_stack(self):
        blocks = [(0, 2, 0, 3), (2, 8, 3, 8)]
        mask = same_segment(ENCODER, ENCODER)
        cache = {}
        masks = banded_attention.band_masks(blocks, mask, self.bias, torch.float64, cache)
        minimum = torch.finfo(torch.float64).min
        torch.testing.assert_close(masks[1], torch.where(mask[:, :, 2:8, 3:8], self.bias[:, :, 2:8, 3:8], minimum))
        self.assertIs(banded_attention.band_masks(blocks, mask, self.bias, torch.float64, cache), masks)  # reused
        plain = banded_attention.band_masks(blocks, mask, None, torch.float32, {})  # cross-attention: no bias
        self.assertEqual(plain[0].dtype, torch.float32)
        self.assertEqual(set(plain[0][mask[:, :, 0:2, 0:3]].tolist()), {0.0})
        self.assertEqual(set(plain[0][~mask[:, :, 0:2, 0:3]].tolist()), {torch.finfo(torch.float32).min})

    def test_a_float_mask_or_no_bands_goes_to_transformers(self):
        bands = banded_attention.stack_bands(ENCODER)
        float_mask = torch.zeros(2, 1, 8, 8, dtype=torch.float64)
        for mask, segment_bands in ((float_mask, bands), (same_segment(ENCODER, ENCODER), None)):
            with mock.patch.object(banded_attention, "sdpa_attention_forward", return_value=("out", None)) as plain:
                banded_attention.attention_forward(attention_module(False), self.query, self.key, self.value, mask,
                                                   segment_bands=segment_bands)
            plain.assert_called_once()


if __name__ == "__main__":
    absltest.main()
