"""Time to the first training step after resuming at step 10 and at step 1000 (t5-tiny), map-style and streamed.

    python bench/resume.py            # needs ../shared/data (T5 tokenizer, Gutenberg books); ~1 minute

What is measured: from `trainer.train(resume_from_checkpoint=...)` being called to the end of the first
`training_step` (loading model/optimizer/scheduler/RNG, checking the manifest, putting the data where the run
stopped, one forward/backward), and how much data was read meanwhile (map-style: dataset rows; streamed: windows
the stream handed to the data loader; its background thread also reads ahead of them, as in training). A real
step-1000 run would cost minutes, so checkpoint-1000 is checkpoint-10 with `global_step` (and `epoch`) in
trainer_state.json set to 1000 and its manifest rewritten; its weights and scheduler are those of step 10, its
data position is real:

- map-style (austen-persuasion): 2 whole epochs of 383 steps are not iterated at all, then 234 batches of epoch 2
  are skipped by index in the batch sampler (accelerate's SkipBatchSampler);
- streamed (--streaming, 13 Gutenberg books as 13 files): stream_position.json is the position of window 4000
  (1000 steps x 4) taken from the same stream, so resuming reads from there. For comparison the same checkpoint
  without stream_position.json resumes the way HF does for an IterableDataset: accelerate's SkipDataLoader reads,
  tokenises, packs and collates all 4000 consumed windows again.

If resume re-read consumed data, the step-1000 time and data read would grow ~100x over step 10.
Rows/windows read at the first step: the first batch plus what the data loader prefetches.
"""
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import conftest  # noqa: E402,F401  offline hubs, as in the tests
import datasets  # noqa: E402

import checkpoint_manifest  # noqa: E402
import data  # noqa: E402
import flags  # noqa: E402
import pre_train_t5  # noqa: E402
import stream_resume  # noqa: E402
from data_collator import compute_input_and_target_lengths  # noqa: E402
from modeling import load_tokenizer  # noqa: E402
from packed_stream import PackedWindowStream  # noqa: E402
from shared_data import require  # noqa: E402
from test_pre_train_t5 import tiny_run_flags  # noqa: E402

STEPS = (10, 1000)
BOOKS = sorted(str(p) for p in require("gutenberg").glob("*.txt"))


def fake_checkpoint(source, output_dir, step, steps_per_epoch=None, stream_position=None):
    """checkpoint-`step` in output_dir: a copy of source claiming to be at `step` (see the module docstring)."""
    target = Path(output_dir) / f"checkpoint-{step}"
    shutil.copytree(source, target)
    state_file = target / "trainer_state.json"
    state = json.loads(state_file.read_text())
    state.update(global_step=step, epoch=step / steps_per_epoch if steps_per_epoch else state["epoch"])
    state_file.write_text(json.dumps(state))
    position_file = target / stream_resume.POSITION_FILE
    if stream_position is None:
        position_file.unlink(missing_ok=True)
    else:
        position_file.write_text(json.dumps(stream_position))
    checkpoint_manifest.write_manifest(target)


def stream_position(argv, window):
    """Where window `window` of the run's training stream starts: the position a real run saves there."""
    (_, data_args, span_args, training_args), _ = flags.parse_flags(pre_train_t5.FLAG_CLASSES, argv)
    tokens_length, _ = compute_input_and_target_lengths(span_args.input_length, span_args.noise_density,
                                                        span_args.mean_noise_span_length)
    tokenizer = load_tokenizer(str(require("t5_spiece")))
    train, _ = data.build_pretraining_datasets(data_args, tokenizer, tokens_length, training_args)
    for row in train:
        train.forget_before(row["window_index"])
        if row["window_index"] == window:
            return train.position(window)
    raise SystemExit(f"the stream has fewer than {window + 1} windows")


