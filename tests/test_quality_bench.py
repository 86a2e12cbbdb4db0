"""bench/quality.py --task_adaptive: SST-2's training sentences become a second pre-training file, labels left out;
the tokenizer and the default run never see them."""
import argparse
import tempfile
from pathlib import Path
from unittest import mock

from absl.testing import absltest, parameterized

from bench import quality
from tests.helpers import require


class TaskAdaptiveCorpusTest(parameterized.TestCase):

    def test_the_sentences_are_written_one_document_each_without_labels(self):
        require("glue/SST-2")
        folder = Path(tempfile.mkdtemp())
        quality.write_task_sentences(folder)
        documents = (folder / "sst2_train.txt").read_text(encoding="utf-8").strip().split("\n\n")
        self.assertLen(documents, 67349)
        self.assertEqual(documents[0], "hide new secretions from the parental units")
        self.assertFalse(any(document.endswith(("\t0", "\t1")) for document in documents))

    @parameterized.parameters((True, 2), (False, 1))
    def test_the_pretraining_command_reads_them_only_when_asked(self, task_adaptive, files):
        work = Path("/w")
        args = argparse.Namespace(pretrain_config="configs/pretrain_cpu.yaml", task_adaptive=task_adaptive,
                                  pretrain_overrides=[])
        command = quality.pretrain_command(args, work, work / "tokenizer")
        start = command.index("--train_files") + 1
        self.assertEqual(command[start:start + files], [str(work / "corpus" / "train.txt"),
                                                         str(work / "corpus" / "sst2_train.txt")][:files])
        self.assertEqual(command[start + files], "--validation_files")

    def test_the_tokenizer_is_trained_on_the_books_with_or_without_task_sentences(self):
        """Step 1-2 of main: the tokenizer runs in both modes, on train.txt alone (the regression this guards: the
        tokenizer step once sat under the --task_adaptive branch)."""
        for task_adaptive in (False, True):
            work = Path(tempfile.mkdtemp())
            commands = []
            stop = SystemExit("stop after the tokenizer")
            with mock.patch.object(quality, "write_corpus"), \
                    mock.patch.object(quality, "write_task_sentences") as write_sentences, \
                    mock.patch.object(quality, "run", side_effect=lambda c, log: commands.append(c) or 0), \
                    mock.patch.object(quality, "read_config_value", side_effect=stop):
                argv = ["--work_dir", str(work)] + (["--task_adaptive"] if task_adaptive else [])
                with self.assertRaises(SystemExit):
                    quality.main(argv)
            self.assertLen(commands, 1)
            self.assertIn("train_tokenizer.py", commands[0])
            self.assertEqual(commands[0][commands[0].index("--train_files") + 1], str(work / "corpus" / "train.txt"))
            self.assertEqual(write_sentences.called, task_adaptive)


if __name__ == "__main__":
    absltest.main()
