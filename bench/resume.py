"""Time to the first training step after resuming at step 10 and at step 1000 (t5-tiny, map-style corpus).

    python bench/resume.py            # needs ../shared/data (T5 tokenizer, austen-persuasion.txt); ~1 minute

What is measured: from `trainer.train(resume_from_checkpoint=...)` being called to the end of the first
`training_step` (loading model/optimizer/scheduler/RNG, checking the manifest, skipping the consumed batches,
one forward/backward), and how many dataset rows were read in that time. A real step-1000 run would cost minutes,
so checkpoint-1000 is checkpoint-10 with `global_step` (and `epoch`) in trainer_state.json set to 1000 and its
manifest rewritten: the data skip is real (2 whole epochs of 383 steps are not iterated at all, then 234
batches of epoch 2 are skipped), the weights and the scheduler are those of step 10. If resume re-read the skipped
data, the step-1000 time and row count would grow ~100x; for map-style data HF's skip_first_batches skips indices
in the batch sampler (accelerate's SkipBatchSampler), so neither does. Rows read: the first batch plus the one
batch accelerate's DataLoaderShard prefetches. (An IterableDataset, --streaming, is different: accelerate's
SkipDataLoader reads, packs and collates every skipped batch, so its resume time grows with the step.)
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
import checkpointing  # noqa: E402
import pre_train_t5  # noqa: E402
from shared_data import require  # noqa: E402
from test_pre_train_t5 import tiny_run_flags  # noqa: E402

STEPS = (10, 1000)


def fake_checkpoint(source, output_dir, step, steps_per_epoch):
    """checkpoint-`step` in output_dir: a copy of source claiming to be at `step` (see the module docstring)."""
    target = Path(output_dir) / f"checkpoint-{step}"
    shutil.copytree(source, target)
    state_file = target / "trainer_state.json"
    state = json.loads(state_file.read_text())
    state.update(global_step=step, epoch=step / steps_per_epoch)
    state_file.write_text(json.dumps(state))
    checkpoint_manifest.write_manifest(target)


def time_to_first_step(argv):
    """Seconds from train() to the end of the first training_step, and the dataset rows read meanwhile."""
    marks, rows = {}, [0]
    train, step = checkpointing.SafeSeq2SeqTrainer.train, checkpointing.SafeSeq2SeqTrainer.training_step
    getitems = datasets.Dataset.__getitems__

    def timed_train(self, *args, **kwargs):
        marks["start"], rows[0] = time.perf_counter(), 0
        return train(self, *args, **kwargs)

    def timed_step(self, *args, **kwargs):
        loss = step(self, *args, **kwargs)
        marks.setdefault("first_step", (time.perf_counter(), rows[0]))
        return loss

    def counted_getitems(self, keys):
        rows[0] += len(keys)
        return getitems(self, keys)

    checkpointing.SafeSeq2SeqTrainer.train, checkpointing.SafeSeq2SeqTrainer.training_step = timed_train, timed_step
    datasets.Dataset.__getitems__ = counted_getitems
    try:
        pre_train_t5.main(argv)
    finally:
        checkpointing.SafeSeq2SeqTrainer.train, checkpointing.SafeSeq2SeqTrainer.training_step = train, step
        datasets.Dataset.__getitems__ = getitems
    end, rows_read = marks["first_step"]
    return end - marks["start"], rows_read


def main():
    torch.set_num_threads(1)  # shared small machines: one thread is the fastest and the least noisy
    corpus = str(require("gutenberg/austen-persuasion.txt"))
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        flags = dict(save_strategy="steps", report_to="none")
        pre_train_t5.main(tiny_run_flags(str(base), corpus, max_steps=STEPS[0], save_steps=STEPS[0], **flags))
        state = json.loads((base / f"checkpoint-{STEPS[0]}" / "trainer_state.json").read_text())
        steps_per_epoch = round(state["global_step"] / state["epoch"])  # epoch is steps / steps per epoch
        results = []
        for step in STEPS:
            out = Path(tmp) / f"resume{step}"
            fake_checkpoint(base / f"checkpoint-{STEPS[0]}", out, step, steps_per_epoch)
            results.append(time_to_first_step(tiny_run_flags(
                str(out), corpus, max_steps=step + 1, resume_from_checkpoint="auto", **flags)))
    (t_small, rows_small), (t_large, rows_large) = results
    print(f"resume time-to-first-step: step {STEPS[0]} {t_small:.2f} s ({rows_small} rows read), step {STEPS[1]} "
          f"{t_large:.2f} s ({rows_large} rows read); ratio {t_large / t_small:.2f}")


if __name__ == "__main__":
    main()
