"""predict_t5.py's batching vs a bare loop of model.generate, on GLUE dev sets: examples/s of each arm.

    .venv/bin/python bench/predict.py                     # t5-small, every GLUE dev set in ../shared/data, CPU
    .venv/bin/python bench/predict.py --model_size t5-base --device cuda --tasks sst2,rte,mrpc,qnli

Same process, same model, same examples and the same number of generated tokens in every arm:
- predictor: what predict_t5.py runs from its formatted texts: inference.tokenize_inputs (once, inside the clock),
  then inference.predict: length-sorted batches each padded to its own longest, inference mode; in the model's
  precision (fp32), as the bare loops, so the difference is the batching alone;
- predictor bf16: the same on a copy of the model with its weights in bf16 (inference.place_model), predict_t5.py's
  default where the hardware computes bf16: a GPU with bf16, or a CPU with AVX512-BF16 or AMX (elsewhere the arm is
  left out); beside it, predictor bf16 autocast: the fp32 model under bf16 autocast, what predict_t5.py ran before
  it cast the weights, kept as that choice's baseline;
- predictor compiled (and predictor bf16 compiled): the same with predict_t5.py --compile
  (compiled_generation.py: a static cache, the decoding step compiled, batches padded to shape buckets); every
  shape compiles in a pass over the texts before the clock runs, whose seconds are printed (the cost a run pays
  once); its predictions must be the fp32 predictor's;
- bare, input order: `tokenizer(batch, padding=True)` then `model.generate(**batch)` over the examples in file
  order, batches of the same size, fp32 (what a script around generate usually does);
- bare, length-sorted: the same loop over the examples sorted by token length (what sorting alone gives);
- ct2 float32 / int8 / bf16: predict_t5.py --backend ctranslate2 (ctranslate2_backend.predict: the same
  length-sorted batches through a CTranslate2 Translator, as many one-thread workers as torch has threads) on one
  float32 export of the same model, loaded with each compute type (bf16 only where this device computes it);
  float32 must give the same texts, int8 and bf16 print their agreement with it.
A generation-heavy row follows the GLUE rows: English->German on the first --translation_examples sentences of
newstest2014 (../shared/data/translation), --translation_new_tokens new tokens each, where decoding, not the
encoder, takes the time.
The model is a random init of a size preset with the real T5 vocabulary (../shared/data/t5_spiece): an untrained
model stops at arbitrary points, so each arm generates exactly --max_new_tokens tokens (min = max length), and the
output lengths cannot decide the result. The fp32 arms' predictions are checked to be the same texts; the bf16 arm's
agreement with them is printed (an untrained model's near-equal logits flip more often than a trained model's). The
arms take turns, --repeats rounds after a burn-in batch; each arm's best time counts (other processes share the
machine). The last line sums every task: all examples over all seconds, per arm.
"""
import argparse
import copy
import tempfile
import time

import torch
from transformers import T5ForConditionalGeneration

from bench.paths import SHARED_DATA
from t5kit.config.checks import cpu_has_native_bf16
from t5kit.data import predict_inputs
from t5kit.data.task_format import find_task, format_input
from t5kit.model import building, compiled_generation, ctranslate2_backend, inference

MAX_SOURCE_LENGTH = 512
SEED = 0


GLUE_DEV_SETS = "cola,sst2,mrpc,stsb,qnli,rte,wnli"  # the GLUE dev sets ../shared/data holds (not MNLI, QQP)
TRANSLATION_FILE = "translation/wmt14_en_de_newstest2014_tok/test.en"
TRANSLATION_TASK = "translation/multi30k_en_de"  # T5's "translate English to German: " format (constants.DATASET_VALS)
CT2_COMPUTE_TYPES = {"ct2 float32": "float32", "ct2 int8": "int8", "ct2 bf16": "bfloat16"}


def translation_texts(limit):
    """The first `limit` newstest2014 English sentences with T5's English->German prefix."""
    task_vals = find_task(TRANSLATION_TASK)
    lines = (SHARED_DATA / TRANSLATION_FILE).read_text(encoding="utf-8").splitlines()
    return [format_input(task_vals, {"en": line}) for line in lines if line.strip()][:limit]


