"""Small torch helpers shared by the simulator and the trainer (imported lazily)."""

from __future__ import annotations

import random

from .errors import require


def seed_all(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) from one integer."""
    import numpy as np

    torch = require("torch", "torch")
    random.seed(seed)
    np.random.seed(seed % (2**32))  # noqa: NPY002 - seeds the legacy global RNG on purpose
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def pick_device(device: str | None = None):
    """Return a ``torch.device``: the one named, else CUDA when available, else CPU."""
    torch = require("torch", "torch")
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)
