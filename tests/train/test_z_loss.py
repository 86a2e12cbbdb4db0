"""--z_loss (train/z_loss.py): T5X's auxiliary z-loss, z_loss * log(Z)^2 averaged over the target tokens as the
cross-entropy is, added to the training loss of both trainers, logged as `z_loss` (log lines, metrics.json; its
loss-curve line: tests/outputs/test_loss_plot.py), left out of eval_loss, and resumed without a break."""
import json
import math

import pytest
import torch
from absl.testing import absltest, parameterized
from datasets import Dataset
from transformers import T5Config, T5ForConditionalGeneration

from t5kit.train.pretrain_trainer import PretrainTrainer
from t5kit.train.task_trainer import TaskTrainer
from t5kit.train.z_loss import ZLossMixin, mean_logged, z_loss_term
from tests.helpers import OneThreadTestCase, fine_tune, pre_train, tiny_flags, training_args

Z = 1e-4  # T5X's setting


def hand_term(logits, labels, z_loss):
    """z_loss * mean over labels != -100 of (log sum_v exp(logit_v))^2, one token at a time in float64."""
    squares = [math.log(sum(math.exp(x) for x in logits[b, t].tolist())) ** 2
               for b in range(labels.shape[0]) for t in range(labels.shape[1]) if labels[b, t] != -100]
    return z_loss * sum(squares) / len(squares)


def tiny_model():
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(T5Config(vocab_size=64, d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2,
                                                dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0))
    model.accepts_loss_kwargs = False  # as building.build_model sets it: T5 averages its own loss
    return model


