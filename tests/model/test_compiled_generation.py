"""Compiled, static-cache generation (t5kit/model/compiled_generation.py, --compile): on a tiny T5 trained for
seconds, predict_t5.py --compile gives eager's predictions on RTE, greedy and with beams, and fine-tuning evaluates
with it as without, under Inductor as users run them. SST-2, newstest2014 and span-filling inputs and the shape
buckets' edge cases (a batch of 1, a batch one past a bucket, a source of the maximum length, rows that end early)
run the same static cache and padding through dynamo's eager backend, which skips Inductor's code generation
(seconds instead of tens of seconds a shape on a CPU); a negative control shows the comparison catches unmasked
padding; the fallbacks log one line and generate eagerly."""
import json
from pathlib import Path
from unittest import mock

import pytest
import torch
from absl.testing import absltest, parameterized
from torch._dynamo.utils import counters

from t5kit.data import predict_inputs, task_format
from t5kit.errors import UsageError
from t5kit.model import building, compiled_generation, inference
from tests.helpers import EVAL_ROWS, fine_tune, predict, predict_flags, require, tiny_flags
from tests.trained_model import trained_tiny_model

ROWS = 8  # of each input set
# The evaluation of the fine-tuning test (EVAL_ROWS RTE rows in one batch) and the predict test's greedy RTE run have
# this one shape (rows padded to the batch's bucket, 64 source tokens, max_length decoding positions), so the second
# of them finds Inductor's kernels compiled by the first: ~25 s less on a cold cache.
SHARED_SHAPE = {"rows": EVAL_ROWS, "batch": 16, "max_length": 13}
SPEED_KEYS = ("_runtime", "_per_second")  # evaluation metrics that are timings


def dev_texts(task, limit=ROWS):
    task_vals = task_format.find_task(task)
    path = require("glue") / task_vals["data_dir_name"] / task_vals["data_files"]["validation"]
    return predict_inputs.read_inputs(path, task_vals, limit=limit).texts


def translation_texts(limit=ROWS):
    """newstest2014's first English sentences in T5's translation format (the registry's multi30k_en_de)."""
    task_vals = task_format.find_task("translation/multi30k_en_de")
    lines = require("translation/wmt14_en_de_newstest2014_tok/test.en").read_text(encoding="utf-8").splitlines()
    return [task_format.format_input(task_vals, {"en": line}) for line in lines[:limit]]


def span_texts(limit=ROWS):
    """WikiText-2 test sentences with their 3rd and 7th words replaced by sentinels, as span corruption masks."""
    lines = [line.split() for line in require("wikitext-2-raw/wiki.test.raw").read_text(encoding="utf-8")
             .splitlines() if len(line.split()) > 12 and not line.strip().startswith("=")]
    return [" ".join([*words[:2], "<extra_id_0>", *words[3:6], "<extra_id_1>", *words[7:24]])
            for words in lines[:limit]]


class TrainedModelTestCase(parameterized.TestCase):
    """The tiny trained model (tests/trained_model.py, once per test process) and the input sets."""

    @classmethod
    def setUpClass(cls):
        cls.folder, _ = trained_tiny_model()
        cls.tokenizer = building.load_tokenizer(str(cls.folder))
        cls.texts = {"sst2": dev_texts("sst2"), "rte": dev_texts("rte"), "translation": translation_texts(),
                     "spans": span_texts()}

    def fresh_model(self):
        return building.load_pretrained_t5(str(self.folder)).eval()

    def ids(self, texts, max_source_length=64):
        return inference.tokenize_inputs(self.tokenizer, texts, max_source_length)[0]

    def eager_and_compiled(self, ids, batch_size, max_source_length=64, **options):
        """(eager predictions, compiled predictions, the generator) on one input set, dynamo's eager backend."""
        model = self.fresh_model()
        eager = inference.predict(model, self.tokenizer, ids, batch_size, progress=False, **options)
        generator = compiled_generation.install(model, batch_size, max_source_length, backend="eager")
        compiled = inference.predict(model, self.tokenizer, ids, batch_size, progress=False, **options)
        return eager, compiled, generator


