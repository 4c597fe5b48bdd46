"""Model FLOPs utilisation: achieved training FLOP/s over the device's peak.

The FLOPs of a token come from :func:`scalefit.core.accounting.flops_per_token` with the attention
term (``6·N + 12·ℓ·W·seq_len``; checked against ``torch.utils.flop_counter`` in the tests). Peaks
are the vendors' dense (no sparsity) datasheet figures per precision, in FLOP/s per device; a device
not in the table (every CPU) has no datasheet peak (``benchmarks/_harness.py`` measures the
best matmul rate a process reaches, for the CPU benchmarks).
"""

from __future__ import annotations

import math

from ..core.accounting import flops_per_token

#: Dense peak FLOP/s per device and precision ("fp32" on CUDA means TF32 tensor cores, which the
#: trainer switches on). Vendor datasheets: NVIDIA H100/H200 (SXM), H100 PCIe, A100, L4, A10.
PEAK_FLOPS: dict[str, dict[str, float]] = {
    "H200": {"bf16": 989e12, "fp32": 494.5e12},
    "H100 SXM": {"bf16": 989e12, "fp32": 494.5e12},
    "H100 80GB HBM3": {"bf16": 989e12, "fp32": 494.5e12},  # how the SXM part names itself
    "H100 PCIe": {"bf16": 756e12, "fp32": 378e12},
    "A100": {"bf16": 312e12, "fp32": 156e12},
    "L4": {"bf16": 121e12, "fp32": 60e12},
    "A10": {"bf16": 125e12, "fp32": 62.5e12},
}


def peak_flops(device_name: str, precision: str) -> float:
    """Datasheet peak for a device name (e.g. ``torch.cuda.get_device_name()``), or NaN.

    The longest table key contained in the name wins (``"NVIDIA H100 PCIe"`` → ``"H100 PCIe"``).

    Examples
    --------
    >>> peak_flops("NVIDIA H100 80GB HBM3", "bf16")
    989000000000000.0
    >>> math.isnan(peak_flops("cpu", "fp32"))
    True
    """
    hits = [k for k in PEAK_FLOPS if k.lower() in device_name.lower()]
    if not hits:
        return math.nan
    return PEAK_FLOPS[max(hits, key=len)].get(precision, math.nan)


def device_peak(device, precision: str) -> float:
    """Peak FLOP/s of a torch device: the datasheet's on CUDA (:func:`peak_flops`), else NaN."""
    import torch

    if torch.device(device).type == "cuda":
        return peak_flops(torch.cuda.get_device_name(torch.device(device)), precision)
    return math.nan


def mfu(tokens_per_s: float, params: int, depth: int, width: int, seq_len: int, peak: float):
    """Model FLOPs utilisation: ``flops_per_token · tokens/s / peak`` (NaN without a peak).

    Examples
    --------
    >>> round(mfu(1e5, 10**6, 2, 64, 128, 1e12), 4)
    0.6197
    """
    fpt = flops_per_token(params, depth=depth, width=width, seq_len=seq_len)
    return fpt * tokens_per_s / peak if peak > 0 else math.nan
