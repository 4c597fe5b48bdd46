"""Fitting: least squares (:func:`fit`), bootstrap, held-out checks and the :class:`FitResult`."""

from .bootstrap import bootstrap
from .lsq import fit
from .result import FitResult

__all__ = ["FitResult", "bootstrap", "fit"]