def ct2_translators(model, tokenizer, device, threads):
    """{arm: Translator}: one float32 export of the model, loaded in each compute type the device computes."""
    supported = ctranslate2_backend.import_ctranslate2().get_supported_compute_types(device)
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(f"{folder}/model")
        tokenizer.save_pretrained(f"{folder}/model")
        ctranslate2_backend.convert(f"{folder}/model", f"{folder}/ct2", "float32")
        return {arm: ctranslate2_backend.load_translator(f"{folder}/ct2", device, compute_type, threads)
                for arm, compute_type in CT2_COMPUTE_TYPES.items() if compute_type in supported}


def ct2_predictor(translator, tokenizer, texts, batch_size, max_new_tokens):
    """predict_t5.py --backend ctranslate2's steps 6 and 8, every example generating exactly max_new_tokens."""
    ids, _ = inference.tokenize_inputs(tokenizer, texts, MAX_SOURCE_LENGTH)
    return ctranslate2_backend.predict(translator, tokenizer, ids, batch_size, max_new_tokens=max_new_tokens,
                                       min_decoding_length=max_new_tokens, progress=False)


def dev_texts(task_name, limit):
    """The task's formatted dev-set inputs (the first `limit`), read as predict_t5.py reads the official file."""
    task_vals = find_task(task_name)
    path = SHARED_DATA / "glue" / task_vals["data_dir_name"] / task_vals["data_files"]["validation"]
    return predict_inputs.read_inputs(path, task_vals, limit=limit).texts


def predictor(model, tokenizer, texts, batch_size, max_new_tokens):
    """predict_t5.py's steps 6 and 8 on formatted texts: tokenise once, predict in length-sorted batches."""
    ids, _ = inference.tokenize_inputs(tokenizer, texts, MAX_SOURCE_LENGTH)
    return inference.predict(model, tokenizer, ids, batch_size, max_new_tokens=max_new_tokens,
                             min_length=1 + max_new_tokens, progress=False)


def autocast_predictor(model, tokenizer, texts, batch_size, max_new_tokens, device):
    """The predictor on the fp32 model under bf16 autocast (fp32 weights and residual stream, matmuls in bf16)."""
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        return predictor(model, tokenizer, texts, batch_size, max_new_tokens)


def bare_loop(model, tokenizer, texts, order, batch_size, generate_kwargs, device):
    """model.generate over texts in `order`, batches padded by the tokenizer; predictions in input order."""
    predictions = [None] * len(texts)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            encoded = tokenizer([texts[i] for i in batch], padding=True, truncation=True,
                                max_length=MAX_SOURCE_LENGTH, return_tensors="pt").to(device)
            ids = model.generate(**encoded, **generate_kwargs)
            for index, text in zip(batch, tokenizer.batch_decode(ids, skip_special_tokens=True)):
                predictions[index] = text
    return predictions


def timed(run, device):
    """(seconds, result) of one run."""
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = run()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, result


def best_times(arms, repeats, device):
    """{arm: (best seconds of `repeats` runs, the last run's result)}. The arms take turns, one run each a round, so
    a slow spell of the machine (other tenants, clock changes) falls on every arm alike instead of on one."""
    best = {name: (float("inf"), None) for name in arms}
    for _ in range(repeats):
        for name, run in arms.items():
            seconds, result = timed(run, device)
            best[name] = (min(best[name][0], seconds), result)
    return best


def padded_share(lengths, order, batch_size):
    """Pad tokens / all tokens of the input batches when examples are batched in `order`."""
    padded = sum(max(lengths[i] for i in order[s:s + batch_size]) * len(order[s:s + batch_size])
                 for s in range(0, len(order), batch_size))
    return 1 - sum(lengths) / padded


