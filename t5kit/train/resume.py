"""Step 3 of every entry script: the output folder checked, and the one point the run resumes from, found once.

    resume_point = resume.claim_output_dir(training_args)     # the folder's lock, then find_resume_point
    if resume_point.finished: ...                              # nothing left to do: the entry script returns
    trainer = PretrainTrainer(..., resume_point=resume_point)  # each mixin takes its part at construction
    trainer.train(resume_from_checkpoint=resume_point.checkpoint)  # HF restores the rest from the folder

Only complete checkpoints count (checkpointing.find_problem). What a resumed run restores, and who restores it:
- weights, optimizer, scheduler, RNG states, TrainerState (global step, epoch, log history, best checkpoint):
  HF's Trainer.train, from `checkpoint`; the span-corruption collator's epoch follows the restored state.epoch
  (callbacks.CollatorEpochCallback), and a stream's windows carry their own epoch;
- the stream position of a --streaming run (`stream_position`): StreamResumeMixin puts the stream there and has
  HF skip nothing;
- the --nan_policy skip count (`skipped_nonfinite_steps`): NonFiniteGuardMixin continues it;
- the checkpoint itself (`checkpoint`): SafeCheckpointMixin's rotation never deletes it.

A finished run stays finished: when the folder holds the outputs of a run (metrics.json, written last) and that run,
or its newest valid checkpoint, has reached the end this run's flags ask for (--max_steps; else
--num_train_epochs), `finished` says so and the entry script returns without touching the folder (what a SLURM
requeue that always passes `auto` needs). A run whose last checkpoint reached the end but which stopped before
writing metrics.json resumes from that checkpoint and writes its outputs.
"""
import dataclasses
import json
import logging
from pathlib import Path

from transformers.trainer import TRAINER_STATE_NAME

from t5kit.errors import UsageError
from t5kit.outputs import run_lock
from t5kit.outputs.run_folder import (
    ADAPTER_CONFIG_FILE,
    METRICS_FILE,
    asks_to_resume,
    check_folder_path,
    check_output_dir,
)
from t5kit.train import checkpointing
from t5kit.train.nonfinite_guard import SKIP_LOG_KEY
from t5kit.train.stream_resume import POSITION_FILE

logger = logging.getLogger(__name__)
# What a checkpoint's weights must agree on with the model built now (T5-family config names).
ARCHITECTURE_KEYS = ("model_type", "d_model", "d_ff", "d_kv", "num_heads", "num_layers", "num_decoder_layers",
                     "vocab_size", "feed_forward_proj", "tie_word_embeddings", "encoder_attention_type")
# state.epoch is a float progress counter (epoch + micro-batches done / micro-batches per epoch): an epoch-based run
# that ended is within rounding of --num_train_epochs, a run one micro-batch short is a whole 1/steps_in_epoch short.
EPOCH_TOLERANCE = 1e-6
TRAIN_SUMMARY_KEY = "train_runtime"  # in HF's last log entry of a train() call, the one with its final step


@dataclasses.dataclass(frozen=True)
class ResumePoint:
    """Where a run continues from (see module doc); ResumePoint() is a fresh start."""
    checkpoint: str | None = None  # a complete checkpoint-N folder
    global_step: int = 0  # the checkpoint's TrainerState (its trainer_state.json)
    epoch: float = 0.0
    stream_position: dict | None = None  # its stream_position.json (--streaming runs)
    skipped_nonfinite_steps: int = 0  # --nan_policy skip's count in its last logged line
    finished: str | None = None  # why there is nothing left to do, in one line; None: train


def find_resume_point(training_args) -> ResumePoint:
    """Refuses to clobber a previous run, then returns the point to resume from (ResumePoint() for a fresh start),
    `finished` set when the folder holds a run that already reached its end."""
    out, resume_flag = training_args.output_dir, training_args.resume_from_checkpoint
    check_folder_path(Path(out))
    # Only complete checkpoints count: 'auto' skips broken ones with a warning, a broken path is refused.
    point = read_resume_point(checkpointing.resolve_checkpoint(out, resume_flag))
    if asks_to_resume(resume_flag):
        finished = finished_run(out, point, training_args)
        if finished:
            return dataclasses.replace(point, finished=finished)
    check_output_dir(out, training_args.overwrite_output_dir, resume_flag, point.checkpoint)
    return point


