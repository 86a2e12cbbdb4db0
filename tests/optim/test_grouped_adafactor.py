"""grouped_adafactor.GroupedAdafactor: transformers' Adafactor numbers and state with T5's settings, in a fraction of
its operations; other settings take transformers' step; --param_group_lr builds it. (The trainers' choice of it:
tests/optim/test_optimizer_classes.py.)"""
import copy
from unittest import mock

import torch
from absl.testing import absltest, parameterized
from transformers import T5Config, T5ForConditionalGeneration
from transformers.optimization import Adafactor

from bench.adafactor_step import OperationCounter  # counts aten operations (GPU kernels)
from t5kit.optim import grouped_adafactor, param_groups
from t5kit.optim.grouped_adafactor import GroupedAdafactor
from tests.helpers import training_args

T5_SETTINGS = {"scale_parameter": False, "relative_step": False, "warmup_init": False}  # Trainer's --optim adafactor


def small_t5():
    torch.manual_seed(0)
    config = T5Config(vocab_size=96, d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=4, dropout_rate=0.0,
                      decoder_start_token_id=0, pad_token_id=0)
    return T5ForConditionalGeneration(config)


def two_groups(model, weight_decay):
    """A decay group at lr 1e-2 and a no-decay group (layer norms, position bias) at 3e-3, as Trainer splits them."""
    decay = [p for n, p in model.named_parameters() if "layer_norm" not in n and "relative_attention" not in n]
    rest = [p for n, p in model.named_parameters() if "layer_norm" in n or "relative_attention" in n]
    return [{"params": decay, "lr": 1e-2, "weight_decay": weight_decay}, {"params": rest, "lr": 3e-3}]


def train(model, optimizer, steps, frozen_at=None):
    """`steps` optimizer steps on fixed random batches; at step `frozen_at` the decoder gets no gradient."""
    generator = torch.Generator().manual_seed(1)
    for step in range(steps):
        ids = torch.randint(2, 96, (4, 12), generator=generator)
        labels = torch.randint(2, 96, (4, 5), generator=generator)
        model(input_ids=ids, labels=labels).loss.backward()
        if step == frozen_at:
            for p in model.decoder.parameters():
                p.grad = None
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def state_tensors(optimizer, model):
    return {(name, key): value for name, p in model.named_parameters() if p in optimizer.state
            for key, value in optimizer.state[p].items() if isinstance(value, torch.Tensor)}