def has_bf16(device) -> bool:
    return torch.cuda.is_bf16_supported() if device == "cuda" else cpu_has_native_bf16()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_size", default="t5-small", help="size preset (constants.MODEL_SIZE_PRESETS)")
    parser.add_argument("--tasks", default=GLUE_DEV_SETS, help="GLUE tasks whose dev sets are predicted")
    parser.add_argument("--max_examples", type=int, default=1000,
                        help="the first N examples of each dev set (QNLI's 5,463 take minutes an arm on 2 cores)")
    parser.add_argument("--batch_size", type=int, default=32, help="examples per batch, all arms")
    parser.add_argument("--max_new_tokens", type=int, default=3, help="tokens each example generates, all arms "
                        "(3: the longest GLUE label word with EOS is 3-5 tokens)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--translation_examples", type=int, default=128,
                        help="newstest2014 sentences of the English->German row (0: no such row)")
    parser.add_argument("--translation_new_tokens", type=int, default=64, help="tokens each translation generates")
    parser.add_argument("--no_ctranslate2", action="store_true", help="leave the CTranslate2 arms out")
    parser.add_argument("--no_compile", action="store_true", help="leave the compiled arms out")
    parser.add_argument("--compile_backend", default="inductor", help="torch.compile backend of the compiled arms "
                        "(eager: dynamo traces the same graphs without generating kernels, seconds instead of minutes "
                        "on a CPU; the GPU check's --tiny dry run)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per arm, arms taking turns; the best "
                        "counts")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    tokenizer = building.load_tokenizer(str(SHARED_DATA / "t5_spiece"))
    model = T5ForConditionalGeneration(building.build_t5_config(args.model_size, tokenizer, 0.0))
    model.to(args.device).eval()
    bf16 = inference.place_model(copy.deepcopy(model), args.device, True) if has_bf16(args.device) else None
    print(f"{args.device} ({'with' if bf16 else 'without'} bf16), {torch.get_num_threads()} threads, "
          f"{args.model_size}, batch {args.batch_size}, {args.max_new_tokens} new tokens, best of {args.repeats}")
    translators = {} if args.no_ctranslate2 else ct2_translators(model, tokenizer, args.device,
                                                                 torch.get_num_threads())
    compiled = {} if args.no_compile else compiled_models(model, bf16, args.batch_size, args.compile_backend)
    print(f"CTranslate2 arms: {', '.join(translators) or 'none'}")
    totals = {}
    for task in args.tasks.split(","):
        texts = dev_texts(task, args.max_examples)
        bench_row(f"{task} dev", texts, model, tokenizer, translators, args.max_new_tokens, args, bf16, totals,
                  compiled)
    examples = totals["predictor"][0]
    print(f"all {len(args.tasks.split(','))} dev sets ({examples} examples): "
          f"{rates_line({name: (seconds, None) for name, (_, seconds) in totals.items()}, examples)}")
    if args.translation_examples:
        texts = translation_texts(args.translation_examples)
        bench_row(f"newstest2014 en->de, {args.translation_new_tokens} new tokens", texts, model, tokenizer,
                  translators, args.translation_new_tokens, args, bf16, {}, compiled)


def compiled_models(model, bf16, batch_size, backend):
    """{arm: a copy of the model (and of its bf16 copy) whose generate is predict_t5.py --compile's}."""
    arms = {"predictor compiled": model, **({"predictor bf16 compiled": bf16} if bf16 else {})}
    copies = {name: copy.deepcopy(arm_model) for name, arm_model in arms.items()}
    for arm_model in copies.values():
        compiled_generation.install(arm_model, batch_size, MAX_SOURCE_LENGTH, backend)
    return copies


