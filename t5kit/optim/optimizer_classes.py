"""Which optimizer a run builds: Trainer's choice for --optim, with our versions swapped in where they apply.

    optimizer_cls, kwargs = optimizer_cls_and_kwargs(training_args, model)   # both trainers, --param_group_lr

--optim adafactor (T5's settings) -> GroupedAdafactor (grouped_adafactor.py); --optim adamw_torch[_fused] with
--adamw_rms_scaling true -> nanoT5's AdamWScale (adamw_scale.py). Everything else is Trainer's.
"""
import torch
from transformers import Trainer
from transformers.optimization import Adafactor

from t5kit.optim.adamw_scale import AdamWScale
from t5kit.optim.grouped_adafactor import GroupedAdafactor

ADAMW_KWARGS = ("lr", "betas", "eps")  # what AdamWScale takes of Trainer's AdamW kwargs (not fused/foreach)


def optimizer_cls_and_kwargs(args, model=None):
    """Trainer.get_optimizer_cls_and_kwargs, with GroupedAdafactor for Adafactor and AdamWScale under
    --adamw_rms_scaling (the flag is checked against --optim at parse time: checks.check_adamw_rms_scaling)."""
    optimizer_cls, optimizer_kwargs = Trainer.get_optimizer_cls_and_kwargs(args, model)
    if optimizer_cls is Adafactor:
        return GroupedAdafactor, optimizer_kwargs
    if getattr(args, "adamw_rms_scaling", False) and optimizer_cls is torch.optim.AdamW:
        return AdamWScale, {key: optimizer_kwargs[key] for key in ADAMW_KWARGS if key in optimizer_kwargs}
    return optimizer_cls, optimizer_kwargs
