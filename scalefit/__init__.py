"""scalefit: fit, understand and act on neural scaling laws that separate width, depth and data.

Main entry points: :func:`read_table`, :func:`scalefit.datasets.load`, :func:`fit`,
:class:`FitResult`, and the law catalogue (:func:`get_law`, :func:`register_law`,
:func:`list_laws`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._version import __version__ as __version__
from .core.errors import ConvergenceWarning, NoRecommendationWarning, ScaleFitError
from .core.table import read_table
from .fit import FitResult, bootstrap, fit
from .laws import Law, Param, get_law, list_laws, register_law

if TYPE_CHECKING:
    from . import allocate, datasets

#: Entry points imported on first use (PEP 562), so that a command loads only what it touches:
#: ``scalefit fit`` never imports :mod:`scalefit.allocate`. Name -> (module, attribute or None).
_LAZY = {
    # allocate: the subpackage, callable as its allocate() (scalefit.allocate(res, budgets), .Space)
    "allocate": ("scalefit.allocate", None),
    "datasets": ("scalefit.datasets", None),
    "fit_bayes": ("scalefit.fit.bayes", "fit_bayes"),
    "compare_laws": ("scalefit.fit.compare", "compare_laws"),
    # plan: the subpackage, callable as its plan() (scalefit.plan(target_budget, folder, ...),
    # .load); imported on first use, as it reaches the trainer and the sweep runner
    "plan": ("scalefit.plan", None),
}


def __getattr__(name: str):
    """Import the optional or heavier entry points on first use."""
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = importlib.import_module(module)
        return value if attr is None else getattr(value, attr)
    raise AttributeError(f"module 'scalefit' has no attribute {name!r}")


__all__ = [
    "ConvergenceWarning",
    "NoRecommendationWarning",
    "FitResult",
    "Law",
    "Param",
    "ScaleFitError",
    "allocate",
    "bootstrap",
    "compare_laws",
    "datasets",
    "fit",
    "fit_bayes",
    "get_law",
    "list_laws",
    "plan",
    "read_table",
    "register_law",
]
