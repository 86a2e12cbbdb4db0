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
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline",
           "TOKENIZERS_PARALLELISM": "false"}
os.environ.update(OFFLINE)  # before transformers or datasets is imported

from bench.paths import ROOT as REPO
from bench.paths import SHARED_DATA
from data_collator import compute_input_and_target_lengths
from t5kit.config import parsing
from t5kit.config.script_flags import PRETRAIN_FLAG_CLASSES
from t5kit.data import corpus
from t5kit.model.building import load_tokenizer
from t5kit.train import checkpointing, stream_resume

STEPS = (10, 1000)

# Runs pre_train_t5.py as on the command line (python pre_train_t5.py ARGS) with two probes: the time from
# trainer.train() to the end of the first training_step, and the rows/windows the data handed out meanwhile.
TIMED_RUN = """
import json, runpy, sys, time
import datasets
from t5kit.data.window_stream import WindowStream
from t5kit.train.pretrain_trainer import PretrainTrainer
from bench.paths import ROOT as REPO

marks, read = {}, [0]
train, step = PretrainTrainer.train, PretrainTrainer.training_step
getitems, hand_out = datasets.Dataset.__getitems__, WindowStream._hand_out

def timed_train(self, *args, **kwargs):
    marks["start"], read[0] = time.perf_counter(), 0
    return train(self, *args, **kwargs)

def timed_step(self, *args, **kwargs):
    loss = step(self, *args, **kwargs)
    marks.setdefault("first_step", (time.perf_counter() - marks["start"], read[0]))
    return loss

def counted_getitems(self, keys):
    read[0] += len(keys)
    return getitems(self, keys)

def counted_hand_out(self, start, windows):
    for window in hand_out(self, start, windows):
        read[0] += 1
        yield window

PretrainTrainer.train, PretrainTrainer.training_step = timed_train, timed_step
datasets.Dataset.__getitems__, WindowStream._hand_out = counted_getitems, counted_hand_out
sys.argv = ["pre_train_t5.py", *sys.argv[1:]]
runpy.run_path("pre_train_t5.py", run_name="__main__")
print("FIRST_STEP " + json.dumps(marks["first_step"]))
"""


def require(relative_path):
    path = SHARED_DATA / relative_path
    if not path.exists():
        raise SystemExit(f"bench/resume.py needs {path} (../shared/data beside the repository)")
    return path


def run_flags(output_dir, train_file, **overrides):
    """A seconds-long t5-tiny pre-training run on real text with the real T5 tokenizer."""
    values = {"output_dir": output_dir, "model_size": "t5-tiny", "tokenizer_name_or_path": str(require("t5_spiece")),
              "train_files": [train_file], "input_length": 64, "per_device_train_batch_size": 4,
              "per_device_eval_batch_size": 16, "max_eval_samples": 32, "learning_rate": 1e-2, "logging_steps": 1,
              "eval_strategy": "no", "save_strategy": "no", "use_cpu": True, "seed": 3, "report_to": "none",
              "disable_tqdm": True, **overrides}
    argv = []
    for key, value in values.items():
        argv += [f"--{key}", *map(str, value)] if isinstance(value, list) else [f"--{key}", str(value)]
    return argv


def pre_train(argv, timed=False):
    """Runs pre_train_t5.py in a child process (one torch thread: the fastest and least noisy here); timed=True
    returns (seconds to the first step, data read) from its probes."""
    command = [sys.executable, "-c", TIMED_RUN, *argv] if timed else [sys.executable, "pre_train_t5.py", *argv]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    if result.returncode:
        raise SystemExit(f"pre_train_t5.py failed:\n{result.stderr[-3000:]}")
    if timed:
        line = next(line for line in result.stdout.splitlines() if line.startswith("FIRST_STEP "))
        return tuple(json.loads(line.removeprefix("FIRST_STEP ")))
    return None


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
    checkpointing.write_manifest(target)


def stream_position(argv, window):
    """Where window `window` of the run's training stream starts: the position a real run saves there."""
    _, data_args, span_args, _, training_args = parsing.parse_flags(PRETRAIN_FLAG_CLASSES, argv)
    tokens_length, _ = compute_input_and_target_lengths(span_args.input_length, span_args.noise_density,
                                                        span_args.mean_noise_span_length)
    tokenizer = load_tokenizer(str(require("t5_spiece")))
    train, _, _ = corpus.build_pretraining_datasets(data_args, tokenizer, tokens_length, training_args)
    for row in train:
        train.forget_before(row["window_index"])
        if row["window_index"] == window:
            return train.position(window)
    raise SystemExit(f"the stream has fewer than {window + 1} windows")


def bench_map_style(tmp, corpus):
    base = Path(tmp) / "map_base"
    run = dict(save_strategy="steps", report_to="none")
    pre_train(run_flags(str(base), corpus, max_steps=STEPS[0], save_steps=STEPS[0], **run))
    state = json.loads((base / f"checkpoint-{STEPS[0]}" / "trainer_state.json").read_text())
    steps_per_epoch = round(state["global_step"] / state["epoch"])  # epoch is steps / steps per epoch
    results = []
    for step in STEPS:
        out = Path(tmp) / f"map_resume{step}"
        fake_checkpoint(base / f"checkpoint-{STEPS[0]}", out, step, steps_per_epoch)
        results.append(pre_train(run_flags(str(out), corpus, max_steps=step + 1, resume_from_checkpoint="auto",
                                           **run), timed=True))
    return results


def bench_streaming(tmp):
    def run(out, **extra):
        books = sorted(str(p) for p in require("gutenberg").glob("*.txt"))
        return run_flags(str(Path(tmp) / out), books[0], train_files=books, streaming=True,
                         save_strategy="steps", report_to="none", **extra)

    pre_train(run("stream_base", max_steps=STEPS[0], save_steps=STEPS[0]))
    saved = Path(tmp) / "stream_base" / f"checkpoint-{STEPS[0]}"
    batch = 4  # run_flags' per_device_train_batch_size, one process
    results = []
    for step, with_position in ((STEPS[0], True), (STEPS[1], True), (STEPS[1], False)):
        out = Path(tmp) / f"stream_resume{step}_{with_position}"
        position = json.loads((saved / stream_resume.POSITION_FILE).read_text()) if step == STEPS[0] else \
            stream_position(run("position", max_steps=step), step * batch)
        fake_checkpoint(saved, out, step, stream_position=position if with_position else None)
        results.append(pre_train(run(out.name, max_steps=step + 1, resume_from_checkpoint="auto"), timed=True))
    return results


def main():
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