def claim_output_dir(training_args) -> ResumePoint:
    """Step 3 of both training scripts: the folder's lock first (nothing in it is read while another run writes it),
    then the resume point. A finished run lets the lock go with the folder as it was found, its times included, and
    says so in one line; the entry script then returns."""
    lock = run_lock.hold(training_args)
    point = find_resume_point(training_args)
    if point.finished:
        run_lock.release_untouched(lock)
        logger.info(point.finished)
    return point


def read_resume_point(checkpoint) -> ResumePoint:
    """What `checkpoint` (a complete checkpoint folder, or None) holds for a resume."""
    if checkpoint is None:
        return ResumePoint()
    folder = Path(checkpoint)
    state = read_json(folder / TRAINER_STATE_NAME) or {}
    history = state.get("log_history", [])
    return ResumePoint(
        checkpoint=str(checkpoint), global_step=state.get("global_step", 0), epoch=state.get("epoch") or 0.0,
        stream_position=read_json(folder / POSITION_FILE),
        skipped_nonfinite_steps=next((entry[SKIP_LOG_KEY] for entry in reversed(history) if SKIP_LOG_KEY in entry), 0))


def read_json(path):
    return json.loads(Path(path).read_text()) if Path(path).is_file() else None


def finished_run(output_dir, point, training_args):
    """One line saying the run in output_dir has nothing left to do, or None. Its outputs must be written
    (metrics.json, the last thing a run writes), and it must have reached the end: its newest valid checkpoint,
    or, where the final checkpoint is absent (--save_strategy no, deleted, damaged), the final step metrics.json
    records (HF's train summary: the step and epoch the final model was saved at)."""
    try:
        summary = read_json(Path(output_dir) / METRICS_FILE)
    except ValueError:  # a damaged metrics.json: the outputs are not there to keep
        return None
    history = summary.get("log_history", []) if isinstance(summary, dict) else []
    ended = next((entry for entry in reversed(history) if TRAIN_SUMMARY_KEY in entry), None)
    if ended is None:  # no outputs, or those of an evaluation-only run
        return None
    for step, epoch, where in ((point.global_step, point.epoch, point.checkpoint),
                               (ended.get("step", 0), ended.get("epoch") or 0.0, METRICS_FILE)):
        end = reached_end(step, epoch, training_args)
        if where and end:
            return (f"--resume_from_checkpoint {training_args.resume_from_checkpoint}: {output_dir} holds a finished "
                    f"run ({where} is at step {step}, {end}); nothing to do. Raise --max_steps or "
                    "--num_train_epochs to train on, or pass --overwrite_output_dir true without "
                    "--resume_from_checkpoint to start over")
    return None


def reached_end(step, epoch, training_args):
    """Which end (step, epoch) has reached under this run's flags, in words, or None. --max_steps wins as in HF;
    otherwise the end is --num_train_epochs, compared with the epoch progress (the step count of an epoch depends
    on the data and batch, unknown before they are loaded)."""
    if training_args.max_steps > 0:
        return f"--max_steps {training_args.max_steps}" if step >= training_args.max_steps else None
    if epoch + EPOCH_TOLERANCE >= training_args.num_train_epochs:
        return f"epoch {epoch:g} of --num_train_epochs {training_args.num_train_epochs:g}"
    return None


def check_checkpoint_fits(checkpoint, model):
    """Refuses to resume from a checkpoint saved by another architecture (HF would fail mid-load with a long
    size-mismatch trace, after config.yaml is written), or with adapters where this run has none, or the reverse."""
    holds_adapters = bool(checkpoint) and (Path(checkpoint) / ADAPTER_CONFIG_FILE).is_file()
    if checkpoint and holds_adapters != hasattr(model, "peft_config"):
        kind = "LoRA adapters" if holds_adapters else "a full model"
        raise UsageError(f"--resume_from_checkpoint {checkpoint} holds {kind}, but this run "
                         f"{'fine-tunes the full model' if holds_adapters else 'trains LoRA adapters'}; resume with "
                         "that run's flags (its config.yaml, --peft) or start a new --output_dir")
    saved_config = Path(checkpoint or "") / "config.json"
    if not checkpoint or not saved_config.is_file():
        return
    saved = json.loads(saved_config.read_text())
    built = model.config.to_dict()
    differ = [f"{key}={saved[key]} (this run: {built.get(key)})" for key in ARCHITECTURE_KEYS
              if key in saved and saved[key] != built.get(key)]
    if differ:
        raise UsageError(f"--resume_from_checkpoint {checkpoint} holds another model: {', '.join(differ)}; resume "
                         "with that run's flags (its config.yaml) or start a new --output_dir")
