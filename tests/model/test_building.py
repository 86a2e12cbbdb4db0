"""model/building.py: every --model_size preset builds the architecture its T5 version has (parameter counts with
T5's 32,128-row vocabulary; T5 1.0 ties lm_head to the embedding, T5 v1.1 does not), an untied head keeps its
own values through save, load, resume and resize_token_embeddings, and --dropout_rate applies where it is given;
SDPA gets T5's position bias in the query dtype under autocast, --activation_dtype bfloat16 makes the residual
stream bf16 under autocast, and an older transformers is named."""
import json
from unittest import mock

import pytest
import torch
from absl.testing import absltest, parameterized
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForSeq2SeqLM, T5Config, T5ForConditionalGeneration

import constants
from t5kit.config.arguments import ModelArguments
from t5kit.errors import UsageError
from t5kit.model import building, precision
from t5kit.train import resume
from tests.helpers import OneThreadTestCase, TinyRunTestCase, fine_tune, pre_train, tiny_flags, tiny_run_flags

T5_VOCAB_SIZE = 32128  # 32,100 pieces padded to a multiple of 128, as in the released checkpoints

# (preset, parameters, lm_head shares the embedding): T5 1.0 (google-t5/t5-*) and T5 v1.1 (google/t5-v1_1-*).
PRESET_CASES = (
    ("t5_small", "t5-small", 60_506_624, True),
    ("t5_base", "t5-base", 222_903_552, True),
    ("t5_large", "t5-large", 737_668_096, True),
    ("t5_v1_1_small", "t5-v1_1-small", 76_961_152, False),
    ("t5_v1_1_base", "t5-v1_1-base", 247_577_856, False),
    ("t5_v1_1_large", "t5-v1_1-large", 783_150_080, False),
)
TINY_V1_1 = dict(d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2, feed_forward_proj="gated-gelu",
                 tie_word_embeddings=False)


def tiny_untied_model(vocab_size=128):
    torch.manual_seed(0)
    return building.new_t5_model(building.t5_config(TINY_V1_1, vocab_size, pad_token_id=0, eos_token_id=1))


class PresetTest(parameterized.TestCase):

    @parameterized.named_parameters(*PRESET_CASES)
    def test_preset_has_the_parameters_and_head_of_its_t5_version(self, name, parameters, tied):
        with torch.device("meta"):  # shapes only: no memory, no initialisation time
            model = building.new_t5_model(building.t5_config(constants.MODEL_SIZE_PRESETS[name], T5_VOCAB_SIZE, 0, 1))
        self.assertEqual(building.count_parameters(model), parameters)
        self.assertEqual(model.lm_head.weight is model.shared.weight, tied)
        self.assertEqual(model.config.tie_word_embeddings, tied)
        # Either way the encoder and decoder read the one shared input embedding.
        self.assertIs(model.encoder.embed_tokens.weight, model.shared.weight)
        self.assertIs(model.decoder.embed_tokens.weight, model.shared.weight)
        # T5 1.0 rescales the decoder output before a tied head; T5 v1.1 does not.
        self.assertEqual(model.config.scale_decoder_outputs, tied)