def rows(count, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [{"input_ids": torch.randint(2, 64, (10,), generator=generator).tolist(),
             "labels": torch.randint(2, 64, (6,), generator=generator).tolist()} for _ in range(count)]


def batch_of(row_list):
    return {key: torch.tensor([row[key] for row in row_list]) for key in ("input_ids", "labels")}


class ZLossTermTest(parameterized.TestCase):

    @parameterized.named_parameters(("float32", torch.float32, 1e-6), ("bfloat16_logits", torch.bfloat16, 1e-6))
    def test_term_is_the_mean_of_log_z_squared_over_target_tokens(self, dtype, tolerance):
        generator = torch.Generator().manual_seed(0)
        logits = (3 * torch.randn(2, 5, 11, generator=generator)).to(dtype)
        labels = torch.randint(0, 11, (2, 5), generator=generator)
        labels[0, 3:] = labels[1, 4:] = -100  # padded targets count for nothing
        expected = hand_term(logits.float(), labels, Z)
        self.assertAlmostEqual(z_loss_term(logits, labels, Z).item(), expected, delta=tolerance)
        self.assertGreater(expected, Z * 4)  # log Z >= log 11 > 2: a real term, not a zero
        # The padded positions are left out: changing their logits changes nothing.
        moved = logits.clone()
        moved[0, 3:] += 50
        self.assertEqual(z_loss_term(moved, labels, Z).item(), z_loss_term(logits, labels, Z).item())

    def test_mean_logged_weights_each_line_by_the_steps_it_covers(self):
        history = [{"step": 2, "loss": 5.0, "z_loss": 1.0}, {"step": 2, "eval_loss": 4.0},
                   {"step": 6, "loss": 4.0, "z_loss": 2.0}]
        self.assertAlmostEqual(mean_logged(history, "z_loss"), (2 * 1.0 + 4 * 2.0) / 6)
        self.assertIsNone(mean_logged([{"step": 1, "loss": 3.0}], "z_loss"))

    def test_both_trainers_add_it(self):
        self.assertTrue(issubclass(PretrainTrainer, ZLossMixin))
        self.assertTrue(issubclass(TaskTrainer, ZLossMixin))


class ZLossTrainerTest(OneThreadTestCase):
    """PretrainTrainer on a tiny model and fixed batches: the optimised loss against a hand computation."""

    def trainer(self, *argv, dataset=None):
        args = training_args("--output_dir", str(self.dir / "out"), "--report_to", "none", "--save_strategy", "no",
                             "--logging_steps", "1", "--disable_tqdm", "true", *argv)
        return PretrainTrainer(model=tiny_model(), args=args, train_dataset=dataset)

    def test_training_loss_is_cross_entropy_plus_the_term_and_eval_loss_is_not(self):
        trainer = self.trainer("--z_loss", str(Z))
        model, batch = trainer.model, batch_of(rows(3))
        model.train()
        loss = trainer.compute_loss(model, dict(batch))
        with torch.no_grad():
            output = model(**batch)
        expected = output.loss.item() + hand_term(output.logits, batch["labels"], Z)
        self.assertAlmostEqual(loss.item(), expected, delta=1e-6)
        self.assertGreater(loss.item() - output.loss.item(), 1e-4)  # the term is in it
        model.eval()
        with torch.no_grad():
            self.assertEqual(trainer.compute_loss(model, dict(batch)).item(), model(**batch).loss.item())

    def test_logged_term_is_its_mean_over_the_accumulated_micro_batches(self):
        data = rows(4, seed=1)  # equal target lengths: the mean of micro-batch means is the mean over all tokens
        trainer = self.trainer("--z_loss", str(Z), "--max_steps", "1", "--per_device_train_batch_size", "2",
                               "--gradient_accumulation_steps", "2", dataset=Dataset.from_list(data))
        with torch.no_grad():  # both micro-batches of step 1 see the initial weights
            output = trainer.model(**batch_of(data))
        trainer.train()
        (line,) = [entry for entry in trainer.state.log_history if "loss" in entry]
        term = hand_term(output.logits, batch_of(data)["labels"], Z)
        self.assertAlmostEqual(line["z_loss"], term, delta=1e-6)
        self.assertAlmostEqual(line["loss"], output.loss.item() + term, delta=1e-5)


@pytest.mark.slow  # real pre-training and fine-tuning runs
class ZLossRunTest(OneThreadTestCase):
    """Both entry scripts: the term in each log line, metrics.json and config.yaml; a resumed run logs exactly what
    an uninterrupted one does; without the flag nothing changes. (The loss curve's line for the term:
    tests/outputs/test_loss_plot.py.)"""

    def read_metrics(self, out):
        return json.loads((out / "metrics.json").read_text())

    def test_pretraining_logs_the_term_and_resumes_exactly(self):
        straight, resumed = self.dir / "straight", self.dir / "resumed"
        flags = dict(z_loss=Z, lr_scheduler_type="constant")  # a 2-step run follows a 4-step run's schedule
        pre_train(self.run_flags(straight, **flags))
        pre_train(self.run_flags(resumed, max_steps=2, **flags))
        pre_train(self.run_flags(resumed, resume_from_checkpoint="auto", **flags))
        lines = {name: {e["step"]: e for e in self.read_metrics(out)["log_history"] if "loss" in e}
                 for name, out in (("straight", straight), ("resumed", resumed))}
        self.assertEqual(sorted(lines["straight"]), [1, 2, 3, 4])
        self.assertEqual(sorted(lines["resumed"]), [1, 2, 3, 4])
        for step in range(1, 5):
            self.assertAlmostEqual(lines["resumed"][step]["z_loss"], lines["straight"][step]["z_loss"], delta=1e-6)
            # log Z of a fresh T5's 32,128 logits is about log(32128) = 10.4: a term near 1e-4 * 10.4^2.
            self.assertBetween(lines["straight"][step]["z_loss"], Z * 25, Z * 400)
        metrics = self.read_metrics(resumed)
        self.assertAlmostEqual(metrics["train_z_loss"], sum(e["z_loss"] for e in lines["resumed"].values()) / 4,
                               delta=1e-9)
        self.assertIn("z_loss: 0.0001", (resumed / "config.yaml").read_text())
        self.assertIn("| `--z_loss` | 0.0001 |", (resumed / "README.md").read_text())

    def test_without_the_flag_nothing_is_logged(self):
        out = self.dir / "off"
        pre_train(self.run_flags(out, max_steps=2, save_strategy="no"))
        metrics = self.read_metrics(out)
        self.assertNotIn("train_z_loss", metrics)
        self.assertFalse([e for e in metrics["log_history"] if "z_loss" in e])

    def test_fine_tuning_logs_the_term(self):
        out = self.dir / "finetune"
        fine_tune(tiny_flags(str(out), z_loss=Z, eval_strategy="no", save_strategy="no"))
        metrics = self.read_metrics(out)
        lines = [e for e in metrics["log_history"] if "loss" in e]
        self.assertLen(lines, 4)
        self.assertTrue(all(Z * 25 < e["z_loss"] < e["loss"] for e in lines))
        self.assertIn("train_z_loss", metrics)

if __name__ == "__main__":
    absltest.main()