@pytest.mark.train_class  # trains its model in setUpClass
class CompiledScriptsTest(TrainedModelTestCase):
    """The entry scripts with --compile under Inductor, as users run them (a class of its own, so that a second
    test worker can take it beside CompiledGenerationTest)."""

    @pytest.mark.slow  # Inductor compiles each shape (tens of seconds on 2 CPU cores)
    def test_predict_t5_compile_gives_eager_predictions(self):
        """The script as users run it, on RTE: greedy (the fine-tuning test's evaluation shape, SHARED_SHAPE) and with
        beams; every row the same."""
        out = Path(self.create_tempdir().full_path)
        counters.clear()
        for beams in (1, 2):
            flags = {"task": "rte", "max_predict_samples": SHARED_SHAPE["rows"], "max_source_length": 64,
                     "max_new_tokens": SHARED_SHAPE["max_length"] - 1, "batch_size": SHARED_SHAPE["batch"],
                     "num_beams": beams, "overwrite": True}
            source = require("glue/RTE/dev.tsv")
            eager = predict(predict_flags(self.folder, source, out / "eager.jsonl", **flags))
            compiled = predict(predict_flags(self.folder, source, out / "compiled.jsonl", compile=True, **flags))
            self.assertEqual([row["prediction"] for row in compiled], [row["prediction"] for row in eager], beams)
            self.assertEqual(compiled, eager, beams)  # the input column too
        self.assertGreater(counters["stats"]["unique_graphs"], 0, "nothing was compiled")

    @pytest.mark.slow  # two fine-tuning runs, one compiling its evaluation's shape with Inductor
    def test_fine_tuning_evaluates_with_compiled_generation_as_without(self):
        """Four training steps from the trained model, evaluated every two: the weights change between compiled
        evaluations, which must read them anew; the training itself is the same eager forward."""
        runs = {}
        counters.clear()
        for compile_ in (False, True):
            out = Path(self.create_tempdir().full_path) / "run"
            fine_tune(tiny_flags(out, model_size=None, model_name_or_path=self.folder, tokenizer_name_or_path=None,
                                 compile=compile_, per_device_eval_batch_size=SHARED_SHAPE["batch"],
                                 generation_max_length=SHARED_SHAPE["max_length"]))
            metrics = json.loads((out / "metrics.json").read_text())
            runs[compile_] = ([{name: value for name, value in entry.items() if not name.endswith(SPEED_KEYS)}
                               for entry in metrics["log_history"] if "eval_loss" in entry],
                              [path.read_text() for path in sorted(out.glob("predictions_*"))])
        self.assertGreater(counters["stats"]["unique_graphs"], 0, "nothing was compiled")
        self.assertLen(runs[True][0], 2)  # steps 2 and 4
        self.assertNotEmpty(runs[True][1])
        self.assertEqual(runs[True], runs[False])


