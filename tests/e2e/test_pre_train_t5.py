"""pre_train_t5.py end to end on a tiny model and real text: outputs, loss falls, reproducibility, GA, refusals."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch
import yaml
from absl.testing import absltest, parameterized
from safetensors.torch import load_file
from transformers import T5ForConditionalGeneration

import constants
from t5kit.errors import UsageError
from t5kit.model import t5_flex_attention
from t5kit.train import checkpointing
from tests.helpers import REPO, TinyRunTestCase, pre_train, snapshot, tiny_run_flags


def train_losses(output_dir):
    history = json.loads((Path(output_dir) / "metrics.json").read_text())["log_history"]
    return [entry["loss"] for entry in history if "loss" in entry]


@pytest.mark.slow  # one or two pre-training runs per test
class PreTrainEndToEndTest(TinyRunTestCase):

    def test_tiny_run_writes_outputs_and_loss_falls(self):
        out = self.dir / "run"
        metrics = pre_train(tiny_run_flags(str(out), self.corpus, max_steps=40, eval_strategy="steps",
                                                   eval_steps=20, eval_on_start=True))
        for name in ("config.yaml", "metrics.json", "loss_curve.png", "model.safetensors", "config.json"):
            self.assertTrue((out / name).is_file(), name)
        saved = json.loads((out / "metrics.json").read_text())
        eval_losses = [e["eval_loss"] for e in saved["log_history"] if "eval_loss" in e]
        self.assertLess(eval_losses[-1], 0.88 * eval_losses[0])
        for name in ("eval_token_accuracy", "eval_content_accuracy", "eval_content_share"):
            self.assertBetween(metrics[name], 0.0, 1.0)
        self.assertGreater(metrics["eval_content_loss"], 0.0)
        train_logs = [e for e in saved["log_history"] if "loss" in e]
        self.assertTrue(all(e["tokens_per_second"] > 0 for e in train_logs[1:]))
        model = T5ForConditionalGeneration.from_pretrained(out)
        self.assertEqual(model.config.vocab_size, 32128)
        self.assertEqual(model.config.decoder_start_token_id, 0)

    def test_c4_config_runs_streamed_on_local_files(self):
        """configs/pretrain_c4_t5_base.yaml needs the hub and a GPU; a YAML including it with local files (and
        CPU-sized overrides) must pass every check and train on the stream, so the shipped config stays valid."""
        local = self.dir / "c4_local.yaml"
        local.write_text(f"_include: [{REPO / 'configs/pretrain_c4_t5_base.yaml'}]\ndataset_name: null\n"
                         f"dataset_config_name: null\ntrain_files: [{self.corpus}]\n")
        out = self.dir / "c4"
        argv = tiny_run_flags(str(out), self.corpus, max_steps=4, warmup_steps=2, save_strategy="steps",
                              save_steps=2, max_eval_samples=8, bf16=False, tf32=False, torch_compile=False)
        metrics = pre_train([str(local), *argv])
        config = yaml.safe_load((out / "config.yaml").read_text())
        self.assertEqual((config["streaming"], config["optim"], config["lr_scheduler_type"]),
                         (True, "adafactor", "inverse_sqrt"))
        self.assertTrue((out / "checkpoint-4" / "stream_position.json").is_file())
        self.assertTrue(np.isfinite(metrics["eval_loss"]))

    @parameterized.parameters("4h", "8h", "16h")
    def test_nanot5_budget_configs_run_on_local_files(self, budget):
        """configs/pretrain_v1_1_base_{4h,8h,16h}.yaml (nanoT5's budgets) need the hub and a GPU; with local files and
        CPU-sized overrides each passes every check, trains, and records nanoT5's optimizer and schedule."""
        local = self.dir / f"v1_1_{budget}.yaml"
        local.write_text(f"_include: [{REPO / f'configs/pretrain_v1_1_base_{budget}.yaml'}]\ndataset_name: null\n"
                         f"dataset_config_name: null\ntrain_files: [{self.corpus}]\n")
        out = self.dir / f"v1_1_{budget}"
        argv = tiny_run_flags(str(out), self.corpus, max_steps=2, warmup_steps=1, save_strategy="no",
                              max_eval_samples=8, eval_strategy="no", bf16=False, torch_compile=False,
                              report_to="none")
        pre_train([str(local), *argv])
        config = yaml.safe_load((out / "config.yaml").read_text())
        shipped = yaml.safe_load((REPO / f"configs/pretrain_v1_1_base_{budget}.yaml").read_text())
        self.assertEqual((config["adamw_rms_scaling"], config["lr_scheduler_type"], config["lr_scheduler_kwargs"]),
                         (True, "cosine_with_min_lr", {"min_lr_rate": 1e-5}))
        self.assertEqual(shipped["learning_rate"], 0.02)  # the tiny run's flags set their own
        # nanoT5's configs/task/pt_{4,8,16}h.yaml: steps and warm-up steps, 256 sequences (128 x 2 accumulated).
        nanot5 = {"4h": (13333, 1666), "8h": (26666, 3332), "16h": (53332, 6666)}[budget]
        self.assertEqual((shipped["max_steps"], shipped["warmup_steps"]), nanot5)
        self.assertEqual(shipped["per_device_train_batch_size"] * shipped["gradient_accumulation_steps"], 256)

    def test_config_yaml_alone_reproduces_the_run(self):
        first = self.dir / "first"
        pre_train(tiny_run_flags(str(first), self.corpus))
        config = yaml.safe_load((first / "config.yaml").read_text())
        self.assertEqual(config["max_steps"], 8)
        self.assertEqual(config["input_length"], 64)
        self.assertEqual(config["noise_density"], 0.15)
        saved_config = self.dir / "config.yaml"
        shutil.copy(first / "config.yaml", saved_config)
        shutil.move(str(first), str(self.dir / "moved"))
        pre_train([str(saved_config)])
        self.assertEqual(train_losses(first), train_losses(self.dir / "moved"))
        before = load_file(self.dir / "moved" / "model.safetensors")
        after = load_file(first / "model.safetensors")
        for name, tensor in before.items():
            torch.testing.assert_close(after[name], tensor, rtol=0, atol=0)

    def test_gradient_accumulation_logs_the_same_loss(self):
        # Same global batch of 4: 4 x 1 and 2 x 2. transformers 5.x would scale T5's loss by GA unless
        # model.accepts_loss_kwargs is False.
        one = self.dir / "ga1"
        two = self.dir / "ga2"
        pre_train(tiny_run_flags(str(one), self.corpus, max_steps=4))
        pre_train(tiny_run_flags(str(two), self.corpus, max_steps=4, per_device_train_batch_size=2,
                                         gradient_accumulation_steps=2))
        np.testing.assert_allclose(train_losses(two), train_losses(one), rtol=2e-4)
        before, after = load_file(one / "model.safetensors"), load_file(two / "model.safetensors")
        for name, tensor in before.items():
            torch.testing.assert_close(after[name], tensor, rtol=1e-3, atol=1e-5)

    def test_adamw_rms_scaling_reaches_the_optimizer(self):
        """--adamw_rms_scaling true trains with AdamWScale: another loss curve than AdamW's from the same start,
        falling, recorded in config.yaml, with the step count in the checkpoint's optimizer state."""
        plain, scaled = self.dir / "adamw", self.dir / "adamw_scale"
        flags = dict(max_steps=12, learning_rate=2e-2, warmup_steps=2, logging_steps=1)
        pre_train(tiny_run_flags(str(plain), self.corpus, **flags))
        pre_train(tiny_run_flags(str(scaled), self.corpus, adamw_rms_scaling=True, save_strategy="steps",
                                 save_steps=12, **flags))
        self.assertTrue(yaml.safe_load((scaled / "config.yaml").read_text())["adamw_rms_scaling"])
        losses = train_losses(scaled)
        self.assertEqual(losses[0], train_losses(plain)[0])  # same model, same first batch
        self.assertGreater(abs(losses[5] - train_losses(plain)[5]), 1e-3)
        self.assertLess(np.mean(losses[-3:]), losses[0])
        state = torch.load(scaled / "checkpoint-12" / "optimizer.pt", weights_only=True)["state"]
        self.assertEqual({entry["step"] for entry in state.values()}, {12})

    def test_t5_flex_attention_trains_as_sdpa(self):
        """--attn_implementation reaches the model, is saved in config.yaml, and t5_flex computes what sdpa does
        (on CPU: SDPA without T5's all-zero cross-attention bias and without all-True masks)."""
        sdpa, flex = self.dir / "sdpa", self.dir / "flex"
        pre_train(tiny_run_flags(str(sdpa), self.corpus, max_steps=4))
        # A (faked) V100 beside the CPU is no reason to refuse: --use_cpu true keeps training off it.
        with mock.patch.object(t5_flex_attention, "visible_gpus", return_value=[("Tesla V100-SXM2-32GB", (7, 0))]):
            pre_train(tiny_run_flags(str(flex), self.corpus, max_steps=4, attn_implementation="t5_flex"))
        self.assertEqual(yaml.safe_load((flex / "config.yaml").read_text())["attn_implementation"], "t5_flex")
        self.assertLen(train_losses(flex), 4)
        np.testing.assert_allclose(train_losses(flex), train_losses(sdpa), rtol=1e-6)


class PreTrainRefusalsTest(TinyRunTestCase):
    """Each bad input: UsageError naming the flag/file, and the output folder byte-identical to before."""

    def setUp(self):
        super().setUp()
        self.out = self.dir / "out"

    def assert_refused(self, argv, message):
        before = snapshot(self.dir)
        with self.assertRaisesRegex(UsageError, message):
            pre_train(argv)
        self.assertEqual(snapshot(self.dir), before)

    @parameterized.named_parameters(("no_resume", {}), ("resume_false", {"resume_from_checkpoint": "false"}))
    def test_non_empty_output_dir(self, overrides):
        self.out.mkdir()
        (self.out / "precious.txt").write_text("results of last week")
        self.assert_refused(tiny_run_flags(str(self.out), self.corpus, **overrides),
                            "--output_dir .* is not empty; pass --overwrite_output_dir")

    def test_auto_does_not_restart_a_finished_run_without_checkpoints(self):
        self.out.mkdir()
        (self.out / "metrics.json").write_text('{"train_loss": 1.0}')
        (self.out / "model.safetensors").write_text("last week's weights")
        self.assert_refused(tiny_run_flags(str(self.out), self.corpus, resume_from_checkpoint="auto"),
                            "--resume_from_checkpoint auto: --output_dir .* holds a finished run \\(metrics.json\\) "
                            "and no complete checkpoint to continue from; pass --overwrite_output_dir true")

    def test_output_dir_in_a_folder_without_write_permission(self):
        """Root may write anywhere, so the permission the check reads is faked; the folder stays unmade."""
        with mock.patch("os.access", return_value=False) as access:
            self.assert_refused(tiny_run_flags(str(self.dir / "locked" / "out"), self.corpus),
                                f"--output_dir .*locked/out cannot be created: no write permission in {self.dir}")
        access.assert_any_call(self.dir, os.W_OK | os.X_OK)

    def test_resume_from_a_checkpoint_of_another_model(self):
        checkpoint = self.out / "checkpoint-2"
        checkpoint.mkdir(parents=True)
        (checkpoint / "config.json").write_text(json.dumps({"model_type": "t5",
                                                            **constants.MODEL_SIZE_PRESETS["t5-mini"]}))
        checkpointing.write_manifest(checkpoint)
        self.assert_refused(tiny_run_flags(str(self.out), self.corpus, resume_from_checkpoint="auto"),
                            "--resume_from_checkpoint .*checkpoint-2 holds another model: d_model=128 \\(this run: "
                            "32\\), d_ff=512 \\(this run: 64\\)")

    @parameterized.named_parameters(
        ("unknown_preset", {"model_size": "t5-huge"}, "--model_size='t5-huge' is not a valid choice"),
        ("noise_density_one", {"noise_density": 1.0}, r"--noise_density=1.0 must be in \(0, 1\)"),
        ("noise_density_zero", {"noise_density": 0.0}, r"--noise_density=0.0 must be in \(0, 1\)"),
        ("short_spans", {"mean_noise_span_length": 0.5}, "--mean_noise_span_length=0.5 must be >= 1"),
        ("missing_file", {"train_files": ["/nonexistent/corpus.txt"]}, "--train_files: file .* not found"),
    )
    def test_bad_flag(self, overrides, message):
        self.assert_refused(tiny_run_flags(str(self.out), self.corpus, **overrides), message)

    def test_t5_flex_on_a_gpu_older_than_ampere(self):
        """The check sees --use_cpu: false here, so the (faked) V100 is where training would run."""
        with mock.patch.object(t5_flex_attention, "visible_gpus", return_value=[("Tesla V100-SXM2-32GB", (7, 0))]):
            self.assert_refused(tiny_run_flags(str(self.out), self.corpus, attn_implementation="t5_flex",
                                               use_cpu=False),
                                "--attn_implementation t5_flex needs an Ampere or newer GPU .* use "
                                "--attn_implementation sdpa")

    def test_corpus_shorter_than_one_window(self):
        short = self.dir / "short.txt"
        short.write_text("Only a few words here.\n\nAnd here.\n")
        self.assert_refused(tiny_run_flags(str(self.out), str(short), validation_files=[self.corpus]),
                            "corpus has .* tokens, shorter than one window")

    def test_tokenizer_without_sentinels(self):
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast
        words = ["<pad>", "</s>", "<unk>", "the", "a", "of"]
        backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
        backend.pre_tokenizer = pre_tokenizers.Whitespace()
        tokenizer_dir = str(self.dir / "no_sentinels")
        PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>",
                                unk_token="<unk>").save_pretrained(tokenizer_dir)
        self.assert_refused(tiny_run_flags(str(self.out), self.corpus, tokenizer_name_or_path=tokenizer_dir),
                            "lacks 100 of the 100 sentinel tokens .*first: <extra_id_0>")

    @pytest.mark.slow  # a second interpreter
    def test_command_line_exit_code_and_one_line_error(self):
        config = self.dir / "bad.yaml"
        config.write_text("- not\n- a mapping\n")
        result = subprocess.run([sys.executable, str(REPO / "pre_train_t5.py"), str(config)], cwd=self.dir,
                                capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 2)
        error_lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        self.assertLen(error_lines, 1)
        self.assertIn("must be a mapping of flag: value", error_lines[0])


if __name__ == "__main__":
    absltest.main()
