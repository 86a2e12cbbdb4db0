"""Text-to-text fine-tuning and evaluation of T5: one task, a multi-task mixture, or a task declared in YAML.

    python fine_tune_t5.py configs/finetune_rte_quickstart.yaml                      # offline, CPU, minutes
    python fine_tune_t5.py configs/glue/sst2.yaml --model_name_or_path google-t5/t5-small   # hub data
    python fine_tune_t5.py --do_train false --model_name_or_path runs/finetune_rte_quickstart \\
        --dataset_name rte --data_dir ../shared/data/glue/RTE --output_dir runs/rte_eval   # evaluate only
    python fine_tune_t5.py configs/glue/base.yaml --tasks glue/sst2,glue/rte,glue/cola --data_dir ../shared/data/glue \\
        --model_name_or_path runs/quickstart --output_dir runs/glue_mix                    # multi-task
    python fine_tune_t5.py configs/finetune_rte_quickstart.yaml --peft lora --lora_r 8 --lora_target_modules q,v \\
        --merge_adapters true --output_dir runs/rte_lora                                  # LoRA adapters

Outputs (rank 0): config.yaml, out.log, metrics.json (per-task metrics, their average, data counts), a predictions file
per split, the leaderboard files of GLUE and SuperGLUE test splits (--do_predict: glue_submission/<Task>.tsv,
superglue_submission/<Task>.jsonl), loss_curve.png, the best model and its model card (README.md); with
--push_to_hub, the model, card and record uploaded to --hub_model_id.
"""
import logging
import sys

from transformers import set_seed

from t5kit import cli
from t5kit.config import parsing
from t5kit.config.script_flags import FINETUNE_FLAG_CLASSES
from t5kit.data import task_scoring, task_splits
from t5kit.data.task_mixture import build_train_dataset
from t5kit.model import building, compiled_generation, lora, packed_training
from t5kit.optim import param_groups
from t5kit.outputs import (
    finetuning_card,
    hub_upload,
    model_card,
    run_folder,
    run_lock,
    run_logging,
    run_record,
    wandb_server,
)
from t5kit.outputs.atomic_files import give_weights_default_modes, write_json
from t5kit.outputs.loss_plot import plot_loss_curve
from t5kit.outputs.predictions import write_leaderboard_file, write_predictions
from t5kit.train import (
    best_model_metric,
    callbacks,
    padding_report,
    preemption,
    private_api,
    resume,
)
from t5kit.train.task_trainer import (
    AVERAGE_KEY,
    TaskCollator,
    TaskTrainer,
    predict_splits,
)

logger = logging.getLogger(__name__)
TRAIN_BATCHES_KEY = "train_batches"  # metrics.json's data: the training batches' padding (and packed examples)
MIXED_PRECISION_PAD_MULTIPLE = 8  # tensor cores want dimensions in multiples of 8 under bf16/fp16


