"""Spec of tokenizer_check: what a T5 tokenizer must hold, and that checking it loads no torch. (A trained and the real
T5 tokenizer pass it: tests/model/test_tokenizer_training.py.)"""
import subprocess
import sys

import pytest
import transformers
from absl.testing import absltest, parameterized
from tokenizers import Tokenizer, models

from t5kit.errors import UsageError
from t5kit.model import tokenizer_check
from tests.helpers import REPO


class CheckTokenizerTest(parameterized.TestCase):
    @parameterized.named_parameters(
        ("no_sentinels", {"<pad>": 0, "</s>": 1, "<unk>": 2, "a": 3}, "lacks 100 of the 100 sentinel"),
        ("no_pad", {"</s>": 0, "<unk>": 1, "a": 2}, "has no pad_token"),
    )
    def test_refuses(self, vocab, message):
        tokenizer = transformers.PreTrainedTokenizerFast(
            tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")), unk_token="<unk>",
            eos_token="</s>", pad_token="<pad>" if "<pad>" in vocab else None)
        with self.assertRaisesRegex(UsageError, f"tokenizer word-level {message}.*train_tokenizer.py"):
            tokenizer_check.check_t5_tokenizer(tokenizer, "word-level")

    @pytest.mark.slow  # a second interpreter
    def test_train_tokenizer_imports_no_torch(self):
        """train_tokenizer.py's flags and check load without torch (transformers' tokenizer classes bring it later,
        when the script builds the tokenizer), so that a refused flag is answered in about a second."""
        code = ("import sys; import t5kit.config.tokenizer_arguments, t5kit.model.tokenizer_check; "
                "print(sorted(m for m in ('torch', 'peft') if m in sys.modules))")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
        self.assertEqual(result.stdout.strip(), "[]", result.stderr[-2000:])


if __name__ == "__main__":
    absltest.main()
