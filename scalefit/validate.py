"""Deprecated alias of :mod:`scalefit.experimental.extrapolation` (removed in 0.2)."""

import importlib
import warnings


def __getattr__(name: str):
    value = getattr(importlib.import_module("scalefit.experimental.extrapolation"), name)
    message = f"scalefit.validate.{name} moved to scalefit.experimental.extrapolation.{name}; "
    warnings.warn(message + "the old path goes in 0.2.", DeprecationWarning, stacklevel=2)
    return value
