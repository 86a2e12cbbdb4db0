"""Spec of --packing's training loader (t5kit/train/packed_loader.py) and the packed runs' data side: the DataLoader as
Trainer and accelerate build it, and tiny packed pre-training and fine-tuning runs. Until the model takes segment ids
(the masks are the model side's), the runs here drop them before T5's forward: they check which batches the model
gets, the logs and metrics.json, not the model's maths."""
import json
import re

import datasets
import pytest
import torch
from absl.testing import absltest, parameterized
from safetensors.torch import load_file
from transformers import Seq2SeqTrainer

from t5kit.data import packed_batches, packing
from t5kit.train.packed_loader import PackedLoaderMixin
from t5kit.train.padding_report import PaddingReportMixin
from tests.helpers import (OneThreadTestCase, fine_tune, pre_train, random_examples, tiny_flags, tiny_model,
                           training_args)

class ReportingTrainer(PaddingReportMixin, PackedLoaderMixin, Seq2SeqTrainer):
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



class PackedRunTest(OneThreadTestCase):

    def test_packed_prefix_lm_pre_training(self):
        """Rows of 64 inputs and 64 targets (prefix-LM's targets match its inputs) holding windows of 8 ids: the log
        lines count the windows, metrics.json adds them up, the derived shapes are the packed ones."""
        out = self.dir / "packed"
        pre_train(self.run_flags(out, objective="prefix_lm", packing=True, max_steps=3, save_strategy="no"))
        metrics = json.loads((out / "metrics.json").read_text())
        lines = [entry for entry in metrics["log_history"] if "loss" in entry]
        self.assertLen(lines, 3)
        for entry in lines:
            self.assertGreater(entry["examples_per_step"], 4)  # more windows than the 4 rows
            self.assertLess(entry["encoder_padding"], 0.25)
        data = metrics["data"]
        self.assertEqual(data["windows_seen"], round(sum(entry["examples_per_step"] for entry in lines)))
        self.assertEqual(data["tokens_seen"], data["windows_seen"] * 8)
        config = (out / "config.yaml").read_text()
        self.assertIn("packing: true", config)
        for derived in ("tokens_length: 8", "input_length: 64", "target_length: 64",
                        "packing_window_input_length: 8"):
            self.assertIn(derived, config)

    @pytest.mark.slow  # three pre-training runs
    def test_resumed_run_is_bit_identical_across_epochs(self):
        """UL2 windows from 5 paragraphs: a few packed batches per epoch, so 7 steps cross epochs. A run stopped at
        step 2 and resumed ends with the weights of the run that never stopped: the resumed epoch's rows (its
        sampler replayed and skipped, its epoch restored) and the next epochs' are the same."""
        def flags(out, steps, **extra):
            return self.run_flags(out, objective="ul2", packing=True, max_train_samples=5, max_steps=steps,
                                  lr_scheduler_type="constant", **extra)

        with self.assertLogs("t5kit.data.packed_batches", "INFO") as logs:
            pre_train(flags(self.dir / "plain", 7))
        batches_per_epoch = int(re.search(r"(\d+) batches per epoch", "\n".join(logs.output)).group(1))
        self.assertLess(2 * batches_per_epoch, 7)  # the run crosses two epoch boundaries at least
        pre_train(flags(self.dir / "resumed", 2))
        pre_train(flags(self.dir / "resumed", 7, resume_from_checkpoint="auto"))
        expected = load_file(self.dir / "plain/model.safetensors")
        got = load_file(self.dir / "resumed/model.safetensors")
        for name, tensor in expected.items():
            self.assertTrue(got[name].equal(tensor), f"{name} differs after resuming")

    def test_packed_fine_tuning_evaluates_unpacked(self):
        """RTE's pairs (about 70 ids) in rows of 256 inputs: several examples a row; evaluation (unpacked) scores."""
        out = self.dir / "rte"
        results = fine_tune(tiny_flags(str(out), packing=True, max_source_length=256, max_steps=2,
                                       eval_strategy="no", save_strategy="no", load_best_model_at_end=False))
        self.assertIn("eval_accuracy", results)
        batches = json.loads((out / "metrics.json").read_text())["data"]["train_batches"]
        self.assertGreater(batches["examples_per_step"], 4)
        self.assertLess(batches["encoder_padding"], 0.2)


if __name__ == "__main__":
    absltest.main()