@pytest.mark.train_class  # trains its model in setUpClass
class CompiledGenerationTest(TrainedModelTestCase):
    """The shape buckets' edges, the negative control and the fallbacks, through dynamo's eager backend."""

    def test_every_input_set_gives_eager_predictions(self):
        """SST-2, RTE, newstest2014's English and span filling, greedy, as predict_t5.py --compile predicts them."""
        predictions = set()
        for name, texts in self.texts.items():
            eager, compiled, _ = self.eager_and_compiled(self.ids(texts), 8, max_new_tokens=12)
            self.assertEqual(compiled, eager, name)
            predictions |= set(eager)
        self.assertGreaterEqual(len(predictions), 4, "a degenerate model cannot show a difference")

    def test_a_batch_one_past_a_bucket_is_padded_to_the_next(self):
        ids = self.ids(self.texts["rte"] + self.texts["sst2"][:1])  # 9 rows in one batch of up to 16
        eager, compiled, generator = self.eager_and_compiled(ids, 16, max_new_tokens=12)
        self.assertEqual(compiled, eager)
        self.assertEqual(generator.shapes, {(16, 64)})

    def test_a_batch_of_one(self):
        ids = self.ids(self.texts["rte"][:1])
        eager, compiled, generator = self.eager_and_compiled(ids, 1, max_new_tokens=12)
        self.assertEqual(compiled, eager)
        self.assertEqual(generator.shapes, {(1, 64)})

    def test_a_source_of_the_maximum_length_is_its_own_bucket(self):
        ids = self.ids(self.texts["rte"], max_source_length=48)
        self.assertEqual(max(map(len, ids)), 48)
        eager, compiled, generator = self.eager_and_compiled(ids, 8, max_source_length=48, max_new_tokens=12)
        self.assertEqual(compiled, eager)
        self.assertEqual(generator.source_buckets, (16, 32, 48))
        self.assertIn((8, 48), generator.shapes)

    def test_beams_give_eager_predictions(self):
        ids = self.ids(self.texts["rte"] + self.texts["translation"])
        eager, compiled, _ = self.eager_and_compiled(ids, 8, max_new_tokens=12, num_beams=3)
        self.assertEqual(compiled, eager)

    def test_rows_that_end_early_keep_their_end(self):
        """Label words end at EOS after a few tokens while translations run to the limit: every row stops where
        eager stops, whatever the other rows of its batch do."""
        ids = self.ids(self.texts["sst2"][:4] + self.texts["translation"][:4])
        eager, compiled, _ = self.eager_and_compiled(ids, 8, max_new_tokens=24)
        self.assertEqual(compiled, eager)
        lengths = {len(self.tokenizer(text).input_ids) for text in eager}
        self.assertGreater(len(lengths), 1, "every row ran to the same length: nothing ended early")
        self.assertLess(min(lengths), 24)

    def test_a_run_compiles_a_handful_of_shapes_not_one_a_batch(self):
        ids = self.ids(dev_texts("rte", 24) + dev_texts("sst2", 24))
        batches = inference.length_sorted_batches(list(map(len, ids)), 4)
        raw_shapes = {(len(batch), max(len(ids[i]) for i in batch)) for batch in batches}
        counters.clear()
        eager, compiled, generator = self.eager_and_compiled(ids, 4, max_new_tokens=6)
        self.assertEqual(compiled, eager)
        self.assertLessEqual(len(generator.shapes), 3)  # source buckets 16, 32, 64; every batch has 4 rows
        self.assertGreater(len(raw_shapes), 2 * len(generator.shapes))
        # a first step (cross-attention keys and values) and a later step per shape
        self.assertLessEqual(counters["stats"]["unique_graphs"], 2 * len(generator.shapes))

    def test_negative_control_unmasked_padding_changes_predictions(self):
        """The comparison can fail: cross-attention that reads the bucket's padded source positions changes what
        rows of varied lengths generate."""
        ids = self.ids(self.texts["sst2"] + self.texts["spans"])
        original = compiled_generation.CompiledGenerator.padded_encoding

        def unmasked(generator, input_ids, attention_mask):
            hidden, mask = original(generator, input_ids, attention_mask)
            return hidden, torch.ones_like(mask)
        with mock.patch.object(compiled_generation.CompiledGenerator, "padded_encoding", unmasked):
            eager, compiled, _ = self.eager_and_compiled(ids, 8, max_new_tokens=12)
        self.assertNotEqual(compiled, eager)

    def test_sampling_falls_back_to_eager_with_one_log_line(self):
        model = self.fresh_model()
        generator = compiled_generation.install(model, 8, 64, backend="eager")
        ids, mask = inference.pad_batch(self.ids(self.texts["rte"]), self.tokenizer.pad_token_id, "cpu")
        with self.assertLogs(compiled_generation.logger, "INFO") as logs:
            for _ in range(2):
                torch.manual_seed(0)
                sampled = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, max_length=5)
        self.assertEqual(logs.output, ["INFO:t5kit.model.compiled_generation:compiled generation: sampling "
                                       "(do_sample=True) runs eagerly; generating eagerly"])
        self.assertEqual(generator.shapes, set())
        torch.manual_seed(0)
        self.assertTrue(torch.equal(sampled, generator.eager_generate(input_ids=ids, attention_mask=mask,
                                                                      do_sample=True, max_length=5)))

    def test_a_model_without_a_static_cache_falls_back(self):
        model = self.fresh_model()
        model._can_compile_fullgraph = False
        with self.assertLogs(compiled_generation.logger, "INFO") as logs:
            generator = compiled_generation.install(model, 8, 64, backend="eager")
        self.assertIn("does not declare a static cache", logs.output[0])
        ids = self.ids(self.texts["rte"])
        self.assertEqual(inference.predict(model, self.tokenizer, ids, 8, max_new_tokens=6, progress=False),
                         inference.predict(self.fresh_model(), self.tokenizer, ids, 8, max_new_tokens=6,
                                           progress=False))
        self.assertEqual(generator.shapes, set())

    def test_a_failed_compile_falls_back_to_eager_for_the_rest_of_the_run(self):
        def failing_backend(graph, example_inputs):
            raise RuntimeError("no compiler here")
        model = self.fresh_model()
        ids = self.ids(self.texts["rte"])
        eager = inference.predict(model, self.tokenizer, ids, 4, max_new_tokens=6, progress=False)
        compiled_generation.install(model, 4, 64, backend=failing_backend)
        with self.assertLogs(compiled_generation.logger, "INFO") as logs:
            compiled = inference.predict(model, self.tokenizer, ids, 4, max_new_tokens=6, progress=False)
        self.assertEqual(compiled, eager)
        self.assertEqual(logs.output, ["INFO:t5kit.model.compiled_generation:compiled generation: torch.compile "
                                       "failed (BackendCompilerFailed: RuntimeError: no compiler here); generating "
                                       "eagerly"])


