"""model/chunked_loss.py, --loss_chunk_tokens: a training step's loss and every parameter's gradient equal
transformers' T5 loss (fp32: to fp32 rounding; bf16 autocast: gradients within BF16_TOLERANCE of the largest), for
T5 1.0's tied head (decoder output scaled by d_model**-0.5) and T5 v1.1's untied one, with -100 labels, chunks that
do not divide the tokens, and packed rows; no lm_head call sees more than one chunk; what needs logits (evaluation,
no gradients, no labels) gets transformers' forward; build_model installs it (and --fused_rmsnorm) from the flags,
and both entry scripts train with them (pre-training: the losses of a run without them). The negative control:
leaving out the scale fails the check."""
import copy
import inspect
import json

import pytest
import torch
from absl.testing import absltest, parameterized
from transformers import LongT5Config, LongT5ForConditionalGeneration

from t5kit.config.arguments import ModelArguments
from t5kit.errors import UsageError
from t5kit.model import building, chunked_loss, fused_rmsnorm, packed_attention
from tests.helpers import OneThreadTestCase, fine_tune, pre_train, tiny_flags

VOCAB, ROWS, INPUTS, TARGETS = 96, 3, 10, 6
TIED = dict(d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=2, feed_forward_proj="relu")  # T5 1.0
UNTIED = dict(TIED, feed_forward_proj="gated-gelu", tie_word_embeddings=False)  # T5 v1.1
SHAPES = (("tied", TIED), ("untied", UNTIED))
# bf16 autocast: each chunk's lm_head gradient is a bf16 product rounded apart, the whole one is rounded once; the
# gradients differ by a bf16 rounding or two (2**-8 relative) of each tensor's largest (measured: 0.0054 tied,
# 0.0060 untied). The losses agree to fp32 rounding: both take the fp32 cross-entropy of the same bf16 logits.
BF16_TOLERANCE = 2 ** -6


def tiny_t5(architecture):
    torch.manual_seed(0)
    config = building.t5_config(architecture, VOCAB, pad_token_id=0, eos_token_id=1)
    return building.new_t5_model(config).train()


def batch(ignored_tail=True):
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(2, VOCAB, (ROWS, TARGETS), generator=generator)
    if ignored_tail:
        labels[0, 4:] = -100  # target padding
    return {"input_ids": torch.randint(2, VOCAB, (ROWS, INPUTS), generator=generator), "labels": labels}


def loss_and_gradients(model, inputs, dtype=None):
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        loss = model(**inputs).loss
    loss.backward()
    return loss.detach(), {name: parameter.grad for name, parameter in model.named_parameters()}


def assert_same_step(test, standard, chunked, tolerance=None):
    """Equal losses (to fp32 rounding) and gradients: to fp32 rounding (tolerance None), or within `tolerance` of
    each tensor's largest gradient."""
    (loss, gradients), (chunked_loss_, chunked_gradients) = standard, chunked
    torch.testing.assert_close(chunked_loss_, loss)  # fp32 either way: autocast's cross-entropy is fp32
    test.assertEqual(gradients.keys(), chunked_gradients.keys())
    for name, gradient in gradients.items():
        test.assertIsNotNone(chunked_gradients[name], name)
        if tolerance is None:
            torch.testing.assert_close(chunked_gradients[name], gradient, msg=name)
        else:
            largest = gradient.abs().max().item()
            test.assertLessEqual((chunked_gradients[name] - gradient).abs().max().item(), tolerance * largest, name)


