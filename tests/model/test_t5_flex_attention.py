"""--attn_implementation t5_flex: the same function as sdpa (losses, gradients, generation), the kernel chosen per
attention kind, and no mask built where nothing is masked. FlexAttention's own backward needs a GPU (never in tests):
on CPU its forward is checked against SDPA, and the GPU speed is bench/pretrain_throughput.py's."""
import copy
import types
from unittest import mock

import pytest
import torch
from absl.testing import absltest, parameterized
from torch.nn.attention.flex_attention import flex_attention
from transformers import T5Config, T5ForConditionalGeneration
from transformers.masking_utils import bidirectional_mask_function, causal_mask_function

from t5kit.config.arguments import ModelArguments
from t5kit.errors import UsageError
from t5kit.model import building, t5_flex_attention
from tests.helpers import attention_module


def tiny_t5(num_layers=2):
    torch.manual_seed(0)
    return T5ForConditionalGeneration(T5Config(
        vocab_size=100, d_model=32, d_ff=64, d_kv=16, num_layers=num_layers, num_heads=4, decoder_start_token_id=0,
        pad_token_id=0, eos_token_id=1, dropout_rate=0.0))


def batch(padded):
    torch.manual_seed(1)
    ids, labels = torch.randint(2, 100, (3, 128)), torch.randint(2, 100, (3, 20))
    mask = torch.ones_like(ids)
    if padded:
        mask[1, 100:] = 0
    return ids, (mask if padded else None), labels


@pytest.mark.slow  # torch.compile of a model (unpadded_compiled) builds Inductor kernels
class SameFunctionAsSdpaTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("unpadded", False, False, False), ("padded", True, False, False), ("unpadded_compiled", False, True, False),
        ("gradient_checkpointing", False, False, True))
    def test_loss_and_gradients_match_sdpa(self, padded, compiled, checkpointing):
        # compiled: one layer a stack, as Inductor's cold build grows with the graph (~50 s for two on 2 cores)
        sdpa_model = tiny_t5(num_layers=1 if compiled else 2)
        flex_model = copy.deepcopy(sdpa_model)
        flex_model.set_attn_implementation(t5_flex_attention.NAME)
        ids, mask, labels = batch(padded)
        results = []
        for model in (sdpa_model, flex_model):
            if checkpointing:  # T5 then makes the cross-attention's zero bias require grad; t5_flex leaves it out
                model.gradient_checkpointing_enable()
                model.config.use_cache = False
            # compiled: t5_flex (which torch.compile turns into fused kernels) against eager SDPA, the reference;
            # compiling the reference too would double the cold Inductor build (~40 s on 2 cores) for nothing
            run = torch.compile(model) if compiled and model is flex_model else model
            loss = run(input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            results.append((loss.detach(), [p.grad for p in model.parameters()]))
        (sdpa_loss, sdpa_grads), (flex_loss, flex_grads) = results
        torch.testing.assert_close(flex_loss, sdpa_loss, rtol=1e-6, atol=1e-6)
        for flex_grad, sdpa_grad in zip(flex_grads, sdpa_grads):
            torch.testing.assert_close(flex_grad, sdpa_grad, rtol=1e-5, atol=1e-7)

    @parameterized.named_parameters(("unpadded", False), ("padded", True))
    def test_greedy_generation_matches_sdpa(self, padded):
        """Decoding runs with a cache (one query against several keys), where a mask must not be dropped blindly."""
        sdpa_model = tiny_t5().eval()
        flex_model = copy.deepcopy(sdpa_model)
        flex_model.set_attn_implementation(t5_flex_attention.NAME)
        ids, mask, _ = batch(padded)
        outputs = [model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8, do_sample=False)
                   for model in (sdpa_model, flex_model)]
        self.assertEqual(outputs[0].shape, (3, 9))
        torch.testing.assert_close(outputs[1], outputs[0], rtol=0, atol=0)


class FlexBiasedAttentionTest(absltest.TestCase):

    def test_forward_matches_sdpa_with_t5s_permuted_bias(self):
        """T5 builds its bias by permuting [query, key, heads]; the result must not depend on that layout."""
        torch.manual_seed(0)
        query, key, value = torch.randn(3, 2, 4, 128, 16).unbind(0)
        bias = torch.randn(128, 128, 4).permute(2, 0, 1).unsqueeze(0)  # [1, heads, query, key], not contiguous
        self.assertFalse(bias.is_contiguous())
        expected = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=bias, scale=1.0)
        got = t5_flex_attention.flex_biased_attention(query, key, value, bias, 1.0, attention=flex_attention)
        self.assertEqual(got.shape, (2, 128, 4, 16))  # [batch, query, heads, head_dim], as transformers expects
        torch.testing.assert_close(got, expected.transpose(1, 2), rtol=1e-5, atol=1e-5)


