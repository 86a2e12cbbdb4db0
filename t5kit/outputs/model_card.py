"""OUTPUT_DIR/README.md: the model card, in the Hugging Face format the hub renders.

    card = model_card.pretraining_card(run, summary, model, tokenizer, trainer)      # pre_train_t5.py, step 9
    card = model_card.finetuning_card(run, summary, model, tokenizer, trainer, tasks, eval_splits)
    model_card.write_model_card(output_dir, card)

The YAML metadata is huggingface_hub's `ModelCardData` (library, pipeline tag, tags, datasets, base model and a
`model-index` of `EvalResult`s holding the final metrics exactly as metrics.json has them), rendered by
`ModelCard.from_template`; the hyperparameter list and the training-results table are transformers' own (what
`Trainer.create_model_card` writes). Our part: architecture and size, tokenizer, data, objective, the main flags,
per-task results, the loss curve, the exact `generate` call with the task prefix, the predict_t5.py command and the
command that reproduces the run. The metadata's `t5kit` section records the tasks (predict_t5.py's default
--task) and their input length.
"""
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData
from transformers.modelcard import extract_hyperparameters_from_trainer, make_markdown_table, parse_log_history

from t5kit.outputs.atomic_files import atomic_write
from t5kit.outputs.run_folder import CONFIG_FILE, LOSS_CURVE_FILE, METRICS_FILE, MODEL_CARD_FILE
from t5kit.outputs.run_log import mask_secrets, secret_values

CARD_SECTION = "t5kit"  # our metadata key: tasks, custom task specs, input length
# transformers' create_model_card tags sequence-to-sequence LMs so (modelcard.TASK_MAPPING).
PIPELINE_TAG = "text2text-generation"
MODEL_INDEX_TASK_TYPES = {"classification": "text-classification", "regression": "text-classification"}
BENCHMARK_TASK_TYPES = {"summarization": "summarization", "translation": "translation"}
TASK_TYPE_NAMES = {"text-classification": "Text Classification", "summarization": "Summarization",
                   "translation": "Translation", PIPELINE_TAG: "Text2Text Generation"}
SPAN_FILLING_EXAMPLE = "The <extra_id_0> walks in <extra_id_1> park."
PREFIX_EXAMPLE = "The dog walks in the"  # a prefix-LM model continues a text; it never saw a sentinel
DECIMALS = 4  # shown in the body; the metadata holds the exact values
FLAG_ROWS = ("learning_rate", "lr_scheduler_type", "warmup_steps", "warmup_ratio", "weight_decay", "optim",
             "per_device_train_batch_size", "gradient_accumulation_steps", "seed", "z_loss")

CARD_TEMPLATE = """---
{{ card_data }}
---

# {{ title }}

{{ summary }}

## Results

{{ results }}
{% if loss_curve %}
![loss curve]({{ loss_curve }})
{% endif %}
## Model

{{ model_table }}

## Data

{{ data_table }}

## Objective

{{ objective }}

## Training

{{ flags_table }}

Hyperparameters as transformers' `Trainer.create_model_card` lists them:

{{ hyperparameters }}
{% if training_results %}
### Training results

{{ training_results }}
{% endif %}
## How to use

```python
{{ usage_python }}
```

On a file (txt one example per line, jsonl/csv/tsv, or a task's official file), in length-sorted batches:

```bash
{{ usage_command }}
```

## Reproduce

```bash
{{ reproduce }}
```

`{{ config_file }}` holds every flag as the run used it; `{{ metrics_file }}` every number above.

## Framework versions

{{ versions }}
"""


@dataclass
class RunFacts:
    """What every card states about the run, gathered by the entry script."""
    script: str  # "pre_train_t5.py"
    argv: list  # the arguments as given
    record: dict  # config.yaml: the flags plus "derived"


def metric_text(value) -> str:
    """A metric as the body shows it: DECIMALS places (flags are shown as given)."""
    return f"{value:.{DECIMALS}f}" if isinstance(value, float) else str(value)