class ChunkedLossTest(parameterized.TestCase):

    def pair(self, architecture, chunk_tokens=7):
        standard = tiny_t5(architecture)
        return standard, chunked_loss.install(copy.deepcopy(standard), chunk_tokens)

    @parameterized.named_parameters(
        *[(f"{name}_chunk_{chunk}", architecture, chunk) for name, architecture in SHAPES for chunk in (1, 7, 18, 64)])
    def test_fp32_loss_and_gradients_equal_transformers(self, architecture, chunk_tokens):
        # 18 target tokens: chunks of 7 leave a last chunk of 4; 18 and 64 are one chunk; 1, one token a chunk
        standard, chunked = self.pair(architecture, chunk_tokens)
        inputs = batch()
        assert_same_step(self, loss_and_gradients(standard, inputs), loss_and_gradients(chunked, inputs))

    @parameterized.named_parameters(*SHAPES)
    def test_bf16_autocast_loss_and_gradients_equal_within_tolerance(self, architecture):
        standard, chunked = self.pair(architecture)
        inputs = batch()
        assert_same_step(self, loss_and_gradients(standard, inputs, torch.bfloat16),
                         loss_and_gradients(chunked, inputs, torch.bfloat16), BF16_TOLERANCE)

    def test_the_heads_are_the_shapes_they_claim(self):
        tied, untied = tiny_t5(TIED), tiny_t5(UNTIED)
        self.assertIs(tied.lm_head.weight, tied.shared.weight)
        self.assertIsNot(untied.lm_head.weight, untied.shared.weight)
        self.assertEqual(chunked_loss.decoder_output_scale(tied.config), TIED["d_model"] ** -0.5)
        self.assertEqual(chunked_loss.decoder_output_scale(untied.config), 1.0)

    def test_ignored_labels_count_nowhere_and_all_ignored_is_nan_as_in_transformers(self):
        standard, chunked = self.pair(TIED)
        inputs = batch()
        inputs["labels"][1] = -100  # a whole row of padding, beside row 0's padded tail
        assert_same_step(self, loss_and_gradients(standard, inputs), loss_and_gradients(chunked, inputs))
        inputs["labels"][:] = -100
        self.assertTrue(torch.isnan(loss_and_gradients(standard, inputs)[0]))
        self.assertTrue(torch.isnan(loss_and_gradients(chunked, inputs)[0]))

    def test_packed_rows_give_the_same_loss_and_gradients(self):
        standard, chunked = self.pair(UNTIED, 5)
        for model in (standard, chunked):
            packed_attention.install(model)
        labels = torch.randint(2, VOCAB, (2, 8), generator=torch.Generator().manual_seed(2))
        labels[1, 6:] = -100
        packed = {"input_ids": torch.randint(2, VOCAB, (2, 12), generator=torch.Generator().manual_seed(3)),
                  "labels": labels, "decoder_input_ids": standard._shift_right(labels),
                  "encoder_segment_ids": torch.tensor([[1] * 5 + [2] * 7, [1] * 12]),
                  "decoder_segment_ids": torch.tensor([[1] * 3 + [2] * 5, [1] * 6 + [0] * 2])}
        packed["attention_mask"] = (packed["encoder_segment_ids"] > 0).long()
        step = loss_and_gradients(chunked, packed)
        assert_same_step(self, loss_and_gradients(standard, packed), step)
        unsegmented = {key: value for key, value in packed.items() if "segment" not in key}
        self.assertNotAlmostEqual(loss_and_gradients(chunked, unsegmented)[0].item(), step[0].item(), places=4)

    def test_no_lm_head_call_sees_more_than_one_chunk(self):
        _, chunked = self.pair(UNTIED, 4)
        rows_seen = []
        chunked.lm_head.register_forward_hook(lambda module, args, output: rows_seen.append(output.shape[0]))
        loss_and_gradients(chunked, batch())
        self.assertCountEqual(rows_seen, [4, 4, 4, 4, 2] * 2)  # the forward, then the backward's recomputation

    def test_evaluation_no_gradients_and_no_labels_get_transformers_logits(self):
        standard, chunked = self.pair(TIED)
        inputs = batch()
        self.assertIsNone(chunked(**inputs).logits)  # training
        with torch.no_grad():
            torch.testing.assert_close(chunked(**inputs).logits, standard(**inputs).logits)
        standard.eval(), chunked.eval()
        torch.testing.assert_close(chunked(**inputs).logits, standard(**inputs).logits)
        decoder_input_ids = standard._shift_right(inputs["labels"]).clamp(min=0)
        torch.testing.assert_close(chunked(input_ids=inputs["input_ids"], decoder_input_ids=decoder_input_ids).logits,
                                   standard(input_ids=inputs["input_ids"], decoder_input_ids=decoder_input_ids).logits)

    def test_the_forward_keeps_transformers_signature_and_says_its_chunk(self):
        standard, chunked = self.pair(TIED, 7)
        self.assertEqual(inspect.signature(chunked.forward), inspect.signature(standard.forward))
        self.assertEqual((chunked_loss.chunk_tokens_of(chunked), chunked_loss.chunk_tokens_of(standard)), (7, 0))
        self.assertIs(chunked_loss.install(standard, 0), standard)
        self.assertEqual(chunked_loss.chunk_tokens_of(standard), 0)  # 0: nothing installed

    def test_a_longt5_model_is_refused_naming_the_flag(self):
        config = LongT5Config(vocab_size=VOCAB, d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2)
        with self.assertRaisesRegex(UsageError, "--loss_chunk_tokens applies to t5, mt5, umt5 models, not longt5"):
            chunked_loss.install(LongT5ForConditionalGeneration(config), 8)