@run_lock.released_at_end  # a refused or finished run leaves no lock file
def main(argv=None):
    # 1. Flags, the tasks and the splits they need, and the metric that picks the best model: all settled before
    # any model or data is loaded. The run record is taken then, and no flag changes after it.
    argv = sys.argv[1:] if argv is None else list(argv)
    model_args, data_args, training_args = flags = parsing.parse_flags(FINETUNE_FLAG_CLASSES, argv)
    task_data = data_args.task_data(model_args.cache_dir)
    tasks = task_splits.resolve_run_tasks(data_args.task_selection())  # --tasks, then the held-out --eval_tasks
    plans = task_splits.plan_splits(tasks, task_data, training_args.do_train, training_args.do_eval,
                                    training_args.do_predict)
    best_model_metric.turn_off_evaluation_without_splits(training_args, plans)
    best_metric = best_model_metric.choose_best_model_metric(training_args, plans)
    record = run_record.flag_values(flags)
    packing = packed_training.Packing(training_args.packing)

    # 2. Logging (and a warning where transformers' private hooks were not tested: train/private_api.py)
    run_logging.setup_logging(training_args)
    private_api.warn_on_untested_versions()
    hub_upload.warn_if_no_token(training_args)
    wandb_server.check_before_run(training_args.report_to)  # W&B online: its server answers, in seconds
    task_scoring.check_label_scoring(data_args.label_scoring, tasks)
    if best_metric and training_args.metric_for_best_model_from_task:
        logger.info("--metric_for_best_model defaults to %s (%s)", best_metric,
                    "the average over splits" if best_metric == AVERAGE_KEY else "the task's metric_to_optimize")

    # 3. Output dir: the folder's lock (outputs/run_lock.py), then the point to resume from (checkpoint, skip count),
    # found once: refuse to clobber a previous run before spending any time; a finished one is left as it was found.
    resume_point = resume.claim_output_dir(training_args)
    if resume_point.finished:
        return {}

    # 4. Seed, before the model is built so that it controls a random initialisation.
    set_seed(training_args.seed)

    # 5. Tokenizer, model (load_pretrained_t5 refuses a folder that is not an encoder-decoder); --peft lora wraps
    # it in adapters, after it is sized to the tokenizer and before the optimizer sees its parameters.
    tokenizer, model = building.load_tokenizer_and_model(model_args, training_args.use_cpu,
                                                         activation_dtype=training_args.activation_dtype,
                                                         fp16=training_args.fp16)
    if training_args.peft:
        model = lora.apply_lora(model, training_args.lora_r, training_args.lora_alpha, training_args.lora_dropout,
                                training_args.lora_target_modules)
    resume.check_checkpoint_fits(resume_point.checkpoint, model)
    packing.prepare_model(model)  # packed rows need T5's attention (eager, sdpa, t5_flex): LongT5 cannot take them
    optimizer = param_groups.create_optimizer(model, training_args)  # None: Trainer builds its default

    # 6. Data: rows -> "prefix field: value ..." -> ids; unknown labels, missing columns, empty splits refused.
    splits = task_splits.build_task_splits(plans, task_data, tokenizer, training_args.seed,
                                           training_args.main_process_first)
    train_dataset, mixing_rates = build_train_dataset(splits["train"], data_args.mixture_cap,
                                                      data_args.mixture_temperature, training_args.seed)
    # Saved with the model, so that a plain model.generate() decodes as far as evaluation does (+1: the decoder
    # start token counts towards max_length).
    model.generation_config.max_length = 1 + max(split.max_target_length for role in splits.values()
                                                 for split in role)
    # 6b. --packing: training batches of B rows, each holding whole examples in a keyed random order (evaluation and
    # prediction stay unpacked). A row then carries several examples' tokens.
    packing.pack_task_examples(
        train_dataset, data_args.max_source_length, max((split.max_target_length for split in splits["train"]),
                                                         default=0),
        training_args.per_device_train_batch_size,
        training_args.data_seed if training_args.data_seed is not None else training_args.seed,
        tokenizer.pad_token_id, model.config.decoder_start_token_id)
    tokens_per_example = packing.tokens_per_example(
        task_splits.mean_tokens_per_example(splits["train"] or splits["eval"] or splits["predict"]))
    derived = run_record.derived_values(training_args, tokens_per_example, building.count_parameters(model),
                                        model.config.dropout_rate,
                                        trainable_parameters=lora.trainable_parameters(model), **packing.derived(),
                                        evaluation=task_scoring.evaluation_by_split(data_args.label_scoring, plans))
    run_logging.log_run_summary(record, derived)

    # 7. Collator: each batch padded to its own longest row (dynamic padding; labels padded with -100).
    mixed_precision = training_args.bf16 or training_args.fp16
    collator = TaskCollator(tokenizer, model=model,
                            pad_to_multiple_of=MIXED_PRECISION_PAD_MULTIPLE if mixed_precision else None)

    # 8. Trainer. The run record and out.log are written only now, once every input has been checked, so a refused
    # run leaves the output folder as it was.
    record, trainer_args = run_record.start_run_outputs(training_args, record, derived, resume_point.checkpoint)
    trainer = TaskTrainer(
        model=model, args=trainer_args, train_dataset=train_dataset, eval_splits=splits["eval"],
        data_collator=collator, processing_class=tokenizer, label_scoring=data_args.label_scoring,
        optimizers=(optimizer, None), resume_point=resume_point, packed_batches=packing.batches,
        callbacks=[callbacks.ThroughputCallback(derived["tokens_per_optimizer_step"]),
                   callbacks.WandbConfigCallback(record), callbacks.EvalLogCallback(), callbacks.RunLogCallback(),
                   preemption.PreemptionCallback(), callbacks.CollatorEpochCallback(*packing.epoch_followers())])
    if data_args.compile:  # generated evaluation and test predictions (model/compiled_generation.py)
        compiled_generation.install(trainer.model, training_args.per_device_eval_batch_size,
                                    data_args.max_source_length)

    # 9. Train (best checkpoint by best_metric), evaluate, predict, write outputs (rank 0 only writes), then push
    # them if asked: a failed push is one error line with everything already saved.
    results = {}
    if training_args.do_train:
        train_result = trainer.train(resume_from_checkpoint=resume_point.checkpoint)
        trainer.save_model()
        results.update(train_result.metrics)
    evaluation = predict_splits(trainer, splits["eval"], "eval")
    prediction = predict_splits(trainer, splits["predict"], "predict")
    results.update(evaluation["metrics"], **prediction["metrics"])
    trainer.log_metrics("all", results)
    if trainer.is_world_process_zero():
        summary = write_run_outputs(trainer, data_args, splits, evaluation, prediction, results, best_metric,
                                    mixing_rates)
        if training_args.do_train:  # an evaluate-only run saves no model to describe or push
            run = model_card.RunFacts("fine_tune_t5.py", argv, record)
            model_card.write_model_card(training_args.output_dir, finetuning_card.build_card(
                run, summary, trainer.model, tokenizer, trainer, tasks, splits["eval"], packing.card_note()))
        if training_args.merge_adapters:  # after the card and outputs: merging changes the model
            merged = lora.save_merged_model(trainer.model, tokenizer,
                                            f"{training_args.output_dir}/{run_folder.MERGED_MODEL_DIR}")
            give_weights_default_modes(merged)  # as readable as the rest of the folder (safetensors writes 0600)
        if training_args.push_to_hub:
            hub_upload.push_run_folder(training_args, f"End of training (fine_tune_t5.py, step "
                                                      f"{trainer.state.global_step})")
    run_logging.close_run_log()
    return results