def time_to_first_step(argv):
    """Seconds from train() to the end of the first training_step, and the rows/windows read meanwhile."""
    marks, read = {}, [0]
    trainer_class, getitems, hand_out = pre_train_t5.PretrainTrainer, datasets.Dataset.__getitems__, \
        PackedWindowStream._hand_out
    train, step = trainer_class.train, trainer_class.training_step

    def timed_train(self, *args, **kwargs):
        marks["start"], read[0] = time.perf_counter(), 0
        return train(self, *args, **kwargs)

    def timed_step(self, *args, **kwargs):
        loss = step(self, *args, **kwargs)
        marks.setdefault("first_step", (time.perf_counter(), read[0]))
        return loss

    def counted_getitems(self, keys):
        read[0] += len(keys)
        return getitems(self, keys)

    def counted_hand_out(self, start, windows):
        for window in hand_out(self, start, windows):
            read[0] += 1
            yield window

    trainer_class.train, trainer_class.training_step = timed_train, timed_step
    datasets.Dataset.__getitems__, PackedWindowStream._hand_out = counted_getitems, counted_hand_out
    try:
        pre_train_t5.main(argv)
    finally:
        trainer_class.train, trainer_class.training_step = train, step
        datasets.Dataset.__getitems__, PackedWindowStream._hand_out = getitems, hand_out
    end, data_read = marks["first_step"]
    return end - marks["start"], data_read


def bench_map_style(tmp, corpus):
    base = Path(tmp) / "map_base"
    run = dict(save_strategy="steps", report_to="none")
    pre_train_t5.main(tiny_run_flags(str(base), corpus, max_steps=STEPS[0], save_steps=STEPS[0], **run))
    state = json.loads((base / f"checkpoint-{STEPS[0]}" / "trainer_state.json").read_text())
    steps_per_epoch = round(state["global_step"] / state["epoch"])  # epoch is steps / steps per epoch
    results = []
    for step in STEPS:
        out = Path(tmp) / f"map_resume{step}"
        fake_checkpoint(base / f"checkpoint-{STEPS[0]}", out, step, steps_per_epoch)
        results.append(time_to_first_step(tiny_run_flags(str(out), corpus, max_steps=step + 1,
                                                         resume_from_checkpoint="auto", **run)))
    return results


def bench_streaming(tmp):
    def run(out, **extra):
        return tiny_run_flags(str(Path(tmp) / out), BOOKS[0], train_files=BOOKS, streaming=True,
                              save_strategy="steps", report_to="none", **extra)

    pre_train_t5.main(run("stream_base", max_steps=STEPS[0], save_steps=STEPS[0]))
    saved = Path(tmp) / "stream_base" / f"checkpoint-{STEPS[0]}"
    batch = 4  # tiny_run_flags' per_device_train_batch_size, one process
    results = []
    for step, with_position in ((STEPS[0], True), (STEPS[1], True), (STEPS[1], False)):
        out = Path(tmp) / f"stream_resume{step}_{with_position}"
        position = json.loads((saved / stream_resume.POSITION_FILE).read_text()) if step == STEPS[0] else \
            stream_position(run("position", max_steps=step), step * batch)
        fake_checkpoint(saved, out, step, stream_position=position if with_position else None)
        results.append(time_to_first_step(run(out.name, max_steps=step + 1, resume_from_checkpoint="auto")))
    return results


def main():
    torch.set_num_threads(1)  # shared small machines: one thread is the fastest and the least noisy
    with tempfile.TemporaryDirectory() as tmp:
        (t_small, rows_small), (t_large, rows_large) = bench_map_style(tmp, str(require(
            "gutenberg/austen-persuasion.txt")))
        (s_small, w_small), (s_large, w_large), (s_skip, w_skip) = bench_streaming(tmp)
    print(f"map-style resume time-to-first-step: step {STEPS[0]} {t_small:.2f} s ({rows_small} rows read), "
          f"step {STEPS[1]} {t_large:.2f} s ({rows_large} rows read); ratio {t_large / t_small:.2f}")
    print(f"streamed resume time-to-first-step: step {STEPS[0]} {s_small:.2f} s ({w_small} windows handed out), "
          f"step {STEPS[1]} {s_large:.2f} s ({w_large} windows handed out); ratio {s_large / s_small:.2f}")
    print(f"streamed, step {STEPS[1]} without {stream_resume.POSITION_FILE} (HF re-reads the stream): "
          f"{s_skip:.2f} s ({w_skip} windows handed out); {s_skip / s_large:.1f}x the time with it")


if __name__ == "__main__":
    main()
