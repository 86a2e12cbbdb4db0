"""predict_t5.py's batching vs a bare loop of model.generate, on GLUE dev sets: examples/s of three arms.

    .venv/bin/python bench/predict.py                                   # t5-small, SST-2, RTE and MRPC dev, CPU
    .venv/bin/python bench/predict.py --model_size t5-base --device cuda --tasks sst2,rte,mrpc,qnli

Same process, same model, same examples and the same number of generated tokens in every arm:
- predictor: inference.predict (what predict_t5.py runs): inputs tokenised once, length-sorted batches each padded
  to its own longest, inference mode, bf16 autocast where the GPU has it;
- bare, input order: `tokenizer(batch, padding=True)` then `model.generate(**batch)` over the examples in file
  order, batches of the same size (what a script around generate usually does);
- bare, length-sorted: the same loop over the examples sorted by token length (what sorting alone gives).
The model is a random init of a size preset with the real T5 vocabulary (../shared/data/t5_spiece): an untrained
model stops at arbitrary points, so each arm generates exactly --max_new_tokens tokens (min = max length), and the
output lengths cannot decide the result. Every arm's predictions are checked to be the same texts. Each arm runs
--repeats times after a burn-in batch; the best time counts (other processes share the machine).
"""
import argparse
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch
from transformers import T5ForConditionalGeneration

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from t5kit.data import predict_inputs  # noqa: E402
from t5kit.data.task_format import find_task  # noqa: E402
from t5kit.model import building, inference  # noqa: E402

SHARED_DATA = Path(os.environ.get("T5_SHARED_DATA", ROOT.parent / "shared" / "data"))
MAX_SOURCE_LENGTH = 512
SEED = 0


def dev_texts(task_name):
    """The task's formatted dev-set inputs, read as predict_t5.py reads the official file."""
    task_vals = find_task(task_name)
    path = SHARED_DATA / "glue" / task_vals["data_dir_name"] / task_vals["data_files"]["validation"]
    return predict_inputs.read_inputs(path, task_vals).texts


def bare_loop(model, tokenizer, texts, order, batch_size, generate_kwargs, device, bf16):
    """model.generate over texts in `order`, batches padded by the tokenizer; predictions in input order."""
    predictions = [None] * len(texts)
    autocast = torch.autocast(device_type=device, dtype=torch.bfloat16) if bf16 else nullcontext()
    with torch.inference_mode(), autocast:
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            encoded = tokenizer([texts[i] for i in batch], padding=True, truncation=True,
                                max_length=MAX_SOURCE_LENGTH, return_tensors="pt").to(device)
            ids = model.generate(**encoded, **generate_kwargs)
            for index, text in zip(batch, tokenizer.batch_decode(ids, skip_special_tokens=True)):
                predictions[index] = text
    return predictions


def best_time(run, repeats, device):
    """(best seconds of `repeats` runs, the last run's result)."""
    best, result = float("inf"), None
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        result = run()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best, result


def padded_share(lengths, order, batch_size):
    """Pad tokens / all tokens of the input batches when examples are batched in `order`."""
    padded = sum(max(lengths[i] for i in order[s:s + batch_size]) * len(order[s:s + batch_size])
                 for s in range(0, len(order), batch_size))
    return 1 - sum(lengths) / padded


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_size", default="t5-small", help="size preset (constants.MODEL_SIZE_PRESETS)")
    parser.add_argument("--tasks", default="sst2,rte,mrpc", help="GLUE tasks whose dev sets are predicted")
    parser.add_argument("--batch_size", type=int, default=32, help="examples per batch, all arms")
    parser.add_argument("--max_new_tokens", type=int, default=3, help="tokens each example generates, all arms "
                        "(3: the longest GLUE label word with EOS is 3-5 tokens)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per arm; the best counts")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    tokenizer = building.load_tokenizer(str(SHARED_DATA / "t5_spiece"))
    model = T5ForConditionalGeneration(building.build_t5_config(args.model_size, tokenizer, 0.0))
    model.to(args.device).eval()
    bf16 = args.device == "cuda" and torch.cuda.is_bf16_supported()
    # Fixed output length: min_length = max_length (+1: the decoder start token counts towards both).
    fixed = {"max_length": 1 + args.max_new_tokens, "min_length": 1 + args.max_new_tokens, "num_beams": 1}
    where = (f"{args.device}{' bf16' if bf16 else ''}, {torch.get_num_threads()} threads, {args.model_size}, batch "
             f"{args.batch_size}, {args.max_new_tokens} new tokens")
    for task in args.tasks.split(","):
        texts = dev_texts(task)
        ids, _ = inference.tokenize_inputs(tokenizer, texts, MAX_SOURCE_LENGTH)
        lengths = [len(row) for row in ids]
        input_order = list(range(len(texts)))
        sorted_order = [i for batch in inference.length_sorted_batches(lengths, args.batch_size) for i in batch]
        arms = {
            "predictor": lambda: inference.predict(model, tokenizer, ids, args.batch_size, max_new_tokens=
                                                   args.max_new_tokens, min_length=fixed["min_length"], bf16=bf16,
                                                   progress=False),
            "bare input order": lambda: bare_loop(model, tokenizer, texts, input_order, args.batch_size, fixed,
                                                  args.device, bf16),
            "bare length-sorted": lambda: bare_loop(model, tokenizer, texts, sorted_order, args.batch_size, fixed,
                                                    args.device, bf16),
        }
        # Burn-in: one batch through each code path (allocator, kernels, caches) before any clock runs.
        first = list(range(min(args.batch_size, len(texts))))
        bare_loop(model, tokenizer, texts, first, args.batch_size, fixed, args.device, bf16)
        inference.predict(model, tokenizer, [ids[i] for i in first], args.batch_size, max_new_tokens=
                          args.max_new_tokens, min_length=fixed["min_length"], bf16=bf16, progress=False)
        results = {name: best_time(run, args.repeats, args.device) for name, run in arms.items()}
        outputs = [result for _, result in results.values()]
        same = all(output == outputs[0] for output in outputs)
        rate = {name: len(texts) / seconds for name, (seconds, _) in results.items()}
        print(f"{task} dev ({len(texts)} examples): predictor {rate['predictor']:.1f} ex/s | bare input order "
              f"{rate['bare input order']:.1f} ex/s | bare length-sorted {rate['bare length-sorted']:.1f} ex/s -> "
              f"{rate['predictor'] / rate['bare input order']:.2f}x input order, "
              f"{rate['predictor'] / rate['bare length-sorted']:.2f}x length-sorted; padded input tokens "
              f"{padded_share(lengths, input_order, args.batch_size):.0%} vs "
              f"{padded_share(lengths, sorted_order, args.batch_size):.0%}; same predictions: {same} ({where})")


if __name__ == "__main__":
    main()