class UntiedHeadTest(parameterized.TestCase):

    def test_untied_head_has_its_own_initialisation(self):
        model = tiny_untied_model()
        self.assertFalse(torch.equal(model.lm_head.weight, model.shared.weight))
        # T5X's rule by default (LmHeadInitTest): std d_model^-0.5, where the embedding has std 1.0.
        self.assertAlmostEqual(model.lm_head.weight.std().item(), 32 ** -0.5, delta=0.01)
        self.assertAlmostEqual(model.shared.weight.std().item(), 1.0, delta=0.05)

    def test_save_and_load_keep_the_head_untied(self):
        model = tiny_untied_model()
        folder = self.create_tempdir().full_path
        model.save_pretrained(folder)
        saved = load_file(f"{folder}/model.safetensors")
        self.assertIn("lm_head.weight", saved)
        self.assertNotIn("encoder.embed_tokens.weight", saved)  # still the shared embedding
        with self.assertNoLogs("transformers.modeling_utils", level="WARNING"):
            loaded = building.load_pretrained_t5(folder)
        self.assertTrue(building.has_untied_output_layer(loaded))
        self.assertFalse(loaded.config.tie_word_embeddings)
        torch.testing.assert_close(loaded.lm_head.weight, model.lm_head.weight)
        torch.testing.assert_close(loaded.shared.weight, model.shared.weight)
        self.assertIs(loaded.encoder.embed_tokens.weight, loaded.shared.weight)

    def test_resize_token_embeddings_keeps_the_head_untied(self):
        model = tiny_untied_model()
        head = model.lm_head.weight.detach().clone()
        model.resize_token_embeddings(256)
        self.assertEqual(tuple(model.lm_head.weight.shape), (256, 32))
        self.assertTrue(building.has_untied_output_layer(model))
        torch.testing.assert_close(model.lm_head.weight[:128], head)
        self.assertIs(model.decoder.embed_tokens.weight, model.shared.weight)

    def test_tied_model_stays_tied_through_save_and_load(self):
        torch.manual_seed(0)
        tied = building.new_t5_model(building.t5_config(constants.MODEL_SIZE_PRESETS["t5-tiny"], 128, 0, 1))
        folder = self.create_tempdir().full_path
        tied.save_pretrained(folder)
        loaded = building.load_pretrained_t5(folder)
        self.assertIs(loaded.lm_head.weight, loaded.shared.weight)
        self.assertTrue(loaded.config.tie_word_embeddings)


class LmHeadInitTest(parameterized.TestCase):
    """--lm_head_init: a new untied head (the t5-v1_1-small preset, made shallow) gets T5X's truncated normal of std
    d_model^-0.5 (0.0442 at d_model 512) or transformers' std 1.0; every other weight is the same for one seed, and a
    tied preset or a loaded model is left as it was."""

    class Tokenizer:  # what build_t5_config reads: 128 ids, so a 128 x 512 head (65,536 draws)
        pad_token_id, eos_token_id = 0, 1

        def __len__(self):
            return 128

    def build(self, lm_head_init, model_size="t5-v1_1-small", model_name_or_path=None, more_overrides=""):
        overrides = None if model_name_or_path else "num_layers=1,num_decoder_layers=1,d_ff=64" + more_overrides
        args = ModelArguments(model_name_or_path=model_name_or_path, model_size=model_size,
                              tokenizer_name_or_path="t5", config_overrides=overrides, lm_head_init=lm_head_init)
        torch.manual_seed(0)
        return building.build_model(args, self.Tokenizer())

    @parameterized.named_parameters(("t5x", "t5x", 512 ** -0.5, 2 * 512 ** -0.5 / 0.87962566103423978),
                                    ("hf", "hf", 1.0, None))
    def test_untied_head_has_the_std_of_its_init(self, lm_head_init, std, bound):
        model = self.build(lm_head_init)
        head = model.lm_head.weight.detach()
        # Untied: lm_head is a parameter of its own, 128 x 512 more than the same shape tied.
        tied = self.build(lm_head_init, more_overrides=",tie_word_embeddings=True")
        self.assertEqual(building.count_parameters(model) - building.count_parameters(tied), 128 * 512)
        self.assertEqual(tuple(head.shape), (128, 512))
        self.assertAlmostEqual(head.std().item(), std, delta=0.02 * std)  # 65,536 draws: ~0.3 % off at most
        self.assertAlmostEqual(head.mean().item(), 0.0, delta=0.02 * std)
        if bound:  # truncated at 2 standard deviations of the normal drawn from: 0.1005, not 2 x 0.0442
            self.assertLessEqual(head.abs().max().item(), bound)
            self.assertGreater(head.abs().max().item(), 0.95 * bound)
        else:
            self.assertGreater(head.abs().max().item(), 3.5)  # a plain normal's tail

    def test_only_the_head_differs_between_the_inits(self):
        t5x, hf = self.build("t5x").state_dict(), self.build("hf").state_dict()
        differing = [name for name in t5x if not torch.equal(t5x[name], hf[name])]
        self.assertEqual(differing, ["lm_head.weight"])

    def test_a_tied_preset_is_untouched(self):
        t5x, hf = self.build("t5x", "t5-tiny"), self.build("hf", "t5-tiny")
        self.assertIs(t5x.lm_head.weight, t5x.shared.weight)
        for name, weight in t5x.state_dict().items():
            torch.testing.assert_close(weight, hf.state_dict()[name], rtol=0, atol=0)

    def test_a_loaded_model_keeps_its_head(self):
        folder = self.create_tempdir().full_path
        saved = tiny_untied_model()
        with torch.no_grad():
            saved.lm_head.weight.fill_(0.5)  # neither init would draw this
        saved.save_pretrained(folder)
        loaded = self.build("t5x", model_name_or_path=folder)
        torch.testing.assert_close(loaded.lm_head.weight, saved.lm_head.weight, rtol=0, atol=0)


