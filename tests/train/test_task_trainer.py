"""train/task_trainer.py's length-bucket sampler: batches of equal lengths, longest first, as little padding as
sorting gives; the evaluation of FLAN's COPA and ReCoRD held out, each row's own options ranked."""
import json
from pathlib import Path

import numpy as np
import torch
from absl.testing import absltest
from transformers import T5Config, T5ForConditionalGeneration

from t5kit.config.finetune_arguments import FineTuneDataArguments
from t5kit.data import task_splits
from t5kit.train.task_trainer import (
    ROW_INDEX,
    TaskCollator,
    TaskTrainer,
    chosen_options,
    length_bucket_indices,
    with_row_index,
)
from tests.helpers import REPO, T5TokenizerTestCase, training_args

SUPERGLUE_FIXTURES = REPO / "tests" / "fixtures" / "superglue"


class LengthBucketTest(absltest.TestCase):

    def test_batches_hold_equal_lengths_longest_first(self):
        rng = np.random.default_rng(0)
        inputs, targets = rng.integers(5, 40, size=1000), rng.integers(2, 4, size=1000)
        order = length_bucket_indices(inputs, targets, 32, torch.Generator().manual_seed(0))
        self.assertEqual(sorted(order), list(range(1000)))
        batches = [order[i:i + 32] for i in range(0, 1000, 32)]
        self.assertEqual(inputs[batches[0]].max(), inputs.max())
        self.assertLen(batches[-1], 1000 % 32)
        # As little input padding as any batching can give: that of cutting the sorted lengths into batches.
        def padding(lengths_per_batch):
            return sum(len(b) * b.max() - b.sum() for b in lengths_per_batch)
        descending = np.sort(inputs)[::-1]
        self.assertEqual(padding([inputs[b] for b in batches]),
                         padding([descending[i:i + 32] for i in range(0, 1000, 32)]))



def labelled_copa(folder):
    """The fixture's COPA test rows (hand-written, no labels) as a validation file, labelled idx % 2 as
    tests/data/test_instructions.py labels them: row 0's answer is choice1, row 1's choice2."""
    rows = [json.loads(line) for line in (SUPERGLUE_FIXTURES / "COPA" / "test.jsonl").read_text().splitlines()]
    (Path(folder) / "COPA").mkdir()
    (Path(folder) / "COPA" / "val.jsonl").write_text("".join(json.dumps(dict(row, label=row["idx"] % 2)) + "\n"
                                                           for row in rows))


