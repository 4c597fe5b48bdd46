"""Deprecated alias of :mod:`scalefit.fit.holdout` (removed in 0.2)."""

import importlib
import warnings


def __getattr__(name: str):
    value = getattr(importlib.import_module("scalefit.fit.holdout"), name)
    message = f"scalefit.fit.validate.{name} moved to scalefit.fit.holdout.{name}; "
    warnings.warn(message + "the old path goes in 0.2.", DeprecationWarning, stacklevel=2)
    return value
