"""Compute-optimal allocation: params and tokens, or depth, width and tokens, for a FLOP budget.

Main entry points: :func:`allocate` (continuous and practical optimum per budget, intervals from
draws, near-optimal sets), :func:`scaling_exponents`, :func:`critical_depth_table`,
:func:`audit`, :func:`isoflop_curve`; closed forms for checks in
:mod:`scalefit.allocate.closed_form`.

The package itself is callable: ``scalefit.allocate(result, budgets, ...)`` is
:func:`scalefit.allocate.allocate`, with its signature, and ``scalefit.allocate.Space`` its
classes.
"""

import inspect
import sys
import types

from .analysis import audit, critical_depth_table, isoflop_curve, scaling_exponents
from .api import Allocation, allocate
from .closed_form import chinchilla_optimum, decomposed_exponents, decomposed_optimum
from .practical import Constraints
from .solve import solve
from .space import Accounting, Space, default_accounting


class _CallableModule(types.ModuleType):
    """A module whose call is :func:`allocate` (the data model's ``__class__`` assignment)."""

    def __call__(self, *args, **kwargs) -> Allocation:
        return allocate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
__signature__ = inspect.signature(allocate)

__all__ = [
    "Accounting",
    "Allocation",
    "Constraints",
    "Space",
    "allocate",
    "audit",
    "chinchilla_optimum",
    "critical_depth_table",
    "decomposed_exponents",
    "decomposed_optimum",
    "default_accounting",
    "isoflop_curve",
    "scaling_exponents",
    "solve",
]
