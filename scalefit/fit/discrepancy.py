"""Deprecated alias of :mod:`scalefit.experimental.discrepancy` (removed in 0.2).

``Mixture``, ``score_holdout`` and ``sample_scores`` moved to :mod:`scalefit.fit.observation`.
"""

import importlib
import warnings


def __getattr__(name: str):
    noise = name in ("Mixture", "score_holdout", "sample_scores")
    where = "scalefit.fit.observation" if noise else "scalefit.experimental.discrepancy"
    value = getattr(importlib.import_module(where), name)  # AttributeError for an unknown name
    message = f"scalefit.fit.discrepancy.{name} moved to {where}.{name}; the old path goes in 0.2."
    warnings.warn(message, DeprecationWarning, stacklevel=2)
    return value
