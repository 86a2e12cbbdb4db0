"""CTranslate2 (export_t5.py, predict_t5.py --backend ctranslate2, t5kit/model/ctranslate2_backend.py): the
converter seam on a tiny model, parity with the torch predictor on every GLUE dev set, the export folder and its
record, a stale export never used."""
import json
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
import torch
from absl.testing import absltest, parameterized

from t5kit.data import predict_inputs, task_format
from t5kit.errors import UsageError
from t5kit.model import building, ctranslate2_backend, ctranslate2_export, inference
from t5kit.outputs import hub_upload, model_card
from tests.helpers import entry_main, predict, predict_flags, require, save_tiny_t5, snapshot
from tests.trained_model import trained_tiny_model

GLUE_DEV_TASKS = ("cola", "sst2", "mrpc", "stsb", "qnli", "rte", "wnli")  # the dev sets ../shared/data holds
DEV_ROWS = 120  # the first rows of each dev set: parity over all 7 stays well under a minute on 2 cores
TIE = 1e-5  # a difference is allowed only where the torch model's two choices are this close in log-probability
def next_token_gap(model, tokenizer, input_ids, a, b):
    """|log p(a) - log p(b)| at the first token where two generations (id lists) part: 0 where one is a prefix."""
    common = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if common is None:
        return 0.0
    decoder = torch.tensor([[model.config.decoder_start_token_id, *a[:common]]])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([input_ids]), decoder_input_ids=decoder).logits[0, -1]
    log_probs = logits.float().log_softmax(-1)
    return abs(float(log_probs[a[common]] - log_probs[b[common]]))


class ConverterSeamTest(absltest.TestCase):
    """The converter is a seam (ctranslate2's TransformersConverter reads our saved model with transformers): a
    transformers or ctranslate2 release it cannot read fails here, not in a user's export."""

    def test_loading_a_translator_leaves_torch_threads_as_they_were(self):
        """CTranslate2 sets the calling thread's OpenMP thread count to its workers' one thread, which torch shares:
        bench/predict.py's torch arms once ran on one thread after the CTranslate2 arms were loaded."""
        tmp = Path(self.create_tempdir().full_path)
        ctranslate2_backend.convert(save_tiny_t5(tmp / "model"), tmp / "out", "float32")
        before = torch.get_num_threads()
        self.addCleanup(torch.set_num_threads, before)
        torch.set_num_threads(2)
        translator = ctranslate2_backend.load_translator(tmp / "out", threads=2)
        self.assertEqual(torch.get_num_threads(), 2)
        self.assertEqual(translator.num_translators, 2)  # two workers of one thread each

    @pytest.mark.slow  # CTranslate2's converter and translator
    def test_converter_reads_a_tiny_saved_model_and_the_translator_scores_it(self):
        tmp = Path(self.create_tempdir().full_path)
        source = save_tiny_t5(tmp / "model")
        ctranslate2_backend.convert(source, tmp / "out", "float32")
        self.assertTrue({"model.bin", "config.json", "shared_vocabulary.json", "tokenizer.json"}
                        <= {p.name for p in (tmp / "out").iterdir()})
        tokenizer = building.load_tokenizer(source)
        translator = ctranslate2_backend.load_translator(tmp / "out", threads=1)
        ids, _ = inference.tokenize_inputs(tokenizer, ["a short input", "another, longer input text"], 64)
        scores = ctranslate2_backend.score_label_words(translator, tokenizer,
                                                       [tokenizer.convert_ids_to_tokens(r) for r in ids], ["yes", "no"])
        model = building.load_pretrained_t5(source).eval()
        expected = inference.score_label_words(model, tokenizer, *inference.pad_batch(ids, 0, "cpu"), ["yes", "no"])
        torch.testing.assert_close(scores.float(), expected, atol=1e-4, rtol=1e-5)