class DropoutTest(parameterized.TestCase):
    """--dropout_rate: unset, random init trains without dropout (T5 v1.1 pre-training) and a loaded model keeps
    its own; given, it applies to a loaded model too (T5 fine-tunes with 0.1)."""

    class Tokenizer:  # what build_t5_config reads
        pad_token_id, eos_token_id = 0, 1

        def __len__(self):
            return 128

    def saved_model(self, dropout_rate):
        folder = self.create_tempdir().full_path
        config = building.t5_config(constants.MODEL_SIZE_PRESETS["t5-tiny"], 128, 0, 1, dropout_rate=dropout_rate)
        building.new_t5_model(config).save_pretrained(folder)
        return folder

    @parameterized.named_parameters(
        ("random_init_default", False, None, 0.0), ("random_init_given", False, 0.2, 0.2),
        ("loaded_keeps_its_own", True, None, 0.0), ("loaded_given", True, 0.1, 0.1))
    def test_dropout_used(self, loaded, flag, expected):
        folder = self.saved_model(dropout_rate=0.0) if loaded else None
        args = ModelArguments(model_name_or_path=folder, model_size="t5-tiny", tokenizer_name_or_path="t5",
                              dropout_rate=flag)
        model = building.build_model(args, self.Tokenizer())
        self.assertEqual(model.config.dropout_rate, expected)
        rates = {module.p for module in model.modules() if isinstance(module, torch.nn.Dropout)}
        self.assertEqual(rates, {expected})


class ConfigOverridesTest(parameterized.TestCase):
    """--config_overrides (HF run_mlm.py's flag): T5Config settings on top of the --model_size preset, random init
    only; a key T5Config lacks or a value of the wrong type is one line naming the flag."""

    Tokenizer = DropoutTest.Tokenizer

    def build(self, overrides, model_name_or_path=None):
        args = ModelArguments(model_name_or_path=model_name_or_path, model_size="t5-tiny", tokenizer_name_or_path="t5",
                              config_overrides=overrides)
        return building.build_model(args, self.Tokenizer())

    @parameterized.named_parameters(
        ("deeper", "num_layers=4", 4, 4, 32), ("narrower_and_deeper", "num_layers=3, d_model=24", 3, 3, 24),
        ("decoder_apart", "num_layers=4,num_decoder_layers=1", 4, 1, 32))
    def test_the_model_has_the_overridden_shape(self, overrides, encoder_layers, decoder_layers, d_model):
        model = self.build(overrides)
        self.assertLen(model.encoder.block, encoder_layers)
        self.assertLen(model.decoder.block, decoder_layers)
        self.assertEqual(model.shared.weight.shape, (128, d_model))
        self.assertEqual(model.config.num_heads, constants.MODEL_SIZE_PRESETS["t5-tiny"]["num_heads"])  # kept

    @parameterized.named_parameters(
        ("unknown_key", "dmodel=64", "T5Config has no setting 'dmodel'; did you mean 'd_model'"),
        ("no_value", "num_layers", "'num_layers' has no value; give key=value pairs"),
        ("wrong_type", "d_model=wide", "--config_overrides 'd_model=wide'"))
    def test_bad_overrides_are_refused(self, overrides, message):
        with self.assertRaisesRegex(UsageError, message):
            self.build(overrides)

    def test_refused_with_a_model_to_continue_from(self):
        with self.assertRaisesRegex(UsageError, "--config_overrides shapes a random init"):
            self.build("num_layers=4", model_name_or_path="google-t5/t5-small")


