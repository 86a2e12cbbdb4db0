"""LoRA fine-tuning through the peft library: the model wrapped after it is built, its trainable share logged, the
adapters merged into a plain T5 model on request.

    model = lora.apply_lora(model, r=8, alpha=16, dropout=0.0, target_modules=["q", "v"])
    lora.save_merged_model(trainer.model, tokenizer, "runs/rte_lora/merged")   # --merge_adapters

The Trainer saves a peft model as its adapters (adapter_config.json, adapter_model.safetensors) in checkpoints and
in the run folder, and loads them back on resume and for the best checkpoint; the frozen base stays as loaded from
--model_name_or_path, which adapter_config.json names (PeftModel.from_pretrained(base, OUTPUT_DIR)).
"""
import logging

import torch
from peft import LoraConfig, PeftModel, TaskType, get_peft_model

from t5kit.errors import UsageError

logger = logging.getLogger(__name__)


def is_peft_model(model) -> bool:
    return isinstance(model, PeftModel)


def linear_module_names(model):
    """The last name component of every torch.nn.Linear in the model (q, k, v, o, wi, wo, lm_head, ...): what
    --lora_target_modules may name."""
    return sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                   if isinstance(module, torch.nn.Linear)})


def check_target_modules(model, target_modules):
    """Refuses a target that matches no layer (peft matches a module whose name is the target or ends with
    '.target'; it only refuses a list that matches nothing at all, so one misspelt name would pass silently)."""
    names = [name for name, _ in model.named_modules()]
    for target in target_modules:
        if not any(name == target or name.endswith(f".{target}") for name in names):
            raise UsageError(f"--lora_target_modules {target!r} matches no layer of the model; its linear layers "
                             f"are {', '.join(linear_module_names(model))} (e.g. q,v)")


def apply_lora(model, r, alpha, dropout, target_modules):
    """The model with LoRA adapters on target_modules (a peft PeftModelForSeq2SeqLM): only the adapters train."""
    check_target_modules(model, target_modules)
    config = LoraConfig(task_type=TaskType.SEQ_2_SEQ_LM, r=r, lora_alpha=alpha, lora_dropout=dropout,
                        target_modules=list(target_modules))
    peft_model = get_peft_model(model, config)
    trainable, total = peft_model.get_nb_trainable_parameters()
    logger.info("LoRA r=%d alpha=%g on %s: %s trainable parameters of %s (%.3f %%)", r, alpha,
                ",".join(target_modules), f"{trainable:,}", f"{total:,}", 100 * trainable / total)
    return peft_model


def trainable_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def save_merged_model(model, tokenizer, folder):
    """Merges the adapters into the base weights and saves a plain T5 model and its tokenizer in `folder`. Merging
    changes the model in place: call it last."""
    merged = model.merge_and_unload()
    merged.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    logger.info("wrote %s: the base model with the LoRA adapters merged in", folder)
    return folder
