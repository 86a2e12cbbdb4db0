"""The offline quickstart path, shortened: stdlib corpus -> trained tokenizer -> configs/quickstart.yaml."""
import json
from pathlib import Path

import pytest
from absl.testing import absltest

from tests.helpers import REPO, built_quickstart_corpus, pre_train, predict, predict_flags, train_tokenizer

pytestmark = pytest.mark.slow  # builds a corpus and a tokenizer, then pre-trains


class QuickstartTest(absltest.TestCase):

    def test_quickstart_config_trains_and_eval_loss_falls_30_percent(self):
        work = Path(self.create_tempdir().full_path)
        corpus, _ = built_quickstart_corpus()  # scripts/quickstart_corpus.py's build, shared with its own test
        train_tokenizer(["--train_files", str(corpus / "train.txt"), "--output_dir", str(work / "tokenizer"),
                         "--vocab_size", "8000"])
        out = work / "run"
        # The real config, pointed at this temp folder and cut to 80 steps to keep the suite fast.
        pre_train([str(REPO / "configs/quickstart.yaml"), "--output_dir", str(out),
                   "--tokenizer_name_or_path", str(work / "tokenizer"),
                   "--train_files", str(corpus / "train.txt"), "--validation_files", str(corpus / "validation.txt"),
                   "--max_steps", "80", "--eval_steps", "40", "--save_steps", "80", "--disable_tqdm", "true"])
        history = json.loads((out / "metrics.json").read_text())["log_history"]
        eval_losses = [entry["eval_loss"] for entry in history if "eval_loss" in entry]
        self.assertEqual(history[0]["step"], 0)  # eval_on_start: the untrained baseline
        self.assertLess(eval_losses[-1], 0.7 * eval_losses[0])
        for name in ("config.yaml", "metrics.json", "loss_curve.png", "model.safetensors", "out.log", "README.md"):
            self.assertTrue((out / name).is_file(), name)

        # predict_t5.py --fp16 fills the same spans as fp32 (fp16 weights, the feed-forward outputs in fp32).
        lines = [line for line in (corpus / "validation.txt").read_text().splitlines() if len(line.split()) > 8][:12]
        spans = work / "spans.txt"
        spans.write_text("".join(" ".join([*words[:3], "<extra_id_0>", *words[5:8], "<extra_id_1>"]) + "\n"
                                 for words in (line.split() for line in lines)))
        filled = {precision: [row["filled"] for row in predict(predict_flags(
            str(out), str(spans), str(work / f"filled_{precision}.jsonl"), fp16=precision == "fp16"))]
            for precision in ("fp32", "fp16")}
        self.assertLen(filled["fp32"], 12)
        self.assertEqual(filled["fp16"], filled["fp32"])


if __name__ == "__main__":
    absltest.main()
