"""CTranslate2, the C++ encoder-decoder engine T5 models are served with: conversion of a saved model, and
predict_t5.py's generation and rank scoring through its Translator.

    ctranslate2_backend.check_convertible(model_dir, flag="--model_name_or_path")   # refuses LoRA, LongT5, ...
    ctranslate2_backend.convert(model_dir, out_dir, quantization="float32")
    translator = ctranslate2_backend.load_translator(out_dir, device="cpu", compute_type="default", threads=2)
    texts = ctranslate2_backend.predict(translator, tokenizer, ids, batch_size=32, max_new_tokens=8)

The Translator takes token strings, not ids, and pads nothing: each batch is a list of rows of their own length.
The rows go in the torch predictor's length order (model/inference.py); CTranslate2 cuts them into batches of
batch_size (rows of similar length together, which it packs best), its workers translate several batches at once
(load_translator), and the predictions go back in input order.

Rank scoring: Translator.score_batch gives the log-probability of each target token, and appends EOS itself, so a
label word is passed without its EOS and the sum then covers the word and EOS, as score_label_words sums the
tokenized target (EOS included). Greedy generation: max_decoding_length counts generated tokens without EOS, and
the torch path counts EOS in max_new_tokens; they stop at the same token (a model that stops emits EOS at that
step in both), so the texts agree.

The converter is a seam: `ctranslate2.converters.TransformersConverter` reads the model with transformers, and
tests/model/test_ctranslate2_backend.py calls it on a tiny model, so a transformers release it cannot read fails there.
"""
import importlib
import os
from pathlib import Path

import torch
from tqdm.auto import tqdm

from t5kit.errors import UsageError
from t5kit.model.building import load_model_config
from t5kit.model.inference import decode_texts, length_sorted_batches, rank_label_words

PACKAGE = "ctranslate2>=4.5,<5"
# model_type -> the config class CTranslate2's converter registers (converters/transformers.py _MODEL_LOADERS).
SUPPORTED_MODEL_TYPES = {"t5": "T5Config", "mt5": "MT5Config", "umt5": "UMT5Config"}
QUANTIZATIONS = ("float32", "int8", "int8_float32", "bfloat16")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "spiece.model")
ADAPTER_CONFIG = "adapter_config.json"  # what a peft (LoRA) save holds instead of a model
MERGED_DIR = "merged"  # fine_tune_t5.py --merge_adapters true writes the merged model here
TRANSLATOR_CONFIG = "model.bin"  # what makes a folder a CTranslate2 model
BATCHES_PER_WORKER = 4  # batches a predict call hands each worker: enough to keep them busy, few for the progress bar


def import_ctranslate2():
    """The ctranslate2 module, or one error line naming the package to install."""
    try:
        return importlib.import_module("ctranslate2")
    except ImportError:
        raise UsageError(f"the ctranslate2 backend needs the ctranslate2 package, which is not installed; "
                         f"pip install '{PACKAGE}' (or use --backend torch)") from None


def is_export(folder) -> bool:
    return (Path(folder) / TRANSLATOR_CONFIG).is_file()


def check_convertible(model_dir, flag="--model_name_or_path"):
    """Refuses what CTranslate2's converter cannot read, before anything is written: a LoRA run's adapters (merge
    first), a model family it does not convert. Returns the model's config."""
    folder = Path(model_dir)
    if (folder / ADAPTER_CONFIG).is_file() and not (folder / "config.json").is_file():
        merged = folder / MERGED_DIR
        hint = (f"export its merged model instead: {flag} {merged}" if (merged / "config.json").is_file() else
                "merge them first: fine_tune_t5.py --peft lora --merge_adapters true writes OUTPUT_DIR/merged")
        raise UsageError(f"{flag} {model_dir} holds LoRA adapters, not a whole model; {hint}")
    config = load_model_config(str(model_dir))
    if config.model_type not in SUPPORTED_MODEL_TYPES:
        raise UsageError(f"{flag} {model_dir} is a {config.model_type} model, which CTranslate2's converter does not "
                         f"convert; it converts {', '.join(SUPPORTED_MODEL_TYPES)} (T5, T5 v1.1/Flan-T5, mT5, UMT5); "
                         f"use --backend torch")
    return config


def check_compute_type(compute_type, device, flag="--quantization"):
    """Refuses a precision this machine's CTranslate2 cannot compute (bfloat16 on a CPU: CTranslate2 4.x lists
    it for GPUs only, even on CPUs with AVX512-BF16)."""
    supported = sorted(import_ctranslate2().get_supported_compute_types(device))
    if compute_type not in ("default", "auto") and compute_type not in supported:
        raise UsageError(f"{flag} {compute_type}: this {device.upper()} cannot compute it in CTranslate2; it "
                         f"computes {', '.join(supported)}")


