"""model/precision.py, the precision owner: under fp16 every T5-family feed-forward output computes in fp32, which
keeps a model whose plain fp16 training overflows finite and close to fp32 (the negative control shows the
overflow without it); fp32 and bf16 runs take no fp16 hook and compute exactly as before; where the protection's
limit lies (the feed-forward's inner activations stay fp16)."""
import json
import math

import pytest
import torch
import yaml
from absl.testing import absltest, parameterized
from transformers import T5Config, T5ForConditionalGeneration

from t5kit.model import precision
from tests.helpers import T5_FAMILY, OneThreadTestCase, fine_tune, pre_train, tiny_flags

ROWS, INPUTS, TARGETS, VOCAB = 4, 16, 8, 128


def scaled_model(scale, feed_forward_proj="gated-gelu"):
    """A tiny T5 whose feed-forward weights are multiplied by `scale`: at 30 its `wo` outputs leave fp16's range."""
    torch.manual_seed(0)
    config = T5Config(vocab_size=VOCAB, d_model=64, d_ff=256, d_kv=16, num_layers=2, num_heads=4, dropout_rate=0.0,
                      decoder_start_token_id=0, pad_token_id=0, feed_forward_proj=feed_forward_proj,
                      tie_word_embeddings=False)
    model = T5ForConditionalGeneration(config)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if ".DenseReluDense." in name:
                parameter.mul_(scale)
    return model


def train(model, dtype, steps=8):
    """Training losses of `steps` AdamW steps under autocast `dtype` (fp16: with torch's GradScaler, as HF's Trainer
    steps it), the same batches for every call."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", enabled=dtype == torch.float16)
    generator = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        inputs = torch.randint(2, VOCAB, (ROWS, INPUTS), generator=generator)
        labels = torch.randint(2, VOCAB, (ROWS, TARGETS), generator=generator)
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            loss = model(input_ids=inputs, labels=labels).loss
        losses.append(loss.item())
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    return losses


def finite(values):
    return all(torch.isfinite(torch.tensor(values)).tolist())


class Fp16ProtectionTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        self.addCleanup(torch.set_num_threads, threads)

    def test_plain_fp16_overflows_and_the_protected_model_trains_like_fp32(self):
        self.assertFalse(finite(train(scaled_model(30.0), torch.float16)))  # the negative control
        reference = train(scaled_model(30.0), torch.float32)
        protected = scaled_model(30.0)
        self.assertEqual(precision.protect_fp16(protected), 4)  # 2 encoder + 2 decoder blocks
        losses = train(protected, torch.float16)
        self.assertTrue(finite(losses), losses)
        self.assertAlmostEqual(losses[0], reference[0], delta=0.01 * reference[0])  # the same weights and batch
        self.assertAlmostEqual(sum(losses) / len(losses), sum(reference) / len(reference),
                               delta=0.05 * sum(reference) / len(reference))

    @parameterized.parameters("relu", "gated-gelu")
    def test_the_output_projection_computes_in_fp32_the_inner_ones_in_fp16(self, feed_forward_proj):
        model = scaled_model(1.0, feed_forward_proj)
        precision.protect_fp16(model)
        block = model.encoder.block[0].layer[-1].DenseReluDense
        seen = {}
        for name in ("wo", "wi_0" if feed_forward_proj == "gated-gelu" else "wi"):
            getattr(block, name).register_forward_hook(lambda module, args, out, name=name: seen.update({name: out}))
        with torch.autocast("cpu", dtype=torch.float16):
            model(input_ids=torch.ones(1, 4, dtype=torch.long), labels=torch.ones(1, 2, dtype=torch.long))
        self.assertEqual(seen.pop("wo").dtype, torch.float32)
        self.assertEqual(next(iter(seen.values())).dtype, torch.float16)

    def test_the_limit_inner_activations_beyond_fp16_still_overflow(self):
        """The protection covers the sum `wo` computes, not the feed-forward's inner activations: scaled 100x, the
        gated product itself leaves fp16's range (module doc)."""
        protected = scaled_model(100.0)
        precision.protect_fp16(protected)
        self.assertFalse(finite(train(protected, torch.float16, steps=2)))

    def test_fp32_numerics_are_unchanged_by_the_protection(self):
        inputs, labels = torch.randint(2, VOCAB, (ROWS, INPUTS)), torch.randint(2, VOCAB, (ROWS, TARGETS))
        plain, protected = scaled_model(1.0), scaled_model(1.0)
        precision.protect_fp16(protected)
        self.assertTrue(torch.equal(plain(input_ids=inputs, labels=labels).logits,
                                    protected(input_ids=inputs, labels=labels).logits))

    @parameterized.parameters(*T5_FAMILY)
    def test_every_t5_family_feed_forward_is_protected(self, family):
        """T5 v1.0's ReLU and v1.1's gated feed-forward (Flan-T5), mT5's, UMT5's and LongT5's copies."""
        import transformers

        config_class, extra = T5_FAMILY[family]
        config = getattr(transformers, config_class)(vocab_size=64, d_model=16, d_ff=32, d_kv=8, num_layers=2,
                                                     num_heads=2, feed_forward_proj="gated-gelu", **extra)
        model = transformers.AutoModelForSeq2SeqLM.from_config(config)
        self.assertEqual(precision.protect_fp16(model), 4)  # 2 encoder + 2 decoder blocks
        self.assertTrue(all(precision.is_protected(linear) for linear in precision.feed_forward_outputs(model)))

    @parameterized.named_parameters(("fp32", False, "float32", 0), ("bf16_stream", False, "bfloat16", 0),
                                    ("fp16", True, "float32", 4))
    def test_only_fp16_runs_take_the_fp16_hooks(self, fp16, activation_dtype, protected):
        model = precision.prepare_model(scaled_model(1.0), fp16=fp16, activation_dtype=activation_dtype)
        self.assertEqual(sum(precision.is_protected(linear) for linear in precision.feed_forward_outputs(model)),
                         protected)

    def test_fp16_weights_keep_the_feed_forward_outputs_in_fp32(self):
        """predict_t5.py --fp16: every weight fp16 but `wo`; the logits stay near fp32's, where the same weights all
        in fp16 overflow (transformers then clamps the inf it finds, so the logits come out finite and wrong)."""
        inputs = torch.randint(2, VOCAB, (2, 8), generator=torch.Generator().manual_seed(3))
        start = torch.zeros(2, 1, dtype=torch.long)

        def logits(model):
            with torch.no_grad():
                return model(input_ids=inputs, decoder_input_ids=start).logits.float()

        reference = logits(scaled_model(30.0))
        model = precision.cast_to_fp16_weights(scaled_model(30.0))
        dtypes = {name: parameter.dtype for name, parameter in model.named_parameters()}
        self.assertEqual({dtype for name, dtype in dtypes.items() if name.endswith(".wo.weight")}, {torch.float32})
        self.assertEqual({dtype for name, dtype in dtypes.items() if not name.endswith(".wo.weight")},
                         {torch.float16})
        scale = reference.abs().max()
        self.assertLess((logits(model) - reference).abs().max() / scale, 0.02)
        plain = logits(scaled_model(30.0).to(torch.float16))
        self.assertFalse(torch.isfinite(plain).all() and (plain - reference).abs().max() / scale < 0.02)


