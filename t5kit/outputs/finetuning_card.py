"""The model card of a fine-tuning run: per-task results in the model-index, the data table, each task's input and
target format, the predict_t5.py command for its tasks; model_card.py holds what every card shares.

    card = finetuning_card.build_card(run, summary, model, tokenizer, trainer, tasks, eval_splits)  # step 9
"""
import shlex
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from t5kit.data.instructions import describe
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

MODEL_INDEX_TASK_TYPES = {"classification": "text-classification", "regression": "text-classification"}
BENCHMARK_TASK_TYPES = {"summarization": "summarization", "translation": "translation"}
TASK_TYPE_NAMES = {"text-classification": "Text Classification", "summarization": "Summarization",
                   "translation": "Translation", PIPELINE_TAG: "Text2Text Generation"}


def task_eval_results(task_vals, split_name, metrics) -> list:
    """model-index entries of one evaluated split: its metric_names (and combined score), exact values."""
    benchmark, task = task_vals["name"].split("/")
    hub = task_vals.get("hub_name")
    task_type = MODEL_INDEX_TASK_TYPES.get(task_vals["task_type"]) or BENCHMARK_TASK_TYPES.get(benchmark, PIPELINE_TAG)
    names = [name for name in (*task_vals["metric_names"], "combined_score") if name in metrics]
    return [EvalResult(task_type=task_type, task_name=TASK_TYPE_NAMES[task_type],
                       dataset_type=hub[0] if hub else "custom",
                       dataset_name=task_vals["name"], dataset_config=hub[1] if hub else None,
                       dataset_split=split_name, metric_type=name, metric_value=metrics[name]) for name in names]


def input_template(task_vals) -> str:
    """The shape of a task's inputs: "rte sentence1: ... sentence2: ..." (task_format.format_input's layout)."""
    columns = task_vals["text_column_name"]
    parts = ["..."] if isinstance(columns, str) else [f"{column}: ..." for column in columns]
    return " ".join([task_vals["prefix"], *parts] if task_vals["prefix"] else parts)


def custom_task_spec(task_vals) -> dict:
    """A YAML-declared task as build_task_vals takes it back (predict_t5.py rebuilds it from the card)."""
    keys = ("task_type", "prefix", "text_column_name", "label_column_name", "labels", "metric_names",
            "metric_to_optimize")
    return {key: list(task_vals[key]) if isinstance(task_vals[key], tuple) else task_vals[key] for key in keys}