def write_run_outputs(trainer, data_args, splits, evaluation, prediction, results, best_metric, mixing_rates):
    """Predictions files, leaderboard files, metrics.json and loss_curve.png next to the saved model; returns what
    metrics.json holds."""
    out = trainer.args.output_dir
    written = []
    for role, outcome in (("eval", evaluation), ("predict", prediction)):
        for split in splits[role]:
            written.append(write_predictions(out, split, outcome["texts"][split.key], data_args.predictions_format))
            if role == "predict" and data_args.leaderboard_files:
                written.append(write_leaderboard_file(out, split, outcome["texts"][split.key]))
    summary = {
        **results,
        "per_task_metrics": evaluation["per_task"],
        "metric_for_best_model": best_metric,
        "best_metric": trainer.state.best_metric, "best_model_checkpoint": trainer.state.best_model_checkpoint,
        # how each split was predicted and scored: label_scoring (--label_scoring's rule), SNI's --sni_metric
        "evaluation": task_scoring.evaluation_by_split(data_args.label_scoring,
                                                       [split.plan for split in splits["eval"] + splits["predict"]]),
        "data": {**{f"{split.key}/{split.plan.split}": split.stats for role in splits.values() for split in role},
                 **({TRAIN_BATCHES_KEY: padding_report.data_counts(results)} if trainer.args.do_train else {})},
        "log_history": trainer.state.log_history,
    }
    if f"eval_{AVERAGE_KEY}" in results:
        summary[AVERAGE_KEY] = results[f"eval_{AVERAGE_KEY}"]
    if mixing_rates:
        summary["mixing_rates"] = mixing_rates
    write_json(f"{out}/{run_folder.METRICS_FILE}", summary)
    if trainer.args.do_train:
        plot_loss_curve(trainer.state.log_history, f"{out}/{run_folder.LOSS_CURVE_FILE}", best_metric)
        trainer.save_state()
    logger.info("wrote %s: config.yaml, metrics.json, out.log%s, %s", out, ", loss_curve.png, model, README.md "
                "(model card)" * trainer.args.do_train, ", ".join(str(path) for path in written if path))
    return summary


if __name__ == "__main__":
    cli.run_cli(main)
