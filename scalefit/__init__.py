"""scalefit: fit, understand and act on neural scaling laws that separate width, depth and data.

Main entry points: :func:`read_table`, :func:`scalefit.datasets.load`, :func:`fit`,
:class:`FitResult`, and the law catalogue (:func:`get_law`, :func:`register_law`,
:func:`list_laws`).
"""

from __future__ import annotations

from . import datasets
from .errors import ConvergenceWarning, ScaleFitError
from .fit import FitResult, bootstrap, fit
from .laws import Law, Param, get_law, list_laws, register_law
from .table import read_table

__version__ = "0.1.0"

__all__ = [
    "ConvergenceWarning",
    "FitResult",
    "Law",
    "Param",
    "ScaleFitError",
    "bootstrap",
    "datasets",
    "fit",
    "get_law",
    "list_laws",
    "read_table",
    "register_law",
]
