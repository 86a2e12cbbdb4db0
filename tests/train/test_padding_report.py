"""Spec of the padding report (t5kit/train/padding_report.py): counts per batch, the run means, and metrics.json's
`data` and log lines of real unpacked runs (packed runs: test_packed_loader.py)."""
import json

import numpy as np
import pytest
import torch
from absl.testing import absltest, parameterized

from t5kit.data import packing
from t5kit.train import padding_report
from tests.helpers import OneThreadTestCase, fine_tune, pre_train, random_examples, tiny_flags


class CountsTest(parameterized.TestCase):

    def test_counts_of_an_unpacked_batch(self):
        batch = {"input_ids": torch.ones(2, 4, dtype=torch.long), "attention_mask": torch.tensor([[1, 1, 1, 0],
                                                                                                 [1, 1, 0, 0]]),
                 "labels": torch.tensor([[5, 1, -100], [5, 6, 1]])}
        self.assertEqual(padding_report.batch_counts(batch).tolist(), [5, 8, 5, 6, 2])
        del batch["attention_mask"]  # span corruption at exact lengths: no padding, no mask
        self.assertEqual(padding_report.batch_counts(batch).tolist(), [8, 8, 5, 6, 2])

    def test_counts_of_a_packed_batch(self):
        examples = random_examples(7, seed=1, longest_input=10, longest_target=5)
        batch = {key: torch.from_numpy(value) for key, value in packing.pack_examples(
            examples, 3, (32, 16), 0, 0).items()}
        real_inputs = sum(len(inputs) for inputs, _ in examples)
        real_targets = sum(len(targets) for _, targets in examples)
        self.assertEqual(padding_report.batch_counts(batch).tolist(), [real_inputs, 96, real_targets, 48, 7])

    def test_run_mean_weighs_log_lines_by_their_steps(self):
        history = [{"step": 2, "loss": 1.0, "encoder_padding": 0.5}, {"step": 3, "eval_loss": 2.0},
                   {"step": 6, "loss": 1.0, "encoder_padding": 0.2}]
        self.assertAlmostEqual(padding_report.run_mean(history, "encoder_padding"), (0.5 * 2 + 0.2 * 4) / 6)
        self.assertAlmostEqual(padding_report.run_mean(history, "encoder_padding", 0.8, 2),
                               (0.5 * 2 + 0.2 * 4 + 0.8 * 2) / 8)
        self.assertIsNone(padding_report.run_mean(history, "decoder_padding"))


@pytest.mark.slow  # pre-training and fine-tuning runs
class RunReportTest(OneThreadTestCase):

    def test_span_corruption_has_no_padding_and_ul2_reports_its_own(self):
        """Span corruption at T5's settings fills every slot: 0.0 exactly. UL2 pads (rows padded to the mixture's
        longest shapes): metrics.json's data and every log line say how much."""
        pre_train(self.run_flags(self.dir / "span", max_steps=2, save_strategy="no"))
        data = json.loads((self.dir / "span" / "metrics.json").read_text())["data"]
        self.assertEqual((data["encoder_padding"], data["decoder_padding"]), (0.0, 0.0))
        self.assertNotIn("examples_per_step", data)

        pre_train(self.run_flags(self.dir / "ul2", objective="ul2", max_steps=2, save_strategy="no"))
        metrics = json.loads((self.dir / "ul2" / "metrics.json").read_text())
        lines = [entry for entry in metrics["log_history"] if "loss" in entry]
        self.assertLen(lines, 2)
        for entry in lines:
            self.assertBetween(entry["encoder_padding"], 0.0, 1.0)
            self.assertBetween(entry["decoder_padding"], 0.0, 1.0)
        self.assertAlmostEqual(metrics["data"]["decoder_padding"],
                               np.mean([entry["decoder_padding"] for entry in lines]))
        self.assertGreater(metrics["data"]["decoder_padding"], 0.0)

    def test_fine_tuning_reports_its_dynamic_padding(self):
        fine_tune(tiny_flags(str(self.dir / "rte"), max_steps=2, eval_strategy="no", save_strategy="no",
                             load_best_model_at_end=False))
        metrics = json.loads((self.dir / "rte" / "metrics.json").read_text())
        lines = [entry for entry in metrics["log_history"] if "loss" in entry]
        batches = metrics["data"]["train_batches"]
        self.assertEqual(sorted(batches), ["decoder_padding", "encoder_padding"])
        self.assertAlmostEqual(batches["encoder_padding"], np.mean([entry["encoder_padding"] for entry in lines]))
        self.assertBetween(batches["encoder_padding"], 0.0, 0.9)  # length buckets: rows of near-equal length


if __name__ == "__main__":
    absltest.main()