def markdown_table(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def card_name(record) -> str:
    return record.get("hub_model_id") or Path(record["output_dir"]).name


def model_location(record) -> str:
    """Where a user loads the model from: the hub repo it is pushed to, else the output folder."""
    return record["hub_model_id"] if record.get("push_to_hub") and record.get("hub_model_id") else record["output_dir"]


def base_model(record):
    """The hub model fine-tuned or continued from (a local folder is no hub id), as transformers infers it."""
    name = record.get("model_name_or_path")
    return name if name and not os.path.isdir(name) else None


def model_table(model, tokenizer, record) -> str:
    config, derived = model.config, record["derived"]
    origin = f"continued from `{record['model_name_or_path']}`" if record.get("model_name_or_path") else \
        f"random init from the `{record['model_size']}` preset" + (
            f" with `{record['config_overrides']}`" if record.get("config_overrides") else "")
    rows = [("architecture", f"T5ForConditionalGeneration, {origin}"),
            ("layers", f"{config.num_layers} encoder + {config.num_decoder_layers} decoder"),
            ("d_model / d_ff / d_kv / heads", f"{config.d_model} / {config.d_ff} / {config.d_kv} / {config.num_heads}"),
            ("feed-forward", config.feed_forward_proj), ("tied embeddings", "True" if config.tie_word_embeddings
             else "False" if record.get("model_name_or_path") else f"False (lm_head: `{record['lm_head_init']}` init)"),
            ("parameters", f"{derived['parameters']:,} ({derived['parameters'] / 1e6:.2f}M)"),
            ("tokenizer", f"`{record['tokenizer_name_or_path']}`: {len(tokenizer):,} tokens (embedding "
                          f"{config.vocab_size:,}), pad {tokenizer.pad_token_id}, EOS {tokenizer.eos_token_id}, "
                          "sentinels `<extra_id_0>` to `<extra_id_99>`"),
            ("precision", derived["precision"])]
    return markdown_table(("part", "value"), rows)


def flags_table(record, global_step) -> str:
    derived = record["derived"]
    # max_steps > 0 overrides the epochs (HF's rule), so only the one that decided the length is shown.
    length = "max_steps" if record.get("max_steps", -1) > 0 else "num_train_epochs"
    rows = [(f"`--{name}`", record[name]) for name in (*FLAG_ROWS, length) if name in record]
    rows += [("global batch", f"{derived['global_batch_size']} = per device x accumulation x "
                              f"{derived['world_size']} process(es)"),
             ("tokens per optimizer step", f"{derived['tokens_per_optimizer_step']:,}"),
             ("optimizer steps trained", global_step)]
    return markdown_table(("flag", "value"), rows)


def hf_training_sections(trainer):
    """transformers' hyperparameter list and its training-results table (empty when nothing was evaluated while
    training); its optimizer line spans lines, a list item may not."""
    hyperparameters = extract_hyperparameters_from_trainer(trainer)
    listed = "\n".join(f"- {name}: {' '.join(str(value).split())}" for name, value in hyperparameters.items())
    _, lines, _ = parse_log_history(trainer.state.log_history)
    return listed, make_markdown_table(lines).strip() if lines else ""


def reproduce_commands(run, secrets) -> str:
    out = run.record["output_dir"]
    typed = mask_secrets(f"python {run.script} {shlex.join(map(str, run.argv))}", secrets)
    processes = run.record["derived"]["world_size"]
    launcher = f"   # as launched, on {processes} processes (torchrun/accelerate launch)" if processes > 1 else ""
    return (f"{typed}{launcher}\n# or from the run record alone, into a new folder:\n"
            f"python {run.script} {shlex.quote(str(Path(out) / CONFIG_FILE))} --output_dir "
            f"{shlex.quote(out + '_rerun')}")


def usage_python(where, example, max_new_tokens, keep_sentinels) -> str:
    decode = "skip_special_tokens=False" if keep_sentinels else "skip_special_tokens=True"
    return (f"from transformers import AutoTokenizer, T5ForConditionalGeneration\n\n"
            f"tokenizer = AutoTokenizer.from_pretrained({where!r})\n"
            f"model = T5ForConditionalGeneration.from_pretrained({where!r})\n"
            f"inputs = tokenizer([{example!r}], return_tensors=\"pt\")\n"
            f"outputs = model.generate(**inputs, max_new_tokens={max_new_tokens}, num_beams=1)\n"
            f"print(tokenizer.batch_decode(outputs, {decode}))")


def versions_list(record) -> str:
    return "\n".join(f"- {name} {version}" for name, version in record["derived"]["versions"].items() if version)


def render(card_data, **sections) -> ModelCard:
    return ModelCard.from_template(card_data, template_str=CARD_TEMPLATE, config_file=CONFIG_FILE,
                                   metrics_file=METRICS_FILE, **sections)


OBJECTIVE_NAMES = {"span_corruption": "Span corruption (T5)", "ul2": "UL2 (mixture of denoisers)",
                   "prefix_lm": "Prefix-LM (T5)"}  # by --objective


def pretraining_card(run, summary, model, tokenizer, trainer) -> ModelCard:
    """The card of a pre-training run (span corruption, UL2 or prefix-LM); summary: what metrics.json holds."""
    record, data = run.record, summary["data"]
    objective = OBJECTIVE_NAMES[record["objective"]]
    derived, secrets = record["derived"], secret_values()
    corpus = record.get("dataset_name") or ", ".join(Path(path).name for path in record["train_files"])
    hub_corpus = [record["dataset_name"]] if record.get("dataset_name") else []
    validation = ", ".join(Path(p).name for p in record.get("validation_files") or []) or \
        f"{record['validation_split_percentage']} % of the training documents, held out"
    results = [EvalResult(task_type=PIPELINE_TAG, task_name=objective,
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
    data_rows += [(name.replace("_", " "), f"{value:,}" if isinstance(value, int) else value)
                  for name, value in data.items() if value is not None]
    hyperparameters, training_results = hf_training_sections(trainer)
    where = model_location(record)
    # Prefix-LM alone never saw a sentinel: its card shows continuing a text. UL2 mixes in span corruption.
    continues = record["objective"] == "prefix_lm"
    use_text, example, files = (
        ("It continues the start of a text", PREFIX_EXAMPLE,
         "--input_file starts.txt --output_file continued.jsonl   # a text's start a line -> its continuation")
        if continues else
        ("It fills masked spans", SPAN_FILLING_EXAMPLE,
         "--input_file spans.txt --output_file filled.jsonl   # lines with <extra_id_N> sentinels -> the filled text"))
    return render(
        card_data, title=card_name(record), loss_curve=LOSS_CURVE_FILE,
        summary=(f"A T5 model pre-trained with {objective} on {corpus} by t5kit's `{run.script}`: "
                 f"{derived['parameters'] / 1e6:.2f}M parameters, {data.get('tokens_seen') or 0:,} tokens seen in "
                 f"{trainer.state.global_step} optimizer steps. {use_text}; fine-tune it for a task."),
        results=markdown_table(("split", "metric", "value"),
                               [("validation", r.metric_name, metric_text(r.metric_value)) for r in results]
                               + [("train", "loss (mean)", metric_text(summary.get("train_loss")))]),
        model_table=model_table(model, tokenizer, record),
        data_table=markdown_table(("item", "value"), data_rows),
        objective=objective_text(record),
        flags_table=flags_table(record, trainer.state.global_step), hyperparameters=hyperparameters,
        training_results=training_results,
        usage_python=usage_python(where, example, derived["target_length"], keep_sentinels=not continues),
        usage_command=f"python predict_t5.py --model_name_or_path {shlex.quote(where)} {files}",
        reproduce=reproduce_commands(run, secrets), versions=versions_list(record))


def objective_text(record) -> str:
    """The objective section: span corruption's settings, or each UL2/prefix-LM denoiser (config/pretrain_arguments.py
    fills them all)."""
    derived = record["derived"]
    shapes = f"inputs of {derived['input_length']} tokens, targets of {derived['target_length']} tokens"
    start = ("\n\nThe embeddings started from word vectors counted from the training corpus (PPMI + SVD, "
             "`--init_embeddings word_vectors`), not from random init." if record.get("init_embeddings") ==
             "word_vectors" else "")
    return objective_settings(record, derived, shapes) + start


def objective_settings(record, derived, shapes) -> str:
    if record["objective"] == "span_corruption":
        return (f"Span corruption (Raffel et al. 2020, sec. 3.1.4): windows of {derived['tokens_length']} tokens, "
                f"{record['noise_density']:.0%} of them in noise spans of mean length "
                f"{record['mean_noise_span_length']}, each span replaced by one sentinel in the input and the kept "
                f"text by sentinels in the target ({shapes}).")
    rows = [["" if value is None else value for value in (d["paradigm"], d.get("noise_density"),
             d.get("mean_noise_span_length"), f"{d['proportion']:.4g}", d.get("mode_token"))]
            for d in record["denoisers"]]
    anchor = ("UL2 (Tay et al. 2022): a mixture of denoisers, one per window" if record["objective"] == "ul2"
              else "Prefix-LM (T5's prefix_lm): each window split at a uniform point")
    return (f"{anchor}, windows of {derived['tokens_length']} tokens padded to fixed shapes ({shapes}).\n\n"
            + markdown_table(("paradigm", "noise density", "mean span", "proportion", "mode token"), rows))


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


def finetuning_card(run, summary, model, tokenizer, trainer, tasks, eval_splits) -> ModelCard:
    """The card of a fine-tuning run; summary: what metrics.json holds; eval_splits: the TaskSplits evaluated."""
    record, secrets = run.record, secret_values()
    names = [task["name"] for task in tasks]
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
                          "label_scoring": record["label_scoring"]}})
    data_rows = [(key, stats["rows"], stats["used"], stats["malformed"], stats["truncated_inputs"])
                 for key, stats in summary["data"].items()]
    examples_seen = trainer.state.global_step * record["derived"]["global_batch_size"]
    first = eval_splits[0] if eval_splits else None
    example = first.inputs[0] if first else f"{tasks[0]['prefix']} ..."
    max_new_tokens = first.max_target_length if first else record.get("max_target_length") or 128
    objective = "\n".join(
        f"- `{task['name']}` ({task['task_type']}): input `{input_template(task)}`, target "
        + (", ".join(f"`{word}`" for word in task["labels"].values()) if task["labels"] else
           "the text of " + f"`{task['label_column_name']}`") for task in tasks)
    scoring = ("Classification tasks are predicted by ranking the label words (`--label_scoring rank`)."
               if record["label_scoring"] == "rank" else "Predictions are generated and must equal a label word "
               "(anything else counts as wrong).")
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
        + f"\n\nSource: {source_of(record)}. Inputs up to {record['max_source_length']} tokens.",
        objective=f"T5's text-to-text format:\n\n{objective}\n\n{scoring}",
        flags_table=flags_table(record, trainer.state.global_step), hyperparameters=hyperparameters,
        training_results=training_results,
        usage_python=usage_python(where, example, max_new_tokens, keep_sentinels=False),
        usage_command=(f"python predict_t5.py --model_name_or_path {shlex.quote(where)} --input_file rows.jsonl "
                       f"--output_file predictions.jsonl   # --task defaults to {names[0]}"
                       + (" (the first task; pass --task for another)" if len(names) > 1 else "")),
        reproduce=reproduce_commands(run, secrets), versions=versions_list(record))


def source_of(record) -> str:
    files = [record.get(flag) for flag in ("train_file", "validation_file", "test_file") if record.get(flag)]
    if files:
        return ", ".join(f"`{Path(path).name}`" for path in files)
    if record.get("data_dir"):
        return "the official files in " + ", ".join(f"`{folder}`" for folder in record["data_dir"])
    return "the hub datasets above"


def write_model_card(output_dir, card) -> Path:
    """README.md, written atomically. The card is built from secret-free values (config.yaml's); masking as
    out.log does is the safety net for the command line it quotes."""
    path = Path(output_dir) / MODEL_CARD_FILE
    with atomic_write(path) as handle:
        handle.write(mask_secrets(str(card), secret_values()))
    return path


def read_card_section(model_dir) -> dict:
    """The card's t5kit section ({} when the folder has no card or the card has none): predict_t5.py's defaults."""
    path = Path(model_dir) / MODEL_CARD_FILE
    if not path.is_file():
        return {}
    return dict(ModelCard.load(path).data.to_dict().get(CARD_SECTION) or {})
