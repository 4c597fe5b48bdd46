"""Everything in the trainer that only exists on CUDA, in one place.

The rest of the trainer is device-generic: bf16 autocast (``torch.autocast(device.type, ...)``),
``torch.compile`` (inductor, which generates C++/OpenMP kernels on CPU and Triton kernels on CUDA)
and fused/foreach AdamW all run on CPU too and are tested there. What stays here:

* TF32 matmul and cuDNN flags (:func:`configure`);
* pinned host memory and non-blocking host-to-device copies (:func:`to_device`);
* the NCCL process-group backend (:func:`backend`; gloo everywhere else);
* flash / memory-efficient SDPA kernels: ``F.scaled_dot_product_attention`` picks them by itself
  on CUDA; on CPU it uses its fused C++ kernel (nothing to configure, listed for completeness).
"""

from __future__ import annotations

import torch


def backend(device: torch.device) -> str:
    """Process-group backend for ``device``: ``"nccl"`` on CUDA, ``"gloo"`` otherwise."""
    return "nccl" if device.type == "cuda" else "gloo"


def configure(device: torch.device) -> None:
    """Switch on TF32 matmuls and convolutions on CUDA (no effect elsewhere)."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def to_device(
    x: torch.Tensor, y: torch.Tensor, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Move a batch to ``device``: pinned memory and asynchronous copies on CUDA."""
    if device.type == "cuda":
        x, y = x.pin_memory(), y.pin_memory()
        return x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    return x.to(device), y.to(device)


def local_device(device: torch.device, local_rank: int) -> torch.device:
    """The CUDA device of this process under ``torchrun`` (``device`` unchanged elsewhere)."""
    if device.type != "cuda":
        return device
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    return device
