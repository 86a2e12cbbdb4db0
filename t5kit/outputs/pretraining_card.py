"""The model card of a pre-training run (span corruption, UL2 or prefix-LM): its results, data and objective sections
and the span-filling (or text-continuing) usage example; model_card.py holds what every card shares.

    card = pretraining_card.build_card(run, summary, model, tokenizer, trainer, objective)   # pre_train_t5.py
"""
import shlex
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from t5kit.outputs.model_card import (
    CARD_SECTION,
    PIPELINE_TAG,
    base_model,
    card_name,
    flags_table,
    hf_training_sections,
    markdown_table,
    metric_text,
    model_location,
    model_table,
    render,
    reproduce_commands,
    usage_python,
    versions_list,
)
from t5kit.outputs.run_folder import LOSS_CURVE_FILE
from t5kit.outputs.run_logging import secret_values

SPAN_FILLING_EXAMPLE = "The <extra_id_0> walks in <extra_id_1> park."
PREFIX_EXAMPLE = "The dog walks in the"  # a prefix-LM model continues a text; it never saw a sentinel


def build_card(run, summary, model, tokenizer, trainer, objective) -> ModelCard:
    """The card of a pre-training run; summary: what metrics.json holds; objective: data/objectives.py's, which
    says what its section holds."""
    record, data = run.record, summary["data"]
    title = objective.title
    derived, secrets = record["derived"], secret_values()
    corpus = record.get("dataset_name") or ", ".join(Path(path).name for path in record["train_files"])
    hub_corpus = [record["dataset_name"]] if record.get("dataset_name") else []
    validation = ", ".join(Path(p).name for p in record.get("validation_files") or []) or \
        f"{record['validation_split_percentage']} % of the training documents, held out"
    results = [EvalResult(task_type=PIPELINE_TAG, task_name=title,
                          dataset_type=record.get("dataset_name") or "text", dataset_name=corpus,
                          dataset_config=record.get("dataset_config_name"), dataset_split="validation",
                          metric_type=name, metric_name=label, metric_value=summary[f"eval_{name}"])
               for name, label in (("loss", "Loss"), ("content_accuracy", "Content accuracy"),
                                  ("content_loss", "Content loss"), ("token_accuracy", "Token accuracy"))
               if f"eval_{name}" in summary]
    card_data = ModelCardData(
        model_name=card_name(record), library_name="transformers", pipeline_tag=PIPELINE_TAG,
        tags=["t5", PIPELINE_TAG, record["objective"].replace("_", "-"), "t5kit"],
        datasets=hub_corpus or None,
        base_model=base_model(record), metrics=[r.metric_type for r in results] or None,
        eval_results=results or None, **{CARD_SECTION: {"script": run.script, "tasks": [],
                                                        "max_source_length": record["input_length"]}})
    data_rows = [("training data", corpus), ("validation data", validation)]
    data_rows += [(name.replace("_", " "), f"{value:,}" if isinstance(value, int) else
                   f"{value:.4g}" if isinstance(value, float) else value)  # floats: the padding shares
                  for name, value in data.items() if value is not None]
    hyperparameters, training_results = hf_training_sections(trainer)
    where = model_location(record)
    continues = objective.continues_text  # a model that never saw a sentinel continues a text
    use_text, example, files = (
        ("It continues the start of a text", PREFIX_EXAMPLE,
         "--input_file starts.txt --output_file continued.jsonl   # a text's start a line -> its continuation")
        if continues else
        ("It fills masked spans", SPAN_FILLING_EXAMPLE,
         "--input_file spans.txt --output_file filled.jsonl   # lines with <extra_id_N> sentinels -> the filled text"))
    return render(
        card_data, title=card_name(record), loss_curve=LOSS_CURVE_FILE,
        summary=(f"A T5 model pre-trained with {title} on {corpus} by t5kit's `{run.script}`: "
                 f"{derived['parameters'] / 1e6:.2f}M parameters, {data.get('tokens_seen') or 0:,} tokens seen in "
                 f"{trainer.state.global_step} optimizer steps. {use_text}; fine-tune it for a task."),
        results=markdown_table(("split", "metric", "value"),
                               [("validation", r.metric_name, metric_text(r.metric_value)) for r in results]
                               + [("train", "loss (mean)", metric_text(summary.get("train_loss")))]),
        model_table=model_table(model, tokenizer, record),
        data_table=markdown_table(("item", "value"), data_rows),
        objective=objective_text(record, objective),
        flags_table=flags_table(record, trainer.state.global_step), hyperparameters=hyperparameters,
        training_results=training_results,
        usage_python=usage_python(where, example, derived["target_length"], keep_sentinels=not continues),
        usage_command=f"python predict_t5.py --model_name_or_path {shlex.quote(where)} {files}",
        reproduce=reproduce_commands(run, secrets), versions=versions_list(record))


def objective_text(record, objective) -> str:
    """The objective section: what the objective says of itself (data/objectives.py), and the embeddings' start."""
    text, table = objective.card_section()
    start = ("\n\nThe embeddings started from word vectors counted from the training corpus (PPMI + SVD, "
             "`--init_embeddings word_vectors`), not from random init." if record.get("init_embeddings") ==
             "word_vectors" else "")
    return text + (f"\n\n{markdown_table(*table)}" if table else "") + start
