"""optim/param_groups.py (--param_group_lr) and the training features around it, as flags: per-regex learning
rates, Adafactor with T5 settings, warm-up, clipping, gradient checkpointing."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from absl.testing import absltest, parameterized
from safetensors.torch import load_file
from transformers.optimization import Adafactor

from t5kit.errors import UsageError
from t5kit.optim import param_groups
from tests.helpers import pre_train, require, tiny_model, tiny_run_flags, training_args


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


@pytest.mark.slow  # seven short pre-training runs
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