def build_card(run, summary, model, tokenizer, trainer, tasks, eval_splits, packing_note="") -> ModelCard:
    """The card of a fine-tuning run; summary: what metrics.json holds; eval_splits: the TaskSplits evaluated;
    packing_note: how the training rows were packed (model/packed_training.Packing.card_note)."""
    record, secrets = run.record, secret_values()
    names = [task["name"] for task in tasks]
    evaluation = summary.get("evaluation", {})
    scoring = {split.task_vals["name"]: evaluation[split.key]["label_scoring"] for split in eval_splits
               if split.key in evaluation}  # how each evaluated task is predicted: rank or generate
    per_task = summary["per_task_metrics"]
    results, rows = [], []
    for split in eval_splits:
        metrics = per_task[split.key]
        results += task_eval_results(split.task_vals, split.plan.split, metrics)
        shown = [name for name in (*split.task_vals["metric_names"], "combined_score", "invalid_rate")
                 if name in metrics]
        rows += [(split.task_vals["name"], split.plan.split, name, metric_text(metrics[name])) for name in shown]
    if "average" in summary:
        rows.append(("all", "validation", "average", metric_text(summary["average"])))
    hub_datasets = list(dict.fromkeys(task["hub_name"][0] for task in tasks if task.get("hub_name")))
    custom = {task["name"]: custom_task_spec(task) for task in tasks if task["name"].startswith("custom/")}
    card_data = ModelCardData(
        model_name=card_name(record), library_name="transformers", pipeline_tag=PIPELINE_TAG,
        tags=["t5", PIPELINE_TAG, "t5kit", *dict.fromkeys(name.split("/")[0] for name in names)],
        datasets=hub_datasets or None, base_model=base_model(record),
        metrics=list(dict.fromkeys(r.metric_type for r in results)) or None, eval_results=results or None,
        **{CARD_SECTION: {"script": run.script, "tasks": names, "custom_tasks": custom,
                          "max_source_length": record["max_source_length"],
                          "max_target_length": record.get("max_target_length"),
                          "label_scoring": scoring,
                          "instruction_templates": record.get("instruction_templates", "none"),
                          "eval_tasks": [t["name"] for t in tasks if t.get("held_out")]}})
    data_rows = [(key, stats["rows"], stats["used"], stats["malformed"], stats["truncated_inputs"])
                 for key, stats in summary["data"].items() if "rows" in stats]  # not the training batches' padding
    per_step = summary.get("train_examples_per_step", record["derived"]["global_batch_size"])  # packed: measured
    examples_seen = round(trainer.state.global_step * per_step)
    first = eval_splits[0] if eval_splits else None
    example = first.inputs[0] if first else f"{tasks[0]['prefix']} ..."
    max_new_tokens = first.max_target_length if first else record.get("max_target_length") or 128
    objective = "\n".join(sni_objective(task, summary) if task.get("row_format") == "sni" else task_line(task)
                          for task in tasks)
    scoring_text = sni_scoring(summary) if all(task.get("row_format") == "sni" for task in tasks) else \
        scoring_sentence(scoring, record["label_scoring"], [task["name"] for task in tasks if task.get("row_options")])
    format_name = ("FLAN's instruction templates (google-research/FLAN flan/templates.py) on T5's text-to-text tasks"
                   if any(task.get("instructions") for task in tasks) else "T5's text-to-text format")
    hyperparameters, training_results = hf_training_sections(trainer)
    where = model_location(record)
    origin = f"`{record['model_name_or_path']}`" if record.get("model_name_or_path") else \
        f"a random `{record['model_size']}` init"
    return render(
        card_data, title=card_name(record), loss_curve=LOSS_CURVE_FILE,
        summary=(f"A T5 model fine-tuned text-to-text on {', '.join(names)} from {origin} by t5kit's `{run.script}`: "
                 f"{examples_seen:,} examples seen in {trainer.state.global_step} optimizer steps; the model kept "
                 f"is the best checkpoint by `{summary.get('metric_for_best_model')}`."),
        results=markdown_table(("task", "split", "metric", "value"), rows),
        model_table=model_table(model, tokenizer, record),
        data_table=markdown_table(("split", "rows read", "rows used", "malformed", "inputs truncated"), data_rows)
        + f"\n\nSource: {source_of(record)}. Inputs up to {record['max_source_length']} tokens."
        + (f" {packing_note}" if packing_note else ""),
        objective=f"{format_name}:\n\n{objective}\n\n{scoring_text}",
        flags_table=flags_table(record, trainer.state.global_step), hyperparameters=hyperparameters,
        training_results=training_results,
        usage_python=usage_python(where, example, max_new_tokens, keep_sentinels=False),
        usage_command=(f"python predict_t5.py --model_name_or_path {shlex.quote(where)} --input_file rows.jsonl "
                       f"--output_file predictions.jsonl   # --task defaults to {names[0]}"
                       + (" (the first task; pass --task for another)" if len(names) > 1 else "")
                       + ("\n# this model was fine-tuned on FLAN's templates, which predict_t5.py does not write: pass "
                          "--task none with inputs already in a template" if any(t.get("instructions") for t in tasks)
                          else "")),
        reproduce=reproduce_commands(run, secrets), versions=versions_list(record))


