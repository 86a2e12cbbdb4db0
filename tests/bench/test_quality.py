"""bench/quality.py --task_adaptive: each benchmarked task's training inputs become one more pre-training file,
labels left out; the tokenizer and the default run never see them."""
import argparse
import sys
import tempfile
import threading
from pathlib import Path
from unittest import mock

import pytest
import torch
from absl.testing import absltest, parameterized
from safetensors.torch import load_file

from bench import quality
from tests.forked import run_forked
from tests.helpers import require


class TaskAdaptiveCorpusTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("sst2", "sst2", "SST-2", 67349, "hide new secretions from the parental units"),
        ("rte", "rte", "RTE", 2490, "No Weapons of Mass Destruction Found in Iraq Yet.\n"
                                    "Weapons of Mass Destruction Found in Iraq."),
        ("cola", "cola", "CoLA", 8551, "Our friends won't buy this analysis, let alone the next one we propose."))
    def test_the_training_inputs_are_written_one_document_a_row_without_labels(self, task, folder_name, rows, first):
        require(f"glue/{folder_name}")
        folder = Path(tempfile.mkdtemp())
        quality.write_task_texts(folder, task)
        documents = (folder / f"{task}_train.txt").read_text(encoding="utf-8").strip().split("\n\n")
        self.assertLen(documents, rows)
        self.assertEqual(documents[0], first)
        labels = ("\t0", "\t1", "entailment", "gj04")  # label fields and CoLA's source column
        self.assertFalse(any(document.endswith(labels) or document.startswith(labels) for document in documents))

    @parameterized.parameters((True, ["sst2"]), (True, ["sst2", "rte", "cola"]), (False, ["sst2", "rte"]))
    def test_the_pretraining_command_reads_them_only_when_asked(self, task_adaptive, tasks):
        work = Path("/w")
        args = argparse.Namespace(pretrain_config="configs/pretrain_cpu.yaml", task_adaptive=task_adaptive,
                                  pretrain_overrides=[], tasks=tasks)
        command = quality.pretrain_command(args, work, work / "tokenizer")
        start = command.index("--train_files") + 1
        expected = [str(work / "corpus" / "train.txt")] + [str(work / "corpus" / f"{task}_train.txt")
                                                           for task in tasks if task_adaptive]
        self.assertEqual(command[start:start + len(expected)], expected)
        self.assertEqual(command[start + len(expected)], "--validation_files")

    @parameterized.parameters(([], "model_size", "t5-mini"), (["--max_steps", "2000"], "max_steps", "2000"),
                              ([], "max_steps", 500), (["--config_overrides", "num_layers=4"], "config_overrides",
                                                       "num_layers=4"), ([], "config_overrides", None))
    def test_a_pretraining_setting_comes_from_the_overrides_else_the_config(self, overrides, key, value):
        config = Path(tempfile.mkdtemp()) / "pretrain.yaml"
        config.write_text("model_size: t5-mini\nmax_steps: 500\n")
        args = argparse.Namespace(pretrain_config=str(config), pretrain_overrides=overrides)
        self.assertEqual(quality.pretrain_setting(args, key), value)

    def test_the_tokenizer_is_trained_on_the_books_with_or_without_task_sentences(self):
        """Step 1-2 of main: the tokenizer runs in both modes, on train.txt alone (the regression this guards: the
        tokenizer step once sat under the --task_adaptive branch)."""
        for task_adaptive in (False, True):
            work = Path(tempfile.mkdtemp())
            commands = []
            stop = SystemExit("stop after the tokenizer")
            with mock.patch.object(quality, "write_corpus"), \
                    mock.patch.object(quality, "write_task_texts") as write_texts, \
                    mock.patch.object(quality, "run", side_effect=lambda c, log: commands.append(c) or 0), \
                    mock.patch.object(quality, "read_config_value", side_effect=stop):
                argv = ["--work_dir", str(work)] + (["--task_adaptive"] if task_adaptive else [])
                with self.assertRaises(SystemExit):
                    quality.main(argv)
            self.assertLen(commands, 1)
            self.assertIn("train_tokenizer.py", commands[0])
            self.assertEqual(commands[0][commands[0].index("--train_files") + 1], str(work / "corpus" / "train.txt"))
            self.assertEqual(write_texts.call_count, 3 if task_adaptive else 0)  # sst2, rte, cola by default