@pytest.mark.slow  # trains, resumes and trains again
class UntiedResumeTest(TinyRunTestCase):
    """A pre-training run of a v1.1 architecture (the t5-v1_1-small preset shrunk to test size) resumes from its
    checkpoint with the head untied, and its final model loads untied."""

    def test_checkpoint_resumes_and_final_model_stays_untied(self):
        out = self.dir / "run"
        flags = dict(model_size="t5-v1_1-small", save_strategy="steps", save_steps=2, save_total_limit=3)
        with mock.patch.dict(constants.MODEL_SIZE_PRESETS, {"t5-v1_1-small": TINY_V1_1}):
            pre_train(tiny_run_flags(str(out), self.corpus, max_steps=2, **flags))
            state = load_file(f"{out}/checkpoint-2/model.safetensors")
            self.assertFalse(torch.equal(state["lm_head.weight"], state["shared.weight"]))
            pre_train(tiny_run_flags(str(out), self.corpus, max_steps=4, resume_from_checkpoint="auto", **flags))
        final = building.load_pretrained_t5(str(out))
        self.assertTrue(building.has_untied_output_layer(final))
        self.assertIn('"tie_word_embeddings": false', (out / "config.json").read_text())
        self.assertIn("lm_head_init: t5x", (out / "config.yaml").read_text())  # the default, recorded
        self.assertIn("| tied embeddings | False (lm_head: `t5x` init) |", (out / "README.md").read_text())
        resume.check_checkpoint_fits(str(out / "checkpoint-4"), final)  # the same architecture: accepted


@pytest.mark.slow  # a pre-training run
class ConfigOverridesRunTest(TinyRunTestCase):
    """A pre-training run with --config_overrides saves the overridden shape, records the flag in config.yaml and
    names it in the model card."""

    def test_the_run_saves_and_reports_the_overridden_shape(self):
        out = self.dir / "run"
        pre_train(tiny_run_flags(str(out), self.corpus, max_steps=1, config_overrides="num_layers=3,d_ff=48"))
        model = building.load_pretrained_t5(str(out))
        self.assertLen(model.encoder.block, 3)
        self.assertLen(model.decoder.block, 3)
        self.assertEqual(model.config.d_ff, 48)
        self.assertIn("config_overrides: num_layers=3,d_ff=48", (out / "config.yaml").read_text())
        self.assertIn("`t5-tiny` preset with `num_layers=3,d_ff=48`", (out / "README.md").read_text())


