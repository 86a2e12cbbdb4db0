"""model/fused_rmsnorm.py, --fused_rmsnorm: F.rms_norm in place of T5LayerNorm gives bit-identical outputs, output
dtypes and weight gradients in fp32, for a bf16 input beside fp32 weights (--activation_dtype bfloat16), under bf16
autocast and in fp16 or bf16 weights; the input's gradient is bit-identical for fp32 inputs and within two roundings
of a half input's dtype otherwise. A whole tiny T5 trains to the same loss and gradients, bit for bit. The negative
control: a LayerNorm that subtracts the mean fails the same check."""
import copy
import types

import torch
import torch.nn.functional as F
from absl.testing import absltest, parameterized
from transformers import MT5Config, MT5ForConditionalGeneration
from transformers.models.t5.modeling_t5 import T5LayerNorm

from t5kit.model import building, fused_rmsnorm

WIDTH = 64
# (input dtype, weight dtype, autocast dtype or None)
CASES = (("fp32", torch.float32, torch.float32, None),
         ("bf16_input_fp32_weight", torch.bfloat16, torch.float32, None),  # the --activation_dtype bfloat16 stream
         ("bf16_autocast", torch.float32, torch.float32, torch.bfloat16),
         ("bf16_input_under_autocast", torch.bfloat16, torch.float32, torch.bfloat16),
         ("fp16_weights", torch.float16, torch.float16, None),  # predict_t5.py --fp16
         ("fp16_weights_fp32_input", torch.float32, torch.float16, None),
         ("bf16_weights", torch.bfloat16, torch.bfloat16, None))


def t5_norm(weight_dtype):
    norm = T5LayerNorm(WIDTH)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(WIDTH, generator=torch.Generator().manual_seed(0)))
    return norm.to(weight_dtype)


def forward_backward(norm, inputs, autocast_dtype):
    """(output, input gradient, weight gradient) of one forward and a fixed backward."""
    inputs = inputs.detach().clone().requires_grad_(True)
    norm.weight.grad = None
    with torch.autocast("cpu", dtype=autocast_dtype or torch.bfloat16, enabled=autocast_dtype is not None):
        output = norm(inputs)
    upstream = torch.randn(output.shape, generator=torch.Generator().manual_seed(2)).to(output.dtype)
    output.backward(upstream)
    return output.detach(), inputs.grad, norm.weight.grad


def assert_t5_numerics(test, reference, fused, input_dtype):
    (output, input_gradient, weight_gradient), (fused_output, fused_input_gradient, fused_weight_gradient) = (
        reference, fused)
    test.assertEqual(fused_output.dtype, output.dtype)
    test.assertTrue(torch.equal(fused_output, output), (fused_output - output).abs().max())
    test.assertTrue(torch.equal(fused_weight_gradient, weight_gradient))
    if input_dtype == torch.float32:
        test.assertTrue(torch.equal(fused_input_gradient, input_gradient))
    else:  # T5 rounds two partial gradients to the input's dtype and adds them; the fused norm rounds their sum
        bound = 2 * torch.finfo(input_dtype).eps * input_gradient.abs().max().item()
        test.assertLessEqual((fused_input_gradient - input_gradient).abs().max().item(), bound)


class FusedNormTest(parameterized.TestCase):

    @parameterized.named_parameters(*CASES)
    def test_outputs_and_gradients_are_t5s(self, input_dtype, weight_dtype, autocast_dtype):
        reference = t5_norm(weight_dtype)
        fused = copy.deepcopy(reference)
        self.assertEqual(fused_rmsnorm.install(fused), 1)
        self.assertTrue(fused_rmsnorm.is_fused(fused))
        inputs = (3 * torch.randn(4, 8, WIDTH, generator=torch.Generator().manual_seed(1))).to(input_dtype)
        assert_t5_numerics(self, forward_backward(reference, inputs, autocast_dtype),
                           forward_backward(fused, inputs, autocast_dtype), input_dtype)

    @parameterized.named_parameters(("fp32", None), ("bf16_autocast", torch.bfloat16))
    def test_a_tiny_t5_trains_to_the_same_loss_and_gradients(self, autocast_dtype):
        architecture = dict(d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=2, feed_forward_proj="gated-gelu",
                            tie_word_embeddings=False)
        torch.manual_seed(0)
        model = building.new_t5_model(building.t5_config(architecture, 96, pad_token_id=0, eos_token_id=1))
        fused = copy.deepcopy(model)
        self.assertEqual(fused_rmsnorm.install(fused), 2 * 2 + 3 * 2 + 2)  # per layer 2 + 3, a final norm each
        generator = torch.Generator().manual_seed(1)
        inputs = {"input_ids": torch.randint(2, 96, (3, 10), generator=generator),
                  "labels": torch.randint(2, 96, (3, 6), generator=generator)}
        steps = []
        for each in (model, fused):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast_dtype is not None):
                loss = each(**inputs).loss
            loss.backward()
            steps.append((loss.detach(), [parameter.grad for parameter in each.parameters()]))
        self.assertTrue(torch.equal(steps[0][0], steps[1][0]))
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(steps[0][1], steps[1][1])))
        self.assertEqual(fused.state_dict().keys(), model.state_dict().keys())  # a saved model is T5's

    def test_the_t5_family_norms_are_found(self):
        config = MT5Config(vocab_size=64, d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2)
        self.assertEqual(fused_rmsnorm.install(MT5ForConditionalGeneration(config)), 2 + 3 + 2)


class NegativeControlTest(absltest.TestCase):

    def test_a_norm_that_subtracts_the_mean_fails_the_check(self):
        reference = t5_norm(torch.float32)
        layer_norm = copy.deepcopy(reference)
        layer_norm.forward = types.MethodType(
            lambda self, x: F.layer_norm(x, self.weight.shape, self.weight, None, self.variance_epsilon), layer_norm)
        inputs = torch.randn(4, 8, WIDTH, generator=torch.Generator().manual_seed(1)) + 0.5
        with self.assertRaises(AssertionError):
            assert_t5_numerics(self, forward_backward(reference, inputs, None),
                               forward_backward(layer_norm, inputs, None), torch.float32)


if __name__ == "__main__":
    absltest.main()
