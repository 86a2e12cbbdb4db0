"""Pre-training of T5: span corruption, UL2's mixture of denoisers or prefix-LM (random init from a size preset, or
continue from a model).

    python pre_train_t5.py configs/quickstart.yaml                                   # tiny, offline, CPU
    python pre_train_t5.py configs/pretrain_wikitext2.yaml --max_steps 2000
    python pre_train_t5.py configs/quickstart.yaml --objective ul2 --output_dir runs/quickstart_ul2
    accelerate launch pre_train_t5.py configs/pretrain_c4_t5_base.yaml --learning_rate 5e-3
"""
import logging
import sys

from transformers import set_seed

from t5kit import cli
from t5kit.config import parsing, pretrain_arguments
from t5kit.config.script_flags import PRETRAIN_FLAG_CLASSES
from t5kit.data import corpus, objectives
from t5kit.model import building, packed_training, word_vectors
from t5kit.optim import param_groups
from t5kit.outputs import (
    hub_upload,
    model_card,
    pretraining_card,
    run_folder,
    run_lock,
    run_logging,
    run_record,
    wandb_server,
)
from t5kit.outputs.atomic_files import write_json
from t5kit.outputs.loss_plot import plot_loss_curve
from t5kit.train import (
    callbacks,
    padding_report,
    preemption,
    private_api,
    resume,
    stream_resume,
)
from t5kit.train.pretrain_trainer import (
    EVAL_METRIC,
    PretrainTrainer,
    SpanCorruptionMetrics,
    predicted_ids_and_losses,
    special_target_ids,
)

logger = logging.getLogger(__name__)