@pytest.mark.slow  # two real pre-training runs
class WordVectorsArmTest(parameterized.TestCase):
    """The third arm: the pre-trained model's starting point (its word vectors, its seed) with no span-corruption
    update, so the report can say what span corruption adds."""

    def test_one_step_at_learning_rate_zero_leaves_the_built_model_unchanged(self):
        """Even where --pretrain_overrides give parameter groups their own learning rates."""
        book = require("gutenberg/austen-persuasion.txt").read_text(encoding="utf-8")
        config = Path(tempfile.mkdtemp()) / "pretrain.yaml"
        config.write_text("model_size: t5-tiny\ninit_embeddings: word_vectors\ninput_length: 64\n"
                          "per_device_train_batch_size: 4\nmax_steps: 5\nlearning_rate: 0.01\nuse_cpu: true\n"
                          "report_to: none\nseed: 42\n")
        models = {}
        for init in ("word_vectors", "random"):
            work = Path(tempfile.mkdtemp())
            (work / "corpus").mkdir()
            (work / "corpus" / "train.txt").write_text(book[:200_000], encoding="utf-8")
            (work / "corpus" / "validation.txt").write_text(book[200_000:230_000], encoding="utf-8")
            args = argparse.Namespace(pretrain_config=str(config), task_adaptive=False, tasks=["sst2"],
                                      pretrain_overrides=["--max_steps", "3", "--init_embeddings", init,
                                                          "--param_group_lr", "shared=0,.*=0.01"])
            command = quality.word_vectors_only_command(args, work, require("t5_spiece"))
            self.assertEqual(command[len(command) - 1 - command[::-1].index("--max_steps") + 1], "1")  # ours win
            self.assertEqual(command[:2], [sys.executable, "pre_train_t5.py"])
            done = run_forked("pre_train_t5", command[2:])  # quality.run's own test: RunTest
            self.assertEqual(done.returncode, 0, done.stderr[-3000:])
            models[init] = load_file(work / "word_vectors_only" / "model.safetensors")
        embeddings = [name for name in models["random"] if "shared" in name or "embed_tokens" in name]
        self.assertNotEmpty(embeddings)
        for name in embeddings:  # the word vectors are in
            self.assertFalse(torch.equal(models["word_vectors"][name], models["random"][name]), name)
        others = [name for name in models["random"] if name not in embeddings and "lm_head" not in name]
        self.assertNotEmpty(others)
        for name in others:  # everything else is the seed's random init, untouched by the step at learning rate 0
            torch.testing.assert_close(models["word_vectors"][name], models["random"][name], rtol=0, atol=0)

    def test_the_report_says_what_span_corruption_adds(self):
        line = quality.report_line("sst2", {"pretrained": [74.0, 73.0], "random_init": [65.0, 66.0],
                                            "word_vectors_only": [74.5, 73.5]}, 2)
        self.assertIn("pre-trained 73.5 +- 0.7 vs random init 65.5 +- 0.7 -> +8.0", line)
        self.assertIn("word vectors alone 74.0 +- 0.7 -> span corruption adds -0.5", line)
        self.assertIn("74.0/65.0/74.5, 73.0/66.0/73.5", line)


class RunStepTest(absltest.TestCase):

    def test_a_step_writes_its_log_and_prints_one_line_when_done(self):
        """The GPU check stops bench/quality.py at its budget: the printed lines say how far it got."""
        log = Path(tempfile.mkdtemp()) / "pretrain.log"
        with mock.patch("builtins.print") as printed:
            seconds = quality.run([sys.executable, "-c", "print('step output')"], log)
        self.assertEqual(log.read_text(), "step output\n")
        (line,), _ = printed.call_args
        self.assertRegex(line, r"^\[quality\] pretrain: done in \d+ s$")
        self.assertGreaterEqual(seconds, 0)

    def test_a_failed_step_names_its_log(self):
        log = Path(tempfile.mkdtemp()) / "tokenizer.log"
        with self.assertRaisesRegex(SystemExit, r"failed \(exit 3\); see .*tokenizer\.log"):
            quality.run([sys.executable, "-c", "raise SystemExit(3)"], log)


class FinetuneAllTest(parameterized.TestCase):

    @parameterized.parameters(1, 3)
    def test_every_run_and_seed_in_order_however_many_at_a_time(self, parallel):
        """--parallel runs several fine-tuning runs at once (a GPU machine); the scores keep their (task, arm) and
        seed order, and no more than --parallel run together."""
        running, most = [0], [0]
        lock = threading.Lock()
        together = threading.Barrier(parallel, timeout=30)  # passes only when `parallel` runs wait at once

        def fake_finetune(args, work, task, seed, arm, model_args):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            together.wait()
            with lock:
                running[0] -= 1
            return f"{task}/{arm}/{seed}/{model_args[0]}"

        args = argparse.Namespace(parallel=parallel, seeds=[1, 2])
        runs = [("sst2", "pretrained", ["p"]), ("sst2", "random_init", ["r"]), ("rte", "pretrained", ["p"])]
        with mock.patch.object(quality, "finetune", fake_finetune):
            scores = quality.finetune_all(args, Path("/unused"), runs)
        self.assertEqual(scores, {("sst2", "pretrained"): ["sst2/pretrained/1/p", "sst2/pretrained/2/p"],
                                  ("sst2", "random_init"): ["sst2/random_init/1/r", "sst2/random_init/2/r"],
                                  ("rte", "pretrained"): ["rte/pretrained/1/p", "rte/pretrained/2/p"]})
        self.assertEqual(most[0], parallel)

    def test_parallel_below_one_names_the_flag(self):
        with self.assertRaises(SystemExit), mock.patch("sys.stderr") as stderr:
            quality.parse_args(["--parallel", "0"])
        self.assertIn("--parallel 0", "".join(call.args[0] for call in stderr.write.call_args_list))


if __name__ == "__main__":
    absltest.main()