def query_of(length, cuda=True):
    return types.SimpleNamespace(is_cuda=cuda, shape=(8, 12, length, 64))


class KernelChoiceTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("unpadded_encoder_on_gpu", attention_module(False), query_of(512), None, 0.0, True),
        ("on_cpu", attention_module(False), query_of(512, cuda=False), None, 0.0, False),
        ("padding_mask", attention_module(False), query_of(512), torch.ones(8, 1, 512, 512, dtype=torch.bool), 0.0,
         False),
        ("dropout", attention_module(False), query_of(512), None, 0.1, False),
        ("not_a_block_multiple", attention_module(False), query_of(200), None, 0.0, False),
        ("decoder_self_attention", attention_module(True, is_causal=True), query_of(512), None, 0.0, False))
    def test_flex_only_for_unpadded_block_multiple_encoder_attention_on_gpu(self, module, query, mask, dropout,
                                                                              expected):
        self.assertEqual(t5_flex_attention.uses_flex(module, query, query, mask, dropout), expected)

    @parameterized.named_parameters(("unpadded", False, 2), ("padded", True, 0))
    def test_cross_attention_drops_the_zero_bias_only_without_padding(self, padded, unmasked_calls):
        """Unpadded: the 2 cross-attentions reach SDPA with no mask at all (so flash/cuDNN may run). Padded: every
        attention gets transformers' contiguous float mask, as with sdpa (a raw boolean mask would run unfused)."""
        model = tiny_t5().eval()
        model.set_attn_implementation(t5_flex_attention.NAME)
        ids, mask, labels = batch(padded)
        masks = []
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def recording_sdpa(query, key, value, attn_mask=None, **kwargs):
            masks.append(attn_mask)
            return sdpa(query, key, value, attn_mask=attn_mask, **kwargs)

        with torch.no_grad(), mock.patch.object(torch.nn.functional, "scaled_dot_product_attention", recording_sdpa):
            model(input_ids=ids, attention_mask=mask, labels=labels)
        self.assertLen(masks, 6)  # encoder self, decoder self and cross attention in each of 2 layers
        self.assertEqual(sum(m is None for m in masks), unmasked_calls)
        for m in masks:
            if m is not None:
                self.assertTrue(m.is_floating_point())
                self.assertEqual(m.stride(-1), 1)


class MaskTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("bidirectional", dict(q_length=16, kv_length=16, mask_function=bidirectional_mask_function)),
        ("cross_attention", dict(q_length=5, kv_length=16, mask_function=bidirectional_mask_function)),
        ("causal_without_cache", dict(q_length=16, kv_length=16, mask_function=causal_mask_function)))
    def test_nothing_masked_builds_no_mask(self, arguments):
        self.assertIsNone(t5_flex_attention.t5_flex_mask(batch_size=2, **arguments))

    def test_padding_and_cache_offsets_keep_transformers_mask(self):
        padding = torch.ones(2, 16, dtype=torch.bool)
        padding[1, 10:] = False
        mask = t5_flex_attention.t5_flex_mask(2, 16, 16, mask_function=bidirectional_mask_function,
                                              attention_mask=padding)
        self.assertEqual(tuple(mask.shape), (2, 1, 16, 16))
        self.assertFalse(bool(mask[1, 0, 0, 10:].any()))
        self.assertTrue(bool(mask[0].all()))
        # A causal chunk after 4 cached tokens: query i sees keys 0..4+i, so the mask is built, not dropped.
        mask = t5_flex_attention.t5_flex_mask(1, 3, 7, q_offset=4, mask_function=causal_mask_function,
                                              allow_is_causal_skip=False)
        self.assertEqual(mask[0, 0].tolist(), [[k <= 4 + q for k in range(7)] for q in range(3)])

    @parameterized.named_parameters(("bidirectional", bidirectional_mask_function, True),
                                    ("causal", causal_mask_function, False))
    def test_a_padding_mask_that_masks_nothing_is_kept_without_reading_it(self, mask_function, allow_skip):
        """transformers drops such a mask after reading it on the host (padding_mask.all(), a GPU sync per step)."""
        unpadded = torch.ones(2, 16, dtype=torch.bool)
        with mock.patch.object(torch.Tensor, "all", side_effect=AssertionError("padding mask read")):
            mask = t5_flex_attention.t5_flex_mask(2, 16, 16, mask_function=mask_function, attention_mask=unpadded,
                                                  allow_is_causal_skip=True, allow_is_bidirectional_skip=allow_skip)
        expected = torch.ones(16, 16, dtype=torch.bool)
        self.assertTrue(mask[:, 0].equal((expected if allow_skip else expected.tril()).expand(2, 16, 16)))


