"""optim/adamw_scale.AdamWScale (--adamw_rms_scaling): nanoT5's numbers, its state across a save and load,
--param_group_lr building it and the flag refused with another optimizer. (The trainers' choice of it:
tests/optim/test_optimizer_classes.py.)"""
import copy
import math

import torch
from absl.testing import absltest, parameterized
from transformers import T5Config, T5ForConditionalGeneration

from t5kit.errors import UsageError
from t5kit.optim import param_groups
from t5kit.optim.adamw_scale import AdamWScale
from tests.helpers import training_args

LR, BETAS, EPS, WEIGHT_DECAY = 2e-2, (0.9, 0.999), 1e-8, 0.01


def small_t5():
    torch.manual_seed(0)
    config = T5Config(vocab_size=96, d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=4, dropout_rate=0.0,
                      decoder_start_token_id=0, pad_token_id=0)
    return T5ForConditionalGeneration(config)


def nanot5_step(params, states, lr, betas, eps, weight_decay):
    """nanoT5's AdamWScale.step (utils/copied_utils.py), one tensor at a time in float64 on the host."""
    beta1, beta2 = betas
    for p, state in zip(params, states):
        state["step"] += 1
        grad = p.grad.double()
        state["m"] = beta1 * state["m"] + (1 - beta1) * grad
        state["v"] = beta2 * state["v"] + (1 - beta2) * grad * grad
        step_size = lr * math.sqrt(1 - beta2 ** state["step"]) / (1 - beta1 ** state["step"])
        rms = state["w"].norm(2).item() / math.sqrt(state["w"].numel())
        step_size *= max(1e-3, rms)
        state["w"] = state["w"] - step_size * state["m"] / (state["v"].sqrt() + eps)
        state["w"] = state["w"] - lr * weight_decay * state["w"]


def train_steps(model, optimizer, steps, seed=1):
    """`steps` optimizer steps of a fixed random batch each; returns the gradients used (after backward)."""
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        input_ids = torch.randint(1, 96, (4, 12), generator=generator)
        labels = torch.randint(1, 96, (4, 6), generator=generator)
        optimizer.zero_grad()
        model(input_ids=input_ids, labels=labels).loss.backward()
        optimizer.step()


class AdamWScaleNumbersTest(parameterized.TestCase):

    def test_matches_nanot5_step_by_step(self):
        model = small_t5()
        with torch.no_grad():
            model.decoder.final_layer_norm.weight.zero_()  # RMS 0: the 1e-3 floor sets its step
        params = list(model.parameters())
        optimizer = AdamWScale(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
        states = [{"step": 0, "m": torch.zeros_like(p, dtype=torch.float64),
                   "v": torch.zeros_like(p, dtype=torch.float64), "w": p.detach().double().clone()} for p in params]
        generator = torch.Generator().manual_seed(1)
        for _ in range(5):
            input_ids = torch.randint(1, 96, (4, 12), generator=generator)
            labels = torch.randint(1, 96, (4, 6), generator=generator)
            optimizer.zero_grad()
            model(input_ids=input_ids, labels=labels).loss.backward()
            nanot5_step(params, states, LR, BETAS, EPS, WEIGHT_DECAY)
            optimizer.step()
            for p, state in zip(params, states):  # the reference follows our weights, so errors cannot pile up
                torch.testing.assert_close(p.detach().double(), state["w"], rtol=1e-5, atol=1e-7)
                state["w"] = p.detach().double().clone()
        self.assertEqual(optimizer.state[params[0]]["step"], 5)
        self.assertGreater(model.decoder.final_layer_norm.weight.abs().max().item(), 0.0)

    def test_step_is_relative_to_the_weights_size(self):
        # One step from zero moments moves each tensor by ~lr * RMS(weight) per entry (Adam's first step is
        # ~sign(grad)), so a tensor ten times larger moves ten times as far.
        model = small_t5()
        attention = model.encoder.block[0].layer[0].SelfAttention
        small, large = attention.q.weight, attention.k.weight
        with torch.no_grad():
            large.copy_(small * 10)
        before = [small.detach().clone(), large.detach().clone()]
        optimizer = AdamWScale([small, large], lr=LR, eps=EPS)
        train_steps(model, optimizer, 1)
        moved = [(p.detach() - b).abs().mean().item() for p, b in zip((small, large), before)]
        self.assertAlmostEqual(moved[1] / moved[0], 10.0, delta=0.5)

    def test_state_round_trips_through_a_checkpoint(self):
        uninterrupted = small_t5()
        optimizer = AdamWScale(uninterrupted.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
        train_steps(uninterrupted, optimizer, 2, seed=1)
        saved_model, saved_state = copy.deepcopy(uninterrupted.state_dict()), copy.deepcopy(optimizer.state_dict())
        train_steps(uninterrupted, optimizer, 2, seed=2)

        resumed = small_t5()
        resumed.load_state_dict(saved_model)
        optimizer = AdamWScale(resumed.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
        optimizer.load_state_dict(saved_state)
        train_steps(resumed, optimizer, 2, seed=2)
        for (name, a), b in zip(uninterrupted.named_parameters(), resumed.parameters()):
            torch.testing.assert_close(a, b, msg=name)

    def test_bad_hyperparameters(self):
        with self.assertRaisesRegex(ValueError, "betas=.* in \\[0, 1\\)"):
            AdamWScale(small_t5().parameters(), betas=(0.9, 1.0))


class AdamWScaleChoiceTest(parameterized.TestCase):

    def test_param_group_lr_builds_it(self):
        optimizer = param_groups.create_optimizer(small_t5(), training_args(
            "--adamw_rms_scaling", "true", "--param_group_lr", "shared=1e-2", ".*=2e-2"))
        self.assertIsInstance(optimizer, AdamWScale)
        self.assertEqual(sorted({group["lr"] for group in optimizer.param_groups}), [1e-2, 2e-2])

    @parameterized.parameters("adafactor", "sgd")
    def test_refused_with_another_optimizer(self, optim):
        with self.assertRaisesRegex(UsageError, f"--adamw_rms_scaling true scales AdamW's step but --optim is "
                                                f"{optim}; pass --optim adamw_torch_fused"):
            training_args("--optim", optim, "--adamw_rms_scaling", "true")


if __name__ == "__main__":
    absltest.main()
