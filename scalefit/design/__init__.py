"""Experiment design: which runs to train next to pin down a recommendation at a target budget.

:func:`next_runs` scores candidate runs by how much they are expected to shrink the variance of a
quantity at the target budget (log N*, log T*, log depth*, log width* or the optimal loss), using
the fit's draws and a linearised (ensemble) update, and picks up to ``k`` of them within a total
compute budget (``C = 6·N·T`` from :mod:`scalefit.core.accounting`);
:func:`scalefit.plot.design.plot_design` draws the result.
"""

from .candidates import default_candidates, isoflop_grid
from .core import QUANTITIES, DesignResult, next_runs

__all__ = [
    "QUANTITIES",
    "DesignResult",
    "default_candidates",
    "isoflop_grid",
    "next_runs",
]
