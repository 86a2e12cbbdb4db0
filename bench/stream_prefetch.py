"""Streamed pre-training data: reading ahead in a background thread vs reading in line, against a device step.

    python bench/stream_prefetch.py                    # needs ../shared/data (T5 tokenizer, Gutenberg books)
    python bench/stream_prefetch.py --step_seconds 0.05 --batch_size 32

With --streaming the stream lives in the main process (--dataloader_num_workers 0, so that resume is exact). Read
in line, reading, tokenising and cutting the next batch happen between training steps, while the accelerator
idles: the host prepares the next batch only once it has launched the current step. window_stream reads ahead in a
thread instead. This bench builds a C4-like corpus (JSON lines, ~400-word documents cut from the Gutenberg
books, 4 files), streams it through corpus.load_raw_corpus + corpus.stream_windows as pre_train_t5 does, and hands
out `--batch_size` windows per step; the step itself is time.sleep(--step_seconds), which is what the main thread
does during a GPU step: wait, without the GIL. The default 0.133 s is the t5-base bf16 step with torch.compile at
batch 64 measured on an H100 with transformers 5.17 (0.109 s with 5.23, docs/benchmarks.md). Both arms get the same
windows (checked). Printed: the stream's own rate (no step), then mean seconds per step in line vs read ahead, and
how much of each step is data time.
"""
import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

for _var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_var, "1")

from bench.paths import SHARED_DATA
from data_collator import compute_input_and_target_lengths
from t5kit.config.arguments import T5TrainingArguments
from t5kit.config.pretrain_arguments import PretrainDataArguments
from t5kit.data import corpus, window_stream
from t5kit.model import building

WORDS_PER_DOCUMENT = 400  # C4's median document is ~400 words
NUM_FILES = 4


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch_size", type=int, default=64, help="windows per step (all ranks')")
    parser.add_argument("--input_length", type=int, default=512, help="encoder tokens; windows are 568 for 512")
    parser.add_argument("--step_seconds", type=float, default=0.133, help="the simulated device step")
    parser.add_argument("--steps", type=int, default=60, help="timed steps per arm, after --burn_in")
    parser.add_argument("--burn_in", type=int, default=2, help="untimed steps (the thread fills its queue)")
    return parser.parse_args(argv)


def write_corpus(folder, copies):
    """C4-like JSON lines from the Gutenberg books: `copies` passes over ~400-word documents, in NUM_FILES files."""
    documents = []
    for book in sorted((SHARED_DATA / "gutenberg").glob("*.txt")):
        words = book.read_text(encoding="utf-8", errors="ignore").split()
        documents += [" ".join(words[i:i + WORDS_PER_DOCUMENT]) for i in range(0, len(words), WORDS_PER_DOCUMENT)]
    documents *= copies
    files = []
    for k in range(NUM_FILES):
        path = Path(folder) / f"c4like-{k:05d}.json"
        path.write_text("".join(json.dumps({"text": text}) + "\n" for text in documents[k::NUM_FILES]))
        files.append(str(path))
    return files


def training_stream(files, tokenizer, tokens_length, prefetch):
    """The training stream pre_train_t5 builds for these files (32 windows held out for evaluation)."""
    data_args = PretrainDataArguments(train_files=files, streaming=True, max_eval_samples=32)
    training_args = T5TrainingArguments(output_dir=tempfile.gettempdir(), use_cpu=True, report_to="none")
    raw = corpus.load_raw_corpus(data_args)
    train, _ = corpus.stream_windows(raw["train"], raw["validation"], tokenizer, tokens_length, data_args,
                                   training_args)
    train.prefetch = prefetch
    return train


def run_arm(stream, args, step_seconds):
    """Seconds per step (data + simulated device step) after burn-in, and the windows handed out."""
    iterator, windows, times = iter(stream), [], []
    for step in range(args.burn_in + args.steps):
        if step >= args.burn_in:
            times.append(time.perf_counter())
        windows += [next(iterator)["input_ids"] for _ in range(args.batch_size)]
        time.sleep(step_seconds)
    times.append(time.perf_counter())
    iterator.close()  # stops the reading-ahead thread
    return np.diff(times), np.stack(windows)


def main(argv=None):
    args = parse_args(argv)
    if not (SHARED_DATA / "t5_spiece").is_dir():
        print(f"skipped: needs the T5 tokenizer and Gutenberg books under {SHARED_DATA} (set T5_DATA_DIR)")
        return
    tokenizer = building.load_tokenizer(str(SHARED_DATA / "t5_spiece"))
    tokens_length, _ = compute_input_and_target_lengths(args.input_length, 0.15, 3.0)
    with tempfile.TemporaryDirectory() as folder:
        files = write_corpus(folder, copies=3)
        arms = {"in line": 0, "read ahead": window_stream.PREFETCH_WINDOWS}
        alone, _ = run_arm(training_stream(files, tokenizer, tokens_length, 0), args, 0.0)
        results = {name: run_arm(training_stream(files, tokenizer, tokens_length, prefetch), args,
                                 args.step_seconds) for name, prefetch in arms.items()}
    # Means, not medians: datasets tokenises TOKENIZE_BATCH_SIZE documents at a time, so in line most steps find
    # their windows ready and every ~15th pays for a whole batch; throughput is the mean.
    data_seconds = alone.mean()
    print(f"stream alone: {args.batch_size} windows of {tokens_length} ids per {data_seconds * 1e3:.0f} ms = "
          f"{args.batch_size * tokens_length / data_seconds / 1e3:,.0f}k tokens/s ({os.cpu_count()} cores)")
    (inline, inline_windows), (ahead, ahead_windows) = results["in line"], results["read ahead"]
    same = np.array_equal(inline_windows, ahead_windows)
    print(f"step = data + {args.step_seconds * 1e3:.0f} ms device step: in line {inline.mean() * 1e3:.0f} ms, "
          f"read ahead {ahead.mean() * 1e3:.0f} ms (mean of {args.steps}) -> {inline.mean() / ahead.mean():.2f}x "
          f"steps/s; data time per step {(inline.mean() - args.step_seconds) * 1e3:.0f} vs "
          f"{(ahead.mean() - args.step_seconds) * 1e3:.0f} ms | same windows: {same}")


if __name__ == "__main__":
    main()
