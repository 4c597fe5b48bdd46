"""The teacher–student toy of Liu et al. (inverse depth scaling), fast and seeded.

Import the torch parts from :mod:`scalefit.sim.model` and :mod:`scalefit.sim.train`; this package
itself stays light so that configs and specs can be checked without torch.

Examples
--------
>>> from scalefit.sim import preset
>>> cfg = preset("cpu", teacher_mode="tied")
>>> cfg.depths
[6, 12, 16, 24, 32, 48]
"""

from __future__ import annotations

from .config import PRESETS, ToyConfig, preset
from .sweep_task import build_config, run_toy

__all__ = ["PRESETS", "ToyConfig", "build_config", "preset", "run_toy"]
