"""scalefit: fit, understand and act on neural scaling laws that separate width, depth and data."""

from __future__ import annotations

__version__ = "0.1.0"