@pytest.mark.train_class  # trains a tiny model in setUpClass, then predicts 7 dev sets twice
class ParityTest(parameterized.TestCase):
    """float32 CTranslate2 predicts what the torch predictor predicts, on the first DEV_ROWS rows of every GLUE dev
    set in ../shared/data (not all rows: CI time), with a tiny model trained a few hundred steps on a GLUE mixture,
    both for greedy generation and rank scoring. A difference passes only as a tie (the torch model's two choices
    within TIE in log-probability), and each is printed."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.threads = torch.get_num_threads()
        torch.set_num_threads(1)
        cls.tmp = tempfile.TemporaryDirectory()
        cls.folder, cls.final_loss = trained_tiny_model()
        ctranslate2_backend.convert(cls.folder, Path(cls.tmp.name) / "ct2", "float32")
        cls.tokenizer = building.load_tokenizer(str(cls.folder))
        cls.model = building.load_pretrained_t5(str(cls.folder)).eval()
        cls.translator = ctranslate2_backend.load_translator(Path(cls.tmp.name) / "ct2", threads=1)

    @classmethod
    def tearDownClass(cls):
        torch.set_num_threads(cls.threads)
        cls.tmp.cleanup()
        super().tearDownClass()

    def dev_ids(self, task):
        task_vals = task_format.find_task(task)
        path = require("glue") / task_vals["data_dir_name"] / "dev.tsv"
        texts = predict_inputs.read_inputs(path, task_vals, limit=DEV_ROWS).texts
        return task_vals, inference.tokenize_inputs(self.tokenizer, texts, 128)[0]

    @parameterized.parameters(*GLUE_DEV_TASKS)
    def test_greedy_generation_equals_torch(self, task):
        task_vals, ids = self.dev_ids(task)
        new_tokens = predict_inputs.generation_length(task_vals, {}, self.tokenizer)
        expected = inference.predict(self.model, self.tokenizer, ids, 32, max_new_tokens=new_tokens, progress=False)
        got = ctranslate2_backend.predict(self.translator, self.tokenizer, ids, 32, max_new_tokens=new_tokens,
                                          progress=False)
        if task == "sst2":  # trained on it: not one degenerate string for every input
            self.assertContainsSubset({"positive", "negative"}, set(expected))
        for index in [i for i, (a, b) in enumerate(zip(expected, got)) if a != b]:
            a, b = (self.tokenizer(text, add_special_tokens=False).input_ids for text in (expected[index], got[index]))
            gap = next_token_gap(self.model, self.tokenizer, ids[index], a, b)
            print(f"{task} row {index}: torch {expected[index]!r} vs ctranslate2 {got[index]!r}, gap {gap:.2e}")
            self.assertLessEqual(gap, TIE, f"{task} row {index} differs beyond a tie")

    @parameterized.parameters(*(t for t in GLUE_DEV_TASKS if t != "stsb"))  # STS-B is regression: no label words
    def test_rank_scoring_equals_torch(self, task):
        task_vals, ids = self.dev_ids(task)
        words = list(task_vals["labels"].values())
        expected = inference.predict(self.model, self.tokenizer, ids, 32, label_words=words, progress=False)
        got = ctranslate2_backend.predict(self.translator, self.tokenizer, ids, 32, label_words=words,
                                          progress=False)
        for index in [i for i, (a, b) in enumerate(zip(expected, got)) if a != b]:
            rows = inference.pad_batch([ids[index]], self.tokenizer.pad_token_id, "cpu")
            scores = inference.score_label_words(self.model, self.tokenizer, *rows, words)[0]
            gap = abs(float(scores[words.index(expected[index])] - scores[words.index(got[index])]))
            print(f"{task} row {index}: torch {expected[index]!r} vs ctranslate2 {got[index]!r}, gap {gap:.2e}")
            self.assertLessEqual(gap, TIE, f"{task} row {index} ranks differently beyond a tie")

    def test_fp16_weights_give_fp32s_labels(self):
        """predict_t5.py --fp16 (the torch predictor with fp16 weights, the feed-forward outputs in fp32) on the same
        trained model: the fp32 labels on >= 99 % of the SST-2 and RTE dev rows, by generation and by ranking."""
        fp16 = inference.place_model(building.load_pretrained_t5(str(self.folder)), "cpu",
                                     fp16=True)
        for task in ("sst2", "rte"):
            task_vals, ids = self.dev_ids(task)
            words = list(task_vals["labels"].values())
            for options in (dict(max_new_tokens=predict_inputs.generation_length(task_vals, {}, self.tokenizer)),
                            dict(label_words=words)):
                expected = inference.predict(self.model, self.tokenizer, ids, 32, progress=False, **options)
                got = inference.predict(fp16, self.tokenizer, ids, 32, progress=False, **options)
                agreement = sum(a == b for a, b in zip(expected, got)) / len(expected)
                self.assertGreaterEqual(agreement, 0.99, f"{task} {sorted(options)}")

    def test_summed_log_probs_match_torch_scores(self):
        """score_batch's per-token log-probs summed (EOS included) are score_label_words' sums, not just argmax."""
        _, ids = self.dev_ids("rte")
        ids = ids[:16]
        words = ["entailment", "not_entailment"]
        expected = inference.score_label_words(self.model, self.tokenizer,
                                               *inference.pad_batch(ids, 0, "cpu"), words)
        got = ctranslate2_backend.score_label_words(self.translator, self.tokenizer,
                                                    [self.tokenizer.convert_ids_to_tokens(r) for r in ids], words)
        torch.testing.assert_close(got.float(), expected, atol=1e-4, rtol=1e-5)


def export(argv):
    return entry_main("export_t5")(argv)


@pytest.mark.slow  # real exports of a saved model
class ExportTest(parameterized.TestCase):
    """export_t5.py on a tiny random model: the folder, its record and probe, the card, no silent overwrite; and
    predict_t5.py --backend ctranslate2 on it: the torch backend's rows, the fresh export used, a stale one not."""

    def setUp(self):
        super().setUp()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        self.addCleanup(torch.set_num_threads, threads)
        self.dir = Path(self.create_tempdir().full_path)
        self.model = save_tiny_t5(self.dir / "run")
        (self.dir / "run" / "README.md").write_text("# a run\n\n## How to use\n\ntext\n")
        self.inputs = self.dir / "in.txt"
        self.inputs.write_text("a great movie\nThe <extra_id_0> walks in <extra_id_1> park.\nshort\n")

    def predict_rows(self, backend, name, model=None, **flags):
        return predict(predict_flags(model or self.model, str(self.inputs), str(self.dir / name), backend=backend,
                                     max_new_tokens=6, **flags))

    def test_export_folder_record_and_card(self):
        folder = export(["--model_name_or_path", self.model])
        self.assertEqual(folder, self.dir / "run" / "ctranslate2")
        record = json.loads((folder / ctranslate2_export.RECORD_FILE).read_text())
        self.assertEqual(record["source_weights_sha256"], ctranslate2_export.weights_sha256(self.model))
        self.assertEqual(record["export_sha256"], ctranslate2_export.export_sha256(folder))
        self.assertEqual((record["quantization"], record["probe"]["identical"], record["probe"]["examples"]),
                         ("float32", 8, 8))
        self.assertTrue({"model.bin", "tokenizer.json", "README.md"} <= {p.name for p in folder.iterdir()})
        self.assertEqual([p.name for p in (self.dir / "run").iterdir() if p.name.startswith(".")], [])
        card = (self.dir / "run" / "README.md").read_text()
        self.assertIn(model_card.EXPORT_HEADING, card)
        self.assertIn("--backend ctranslate2", card)
        self.assertTrue(card.startswith("# a run\n\n## How to use\n\ntext\n"))
        # replaced, the section not doubled
        export(["--model_name_or_path", self.model, "--overwrite_output_dir", "true"])
        self.assertEqual((self.dir / "run" / "README.md").read_text().count(model_card.EXPORT_HEADING), 1)

    def test_existing_export_is_refused_without_overwrite(self):
        export(["--model_name_or_path", self.model])
        before = snapshot(self.dir)
        with self.assertRaisesRegex(UsageError, "ctranslate2 exists; pass --overwrite_output_dir true"):
            export(["--model_name_or_path", self.model])
        self.assertEqual(snapshot(self.dir), before)

    def test_int8_export_reports_agreement(self):
        folder = export(["--model_name_or_path", self.model, "--quantization", "int8", "--output_dir",
                         str(self.dir / "int8")])
        probe = json.loads((folder / ctranslate2_export.RECORD_FILE).read_text())["probe"]
        self.assertEqual(probe["examples"], 8)
        self.assertBetween(probe["identical"], 0, 8)
        self.assertLen(probe["differing"], min(5, 8 - probe["identical"]))

    def test_predictions_equal_the_torch_backend_rows(self):
        export(["--model_name_or_path", self.model])
        torch_rows = self.predict_rows("torch", "torch.jsonl")
        with mock.patch.object(ctranslate2_backend, "convert", wraps=ctranslate2_backend.convert) as convert:
            ct2_rows = self.predict_rows("ctranslate2", "ct2.jsonl")
        convert.assert_not_called()  # the run's fresh export was used
        self.assertEqual(ct2_rows, torch_rows)
        self.assertEqual((self.dir / "ct2.jsonl").read_text(), (self.dir / "torch.jsonl").read_text())
        direct = self.predict_rows("ctranslate2", "direct.jsonl", model=str(self.dir / "run" / "ctranslate2"))
        self.assertEqual(direct, torch_rows)

    def test_a_stale_export_is_never_used(self):
        export(["--model_name_or_path", self.model])
        model = building.load_pretrained_t5(self.model)
        with torch.no_grad():
            model.lm_head.weight.mul_(-1.0)  # other weights: the export no longer matches them
        model.save_pretrained(self.model)
        self.assertIsNone(ctranslate2_export.usable_export(self.model, "default"))
        torch_rows = self.predict_rows("torch", "torch.jsonl")
        with mock.patch.object(ctranslate2_backend, "convert", wraps=ctranslate2_backend.convert) as convert:
            ct2_rows = self.predict_rows("ctranslate2", "ct2.jsonl")
        convert.assert_called_once()  # converted afresh into a temporary folder
        self.assertEqual(ct2_rows, torch_rows)
        with self.assertRaisesRegex(UsageError, "ctranslate2 is stale: .* now holds other weights"):
            ctranslate2_export.check_export(self.dir / "run" / "ctranslate2")

    def test_rank_scoring_through_the_predictor(self):
        rows = self.dir / "pairs.jsonl"
        rows.write_text("".join(json.dumps({"sentence": s}) + "\n" for s in ("a fine film", "dull", "so so")))
        flags = dict(task="sst2", label_scoring="rank")
        expected = predict(predict_flags(self.model, str(rows), str(self.dir / "t.jsonl"), **flags))
        got = predict(predict_flags(self.model, str(rows), str(self.dir / "c.jsonl"), backend="ctranslate2",
                                    **flags))
        self.assertEqual(got, expected)
        self.assertTrue({row["prediction"] for row in got} <= {"positive", "negative"})

    def test_bfloat16_where_the_cpu_lacks_it_is_refused(self):
        with mock.patch("ctranslate2.get_supported_compute_types", return_value={"float32", "int8"}), \
                self.assertRaisesRegex(UsageError, "--quantization bfloat16: this CPU cannot compute it"):
            export(["--model_name_or_path", self.model, "--quantization", "bfloat16"])
        self.assertFalse((self.dir / "run" / "ctranslate2").exists())

    def test_push_to_hub_uploads_the_export_when_it_exists(self):
        self.assertNotIn("ctranslate2/*", hub_upload.upload_patterns(self.model, "end"))
        export(["--model_name_or_path", self.model])
        self.assertIn("ctranslate2/*", hub_upload.upload_patterns(self.model, "end"))

    def test_export_push_to_hub_uploads_the_saved_export_as_its_folder(self):
        with mock.patch.dict(os.environ, {"HF_TOKEN": "hf_FakeTokenForTestsOnly"}), \
                mock.patch.object(hub_upload, "HfApi") as api_class:
            api_class.return_value.create_repo.side_effect = lambda repo_id, **_: SimpleNamespace(repo_id=repo_id)
            folder = export(["--model_name_or_path", self.model, "--push_to_hub", "true", "--hub_model_id", "me/t5"])
        (_, upload), = api_class.return_value.upload_folder.call_args_list
        self.assertEqual((upload["repo_id"], upload["folder_path"], upload["path_in_repo"]),
                         ("me/t5", str(folder), "ctranslate2"))
        with mock.patch.dict(os.environ, {"HF_TOKEN": ""}), \
                self.assertRaisesRegex(UsageError, "HF_TOKEN is not set, so nothing was uploaded to me/t5; the export "
                                                   "is saved in"):
            export(["--model_name_or_path", self.model, "--overwrite_output_dir", "true", "--push_to_hub", "true",
                    "--hub_model_id", "me/t5"])
        self.assertTrue((folder / "model.bin").is_file())