def convert(model_dir, out_dir, quantization):
    """Converts a saved model into the (existing, empty) out_dir, the tokenizer files copied beside it."""
    converters = importlib.import_module("ctranslate2.converters")
    copy_files = [name for name in TOKENIZER_FILES if (Path(model_dir) / name).is_file()]
    converter = converters.TransformersConverter(str(model_dir), copy_files=copy_files)
    return converter.convert(str(out_dir), quantization=quantization, force=True)


def default_device(use_cpu=False) -> str:
    return "cuda" if not use_cpu and import_ctranslate2().get_cuda_device_count() > 0 else "cpu"


def load_translator(folder, device="cpu", compute_type="default", threads=0):
    """A Translator on `folder`. On a CPU, `threads` (0: the cores this process may use) become that many workers of
    one thread each, which translate different batches at once: measured on 2 cores, a t5-small decoding 64 tokens
    ran 1.2-2.5x faster so than with one worker of 2 threads (bench/predict.py), with the same outputs. On a GPU, one
    worker."""
    ctranslate2 = import_ctranslate2()
    if device == "cuda":
        return ctranslate2.Translator(str(folder), device=device, compute_type=compute_type)
    workers = threads or len(os.sched_getaffinity(0))
    torch_threads = torch.get_num_threads()
    translator = ctranslate2.Translator(str(folder), device=device, compute_type=compute_type, inter_threads=workers,
                                        intra_threads=1)
    # Creating it sets the calling thread's OpenMP thread count to intra_threads, which torch shares: without this,
    # torch (the predictor's tokenizer-side work, a torch model in the same process) would run on one thread.
    torch.set_num_threads(torch_threads)
    return translator


def predict(translator, tokenizer, input_ids, batch_size, label_words=None, max_new_tokens=None, num_beams=1,
            keep_sentinels=False, progress=True, **translate_kwargs) -> list:
    """inference.predict through a Translator: one prediction per row of input_ids (lists of ids, EOS last), in
    input order; the likeliest of label_words when given, else the decoded generation (translate_kwargs go to
    translate_batch: bench/predict.py fixes the output length with min_decoding_length). The rows go in length
    order, a few batches per call, so that the Translator's workers each take a batch (max_batch_size) at once."""
    sources = [tokenizer.convert_ids_to_tokens(row) for row in input_ids]
    order = [i for batch in length_sorted_batches([len(row) for row in input_ids], batch_size) for i in batch]
    chunk = batch_size * translator.num_translators * BATCHES_PER_WORKER
    predictions = [None] * len(input_ids)
    with tqdm(total=len(input_ids), unit="example", disable=not progress) as bar:
        for start in range(0, len(order), chunk):
            indices = order[start:start + chunk]
            rows = [sources[i] for i in indices]
            if label_words is not None:
                texts = rank_label_words(score_label_words(translator, tokenizer, rows, label_words, batch_size),
                                         label_words)
            else:
                texts = generate(translator, tokenizer, rows, max_new_tokens, num_beams, keep_sentinels, batch_size,
                                 **translate_kwargs)
            for index, text in zip(indices, texts):
                predictions[index] = text
            bar.update(len(indices))
    return predictions


def generate(translator, tokenizer, rows, max_new_tokens, num_beams, keep_sentinels, batch_size, **translate_kwargs):
    """Decoded texts of token rows (greedy or beams, at most max_new_tokens tokens with EOS), in batches of
    batch_size (CTranslate2 sorts them by length and splits them; its workers take one batch each)."""
    results = translator.translate_batch(rows, beam_size=num_beams, max_decoding_length=max_new_tokens,
                                         max_batch_size=batch_size, **translate_kwargs)
    ids = [torch.tensor(tokenizer.convert_tokens_to_ids(result.hypotheses[0]), dtype=torch.long)
           for result in results]
    return decode_texts(tokenizer, ids, keep_sentinels)


def score_label_words(translator, tokenizer, rows, label_words, batch_size=0):
    """(B, n_labels) summed log-probabilities of each label word with EOS given each row, as
    inference.score_label_words computes them (score_batch adds the EOS; see the module docstring); batch_size 0:
    one batch."""
    eos = tokenizer.eos_token_id
    targets = [tokenizer.convert_ids_to_tokens([t for t in ids if t != eos])
               for ids in tokenizer(list(label_words)).input_ids]
    results = translator.score_batch([row for _ in targets for row in rows],
                                     [target for target in targets for _ in rows], max_batch_size=batch_size)
    sums = torch.tensor([sum(result.log_probs) for result in results], dtype=torch.float64)
    return sums.view(len(targets), len(rows)).T  # (B, n_labels)
