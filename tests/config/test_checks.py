"""config/checks.py: batches go to the device with non-blocking copies unless the user says otherwise, and predicting
defaults to bf16 where the hardware computes it."""
from unittest import mock

import torch
from absl.testing import absltest, parameterized
from transformers import Seq2SeqTrainer

from t5kit.config import checks
from t5kit.config.checks import with_non_blocking_copies
from t5kit.errors import UsageError
from tests.helpers import tiny_model, training_args


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


class PrecisionTest(parameterized.TestCase):
    """--bf16 unset: on where the hardware computes bf16 (a GPU with bf16, a CPU with AVX512-BF16 or AMX)."""

    @parameterized.parameters((None, True, True), (None, False, False), (False, True, False), (True, True, True))
    def test_the_cpu_default_follows_its_bf16_instructions(self, flag, native, expected):
        if torch.cuda.is_available():
            self.skipTest("this machine has a GPU: the default follows the GPU")
        with mock.patch.object(checks, "cpu_has_native_bf16", return_value=native):
            for use_cpu in (True, False):  # no GPU: predicting runs on the CPU either way
                self.assertIs(checks.inference_precision(flag, use_cpu), expected)


if __name__ == "__main__":
    absltest.main()