class NegativeControlTest(absltest.TestCase):

    def test_leaving_out_the_tied_scale_fails_the_check(self):
        model, inputs, seen = tiny_t5(TIED), batch(), {}
        model.decoder.register_forward_hook(lambda module, args, output: seen.update(decoder_output=output[0]))
        expected = model(**inputs).loss
        for scale in (TIED["d_model"] ** -0.5, 1.0):
            loss = chunked_loss.chunked_cross_entropy(seen["decoder_output"], model.lm_head, inputs["labels"], 7, scale)
            if scale == 1.0:
                with self.assertRaises(AssertionError):  # the check this file's equalities make
                    torch.testing.assert_close(loss, expected)
            else:
                torch.testing.assert_close(loss, expected)


class FlagsTest(OneThreadTestCase):

    class Tokenizer:  # what build_t5_config reads
        pad_token_id, eos_token_id = 0, 1

        def __len__(self):
            return 128

    def test_build_model_installs_what_the_flags_ask(self):
        for chunk_tokens, fused in ((0, False), (64, True)):
            args = ModelArguments(model_size="t5-tiny", tokenizer_name_or_path="t5", loss_chunk_tokens=chunk_tokens,
                                  fused_rmsnorm=fused)
            model = building.build_model(args, self.Tokenizer())
            self.assertEqual(chunked_loss.chunk_tokens_of(model), chunk_tokens)
            self.assertEqual({fused_rmsnorm.is_fused(norm) for norm in fused_rmsnorm.t5_norms(model)}, {fused})

    def losses(self, out):
        return [entry["loss"] for entry in json.loads((out / "metrics.json").read_text())["log_history"]
                if "loss" in entry]

    @pytest.mark.slow  # three tiny runs
    def test_both_entry_scripts_train_with_them(self):
        runs = {"standard": {}, "chunked": dict(loss_chunk_tokens=16, fused_rmsnorm=True)}
        for name, flags in runs.items():
            pre_train(self.run_flags(self.dir / name, save_strategy="no", **flags))
        for standard, chunked in zip(self.losses(self.dir / "standard"), self.losses(self.dir / "chunked"),
                                     strict=True):
            self.assertAlmostEqual(chunked, standard, delta=1e-5 * standard)
        self.assertIn("loss_chunk_tokens: 16", (self.dir / "chunked" / "config.yaml").read_text())
        results = fine_tune(tiny_flags(str(self.dir / "fine_tuned"), loss_chunk_tokens=16, fused_rmsnorm=True))
        self.assertLen(self.losses(self.dir / "fine_tuned"), 4)
        self.assertIn("eval_accuracy", results)  # evaluation generates: transformers' forward, logits and all


if __name__ == "__main__":
    absltest.main()
