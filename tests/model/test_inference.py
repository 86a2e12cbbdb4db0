"""model/inference.py's batching: length-sorted batches (longest first, ties in input order), each padded to its
longest row; place_model's bf16 weights, which predict like fp32 ones; score_row_options, which ranks each row's
own options (FLAN's COPA and ReCoRD), equal to scoring every option alone through the model's loss."""
import json

import numpy as np
import torch
import transformers
from absl.testing import absltest, parameterized
from transformers import T5Config, T5ForConditionalGeneration

from constants import DATASET_VALS
from t5kit.data import instructions, superglue_formats
from t5kit.model import inference
from tests.helpers import REPO, T5TokenizerTestCase, require, tiny_model

SUPERGLUE_FIXTURES = REPO / "tests" / "fixtures" / "superglue"


class InferenceTest(parameterized.TestCase):

    def test_length_sorted_batches_longest_first_ties_in_input_order(self):
        self.assertEqual(inference.length_sorted_batches([3, 7, 3, 9, 1], 2), [[3, 1], [0, 2], [4]])

    def test_pad_batch_pads_to_the_batch_longest(self):
        ids, mask = inference.pad_batch([[5, 6, 1], [7, 1]], pad_id=0, device="cpu")
        self.assertEqual(ids.tolist(), [[5, 6, 1], [7, 1, 0]])
        self.assertEqual(mask.tolist(), [[1, 1, 1], [1, 1, 0]])

    @parameterized.parameters(True, False)
    def test_place_model_casts_every_weight_to_bf16_only_where_asked(self, bf16):
        model = inference.place_model(tiny_model(), "cpu", bf16)
        self.assertEqual({tensor.dtype for tensor in model.state_dict().values()},
                         {torch.bfloat16 if bf16 else torch.float32})

    def test_bf16_weights_generate_what_fp32_weights_generate(self):
        """Greedy decoding of a random model: its logits sit far apart, so bf16 rounding rarely flips an argmax."""
        torch.manual_seed(0)
        fp32 = tiny_model().eval()
        bf16 = inference.place_model(tiny_model(), "cpu", True)
        bf16.load_state_dict(fp32.state_dict())  # load_state_dict casts to the bf16 parameters' dtype
        ids = [torch.randint(2, 64, (length,)).tolist() + [1] for length in (9, 4, 7, 12, 5, 8)]
        tokenizer = type("Ids", (), {"pad_token_id": 0, "batch_decode": staticmethod(
            lambda rows, skip_special_tokens: [" ".join(map(str, row.tolist())) for row in rows])})()
        texts = {name: inference.predict(model, tokenizer, ids, 4, max_new_tokens=6, progress=False)
                 for name, model in (("fp32", fp32), ("bf16", bf16))}
        self.assertEqual(next(bf16.parameters()).dtype, torch.bfloat16)
        agree = sum(a == b for a, b in zip(texts["fp32"], texts["bf16"]))
        self.assertGreaterEqual(agree, 5, texts)



def flan_rows():
    """[(input, options)] of the fixture's COPA test rows and ReCoRD validation queries in FLAN's first template with
    OPTIONS, the options as FLAN's _process_copa and _process_record give them: 2 each for COPA, 3 or 4 for
    ReCoRD, of unequal token lengths."""
    copa = [json.loads(line) for line in (SUPERGLUE_FIXTURES / "COPA" / "test.jsonl").read_text().splitlines()]
    record = [row for line in (SUPERGLUE_FIXTURES / "ReCoRD" / "val.jsonl").read_text().splitlines()
              for row in superglue_formats.record_rows(json.loads(line), labelled=True)]
    rows = []
    for name, task_rows, build in (("super_glue/copa", copa, instructions.copa_features),
                                   ("super_glue/record", record, instructions.record_features)):
        flan_task = instructions.FLAN_TASKS[name]
        template = instructions.usable_templates(flan_task, "label")[0]
        task_vals = {"name": name, "label_column_name": "label", "task_type": "qa", "labels": None}
        rows += [(instructions.render(task_vals, template, row, options=True)[0], build(row)["options"])
                 for row in task_rows]
    return rows