class GpuGenerationTest(parameterized.TestCase):
    """FlexAttention's Triton kernels need sm80+: an older GPU is refused when the model is built, not mid-step."""

    @parameterized.named_parameters(
        ("v100", [("Tesla V100-SXM2-32GB", (7, 0))], "GPU 0, Tesla V100-SXM2-32GB, is 7.0"),
        ("t4_beside_an_a100", [("NVIDIA A100-SXM4-80GB", (8, 0)), ("Tesla T4", (7, 5))], "GPU 1, Tesla T4, is 7.5"),
    )
    def test_older_gpu_is_refused_naming_it_and_the_fix(self, gpus, named):
        with mock.patch.object(t5_flex_attention, "visible_gpus", return_value=gpus):
            with self.assertRaisesRegex(UsageError, r"--attn_implementation t5_flex needs an Ampere or newer GPU "
                                                    r"\(compute capability 8.0\+\) but " + named
                                                    + "; use --attn_implementation sdpa$"):
                t5_flex_attention.check_gpu_generation(use_cpu=False)

    @parameterized.named_parameters(
        ("h100", [("NVIDIA H100 80GB HBM3", (9, 0))], False),
        ("a100s", [("NVIDIA A100-SXM4-80GB", (8, 0))] * 2, False),
        ("no_gpu", [], False),
        ("v100_left_idle_by_use_cpu", [("Tesla V100-SXM2-32GB", (7, 0))], True),
    )
    def test_ampere_or_newer_or_cpu_is_accepted(self, gpus, use_cpu):
        with mock.patch.object(t5_flex_attention, "visible_gpus", return_value=gpus) as visible_gpus:
            t5_flex_attention.check_gpu_generation(use_cpu=use_cpu)  # raises UsageError on refusal
        # --use_cpu leaves every GPU idle, so none is looked at; otherwise all of them are (ranks pick theirs later).
        self.assertEqual(visible_gpus.call_count, 0 if use_cpu else 1)

    def test_visible_gpus_is_empty_without_cuda(self):
        with mock.patch.object(torch.cuda, "is_available", return_value=False):
            self.assertEqual(t5_flex_attention.visible_gpus(), [])

    @parameterized.parameters("sdpa", "eager")
    def test_build_model_checks_the_gpu_for_t5_flex_only(self, other):
        class Tokenizer:  # what build_t5_config reads
            pad_token_id, eos_token_id = 0, 1

            def __len__(self):
                return 100

        def args(name):
            return ModelArguments(model_size="t5-tiny", tokenizer_name_or_path="t5", attn_implementation=name)

        with mock.patch.object(t5_flex_attention, "visible_gpus", return_value=[("Tesla T4", (7, 5))]):
            with self.assertRaisesRegex(UsageError, "GPU 0, Tesla T4, is 7.5"):
                building.build_model(args("t5_flex"), Tokenizer())
            self.assertEqual(building.build_model(args(other), Tokenizer()).config._attn_implementation, other)
            flex_on_cpu = building.build_model(args("t5_flex"), Tokenizer(), use_cpu=True)
            self.assertEqual(flex_on_cpu.config._attn_implementation, "t5_flex")


class FlagTest(absltest.TestCase):

    def test_unknown_attention_implementation_names_the_flag_and_choices(self):
        with self.assertRaisesRegex(UsageError, r"--attn_implementation='flash' is not a valid choice; choices: sdpa, "
                                                r"eager, "
                                                r"t5_flex"):
            ModelArguments(model_size="t5-tiny", tokenizer_name_or_path="t5", attn_implementation="flash")


if __name__ == "__main__":
    absltest.main()
