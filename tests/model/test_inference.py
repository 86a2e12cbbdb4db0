"""model/inference.py's batching: length-sorted batches (longest first, ties in input order), each padded to its
longest row; place_model's bf16 weights, which predict like fp32 ones."""
import torch
from absl.testing import absltest, parameterized

from t5kit.model import inference
from tests.helpers import tiny_model


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


if __name__ == "__main__":
    absltest.main()
