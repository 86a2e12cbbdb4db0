"""model/packed_training.py, the packing owner: off, it changes nothing and reports nothing; on, it refuses a model
that cannot take packed rows, installs the segment masks and builds the sampler and collator whose shapes and
padding it reports."""
import datasets
from absl.testing import absltest, parameterized
from transformers import LongT5Config, LongT5ForConditionalGeneration

from t5kit.data import packed_batches
from t5kit.errors import UsageError
from t5kit.model import packed_attention
from t5kit.model.packed_training import Packing
from tests.helpers import random_examples, tiny_model


def task_examples(count=60):
    examples = random_examples(count, seed=2, longest_input=20, longest_target=6)
    return datasets.Dataset.from_dict({"input_ids": [i.tolist() for i, _ in examples],
                                       "labels": [t.tolist() for _, t in examples]})


class PackingOwnerTest(parameterized.TestCase):

    def test_off_changes_nothing_and_reports_nothing(self):
        packing, model = Packing(False), tiny_model()
        packing.prepare_model(model)
        packing.pack_task_examples(task_examples(), 32, 6, 4, 0, 0, 0)
        self.assertFalse(packed_attention.installed(model))
        self.assertIsNone(packing.batches)
        self.assertEqual((packing.derived(), packing.epoch_followers(), packing.card_note()), ({}, [], ""))
        self.assertEqual(packing.tokens_per_example(12.5), 12.5)

    def test_on_installs_the_masks_and_reports_the_rows_it_built(self):
        packing, model = Packing(True), tiny_model()
        packing.prepare_model(model)
        self.assertTrue(packed_attention.installed(model))
        packing.pack_task_examples(task_examples(), 32, 6, 4, 0, 0, 0)
        sampler, collator = packing.batches
        self.assertEqual(sampler.row_shape[0], 32)
        self.assertEqual(packing.derived(), {"input_length": 32, "target_length": sampler.row_shape[1]})
        self.assertEqual(packing.epoch_followers(), [sampler])
        self.assertEqual(packing.tokens_per_example(12.5), packed_batches.real_tokens_per_row(sampler))
        self.assertGreater(packing.tokens_per_example(12.5), 12.5)  # several examples to a row
        self.assertIn(f"a row of 32 inputs and {sampler.row_shape[1]} targets", packing.card_note())

    def test_an_evaluation_only_run_builds_no_batches(self):
        packing = Packing(True)
        packing.pack_task_examples(None, 32, 6, 4, 0, 0, 0)
        self.assertIsNone(packing.batches)

    def test_a_model_that_cannot_take_packed_rows_is_refused(self):
        config = LongT5Config(vocab_size=64, d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2)
        with self.assertRaisesRegex(UsageError, "packed batches need a T5, mT5 or UMT5 model, not longt5"):
            Packing(True).prepare_model(LongT5ForConditionalGeneration(config))
        Packing(False).prepare_model(LongT5ForConditionalGeneration(config))  # off: nothing to refuse


if __name__ == "__main__":
    absltest.main()