class RowOptionsTest(T5TokenizerTestCase):
    """A random one-layer T5 with the real T5 vocabulary, on real inputs and options."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        torch.manual_seed(0)
        config = T5Config(vocab_size=len(cls.tokenizer), d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2,
                          decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
        cls.model = T5ForConditionalGeneration(config).eval()
        cls.rows = flan_rows()

    def batch(self, rows):
        ids = [self.tokenizer(text).input_ids for text, _ in rows]
        return inference.pad_batch(ids, self.tokenizer.pad_token_id, "cpu")

    def slow_score(self, text, option):
        """One option alone: minus the model's mean loss over its target ids (EOS included) times their count."""
        inputs = self.tokenizer(text, return_tensors="pt")
        labels = self.tokenizer(option, return_tensors="pt").input_ids
        with torch.no_grad():
            return -self.model(**inputs, labels=labels).loss.item() * labels.shape[1]

    def test_each_rows_options_score_as_each_option_alone_through_the_loss(self):
        self.assertEqual([len(options) for _, options in self.rows], [2, 2, 4, 3, 3])  # COPA, ReCoRD's entities
        lengths = {len(self.tokenizer(option).input_ids) for _, options in self.rows for option in options}
        self.assertGreater(len(lengths), 3)  # options of unequal token lengths, padded in the same decoder call
        scores = inference.score_row_options(self.model, self.tokenizer, *self.batch(self.rows),
                                             [options for _, options in self.rows])
        self.assertEqual(tuple(scores.shape), (5, 4))
        for row, (text, options) in enumerate(self.rows):
            expected = [self.slow_score(text, option) for option in options]
            torch.testing.assert_close(scores[row, :len(options)], torch.tensor(expected), rtol=0, atol=2e-5)
            self.assertTrue(torch.isneginf(scores[row, len(options):]).all())  # no K-th option: never picked

    def test_negative_control_padding_left_in_the_sum_changes_the_scores(self):
        """The comparison above would catch a scorer that summed the padding of its shorter options."""
        text, options = self.rows[2]
        ids, mask = self.batch([self.rows[2]] * len(options))
        targets = self.tokenizer(options).input_ids
        labels = torch.full((len(options), max(map(len, targets))), inference.LABEL_PAD)
        for i, row in enumerate(targets):
            labels[i, :len(row)] = torch.tensor(row)
        encoded = self.model.get_encoder()(input_ids=ids, attention_mask=mask)
        with torch.no_grad():
            masked = inference.target_log_likelihoods(self.model, encoded, mask, labels)
            unmasked = inference.target_log_likelihoods(self.model, encoded, mask, labels.clamp(min=0))
        expected = torch.tensor([self.slow_score(text, option) for option in options])
        torch.testing.assert_close(masked, expected, rtol=0, atol=2e-5)
        shorter = torch.tensor([len(row) < labels.shape[1] for row in targets])
        self.assertTrue(shorter.any())
        self.assertTrue(((unmasked - expected).abs()[shorter] > 1e-3).all())

    def test_ties_go_to_the_first_option_and_a_row_without_options_to_none(self):
        text, (first, second) = self.rows[0]
        rows = [(text, [first, first, second]), (text, []), (text, [second, first])]
        scores = inference.score_row_options(self.model, self.tokenizer, *self.batch(rows),
                                             [options for _, options in rows])
        self.assertEqual(scores[0, 0].item(), scores[0, 1].item())  # the same option twice: one score
        self.assertTrue(torch.isneginf(scores[1]).all())
        counts = torch.tensor([3, 0, 2])
        self.assertEqual(inference.best_options(torch.tensor([[-1.0, -1.0, -2.0], [float("-inf")] * 3,
                                                              [-3.0, -3.0, float("-inf")]]), counts).tolist(),
                         [0, -1, 0])
        picked = inference.best_options(scores, counts).tolist()
        self.assertEqual(picked[1], -1)
        self.assertEqual(rows[0][1][picked[0]], rows[2][1][picked[2]])  # the same likeliest option, either order

    def test_label_words_score_as_the_same_options_on_every_row(self):
        words = ["yes", "no", "It's impossible to say"]
        ids, mask = self.batch(self.rows)
        torch.testing.assert_close(inference.score_row_options(self.model, self.tokenizer, ids, mask,
                                                               [words] * len(self.rows)),
                                   inference.score_label_words(self.model, self.tokenizer, ids, mask, words),
                                   rtol=0, atol=2e-5)


class LabelScoringTest(parameterized.TestCase):

    def test_rank_picks_highest_log_likelihood_first_on_ties(self):
        log_likelihoods = np.array([[-1.0, -0.5, -3.0], [-0.1, -2.0, -0.1], [-9.0, -8.0, -7.0]])
        self.assertEqual(inference.rank_label_words(log_likelihoods, ["a", "b", "c"]), ["b", "a", "c"])
        with self.assertRaisesRegex(ValueError, r"log_likelihoods must be \(B, 2\)"):
            inference.rank_label_words(log_likelihoods, ["a", "b"])

    def test_score_label_words_matches_per_example_loop(self):
        tokenizer = transformers.T5TokenizerFast.from_pretrained(str(require("t5_spiece")))
        torch.manual_seed(0)
        config = transformers.T5Config(vocab_size=len(tokenizer), d_model=32, d_ff=64, d_kv=16, num_layers=2,
                                       num_heads=2, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
        model = transformers.T5ForConditionalGeneration(config).eval()
        label_words = list(DATASET_VALS["glue"]["mnli"]["labels"].values())
        texts = ["mnli hypothesis: Nobody eats. premise: A man eats.", "mnli hypothesis: A cat. premise: A cat sat.",
                 "mnli hypothesis: It rains. premise: The sun shines on a long summer day in the park."]
        batch = tokenizer(texts, padding=True, return_tensors="pt")
        scores = inference.score_label_words(model, tokenizer, batch.input_ids, batch.attention_mask, label_words)
        self.assertEqual(tuple(scores.shape), (3, 3))

        expected = torch.zeros(3, 3)
        with torch.no_grad():
            for i, text in enumerate(texts):
                input_ids = tokenizer(text, return_tensors="pt").input_ids  # unpadded, one example
                for j, word in enumerate(label_words):
                    labels = tokenizer(word, return_tensors="pt").input_ids  # ends with </s>
                    loss = model(input_ids=input_ids, labels=labels).loss  # mean negative log-likelihood
                    expected[i, j] = -loss * labels.shape[1]
        torch.testing.assert_close(scores, expected, atol=1e-4, rtol=1e-5)
        self.assertEqual(inference.rank_label_words(scores, label_words),
                         [label_words[j] for j in expected.argmax(dim=-1)])


if __name__ == "__main__":
    absltest.main()