@pytest.mark.slow  # real pre-training and fine-tuning runs
class Fp16RunTest(OneThreadTestCase):
    """Both training scripts with --fp16 --use_cpu: fp16 autocast really on (the feed-forward inputs compute in fp16,
    its outputs in fp32), the loss scaler saved with each checkpoint, --fp16 in config.yaml and the model card."""

    def linear_output_dtypes(self):
        seen = set()

        def hook(module, args, output):
            if isinstance(module, torch.nn.Linear) and module.training:
                seen.add(output.dtype)
        handle = torch.nn.modules.module.register_module_forward_hook(hook)
        self.addCleanup(handle.remove)
        return seen

    def check_record_and_card(self, out):
        record = yaml.safe_load((out / "config.yaml").read_text())
        self.assertEqual((record["fp16"], record["bf16"], record["derived"]["precision"]), (True, False, "fp16"))
        self.assertIn("| precision | fp16 |", (out / "README.md").read_text())

    def test_pre_training_in_fp16(self):
        out, seen = self.dir / "pretrain", self.linear_output_dtypes()
        metrics = pre_train(self.run_flags(out, fp16=True))
        self.assertEqual(seen, {torch.float16, torch.float32})  # autocast's matmuls, the protected outputs
        self.assertTrue(math.isfinite(metrics["train_loss"]) and math.isfinite(metrics["eval_loss"]))
        self.assertTrue((out / "checkpoint-4" / "scaler.pt").is_file())
        self.check_record_and_card(out)

    def test_fine_tuning_in_fp16(self):
        out, seen = self.dir / "finetune", self.linear_output_dtypes()
        results = fine_tune(tiny_flags(str(out), fp16=True))
        self.assertEqual(seen, {torch.float16, torch.float32})
        self.assertTrue(math.isfinite(results["eval_loss"]))
        self.check_record_and_card(out)

    def test_60_steps_of_t5_mini_end_within_0_1_of_fp32(self):
        """The GPU check's fp16 section on a CPU (bench/gpu_sections.py: LOSS_TOLERANCE, the mean gap over the last
        half of the logged steps), at a CPU-sized run: 60 steps of 4 rows of 16 tokens, as fp16 on a CPU without
        native fp16 (no AVX-512 FP16 or AMX) runs several times slower than fp32."""
        curves = {}
        for name, flags in (("fp32", {}), ("fp16", {"fp16": True})):
            out = self.dir / name
            pre_train(self.run_flags(out, model_size="t5-mini", max_steps=60, learning_rate=3e-3, warmup_steps=10,
                                     input_length=16, save_strategy="no", logging_steps=1, **flags))
            state = json.loads((out / "trainer_state.json").read_text())
            curves[name] = [entry["loss"] for entry in state["log_history"] if "loss" in entry]
        self.assertLen(curves["fp16"], 60)
        self.assertTrue(all(math.isfinite(loss) for loss in curves["fp16"]))
        self.assertLess(curves["fp32"][-1], curves["fp32"][0] - 3)  # a curve that fell, not one that sat still
        gap = sum(abs(a - b) for a, b in zip(curves["fp16"][-30:], curves["fp32"][-30:])) / 30
        print(f"fp16 vs fp32, t5-mini, 60 steps: mean gap over the last 30 steps {gap:.4f}")
        self.assertLess(gap, 0.1)


if __name__ == "__main__":
    absltest.main()
