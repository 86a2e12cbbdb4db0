"""The predictors behind predict_t5.py: one interface, one implementation per --backend.

    predictor = predictors.load("torch", model_dir, tokenizer_dir, PredictorSettings(use_cpu=False, bf16=True))
    ids, _ = inference.tokenize_inputs(predictor.tokenizer, texts, max_source_length=512)
    texts = predictor.predict(ids, batch_size=32, max_new_tokens=8)                  # generation
    words = predictor.predict(ids, batch_size=32, label_words=["yes", "no"])        # rank scoring
    predictor.description                                       # "cpu bf16", "CTranslate2 on cpu (float32)"

Both take the same token ids (EOS last) and give one prediction per row in input order, from length-sorted batches:
- torch: the model with transformers' generate (inference.py), its weights cast to bf16 or fp16 where asked, its
  generation compiled with --compile (compiled_generation.py);
- ctranslate2: a CTranslate2 Translator (ctranslate2_backend.py) on a run's fresh export, an export folder, or a
  conversion made now (ctranslate2_export.open_translator).
A new backend is a class here with `tokenizer`, `description` and `predict`, its loader in LOADERS, its name in the
flag's choices (config/predict_arguments.BACKENDS) and its tests: predict_t5.py does not change.
"""
from dataclasses import dataclass
from typing import Optional

import torch

from t5kit.model import building, compiled_generation, ctranslate2_backend, ctranslate2_export, inference


@dataclass(frozen=True)
class PredictorSettings:
    """What a backend may take of predict_t5.py's flags: the device, torch's bf16 or fp16 weights, CTranslate2's
    compute type and CPU workers."""

    use_cpu: bool = False
    bf16: bool = False
    fp16: bool = False
    compile: bool = False
    compute_type: str = "default"
    threads: Optional[int] = None


class TorchPredictor:
    def __init__(self, model, tokenizer, device, bf16=False, fp16=False, compile=False):
        self.model, self.tokenizer = inference.place_model(model, device, bf16, fp16), tokenizer
        self.compile = compile
        self.description = f"{device}{' bf16' if bf16 else ' fp16' if fp16 else ''}{', compiled' if compile else ''}"

    def predict(self, input_ids, batch_size, **options) -> list:
        if self.compile and not isinstance(self.model.generate, compiled_generation.CompiledGenerator):
            # shape buckets up to the batch size and the longest input: every batch fits one
            compiled_generation.install(self.model, batch_size, max(map(len, input_ids)))
        return inference.predict(self.model, self.tokenizer, input_ids, batch_size, **options)


class CTranslate2Predictor:
    def __init__(self, translator, tokenizer):
        self.translator, self.tokenizer = translator, tokenizer
        self.description = f"CTranslate2 on {translator.device} ({translator.compute_type})"

    def predict(self, input_ids, batch_size, **options) -> list:
        return ctranslate2_backend.predict(self.translator, self.tokenizer, input_ids, batch_size, **options)


def load_torch(model_name_or_path, load_tokenizer, settings: PredictorSettings) -> TorchPredictor:
    building.load_model_config(model_name_or_path)  # a folder of another architecture: a model problem, said so
    tokenizer = load_tokenizer()
    device = "cuda" if torch.cuda.is_available() and not settings.use_cpu else "cpu"
    return TorchPredictor(building.load_pretrained_t5(model_name_or_path), tokenizer, device, settings.bf16,
                          settings.fp16, settings.compile)


def load_ctranslate2(model_name_or_path, load_tokenizer, settings: PredictorSettings) -> CTranslate2Predictor:
    translator = ctranslate2_export.open_translator(model_name_or_path, settings.compute_type, settings.threads or 0,
                                                    settings.use_cpu)
    return CTranslate2Predictor(translator, load_tokenizer())


LOADERS = {"torch": load_torch, "ctranslate2": load_ctranslate2}


def load(backend, model_name_or_path, tokenizer_name_or_path, settings: PredictorSettings):
    """The backend's predictor on the model (a folder or hub name; for CTranslate2 an export folder too) with its
    tokenizer. A folder the backend cannot take (another architecture; LoRA adapters or a family CTranslate2 does
    not convert) is refused with one error line, before a missing tokenizer is."""
    flag = "--model_name_or_path" if tokenizer_name_or_path == model_name_or_path else "--tokenizer_name_or_path"
    return LOADERS[backend](model_name_or_path, lambda: building.load_tokenizer(tokenizer_name_or_path, flag=flag),
                            settings)