def scoring_sentence(scoring, label_scoring, row_options=()) -> str:
    """How the evaluated tasks were predicted; scoring: task name -> "rank" | "generate"; row_options: the tasks whose
    rows have their own options (FLAN's COPA and ReCoRD), which ranking ranks instead of label words."""
    ranked = [f"`{name}`" for name, how in scoring.items() if how == "rank"]
    per_row = [f"`{name}`" for name, how in scoring.items() if how == "rank" and name in row_options]
    generated = "Predictions are generated and must equal a label word exactly (anything else is wrong and invalid)."
    if not ranked:
        return generated
    why = f"--label_scoring {label_scoring}" if label_scoring else \
        "--label_scoring unset: held-out tasks in FLAN's templates are ranked, as FLAN scores them"
    own = f" ({', '.join(per_row)}: each row's own options)" if per_row else ""
    text = f"{', '.join(ranked)}: predicted by ranking the label words{own}, never invalid ({why})."
    return text + (f" Other tasks: {generated[0].lower()}{generated[1:]}" if len(ranked) < len(scoring) else "")


def source_of(record) -> str:
    files = [record.get(flag) for flag in ("train_file", "validation_file", "test_file") if record.get(flag)]
    if files:
        return ", ".join(f"`{Path(path).name}`" for path in files)
    if record.get("data_dir"):
        return "the official files in " + ", ".join(f"`{folder}`" for folder in record["data_dir"])
    return "the hub datasets above"


SNI_TASKS_SHOWN = 20  # a card names this many SNI tasks per split, then counts the rest


SNI_METRIC_TEXTS = {
    "official": "scored by the official evaluation (natural-instructions eval/automatic/evaluation.py, "
                "`--sni_metric official`): exact match and Rouge-L, each the best over all of the instance's outputs",
    "nanot5": "scored as nanoT5 reports it (`--sni_metric nanot5`, the metric of nanoT5's published figures): "
              "Rouge-L against one drawn output, round-tripped through the tokenizer and cut to the target length, "
              "with `evaluate`'s rouge (Porter stemmer), the mean over instances"}


def sni_metric_of(summary) -> str:
    return next((how["sni_metric"] for how in summary.get("evaluation", {}).values() if "sni_metric" in how),
                "official")


def sni_scoring(summary) -> str:
    return f"Predictions are generated and {SNI_METRIC_TEXTS[sni_metric_of(summary)]}."


def sni_objective(task_vals, summary) -> str:
    """The card's lines for Super-NaturalInstructions: its format and the tasks of each split (the split stats)."""
    lines = [f"- `{task_vals['name']}`: Super-NaturalInstructions in the Tk-Instruct format nanoT5 fine-tunes on "
             "(the task's definition, its positive examples, then the instance; target: one of the instance's "
             "outputs)"]
    for key, stats in summary["data"].items():
        if key.startswith(f"{task_vals['name'].split('/')[1]}/") and "tasks" in stats:
            names, split = stats["tasks"], key.rsplit("/", 1)[1]
            shown = ", ".join(f"`{name}`" for name in names[:SNI_TASKS_SHOWN])
            more = f" and {len(names) - SNI_TASKS_SHOWN} more" if len(names) > SNI_TASKS_SHOWN else ""
            lines.append(f"  - {split} tasks ({len(names)}): {shown}{more}")
    return "\n".join(lines)


def task_line(task) -> str:
    """One task of the card's objective: its input (T5's prefix layout or FLAN's templates) and target words."""
    held_out = ", held out: evaluated, never trained on" if task.get("held_out") else ""
    inputs = describe(task) or f"`{input_template(task)}`"
    targets = ("the right one of the row's own options" if task.get("row_options") else
               ", ".join(f"`{word}`" for word in task["labels"].values()) if task["labels"] else
               f"the text of `{task['label_column_name']}`")
    return f"- `{task['name']}` ({task['task_type']}{held_out}): input {inputs}, target {targets}"