class RowOptionRankingTest(T5TokenizerTestCase):
    """A run in FLAN's templates with COPA and ReCoRD held out (--eval_tasks), their splits built from files as
    fine_tune_t5.py builds them, evaluated by a random one-layer T5 with the real vocabulary."""

    def setUp(self):
        super().setUp()
        folder = self.create_tempdir().full_path
        labelled_copa(folder)
        args = FineTuneDataArguments(dataset_name=None, tasks="glue/rte",
                                     eval_tasks="super_glue/copa,super_glue/record", instruction_templates="flan",
                                     data_dir=[folder, str(SUPERGLUE_FIXTURES)], max_source_length=256)
        tasks = task_splits.resolve_run_tasks(args.task_selection())
        self.splits = [task_splits.build_task_split(task_splits.SplitPlan(task, "validation", "eval", key),
                                                    args.task_data(), self.tokenizer)
                       for task, key in zip(tasks[1:], ("copa", "record"))]
        torch.manual_seed(0)
        self.model = T5ForConditionalGeneration(T5Config(
            vocab_size=len(self.tokenizer), d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2,
            decoder_start_token_id=0, pad_token_id=0, eos_token_id=1))
        self.out = self.create_tempdir().full_path

    def trainer(self, label_scoring=None, batch_size=2):
        args = training_args("--output_dir", self.out, "--report_to", "none", "--disable_tqdm", "true",
                             "--per_device_eval_batch_size", str(batch_size), "--predict_with_generate", "true")
        return TaskTrainer(model=self.model, args=args, eval_splits=self.splits, label_scoring=label_scoring,
                           data_collator=TaskCollator(self.tokenizer, model=self.model),
                           processing_class=self.tokenizer)

    def slow_choice(self, split, row):
        """The option whose target ids (EOS included) the model's loss, scored one option at a time, makes likeliest."""
        input_ids = torch.tensor([split.dataset[row]["input_ids"]])
        scores = []
        with torch.no_grad():
            for option in split.meta[row]["options"]:
                labels = torch.tensor([self.tokenizer(option).input_ids])
                scores.append(-self.model(input_ids=input_ids, labels=labels).loss.item() * labels.shape[1])
        return split.meta[row]["options"][int(np.argmax(scores))]

    def test_held_out_copa_and_record_rank_each_rows_options_never_invalid(self):
        trainer = self.trainer()
        with self.assertLogs("t5kit.train.task_trainer", "INFO") as logs:
            metrics = trainer.evaluate()
        self.assertEqual((metrics["eval_copa_invalid_count"], metrics["eval_record_invalid_count"]), (0, 0))
        self.assertIn("super_glue/copa validation (ranked): 0 of 2 predictions invalid (0.00 %)", logs.output[0])
        self.assertIn("super_glue/record validation (ranked): 0 of 3 predictions invalid (0.00 %)", logs.output[1])
        copa, record = (trainer.predict_split(split, "eval")[0] for split in self.splits)
        # batches of 2: ReCoRD's 3 queries (4, 3 and 3 options) span two of them
        for split, texts in zip(self.splits, (copa, record)):
            self.assertEqual(texts, [self.slow_choice(split, row) for row in range(len(split.inputs))])
        self.assertEqual(metrics["eval_copa_accuracy"],
                         50.0 * sum(text == target for text, target in zip(copa, self.splits[0].targets)))

    def test_generation_is_one_flag_away(self):
        self.assertEqual(with_row_index(self.splits[0], "generate").column_names, ["input_ids", "attention_mask",
                                                                                    "labels"])
        with self.assertLogs("t5kit.train.task_trainer", "INFO") as logs:
            self.trainer("generate").evaluate(eval_dataset=self.splits[:1])
        self.assertIn("super_glue/copa validation (generated): ", logs.output[0])

    def test_the_row_index_rides_every_batch_to_prediction_step(self):
        trainer = self.trainer(batch_size=2)
        dataset = with_row_index(self.splits[1], None)
        self.assertEqual(dataset[ROW_INDEX], [0, 1, 2])
        batches = list(trainer.get_eval_dataloader(dataset))
        self.assertEqual([batch[ROW_INDEX].tolist() for batch in batches], [[0, 1], [2]])
        trainer.current_split = self.splits[1]
        _, ranked, _ = trainer.prediction_step(trainer.model, batches[1], prediction_loss_only=False)
        self.assertEqual(ranked[:, 0].tolist(), [2])  # the row, then its option
        del batches[0][ROW_INDEX]
        with self.assertRaisesRegex(ValueError, "ranking super_glue/record's own options needs the row_index column"):
            trainer.prediction_step(trainer.model, batches[0], prediction_loss_only=False)

    def test_options_are_put_back_by_row_index_whatever_the_order(self):
        """However the processes' batches are gathered (reordered, the padding's repeated rows kept), each row gets
        its own option; a row that never came back is an error, not a shifted prediction."""
        meta = [{"options": ["a", "b"]}, {"options": ["c", "d", "e"]}, {"options": []}]
        self.assertEqual(chosen_options(np.array([[2, -1], [1, 2], [0, 1], [1, 2]]), meta), ["b", "e", ""])
        with self.assertRaisesRegex(RuntimeError, "row 1 of 3 came back without a ranked option"):
            chosen_options(np.array([[0, 0], [2, -1]]), meta)


if __name__ == "__main__":
    absltest.main()