class GroupedAdafactorTest(parameterized.TestCase):
    """On the CPU here, with stacking allowed there (by default it is a GPU's: STACK_DEVICES)."""

    def setUp(self):
        super().setUp()
        self.enter_context(mock.patch.object(grouped_adafactor, "STACK_DEVICES", ("cuda", "cpu")))

    def assert_same_training(self, model, reference_model, optimizer, reference, tolerance=1e-6):
        for (name, p), (_, q) in zip(model.named_parameters(), reference_model.named_parameters()):
            torch.testing.assert_close(p, q, rtol=tolerance, atol=tolerance, msg=name)
        ours, theirs = state_tensors(optimizer, model), state_tensors(reference, reference_model)
        self.assertEqual(ours.keys(), theirs.keys())
        self.assertNotEmpty(ours)
        for key, value in theirs.items():
            torch.testing.assert_close(ours[key], value, rtol=tolerance, atol=1e-12, msg=str(key))
        self.assertEqual([s["step"] for s in optimizer.state.values()], [s["step"] for s in reference.state.values()])

    @parameterized.named_parameters(
        ("plain", {}, 0.0, None), ("weight_decay", {}, 0.01, None),
        ("clipped_updates", {"clip_threshold": 0.1}, 0.0, None),  # the RMS clip divides most updates
        ("a_step_without_decoder_gradients", {}, 0.0, 2),  # parameters at different step counts
        ("tiny_stacks", {}, 0.0, None, 1000))
    def test_same_weights_and_state_as_transformers_adafactor(self, settings, weight_decay, frozen_at,
                                                               bucket_elements=grouped_adafactor.BUCKET_ELEMENTS):
        model = small_t5()
        reference_model = copy.deepcopy(model)
        optimizer = GroupedAdafactor(two_groups(model, weight_decay), **T5_SETTINGS, **settings)
        reference = Adafactor(two_groups(reference_model, weight_decay), **T5_SETTINGS, **settings)
        with mock.patch.object(grouped_adafactor, "BUCKET_ELEMENTS", bucket_elements), \
                mock.patch.object(GroupedAdafactor, "update_stack", wraps=optimizer.update_stack) as stacked:
            train(model, optimizer, 5, frozen_at)
        train(reference_model, reference, 5, frozen_at)
        self.assertGreater(stacked.call_count, 0)
        self.assert_same_training(model, reference_model, optimizer, reference)
        self.assertFalse(all(p.equal(q) for p, q in zip(model.parameters(), small_t5().parameters())))

    @parameterized.named_parameters(
        ("relative_step", {}, ("cuda", "cpu")),  # transformers' defaults: the lr comes from each parameter's RMS
        ("cpu_parameters", {"lr": 1e-2, **T5_SETTINGS}, ("cuda",)))
    def test_others_take_transformers_step(self, settings, stack_devices):
        model = small_t5()
        reference_model = copy.deepcopy(model)
        optimizer = GroupedAdafactor(model.parameters(), **settings)
        reference = Adafactor(reference_model.parameters(), **settings)
        with mock.patch.object(GroupedAdafactor, "update_stack") as stacked, \
                mock.patch.object(grouped_adafactor, "STACK_DEVICES", stack_devices):
            train(model, optimizer, 3)
        train(reference_model, reference, 3)
        stacked.assert_not_called()
        self.assert_same_training(model, reference_model, optimizer, reference, tolerance=0)

    def test_checkpointed_state_continues_in_transformers_adafactor(self):
        model = small_t5()
        optimizer = GroupedAdafactor(model.parameters(), lr=1e-2, **T5_SETTINGS)
        train(model, optimizer, 3)
        reference_model = copy.deepcopy(model)
        reference = Adafactor(reference_model.parameters(), lr=1e-2, **T5_SETTINGS)
        reference.load_state_dict(copy.deepcopy(optimizer.state_dict()))
        train(model, optimizer, 2)
        train(reference_model, reference, 2)
        self.assert_same_training(model, reference_model, optimizer, reference)

    def test_a_step_runs_a_fraction_of_the_operations(self):
        counts = {}
        for name, optimizer_cls in (("grouped", GroupedAdafactor), ("transformers", Adafactor)):
            model = small_t5()
            optimizer = optimizer_cls(model.parameters(), lr=1e-2, **T5_SETTINGS)
            train(model, optimizer, 1)  # the first step creates the state
            model(input_ids=torch.ones(2, 4, dtype=torch.long), labels=torch.ones(2, 3, dtype=torch.long)).loss \
                .backward()
            with OperationCounter() as counter:
                optimizer.step()
            counts[name] = counter.count
        # 2 layers here; t5-base's 12 have ~5,000 operations a step in transformers' Adafactor
        self.assertLess(counts["grouped"] * 3, counts["transformers"], counts)


class OptimizerChoiceTest(parameterized.TestCase):

    def test_param_group_lr_builds_it_and_other_optimizers_are_trainers(self):
        model = small_t5()
        optimizer = param_groups.create_optimizer(model, training_args("--optim", "adafactor",
                                                                       "--param_group_lr", ".*=1e-3"))
        self.assertIsInstance(optimizer, GroupedAdafactor)
        optimizer = param_groups.create_optimizer(model, training_args("--param_group_lr", ".*=1e-3"))
        self.assertIsInstance(optimizer, torch.optim.AdamW)


if __name__ == "__main__":
    absltest.main()
