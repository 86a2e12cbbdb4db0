"""Span-corruption pre-training of T5 (random init from a size preset, or continue from a model).

    python pre_train_t5.py configs/quickstart.yaml                                   # tiny, offline, CPU
    python pre_train_t5.py configs/pretrain_wikitext2.yaml --max_steps 2000
    accelerate launch pre_train_t5.py configs/pretrain_c4_t5_base.yaml --learning_rate 5e-3
"""
import logging
import math
import sys

import numpy as np
from transformers import Seq2SeqTrainer, TrainerCallback, set_seed

import checkpointing
import data
import eval_log
import flags
import grouped_adafactor
import modeling
import nonfinite_guard
import output_dir
import param_groups
import run_logging
import stream_resume
from data_collator import DataCollatorForT5SpanCorruption, compute_input_and_target_lengths
from loss_plot import plot_loss_curve
from run_flags import ModelArguments, PretrainDataArguments, SpanCorruptionArguments, T5TrainingArguments

logger = logging.getLogger(__name__)
FLAG_CLASSES = (ModelArguments, PretrainDataArguments, SpanCorruptionArguments, T5TrainingArguments)
EVAL_METRIC = "token_accuracy"


class PretrainTrainer(checkpointing.SafeCheckpointMixin, nonfinite_guard.NonFiniteGuardMixin,
                      stream_resume.StreamResumeMixin, Seq2SeqTrainer):
    """Atomic checkpoints and save-and-exit on SIGTERM/SIGUSR1 (checkpointing.py), --nan_policy
    (nonfinite_guard.py), streams that resume where they stopped (stream_resume.py), and Adafactor's update in
    stacks of same-shaped parameters (grouped_adafactor.py)."""

    get_optimizer_cls_and_kwargs = staticmethod(grouped_adafactor.optimizer_cls_and_kwargs)


class CollatorEpochCallback(TrainerCallback):
    """New noise masks each epoch; state.epoch is restored on resume, so a resumed run draws the same ones."""

    def __init__(self, collator):
        self.collator = collator

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.collator.set_epoch(math.floor(state.epoch + 1e-6))  # state.epoch is a float progress counter


def predicted_token_ids(logits, labels):
    """Keeps only the argmax ids of eval logits, (B, target_length), so evaluation holds no vocab-sized arrays."""
    logits = logits[0] if isinstance(logits, tuple) else logits
    return logits.argmax(dim=-1)


def token_accuracy(eval_prediction):
    """Fraction of target tokens (span tokens, sentinels and EOS) the model predicts exactly."""
    predictions, labels = eval_prediction.predictions, eval_prediction.label_ids
    scored = labels != -100
    return {EVAL_METRIC: float(np.mean(predictions[scored] == labels[scored]))}


def main(argv=None):
    # 1. Flags: YAML configs, then command-line overrides, validated before anything is loaded.
    (model_args, data_args, span_args, training_args), resolved = flags.parse_flags(
        FLAG_CLASSES, sys.argv[1:] if argv is None else argv)
    tokens_length, target_length = compute_input_and_target_lengths(
        span_args.input_length, span_args.noise_density, span_args.mean_noise_span_length)

    # 2. Logging
    run_logging.setup_logging(training_args)

    # 3. Output dir, last checkpoint: refuse to clobber a previous run before spending any time.
    checkpoint = output_dir.prepare_output_dir(training_args)

    # 4. Seed, before the model is built so that it controls the initialisation.
    set_seed(training_args.seed)

    # 5. Tokenizer, model
    tokenizer, model = modeling.load_tokenizer_and_model(model_args, training_args.use_cpu)
    output_dir.check_checkpoint_fits(checkpoint, model)
    optimizer = param_groups.create_optimizer(model, training_args)  # None: Trainer builds its default
    run_logging.log_run_summary(resolved, modeling.count_parameters(model), span_args.input_length + target_length,
                                training_args)
    logger.info("span corruption: windows of %d tokens -> inputs %d, targets %d", tokens_length,
                span_args.input_length, target_length)

    # 6. Data: documents -> token ids -> windows of exactly tokens_length.
    train_dataset, eval_dataset = data.build_pretraining_datasets(
        data_args, tokenizer, tokens_length, training_args, model_args.cache_dir, model_args.trust_remote_code)

    # 7. Collator: masks keyed by (seed, epoch, window), so every process count, GA and resume point agree.
    span_collator = DataCollatorForT5SpanCorruption(
        tokenizer, noise_density=span_args.noise_density, mean_noise_span_length=span_args.mean_noise_span_length,
        input_length=span_args.input_length, target_length=target_length, seed=training_args.seed)
    # Stream windows carry their id and epoch, for exact resume.
    collator = stream_resume.StreamPositionCollator(span_collator) if data_args.streaming else span_collator

    # 8. Trainer. The resolved flags are saved only now, once every input has been checked, so a refused run
    # leaves the output folder as it was.
    if training_args.should_save:
        output_dir.write_resolved_config(training_args.output_dir, resolved)
    tokens_per_step = run_logging.global_batch_size(training_args) * (span_args.input_length + target_length)
    trainer = PretrainTrainer(
        model=model, args=training_args, train_dataset=train_dataset, eval_dataset=eval_dataset,
        data_collator=collator, processing_class=tokenizer, compute_metrics=token_accuracy,
        preprocess_logits_for_metrics=predicted_token_ids,
        optimizers=(optimizer, None),
        callbacks=[run_logging.ThroughputCallback(tokens_per_step), run_logging.WandbConfigCallback(resolved),
                   eval_log.EvalLogCallback(), CollatorEpochCallback(span_collator)])

    # 9. Train, evaluate, write outputs (rank 0 only writes).
    train_result = trainer.train(resume_from_checkpoint=checkpoint)
    trainer.save_model()
    metrics = {**train_result.metrics, **trainer.evaluate()}
    trainer.log_metrics("all", metrics)
    if trainer.is_world_process_zero():
        write_run_outputs(trainer, metrics)
    return metrics


def write_run_outputs(trainer, metrics):
    """metrics.json, loss_curve.png and trainer state next to the saved model."""
    out = trainer.args.output_dir
    output_dir.write_json(f"{out}/{output_dir.METRICS_FILE}",
                          {**metrics, "log_history": trainer.state.log_history})
    plot_loss_curve(trainer.state.log_history, f"{out}/{output_dir.LOSS_CURVE_FILE}", EVAL_METRIC)
    trainer.save_state()
    logger.info("wrote %s: model, config.yaml, metrics.json, loss_curve.png", out)


if __name__ == "__main__":
    flags.run_cli(main)