def bench_row(label, texts, model, tokenizer, translators, max_new_tokens, args, bf16, totals, compiled):
    """Times every arm on `texts` (taking turns, best of --repeats), prints one line, adds to totals. bf16: the
    model's bf16 copy, or None where the device does not compute bf16; compiled: compiled_models' copies."""
    # Fixed output length: min_length = max_length (+1: the decoder start token counts towards both).
    fixed = {"max_length": 1 + max_new_tokens, "min_length": 1 + max_new_tokens, "num_beams": 1}
    ids, _ = inference.tokenize_inputs(tokenizer, texts, MAX_SOURCE_LENGTH)
    lengths = [len(row) for row in ids]
    input_order = list(range(len(texts)))
    sorted_order = [i for batch in inference.length_sorted_batches(lengths, args.batch_size) for i in batch]
    arms = {
        "predictor": lambda: predictor(model, tokenizer, texts, args.batch_size, max_new_tokens),
        "bare input order": lambda: bare_loop(model, tokenizer, texts, input_order, args.batch_size, fixed,
                                              args.device),
        "bare length-sorted": lambda: bare_loop(model, tokenizer, texts, sorted_order, args.batch_size, fixed,
                                                args.device),
    }
    if bf16:
        arms["predictor bf16"] = lambda: predictor(bf16, tokenizer, texts, args.batch_size, max_new_tokens)
        arms["predictor bf16 autocast"] = lambda: autocast_predictor(model, tokenizer, texts, args.batch_size,
                                                                     max_new_tokens, args.device)
    for arm, translator in translators.items():
        arms[arm] = lambda translator=translator: ct2_predictor(translator, tokenizer, texts, args.batch_size,
                                                                max_new_tokens)
    for arm, arm_model in compiled.items():
        arms[arm] = lambda arm_model=arm_model: predictor(arm_model, tokenizer, texts, args.batch_size,
                                                          max_new_tokens)
    # Every shape of the compiled arms compiles once, off the clock, as a run pays it once.
    compile_seconds = {arm: timed(arms[arm], args.device)[0] for arm in compiled}
    # Burn-in: one batch through each code path (allocator, kernels, caches) before any clock runs.
    first = list(range(min(args.batch_size, len(texts))))
    bare_loop(model, tokenizer, texts, first, args.batch_size, fixed, args.device)
    for arm_model in (model, bf16) if bf16 else (model,):
        predictor(arm_model, tokenizer, texts[:len(first)], args.batch_size, max_new_tokens)
    if bf16:
        autocast_predictor(model, tokenizer, texts[:len(first)], args.batch_size, max_new_tokens, args.device)
    for translator in translators.values():
        ct2_predictor(translator, tokenizer, texts[:len(first)], args.batch_size, max_new_tokens)
    results = best_times(arms, args.repeats, args.device)
    for name, (seconds, _) in results.items():
        totals[name] = [a + b for a, b in zip(totals.get(name, [0, 0.0]), [len(texts), seconds])]
    outputs = {name: result for name, (_, result) in results.items()}
    same = all(outputs[name] == outputs["predictor"] for name in ("bare input order", "bare length-sorted",
                                                                  "ct2 float32", "predictor compiled")
               if name in outputs)
    agreement = "".join(f"; {name} agrees on {mean_equal(outputs[name], outputs['predictor']):.0%}"
                        for name in outputs if name in ("predictor bf16", "predictor bf16 autocast", "ct2 int8",
                                                        "ct2 bf16", "predictor bf16 compiled"))
    agreement += "".join(f"; {arm} first pass (compiling) {seconds:.1f} s, {len(compiled[arm].generate.shapes)} "
                         "shapes so far" for arm, seconds in compile_seconds.items())
    print(f"{label} ({len(texts)} examples): {rates_line(results, len(texts))}; padded input tokens "
          f"{padded_share(lengths, input_order, args.batch_size):.0%} vs "
          f"{padded_share(lengths, sorted_order, args.batch_size):.0%}; same fp32 predictions: {same}{agreement}",
          flush=True)


def mean_equal(a, b) -> float:
    return sum(x == y for x, y in zip(a, b)) / len(a)


def rates_line(results, examples) -> str:
    """Examples/s of each arm, then the predictor arms against the bare input-order loop."""
    rate = {name: examples / seconds for name, (seconds, _) in results.items()}
    arms = " | ".join(f"{name} {value:.1f} ex/s" for name, value in rate.items())
    gains = ", ".join(f"{name} {rate[name] / rate['bare input order']:.2f}x" for name in rate
                      if name.startswith(("predictor", "ct2")))
    over_predictor = ", ".join(f"{name} {rate[name] / rate['predictor']:.2f}x" for name in rate
                               if name.startswith("ct2") or name == "predictor compiled")
    return f"{arms} -> vs bare input order: {gains}" + (f"; vs predictor fp32: {over_predictor}"
                                                        if over_predictor else "")

if __name__ == "__main__":
    main()
