"""OUTPUT_DIR/README.md: the model card, in the Hugging Face format the hub renders. This module holds what every
card has (the template, the model, flags, usage and reproduce sections, writing and reading the card); each run
kind's own parts are in pretraining_card.py and finetuning_card.py.

    card = pretraining_card.build_card(run, summary, model, tokenizer, trainer)      # pre_train_t5.py, step 9
    card = finetuning_card.build_card(run, summary, model, tokenizer, trainer, tasks, eval_splits)
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

from huggingface_hub import ModelCard
from transformers.modelcard import extract_hyperparameters_from_trainer, make_markdown_table, parse_log_history

from t5kit.outputs.atomic_files import atomic_write
from t5kit.outputs.run_folder import CONFIG_FILE, METRICS_FILE, MODEL_CARD_FILE
from t5kit.outputs.run_logging import mask_secrets, secret_values

CARD_SECTION = "t5kit"  # our metadata key: tasks, custom task specs, input length
# transformers' create_model_card tags sequence-to-sequence LMs so (modelcard.TASK_MAPPING).
PIPELINE_TAG = "text2text-generation"
DECIMALS = 4  # shown in the body; the metadata holds the exact values
FLAG_ROWS = ("learning_rate", "lr_scheduler_type", "warmup_steps", "warmup_ratio", "weight_decay", "optim",
             "per_device_train_batch_size", "gradient_accumulation_steps", "seed", "z_loss",
             "activation_dtype")

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


def write_model_card(output_dir, card) -> Path:
    """README.md, written atomically. The card is built from secret-free values (config.yaml's); masking as
    out.log does is the safety net for the command line it quotes."""
    path = Path(output_dir) / MODEL_CARD_FILE
    with atomic_write(path) as handle:
        handle.write(mask_secrets(str(card), secret_values()))
    return path


EXPORT_HEADING = "## CTranslate2 export"


def add_export_section(model_dir, export_name, quantization) -> Path:
    """Adds (or replaces) the card's section on the run's CTranslate2 export (export_t5.py, step 6)."""
    path = Path(model_dir) / MODEL_CARD_FILE
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8").split(f"\n{EXPORT_HEADING}\n")[0].rstrip("\n")
    section = (f"\n\n{EXPORT_HEADING}\n\n`{export_name}/` holds this model for CTranslate2 ({quantization}; "
               f"`export_record.json` names the weights it was made from). Predict with it, or load it alone:\n\n"
               f"```bash\npython predict_t5.py --model_name_or_path {shlex.quote(str(model_dir))} --backend "
               f"ctranslate2 --input_file INPUTS --output_file OUT.jsonl\n```\n\n```python\nimport ctranslate2, "
               f"transformers\n\ntokenizer = transformers.AutoTokenizer.from_pretrained(\"{export_name}\")\n"
               f"translator = ctranslate2.Translator(\"{export_name}\")\n"
               f"tokens = tokenizer.convert_ids_to_tokens(tokenizer.encode(\"...\"))\n"
               f"result = translator.translate_batch([tokens])[0].hypotheses[0]\n"
               f"print(tokenizer.decode(tokenizer.convert_tokens_to_ids(result)))\n```\n")
    with atomic_write(path) as handle:
        handle.write(text + section)
    return path


def read_card_section(model_dir) -> dict:
    """The card's t5kit section ({} when the folder has no card or the card has none): predict_t5.py's defaults."""
    path = Path(model_dir) / MODEL_CARD_FILE
    if not path.is_file():
        return {}
    return dict(ModelCard.load(path).data.to_dict().get(CARD_SECTION) or {})
