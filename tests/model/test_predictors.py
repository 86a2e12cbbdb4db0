"""model/predictors.py, the predictor owner: every --backend choice has a loader; each predictor carries its
tokenizer and says what it runs; the torch and CTranslate2 predictors give the same float32 predictions, as the
functions behind them do; a folder the backend cannot take is refused before a missing tokenizer is."""
import json
from pathlib import Path

import pytest
from absl.testing import absltest, parameterized

from t5kit.config.predict_arguments import BACKENDS
from t5kit.errors import UsageError
from t5kit.model import building, inference, predictors
from tests.helpers import save_tiny_t5

TEXTS = ["sst2 sentence: a gripping, beautifully acted film.", "The <extra_id_0> walks in <extra_id_1> park.",
         "rte sentence1: A man plays a guitar. sentence2: A person plays music."]
SETTINGS = predictors.PredictorSettings(use_cpu=True, bf16=False, threads=1)


class PredictorsTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.model_dir = save_tiny_t5(Path(absltest.get_default_test_tmpdir()) / "predictors_model")

    def test_every_backend_choice_has_a_loader(self):
        self.assertEqual(tuple(predictors.LOADERS), BACKENDS)

    def test_the_torch_predictor_predicts_what_inference_predicts(self):
        predictor = predictors.load("torch", self.model_dir, self.model_dir, SETTINGS)
        self.assertEqual(predictor.description, "cpu")
        ids, _ = inference.tokenize_inputs(predictor.tokenizer, TEXTS, 64)
        model = building.load_pretrained_t5(self.model_dir)
        expected = inference.predict(model, predictor.tokenizer, ids, 2, max_new_tokens=6, progress=False)
        self.assertEqual(predictor.predict(ids, 2, max_new_tokens=6, progress=False), expected)
        words = predictor.predict(ids, 2, label_words=["yes", "no"], progress=False)
        self.assertContainsSubset(words, {"yes", "no"})

    @pytest.mark.slow  # converts the model with CTranslate2
    def test_both_backends_predict_alike_in_float32(self):
        torch_predictor = predictors.load("torch", self.model_dir, self.model_dir, SETTINGS)
        ct2_predictor = predictors.load("ctranslate2", self.model_dir, self.model_dir, SETTINGS)
        self.assertIn("CTranslate2 on cpu", ct2_predictor.description)
        ids, _ = inference.tokenize_inputs(torch_predictor.tokenizer, TEXTS, 64)
        for options in (dict(max_new_tokens=6), dict(label_words=["yes", "no"])):
            self.assertEqual(ct2_predictor.predict(ids, 2, progress=False, **options),
                             torch_predictor.predict(ids, 2, progress=False, **options), options)

    @parameterized.parameters("torch", "ctranslate2")
    def test_another_architecture_is_refused_before_the_missing_tokenizer(self, backend):
        folder = Path(self.create_tempdir().full_path)
        (folder / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertModel"]}))
        with self.assertRaisesRegex(UsageError, "bert") as caught:
            predictors.load(backend, str(folder), str(folder), SETTINGS)
        self.assertNotIn("holds no tokenizer", str(caught.exception))
        self.assertIn("not a T5 model", str(caught.exception))

    @parameterized.product(backend=["torch", "ctranslate2"], path=["{tmp}/missing", "./runs/missing",
                                                                   "runs/x/missing", "~/t5kit-missing-model"])
    def test_a_missing_folder_is_said_to_be_missing(self, backend, path):
        path = path.format(tmp=self.create_tempdir().full_path)
        with self.assertRaises(UsageError) as caught:
            predictors.load(backend, path, path, SETTINGS)
        self.assertEqual(str(caught.exception), f"--model_name_or_path {path}: no such folder; pass a saved model "
                                                "folder (one holding config.json) or a hub name such as "
                                                "google-t5/t5-small")

    @parameterized.parameters("torch", "ctranslate2")
    def test_a_hub_name_still_goes_to_the_hub(self, backend):
        """namespace/name is a hub repo id: offline (HF_HUB_OFFLINE=1, as tests run) the hub client answers."""
        with self.assertRaisesRegex(UsageError, "cannot load model 't5kit-tests/no-such-model'") as caught:
            predictors.load(backend, "t5kit-tests/no-such-model", "t5kit-tests/no-such-model", SETTINGS)
        self.assertNotIn("no such folder", str(caught.exception))
        self.assertTrue(str(caught.exception).endswith("(nor is there a local folder t5kit-tests/no-such-model)"),
                        str(caught.exception))


if __name__ == "__main__":
    absltest.main()
