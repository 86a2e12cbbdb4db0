"""Training features as flags: per-regex learning rates, Adafactor with T5 settings, warm-up, checkpointing."""
import json
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from absl.testing import absltest, parameterized
from safetensors.torch import load_file
from transformers import Seq2SeqTrainer, T5Config, T5ForConditionalGeneration
from transformers.optimization import Adafactor

from t5kit.config.checks import with_non_blocking_copies
from t5kit.errors import UsageError
from t5kit.model import building
from t5kit.optim import param_groups
from tests.helpers import pre_train, require, tiny_run_flags, training_args


def tiny_model():
    config = T5Config(vocab_size=64, d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2,
                      decoder_start_token_id=0, pad_token_id=0)
    return T5ForConditionalGeneration(config)


class PositionBiasDtypeTest(absltest.TestCase):
    """building.cast_position_bias_under_autocast: SDPA gets one dtype under autocast, fp32 is untouched; and the
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
        building.cast_position_bias_under_autocast(model)
        fp32_after, bf16_after = logits(False), logits(True)
        self.assertEqual(set(seen), {(torch.bfloat16, torch.bfloat16)})
        self.assertEqual(len(seen), 3 * 2)  # encoder self, decoder self and cross attention in each of 2 layers
        self.assertEqual(set(last_dim_strides), {1})
        self.assertTrue(torch.equal(fp32_after, fp32_before))  # exact resume and CPU tests run fp32
        # The bias is rounded to bf16 where the scores already are bf16: no worse than before against fp32.
        error_before = (bf16_before - fp32_before).abs().mean()
        error_after = (bf16_after - fp32_before).abs().mean()
        self.assertLessEqual(float(error_after), 1.1 * float(error_before))


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


class NonBlockingCopiesTest(parameterized.TestCase):
    """Batches go to the device with non-blocking copies by default: a blocking copy would wait for the steps queued
    before it, one GPU sync per step (config/checks.with_non_blocking_copies)."""

    def test_trainers_data_loader_copies_without_blocking_by_default(self):
        trainer = Seq2SeqTrainer(model=tiny_model(), args=training_args(),
                                 train_dataset=[{"input_ids": [5, 6, 1], "labels": [7, 1]}] * 4)
        self.assertTrue(trainer.get_train_dataloader()._non_blocking)

    @parameterized.named_parameters(
        ("json_off", ["--accelerator_config", '{"non_blocking": false}'], False),
        ("json_other_key", ["--accelerator_config", '{"even_batches": false}'], True),
        ("nothing_pinned", ["--dataloader_pin_memory", "false"], False))  # HF warns against non_blocking unpinned
    def test_a_value_the_user_sets_is_kept(self, argv, non_blocking):
        self.assertEqual(training_args(*argv).accelerator_config.non_blocking, non_blocking)

    def test_a_yaml_mapping_keeps_its_keys(self):
        config = with_non_blocking_copies({"even_batches": False}, pin_memory=True)
        self.assertEqual(config, {"non_blocking": True, "even_batches": False})

    def test_bad_json_is_refused_naming_the_flag(self):
        with self.assertRaisesRegex(UsageError, r"^--accelerator_config is not valid JSON \(.*\); pass a JSON "):
            training_args("--accelerator_config", '{"non_blocking": tru}')


class ParamGroupsTest(parameterized.TestCase):

    def test_groups_follow_the_first_matching_regex(self):
        model = tiny_model()
        args = training_args("--param_group_lr", "lm_head|shared=1e-3,.*=1e-4", "--weight_decay", "0.1")
        optimizer = param_groups.create_optimizer(model, args)
        lr_of = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
        decay_of = {id(p): group["weight_decay"] for group in optimizer.param_groups for p in group["params"]}
        for name, parameter in model.named_parameters():
            expected = 1e-3 if ("lm_head" in name or "shared" in name) else 1e-4
            self.assertEqual(lr_of[id(parameter)], expected, name)
            # HF's rule: no decay on norms and biases (T5's relative_attention_bias included).
            no_decay = "layer_norm" in name or "bias" in name
            self.assertEqual(decay_of[id(parameter)], 0.0 if no_decay else 0.1, name)
        # Every parameter is in exactly one group.
        self.assertEqual(sum(len(g["params"]) for g in optimizer.param_groups), len(list(model.parameters())))

    def test_group_sizes_are_logged(self):
        with self.assertLogs("t5kit.optim.param_groups", level="INFO") as logs:
            param_groups.build_param_groups(tiny_model(), ["shared=1e-3", ".*=1e-4"], weight_decay=0.0)
        shared = next(line for line in logs.output if "group shared (decay)" in line)
        self.assertIn(f"{64 * 16} parameters", shared)

    def test_yaml_list_and_space_separated_items_parse_the_same(self):
        as_list = param_groups.parse_param_group_lr(["a{1,2}=1e-3", ".*=2e-4"])
        as_string = param_groups.parse_param_group_lr(["a{1,2}=1e-3,.*=2e-4"])
        self.assertEqual([(r.pattern, lr) for r, lr in as_list], [(r.pattern, lr) for r, lr in as_string])
        self.assertEqual(as_list[0][0].pattern, "a{1,2}")

    @parameterized.named_parameters(
        ("no_catch_all", ["lm_head=1e-3"], "parameter 'shared.weight' matches no item; add a catch-all"),
        ("matches_nothing", ["decoder_only_typo=1e-3", ".*=1e-4"], "regex 'decoder_only_typo' matches no parameter"),
        ("shadowed", [".*=1e-4", "lm_head=1e-3"], "regex 'lm_head' matches no parameter .*shadowed"),
        ("not_an_item", ["lm_head"], "item 'lm_head' is not REGEX=LR"),
        ("bad_number", ["lm_head=fast"], "item 'lm_head=fast' is not REGEX=LR"),
        ("missing_comma_item", ["lm_head=1e-3,shared"], "item 'shared' is not REGEX=LR"),
        ("bad_regex", ["(unclosed=1e-3"], "regex '\\(unclosed' is invalid"),
    )
    def test_bad_param_group_lr(self, items, message):
        with self.assertRaisesRegex(UsageError, message):
            param_groups.build_param_groups(tiny_model(), items, weight_decay=0.0)

    def test_unset_keeps_trainers_default_optimizer(self):
        self.assertIsNone(param_groups.create_optimizer(tiny_model(), training_args()))

    def test_adafactor_uses_t5_settings(self):
        args = training_args("--optim", "adafactor", "--learning_rate", "1e-3", "--param_group_lr", ".*=1e-3")
        optimizer = param_groups.create_optimizer(tiny_model(), args)
        self.assertIsInstance(optimizer, Adafactor)
        group = optimizer.param_groups[0]
        self.assertEqual((group["lr"], group["scale_parameter"], group["relative_step"], group["warmup_init"]),
                         (1e-3, False, False, False))


class TrainingFeaturesEndToEndTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.corpus = str(require("gutenberg/austen-persuasion.txt"))

    def run_logs(self, name, **overrides):
        out = Path(self.create_tempdir().full_path) / name
        pre_train(tiny_run_flags(str(out), self.corpus, max_steps=6, **overrides))
        history = json.loads((out / "metrics.json").read_text())["log_history"]
        return [entry for entry in history if "loss" in entry]

    def test_gradient_checkpointing_gives_the_same_losses(self):
        plain = self.run_logs("plain")
        checkpointed = self.run_logs("checkpointed", gradient_checkpointing=True)
        np.testing.assert_allclose([e["loss"] for e in checkpointed], [e["loss"] for e in plain], rtol=1e-5)

    def test_adafactor_with_warmup_and_group_learning_rates(self):
        logs = self.run_logs("adafactor", optim="adafactor", learning_rate=1e-2, warmup_steps=3,
                             lr_scheduler_type="linear", param_group_lr=".*=1e-2")
        rates = [entry["learning_rate"] for entry in logs]
        # The rate each step used: linear warm-up from 0 over 3 steps to 1e-2, then linear decay towards 0.
        np.testing.assert_allclose(rates, [0.0, 1e-2 / 3, 2e-2 / 3, 1e-2, 2e-2 / 3, 1e-2 / 3], atol=1e-9)
        self.assertLess(logs[-1]["loss"], logs[0]["loss"])

    def final_weights(self, name, **overrides):
        out = Path(self.create_tempdir().full_path) / name
        pre_train(tiny_run_flags(str(out), self.corpus, max_steps=1, optim="sgd", **overrides))
        return torch.cat([t.flatten() for t in load_file(out / "model.safetensors").values()])

    def test_clipping_bounds_the_update(self):
        initial = self.final_weights("no_step", learning_rate=0.0)
        clipped = self.final_weights("clipped", learning_rate=1e-2, max_grad_norm=1e-3)
        unclipped = self.final_weights("unclipped", learning_rate=1e-2, max_grad_norm=0.0)
        # One SGD step moves the weights by lr x gradient norm; clipping caps that norm at max_grad_norm.
        # (Tied embeddings appear once in the file, so the norm over the file is the norm over parameters.)
        # 5 % slack: float32 rounding of ~1M updated weights adds ~1e-6 to the measured norm.
        self.assertLessEqual(float((clipped - initial).norm()), 1e-2 * 1e-3 * 1.05)
        self.assertGreater(float((unclipped - initial).norm()), 100 * 1e-2 * 1e-3)


if __name__ == "__main__":
    absltest.main()
