"""Spec of the padding report (t5kit/train/padding_report.py) and --packing's training loader (packed_loader.py):
counts per batch, the run means, the packed DataLoader as Trainer and accelerate build it, and metrics.json's `data`
of real runs."""
import json

import datasets
import numpy as np
import torch
from absl.testing import absltest, parameterized
from transformers import Seq2SeqTrainer

from t5kit.data import packed_batches, packing
from t5kit.train import padding_report
from t5kit.train.packed_loader import PackedLoaderMixin
from tests.helpers import OneThreadTestCase, pre_train, random_examples, tiny_model, training_args


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


class ReportingTrainer(padding_report.PaddingReportMixin, PackedLoaderMixin, Seq2SeqTrainer):
    pass


class PackedLoaderTest(parameterized.TestCase):

    def test_the_trainer_loader_yields_the_sampler_batches_packed(self):
        """get_train_dataloader as Trainer uses it (accelerate-prepared, epoch set as _run_epoch sets it): every
        batch B rows of fixed shape holding exactly the sampler's examples; a new epoch gives new batches."""
        examples = random_examples(80, seed=4, longest_input=20, longest_target=6)
        dataset = datasets.Dataset.from_dict({"input_ids": [i.tolist() for i, _ in examples],
                                              "labels": [t.tolist() for _, t in examples],
                                              "idx": list(range(80))})  # a column the model does not take
        sampler, collator = packed_batches.packed_task_examples(dataset, 32, 6, 4, seed=0, pad_id=0,
                                                                decoder_start_token_id=0)
        trainer = ReportingTrainer(model=tiny_model(), args=training_args("--per_device_train_batch_size", "4",
                                                                          "--report_to", "none"),
                                   train_dataset=dataset, packed_batches=(sampler, collator))
        loader = trainer.get_train_dataloader()
        self.assertLen(loader, len(sampler))
        seen = {}
        for epoch in (0, 1):
            loader.set_epoch(epoch)
            batches = list(loader)
            self.assertLen(batches, len(sampler))
            for indices, batch in zip(sampler.batches(epoch), batches):
                self.assertEqual(tuple(batch["input_ids"].shape), (4, 32))
                self.assertEqual(tuple(batch["labels"].shape), (4, sampler.row_shape[1]))
                self.assertEqual(packing.examples_in(batch), len(indices))
                packed = sorted(tuple(inputs.tolist()) for row in packing.unpack_rows(batch) for inputs, _ in row)
                self.assertEqual(packed, sorted(tuple(examples[i][0].tolist()) for i in indices))
            seen[epoch] = [batch["input_ids"] for batch in batches]
        self.assertFalse(all(torch.equal(a, b) for a, b in zip(seen[0], seen[1])))


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


if __name__ == "__main__":
    absltest.main()
