"""--fp16 with --use_cpu: fp16 autocast and loss scaling on a CPU, as a GPU gets them.

    class TaskTrainer(..., CpuFp16Mixin, Seq2SeqTrainer): ...

accelerate turns fp16 mixed precision on for accelerators only: on a CPU it leaves autocast off and builds no
GradScaler, so `--fp16 true --use_cpu true` would train in fp32 while config.yaml says fp16. torch's fp16 autocast and
GradScaler run on CPUs (in hardware with AMX-FP16, emulated elsewhere), so this mixin hands the accelerator both
before anything is prepared: `native_amp` makes accelerate wrap the model's forward in fp16 autocast, and the
scaler goes into the optimizer accelerate prepares (it scales the loss, unscales before clipping, skips a step whose
gradients overflowed and lowers the scale) and into each checkpoint (scaler.pt), as on a GPU. This is how the fp16
protection of model/precision.py is tested on CPUs, and what a CPU with AMX-FP16 trains with. DeepSpeed keeps its
own loss scaler.
"""
import torch


class CpuFp16Mixin:
    """Gives a CPU accelerator fp16 autocast and torch's CPU GradScaler under --fp16 (module doc)."""

    def create_accelerator_and_postprocess(self):
        super().create_accelerator_and_postprocess()
        accelerator = self.accelerator
        if self.args.fp16 and accelerator.device.type == "cpu" and accelerator.scaler is None \
                and not self.is_deepspeed_enabled:
            accelerator.native_amp = True
            accelerator.scaler = torch.amp.GradScaler("cpu")
