"""--packing in the trainers (t5kit/train/packed_loader.py): the DataLoader as Trainer and accelerate build it; a
packed batch's training loss, and its evaluation loss by the forward, are those of the same examples one per row;
evaluation that generates or ranks label words refuses a packed batch, and a trainer given packed batches for a
model without the segment masks is refused; tiny packed pre-training and fine-tuning runs."""
import json
import re
import types

import datasets
import pytest
import torch
from absl.testing import absltest, parameterized
from safetensors.torch import load_file
from transformers import Seq2SeqTrainer, T5Config, T5ForConditionalGeneration

from t5kit.data import packed_batches, packing, task_format
from t5kit.model import lora
from t5kit.model.packed_training import Packing
from t5kit.train.packed_loader import PackedLoaderMixin
from t5kit.train.padding_report import PaddingReportMixin
from t5kit.train.pretrain_trainer import PretrainTrainer
from t5kit.train.task_trainer import TaskTrainer
from tests.helpers import (
    OneThreadTestCase,
    fine_tune,
    pre_train,
    random_examples,
    tiny_flags,
    tiny_model,
    training_args,
)

# Two examples (input ids with EOS, target ids with EOS) of a 64-word vocabulary; pad 0, EOS 1.
FIRST, SECOND = ([5, 9, 14, 22, 1], [7, 8, 1]), ([30, 31, 1], [40, 41, 42, 1])


def packed_row():
    """FIRST and SECOND in one row of 10 inputs and 8 targets, as the batch contract lays them out."""
    def row(values, length, fill):
        return torch.tensor([values + [fill] * (length - len(values))])

    return {"input_ids": row(FIRST[0] + SECOND[0], 10, 0), "attention_mask": row([1] * 8, 10, 0),
            "labels": row(FIRST[1] + SECOND[1], 8, -100),
            "decoder_input_ids": row([0, *FIRST[1][:-1], 0, *SECOND[1][:-1]], 8, 0),
            "encoder_segment_ids": row([1] * 5 + [2] * 3, 10, 0), "decoder_segment_ids": row([1] * 3 + [2] * 4, 8, 0),
            "encoder_positions": row([0, 1, 2, 3, 4, 0, 1, 2], 10, 0),
            "decoder_positions": row([0, 1, 2, 0, 1, 2, 3], 8, 0)}


def one_per_row():
    return {"input_ids": torch.tensor([FIRST[0], SECOND[0] + [0, 0]]),
            "attention_mask": torch.tensor([[1] * 5, [1] * 3 + [0, 0]]),
            "labels": torch.tensor([FIRST[1] + [-100], SECOND[1]])}


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
        model = tiny_model()
        Packing(True).prepare_model(model)
        trainer = ReportingTrainer(model=model, args=training_args("--per_device_train_batch_size", "4",
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


class PackedBatchesTest(OneThreadTestCase):

    def trainer(self, cls, *argv, peft=False, **kwargs):
        torch.manual_seed(0)  # a one-layer T5 without dropout, so that two forwards compare
        model = T5ForConditionalGeneration(T5Config(vocab_size=64, d_model=16, d_ff=32, d_kv=8, num_layers=1,
                                                    num_heads=2, dropout_rate=0.0, decoder_start_token_id=0,
                                                    pad_token_id=0))
        model.accepts_loss_kwargs = False  # as building.build_model sets it
        if peft:  # --peft lora: the trainer holds peft's wrapper, the hooks go on the T5 inside it
            model = lora.apply_lora(model, r=2, alpha=4, dropout=0.0, target_modules=["q", "v"])
        Packing(True).prepare_model(model)  # as both entry scripts do with --packing true
        args = training_args("--output_dir", str(self.dir / "out"), "--report_to", "none", *argv)
        return cls(model=model, args=args, **kwargs)

    @parameterized.named_parameters(("pretrain", PretrainTrainer, False), ("task", TaskTrainer, False),
                                    ("task_lora", TaskTrainer, True))
    def test_training_loss_of_a_packed_batch_is_that_of_the_examples_one_per_row(self, cls, peft):
        trainer = self.trainer(cls, peft=peft)
        t5 = trainer.model.get_base_model() if peft else trainer.model
        self.assertLen(t5.encoder._forward_pre_hooks, 1)
        self.assertLen(t5.decoder._forward_pre_hooks, 1)
        trainer.model.train()
        packed = trainer.compute_loss(trainer.model, packed_row())
        torch.testing.assert_close(packed, trainer.compute_loss(trainer.model, one_per_row()), rtol=0, atol=1e-6)

    def test_evaluation_by_the_forward_takes_a_packed_batch(self):
        trainer = self.trainer(PretrainTrainer)
        loss, _, labels = trainer.prediction_step(trainer.model, packed_row(), prediction_loss_only=False)
        plain_loss, _, _ = trainer.prediction_step(trainer.model, one_per_row(), prediction_loss_only=False)
        torch.testing.assert_close(loss, plain_loss, rtol=0, atol=1e-6)
        self.assertEqual(labels.shape, (1, 8))

    def test_generation_refuses_a_packed_batch(self):
        trainer = self.trainer(TaskTrainer, "--predict_with_generate", "true")
        with self.assertRaisesRegex(ValueError, "generation reads each row as one example.*packed"):
            trainer.prediction_step(trainer.model, packed_row(), prediction_loss_only=False)

    def test_label_word_ranking_refuses_a_packed_batch(self):
        trainer = self.trainer(TaskTrainer, label_scoring="rank")
        trainer.current_split = types.SimpleNamespace(task_vals=task_format.get_task_vals("glue", "sst2"))
        with self.assertRaisesRegex(ValueError, "--label_scoring rank reads each row as one example"):
            trainer.prediction_step(trainer.model, packed_row(), prediction_loss_only=False)

    def test_packed_batches_for_a_model_without_the_segment_masks_are_refused(self):
        """Without the hooks the examples of a row would attend to each other and train silently wrong."""
        sampler, collator = packed_batches.packed(lambda epoch: ([4], [2]), lambda f: f, (8, 4), 1, 0, 0, 0)
        with self.assertRaisesRegex(ValueError, "packed batches need the model's segment masks"):
            PretrainTrainer(model=tiny_model(), args=training_args("--output_dir", str(self.dir / "out"),
                                                                   "--report_to", "none"),
                            packed_batches=(sampler, collator))


class PackedRunTest(OneThreadTestCase):

    @pytest.mark.slow  # a packed pre-training run
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

    @pytest.mark.slow  # a packed fine-tuning run
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