class PositionBiasDtypeTest(absltest.TestCase):
    """precision.cast_position_bias_under_autocast: SDPA gets one dtype under autocast, fp32 is untouched; and the
    mask SDPA gets has a contiguous last dimension. Both are conditions of SDPA's fused kernels: without either,
    every T5 attention runs the unfused math path (transformers < 5.20 passed a permuted bias: 125 vs 102 ms per
    t5-base step on an H100)."""

    def test_sdpa_gets_the_query_dtype_under_autocast_and_fp32_is_unchanged(self):
        torch.manual_seed(0)
        model = T5ForConditionalGeneration(T5Config(vocab_size=128, d_model=64, d_ff=128, d_kv=16, num_layers=2,
                                                    num_heads=4, decoder_start_token_id=0, pad_token_id=0)).eval()
        ids, labels = torch.randint(2, 128, (4, 24)), torch.randint(2, 128, (4, 8))
        mask = torch.ones_like(ids)
        mask[1, 15:] = 0  # padding, so the mask is not all ones
        seen, last_dim_strides = [], []
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def recording_sdpa(query, key, value, attn_mask=None, **kwargs):
            seen.append((query.dtype, attn_mask.dtype))
            last_dim_strides.append(attn_mask.stride(-1))
            return sdpa(query, key, value, attn_mask=attn_mask, **kwargs)

        def logits(autocast):
            seen.clear()
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast), \
                    mock.patch.object(torch.nn.functional, "scaled_dot_product_attention", recording_sdpa):
                return model(input_ids=ids, attention_mask=mask, labels=labels).logits.float()

        fp32_before, bf16_before = logits(False), logits(True)
        self.assertIn((torch.bfloat16, torch.float32), seen)  # the mismatch that keeps SDPA off its fused kernels
        precision.cast_position_bias_under_autocast(model)
        fp32_after, bf16_after = logits(False), logits(True)
        self.assertEqual(set(seen), {(torch.bfloat16, torch.bfloat16)})
        self.assertEqual(len(seen), 3 * 2)  # encoder self, decoder self and cross attention in each of 2 layers
        self.assertEqual(set(last_dim_strides), {1})
        self.assertTrue(torch.equal(fp32_after, fp32_before))  # exact resume and CPU tests run fp32
        # The bias is rounded to bf16 where the scores already are bf16: no worse than before against fp32.
        error_before = (bf16_before - fp32_before).abs().mean()
        error_after = (bf16_after - fp32_before).abs().mean()
        self.assertLessEqual(float(error_after), 1.1 * float(error_before))