class BucketsTest(parameterized.TestCase):

    @parameterized.parameters((512, (16, 32, 64, 128, 256, 512)), (48, (16, 32, 48)), (16, (16,)), (8, (8,)))
    def test_source_buckets_are_powers_of_two_up_to_the_maximum(self, longest, buckets):
        self.assertEqual(compiled_generation.source_buckets(longest), buckets)

    @parameterized.parameters((32, (1, 2, 4, 8, 16, 32)), (12, (1, 2, 4, 8, 12)), (1, (1,)))
    def test_batch_buckets_end_at_the_batch_size(self, batch_size, buckets):
        self.assertEqual(compiled_generation.buckets_up_to(batch_size, compiled_generation.BATCH_BUCKETS), buckets)

    @parameterized.parameters((1, 1), (5, 8), (8, 8), (9, 12), (13, 13))
    def test_a_size_goes_to_the_smallest_bucket_that_holds_it(self, size, bucket):
        self.assertEqual(compiled_generation.bucket_for(size, (1, 2, 4, 8, 12)), bucket)


class CompileFlagTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("ctranslate2", {"backend": "ctranslate2"}),
        ("rank_scoring", {"label_scoring": "rank", "task": "rte"}),
    )
    def test_compile_without_torch_generation_is_refused(self, flags):
        out = Path(self.create_tempdir().full_path)
        source = out / "in.txt"
        source.write_text("a sentence\n")
        with self.assertRaisesRegex(UsageError, r"^--compile compiles the torch backend's generation"):
            predict(predict_flags(out / "model", source, out / "out.jsonl", compile=True, **flags))
        self.assertFalse((out / "out.jsonl").exists())


if __name__ == "__main__":
    absltest.main()
