"""A GPU tensor's value, read on the host one training step later, so that reading it never stalls the GPU.

    verdict = DeferredRead(torch.stack([bad_loss, grad_norm]))   # step N: queues a copy, returns at once
    ...                                                         # step N + 1 queues its forward and backward
    bad, norm = verdict.read()                                   # waits for step N's copy only

Why: `tensor.item()`, `bool(tensor)` or `float(tensor)` on a GPU tensor waits until the GPU has run everything
queued so far. Done once per step, it lets the GPU run dry: it idles while the host launches the optimizer step,
fetches the next batch and launches the next forward. Here the value is copied into pinned host memory
asynchronously and a CUDA event marks the copy; read() waits on that event alone. Read after the next step's work is
queued, it waits for work the GPU has (nearly) finished while the next step keeps it busy. Every process reads the
same step's value at the same step, so decisions taken on it (stop, save) stay collective. On CPU (and other
devices) the value is simply kept and read() returns it.
"""
import torch


class DeferredRead:
    """The value `tensor` has now, available as a Python list (or number) through read()."""

    def __init__(self, tensor):
        tensor = tensor.detach()
        self.event = None
        if tensor.device.type == "cuda":
            self.host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
            self.host.copy_(tensor, non_blocking=True)  # queued behind the work that computes `tensor`
            self.event = torch.cuda.Event()
            self.event.record()
        else:
            self.host = tensor.clone()  # the caller may update `tensor` in place afterwards

    def read(self):
        if self.event is not None:
            self.event.synchronize()
        return self.host.tolist()