class ResidualStreamDtypeTest(parameterized.TestCase):
    """--activation_dtype bfloat16 (precision.cast_residual_stream_under_autocast): under autocast every T5 block of
    the encoder and decoder takes a bf16 residual stream (fp32 without the hooks), fp32 runs are bit-identical, the
    parameters and their gradients stay fp32, and the logits stay near fp32's."""

    @staticmethod
    def model(model_type="t5"):
        torch.manual_seed(0)
        config = AutoConfig.for_model(model_type, vocab_size=128, d_model=64, d_ff=128, d_kv=16, num_layers=2,
                                      num_heads=4, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
        return AutoModelForSeq2SeqLM.from_config(config)

    @staticmethod
    def forward_backward(model, autocast):
        """(logits, dtypes of the hidden states entering each block, dtypes of the parameters' gradients)."""
        torch.manual_seed(1)
        ids, labels = torch.randint(2, 128, (4, 24)), torch.randint(2, 128, (4, 8))
        entering = []
        hooks = [block.register_forward_pre_hook(lambda module, args: entering.append(args[0].dtype))
                 for block in [*model.encoder.block, *model.decoder.block]]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            output = model(input_ids=ids, labels=labels)
        output.loss.backward()
        for hook in hooks:
            hook.remove()
        grads = {p.grad.dtype for p in model.parameters() if p.grad is not None}
        model.zero_grad(set_to_none=True)
        return output.logits.detach().float(), entering, grads

    @parameterized.parameters("t5", "mt5", "umt5", "longt5")
    def test_every_block_takes_a_bf16_stream_under_autocast_only(self, model_type):
        model = self.model(model_type)
        fp32_before, _, _ = self.forward_backward(model, False)
        _, entering, _ = self.forward_backward(model, True)
        self.assertEqual(set(entering), {torch.float32})  # autocast alone: the stream between the matmuls is fp32
        self.assertEqual(precision.cast_residual_stream_under_autocast(model), 2)  # encoder's and decoder's
        fp32_after, entering_fp32, grads_fp32 = self.forward_backward(model, False)
        _, entering, grads = self.forward_backward(model, True)
        self.assertEqual(entering, [torch.bfloat16] * 4)  # 2 encoder + 2 decoder blocks
        self.assertEqual(set(entering_fp32), {torch.float32})
        self.assertTrue(torch.equal(fp32_after, fp32_before))
        self.assertEqual(grads | grads_fp32 | {p.dtype for p in model.parameters()}, {torch.float32})

    def test_logits_stay_near_fp32(self):
        model = self.model()
        fp32, _, _ = self.forward_backward(model, False)
        bf16_matmuls, _, _ = self.forward_backward(model, True)
        precision.cast_residual_stream_under_autocast(model)
        bf16_stream, _, _ = self.forward_backward(model, True)
        scale = fp32.abs().mean()
        matmul_error = float((bf16_matmuls - fp32).abs().mean() / scale)
        stream_error = float((bf16_stream - fp32).abs().mean() / scale)
        self.assertLess(stream_error, 0.02)  # bf16 keeps ~3 significant digits
        self.assertLess(stream_error, 4 * matmul_error)
        self.assertFalse(torch.equal(bf16_stream, bf16_matmuls))  # the hooks did change the computation

    def test_build_model_hooks_only_for_bfloat16(self):
        args = ModelArguments(model_size="t5-tiny", tokenizer_name_or_path="t5")
        for activation_dtype, hooks in (("float32", 0), ("bfloat16", 1)):
            model = building.build_model(args, LmHeadInitTest.Tokenizer(), activation_dtype=activation_dtype)
            self.assertEqual([len(model.encoder.embed_tokens._forward_hooks),
                              len(model.decoder.embed_tokens._forward_hooks)], [hooks, hooks])


@pytest.mark.slow  # pre-training and fine-tuning runs
class ActivationDtypeRunTest(OneThreadTestCase):
    """--bf16 true --activation_dtype bfloat16 on the CPU: both entry scripts train with finite losses that differ
    from the float32 stream's, and config.yaml and the model card record the flag."""

    def losses(self, out):
        history = json.loads((out / "metrics.json").read_text())["log_history"]
        return [entry["loss"] for entry in history if "loss" in entry]

    def test_pretraining_records_the_flag_and_changes_the_losses_a_little(self):
        runs = {dtype: self.dir / dtype for dtype in ("float32", "bfloat16")}
        for dtype, out in runs.items():
            pre_train(self.run_flags(out, save_strategy="no", bf16=True, activation_dtype=dtype))
        losses = {dtype: self.losses(out) for dtype, out in runs.items()}
        self.assertLen(losses["bfloat16"], 4)
        self.assertNotEqual(losses["bfloat16"], losses["float32"])
        for stream, matmuls in zip(losses["bfloat16"], losses["float32"]):
            self.assertAlmostEqual(stream, matmuls, delta=0.05 * matmuls)
        self.assertIn("activation_dtype: bfloat16", (runs["bfloat16"] / "config.yaml").read_text())
        self.assertIn("| `--activation_dtype` | bfloat16 |", (runs["bfloat16"] / "README.md").read_text())

    def test_fine_tuning_trains_and_evaluates(self):
        out = self.dir / "finetune"
        results = fine_tune(tiny_flags(str(out), bf16=True, activation_dtype="bfloat16"))
        self.assertLen(self.losses(out), 4)
        self.assertIn("eval_accuracy", results)
        self.assertIn("activation_dtype: bfloat16", (out / "config.yaml").read_text())


class UnfusedAttentionWarningTest(parameterized.TestCase):
    """building.warn_if_t5_attention_runs_unfused: an older transformers than requirements.txt asks for is named."""

    @parameterized.named_parameters(("older", "5.17.0"), ("first_release_before", "5.19.2"))
    def test_older_transformers_is_named_with_the_fix(self, version):
        with self.assertLogs("t5kit.model.building", level="WARNING") as logs:
            building.warn_if_t5_attention_runs_unfused(version)
        self.assertEqual(len(logs.output), 1)
        self.assertIn(f"transformers {version} gives SDPA a non-contiguous T5 position-bias mask", logs.output[0])
        self.assertIn("pip install 'transformers>=5.20'", logs.output[0])

    @parameterized.named_parameters(("first_fixed", "5.20.0"), ("newer", "5.23.0"), ("dev", "5.24.0.dev0"))
    def test_fixed_transformers_is_quiet(self, version):
        with self.assertNoLogs("modeling", level="WARNING"):
            building.warn_if_t5_attention_runs_unfused(version)


if __name__ == "__main__":
    absltest.main()