@run_lock.released_at_end  # a refused or finished run leaves no lock file
def main(argv=None):
    # 1. Flags: YAML configs, then command-line overrides, validated before anything is loaded; the run record is
    # taken from the validated dataclasses, and no flag changes after it.
    argv = sys.argv[1:] if argv is None else list(argv)
    model_args, data_args, span_args, objective_args, training_args = flags = parsing.parse_flags(
        PRETRAIN_FLAG_CLASSES, argv)
    record = run_record.flag_values(flags)
    # The shapes, computed once by the objective (data/objectives.py): the corpus is cut into windows of
    # tokens_length, the collator corrupts them into rows of row_shape (packed: shorter windows, several to a row).
    objective = objectives.build(pretrain_arguments.objective_spec(span_args, objective_args, training_args.packing))
    packing = packed_training.Packing(training_args.packing)

    # 2. Logging (and a warning where transformers' private hooks were not tested: train/private_api.py)
    run_logging.setup_logging(training_args)
    private_api.warn_on_untested_versions()
    hub_upload.warn_if_no_token(training_args)
    wandb_server.check_before_run(training_args.report_to)  # W&B online: its server answers, in seconds

    # 3. Output dir: the folder's lock (outputs/run_lock.py), then the point to resume from (checkpoint, stream
    # position, skip count), found once: refuse to clobber a previous run before spending any time; a finished one is
    # left as it was found.
    resume_point = resume.claim_output_dir(training_args)
    if resume_point.finished:
        return {}

    # 4. Seed, before the model is built so that it controls the initialisation.
    set_seed(training_args.seed)

    # 5. Tokenizer, model (model/precision.py: what it computes in under --bf16, --activation_dtype, --fp16)
    tokenizer, model = building.load_tokenizer_and_model(model_args, training_args.use_cpu, objective.mode_tokens,
                                                         training_args.activation_dtype, training_args.fp16)
    resume.check_checkpoint_fits(resume_point.checkpoint, model)
    packing.prepare_model(model)  # packed rows need T5's attention (eager, sdpa, t5_flex): LongT5 cannot take them
    optimizer = param_groups.create_optimizer(model, training_args)  # None: Trainer builds its default
    derived = run_record.derived_values(training_args, sum(objective.row_shape), building.count_parameters(model),
                                        model.config.dropout_rate, **objective.derived())
    run_logging.log_run_summary(record, derived)

    # 6. Data: documents -> token ids -> windows of exactly tokens_length.
    train_dataset, eval_dataset, corpus_counts = corpus.build_pretraining_datasets(
        data_args.corpus_spec(training_args.seed, model_args.cache_dir, model_args.trust_remote_code), tokenizer,
        objective.tokens_length, training_args.main_process_first)

    # 6b. Word-vector embeddings (--init_embeddings word_vectors), counted from the training windows before the first
    # step; a resumed run takes every weight from its checkpoint instead.
    if objective_args.init_embeddings == "word_vectors" and resume_point.checkpoint is None:
        rows = word_vectors.init_embeddings_from_windows(model, train_dataset["input_ids"])
        logger.info(f"embeddings: word vectors for {rows:,} ids, counted from {len(train_dataset):,} windows")

    # 7. Collator: masks (and UL2's denoiser per window) keyed by (seed, epoch, window), so every process count, GA
    # and resume point agree. Stream windows carry their id and epoch, for exact resume. --packing: a batch sampler
    # places whole windows into the B rows of each training batch, keyed by (seed, epoch, window ids); evaluation
    # stays unpacked (the collator above).
    objective_collator = objective.collator(tokenizer, training_args.seed)
    collator = stream_resume.StreamPositionCollator(objective_collator) if data_args.streaming else objective_collator
    packing.pack_windows(train_dataset, objective_collator, objective.row_shape,
                         training_args.per_device_train_batch_size, training_args.seed)

    # 8. Trainer. The run record and out.log are written only now, once every input has been checked, so a refused
    # run leaves the output folder as it was.
    record, trainer_args = run_record.start_run_outputs(training_args, record, derived, resume_point.checkpoint)
    trainer = PretrainTrainer(
        model=model, args=trainer_args, train_dataset=train_dataset, eval_dataset=eval_dataset,
        data_collator=collator, processing_class=tokenizer,
        compute_metrics=SpanCorruptionMetrics(special_target_ids(tokenizer)),
        preprocess_logits_for_metrics=predicted_ids_and_losses,
        optimizers=(optimizer, None), resume_point=resume_point, packed_batches=packing.batches,
        callbacks=[callbacks.ThroughputCallback(derived["tokens_per_optimizer_step"]),
                   callbacks.WandbConfigCallback(record), callbacks.EvalLogCallback(),
                   callbacks.CollatorEpochCallback(objective_collator, *packing.epoch_followers()),
                   callbacks.RunLogCallback(),
                   preemption.PreemptionCallback()])

    # 9. Train, evaluate, write outputs (rank 0 only writes), then push them if asked: a failed push is one error
    # line with everything already saved.
    train_result = trainer.train(resume_from_checkpoint=resume_point.checkpoint)
    trainer.save_model()
    metrics = {**train_result.metrics, **trainer.evaluate()}
    trainer.log_metrics("all", metrics)
    if trainer.is_world_process_zero():
        run = model_card.RunFacts("pre_train_t5.py", argv, record)
        write_run_outputs(trainer, metrics, run, corpus_counts, tokenizer, objective)
        if training_args.push_to_hub:
            hub_upload.push_run_folder(training_args, f"End of training (pre_train_t5.py, step "
                                                      f"{trainer.state.global_step})")
    run_logging.close_run_log()
    return metrics


def write_run_outputs(trainer, metrics, run, corpus_counts, tokenizer, objective):
    """metrics.json (with the data seen), loss_curve.png, trainer state and the model card next to the saved
    model."""
    out, derived = trainer.args.output_dir, run.record[parsing.DERIVED_KEY]
    windows_seen = trainer.state.global_step * derived["global_batch_size"]
    if "train_examples_per_step" in metrics:  # packed: a batch holds a variable number of windows
        windows_seen = round(trainer.state.global_step * metrics["train_examples_per_step"])
    data = {**corpus_counts, "windows_seen": windows_seen, "tokens_seen": windows_seen * derived["tokens_length"],
            **padding_report.data_counts(metrics)}
    summary = {**metrics, "data": data, "log_history": trainer.state.log_history}
    write_json(f"{out}/{run_folder.METRICS_FILE}", summary)
    plot_loss_curve(trainer.state.log_history, f"{out}/{run_folder.LOSS_CURVE_FILE}", EVAL_METRIC)
    trainer.save_state()
    model_card.write_model_card(out, pretraining_card.build_card(run, summary, trainer.model, tokenizer, trainer,
                                                                 objective))
    logger.info("wrote %s: model, config.yaml, metrics.json, loss_curve.png, README.md (model card), out.log", out)


if __name__ == "__main__":
    cli.run_cli(main)
