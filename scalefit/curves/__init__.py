"""Loss curves: read training logs, compute schedule areas, fit schedule-aware laws, forecast.

>>> from scalefit.curves import read_curves, prepare, fit_curves, forecast  # doctest: +SKIP
>>> curves = prepare(read_curves("curves.csv"))  # doctest: +SKIP
>>> res = fit_curves(curves, "lr_annealing", bootstrap=200)  # doctest: +SKIP
"""

from ..core.schedule import KINDS, MOMENTUM, Schedule, areas, parse_schedule
from .api import (
    constant_lr_law,
    curve_table,
    final_losses,
    fit_curves,
    forecast,
    momentum_profile,
    truncate,
)
from .holdout import holdout_summary, size_holdout
from .optimum import CurveAllocation, allocation, final_areas, final_loss_law, optimal_lr
from .prepare import lr_sequence, prepare, schedule_frame
from .read import read_curves, read_tensorboard, read_trainer_run, read_trainer_runs, read_wandb
from .synthetic import synthetic_curves
from .table import validate_curves

__all__ = [
    "CurveAllocation",
    "KINDS",
    "MOMENTUM",
    "Schedule",
    "allocation",
    "areas",
    "constant_lr_law",
    "curve_table",
    "final_areas",
    "final_loss_law",
    "final_losses",
    "holdout_summary",
    "fit_curves",
    "forecast",
    "lr_sequence",
    "momentum_profile",
    "optimal_lr",
    "parse_schedule",
    "prepare",
    "read_curves",
    "read_tensorboard",
    "read_trainer_run",
    "read_trainer_runs",
    "read_wandb",
    "schedule_frame",
    "size_holdout",
    "synthetic_curves",
    "truncate",
    "validate_curves",
]
