"""From curves to a fit table: learning-rate sequences, schedule areas, checkpoint discipline.

Defaults (each an argument of :func:`prepare`):

* step 0 and the warm-up checkpoints are dropped (the laws describe training after warm-up);
* checkpoints in the first ``early=0.1`` of each run's steps are dropped (early loss is dominated
  by transients the laws do not model);
* each run keeps at most ``max_points=100`` checkpoints, evenly spaced in steps, always with its
  last one (long curves would otherwise outweigh short runs and slow every fit).

A run's learning rate for every update ``1 .. last step`` comes from, in order: an ``lr`` column
logged at every step; the run's declared schedule (``schedule`` column or the ``schedule``
argument); an ``lr`` column at some steps, interpolated linearly between them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core._validation import Interval, validate
from ..core.errors import ScaleFitError
from ..core.schedule import (
    MOMENTUM,
    Schedule,
    areas,
    areas_at,
    check_steps,
    parse_schedule,
    warmup_of,
)
from .multipower import HISTORY_KEY, LrHistory, quadrature
from .table import run_value


def _steps_of(part: pd.DataFrame, where: str) -> np.ndarray:
    if "step" in part.columns:
        return part["step"].to_numpy(dtype=float)
    per = part["tokens_per_step"].iloc[0] if "tokens_per_step" in part.columns else np.nan
    if not np.isfinite(per):
        raise ScaleFitError(
            f"{where}: the curve has tokens but no steps; give a 'step' column or the run's "
            "'tokens_per_step'."
        )
    return np.round(part["tokens"].to_numpy(dtype=float) / per)


def run_schedule(
    curves: pd.DataFrame, run: str, default: str | Schedule | None = None
) -> Schedule | None:
    """The declared schedule of ``run`` (its ``schedule`` column, else ``default``)."""
    where = f"{curves.attrs.get('scalefit_curves', {}).get('source', '<curves>')}: run {run!r}"
    text = run_value(curves, run, "schedule")
    if text is None:
        text = default
    if text is None or isinstance(text, Schedule):
        return text
    last = curves.loc[curves["run"] == run]
    steps = int(_steps_of(last, where).max())
    return parse_schedule(str(text), steps=steps, where=where)


def lr_sequence(
    curves: pd.DataFrame, run: str, *, schedule: str | Schedule | None = None, until: int
) -> tuple[np.ndarray, str, int]:
    """Learning rates of updates ``1 .. until`` of ``run``, where they came from, and warm-up."""
    part = curves.loc[curves["run"] == run]
    where = f"{curves.attrs.get('scalefit_curves', {}).get('source', '<curves>')}: run {run!r}"
    steps = _steps_of(part, where)
    lr = part["lr"].to_numpy(dtype=float) if "lr" in part.columns else None
    if lr is not None and np.isnan(lr).any():
        lr = None
    grid = np.arange(1, check_steps(until, where=f"{where}: last step") + 1)
    if lr is not None and until <= steps.max() and np.isin(grid, steps).all():
        return np.interp(grid, steps, lr), "lr column", -1
    declared = run_schedule(curves, run, schedule)
    if declared is not None:  # evaluated up to the last checkpoint, not over its whole length
        return declared.sequence(until), str(declared), declared.warmup
    if lr is not None:
        return np.interp(grid, steps, lr), "lr column (interpolated)", -1
    raise ScaleFitError(
        f"{where}: no learning rates; log an 'lr' column or declare the run's schedule "
        "(a 'schedule' column or --schedule, e.g. 'cosine:lr=3e-3,steps=1000,warmup=100')."
    )


def prepare(
    curves: pd.DataFrame,
    *,
    schedule: str | Schedule | None = None,
    momentum: float = MOMENTUM,
    drop_warmup: bool = True,
    early: float = 0.1,
    max_points: int | None = 100,
) -> pd.DataFrame:
    """Add ``S1``, ``S2`` and ``lr`` to each checkpoint and apply the checkpoint discipline.

    Parameters
    ----------
    curves : DataFrame
        A long curve table (:func:`scalefit.curves.read_curves`).
    schedule : str or Schedule, optional
        Schedule for runs that declare none and log no lr at every step.
    momentum : float, default 0.999
        Decay factor of the annealing area of Tissue et al. (2024); 0.999 is our default.
    drop_warmup : bool, default True
        Drop checkpoints at or before the end of warm-up.
    early : float, default 0.1
        Drop checkpoints in this first fraction of each run's last step, in [0, 1).
    max_points : int or None, default 100
        Keep at most this many checkpoints per run (evenly spaced, the last one kept);
        ``None`` keeps all.

    Returns
    -------
    DataFrame
        One row per kept checkpoint with ``run, step, loss, lr, S1, S2``, ``peak_lr`` (the
        run's largest learning rate up to its last checkpoint) and the run columns;
        ``attrs["scalefit_curves"]`` records the rules and each run's lr source;
        ``attrs["scalefit_lr_history"]`` keeps each run's learning rates, from which a fit of
        the multi-power law adds its quadrature columns.
    """
    validate(
        "prepare",
        {"early": early, "max_points": max_points},
        {
            "early": [Interval(float, 0, 1, closed="left")],
            "max_points": [Interval(int, 2, None), None],
        },
    )
    meta = dict(curves.attrs.get("scalefit_curves", {}))
    where = meta.get("source", "<curves>")
    parts, sources, history = [], {}, {}
    for run, part in curves.groupby("run", sort=False):
        part = part.copy()
        part["step"] = _steps_of(part, f"{where}: run {run!r}")
        last = part["step"].max()
        if last < 1:
            raise ScaleFitError(f"{where}: run {run!r} has no checkpoint after step 0.")
        eta, source, warm = lr_sequence(curves, run, schedule=schedule, until=last)
        warm = warmup_of(eta) if warm < 0 else warm  # the one warm-up of S2 and the drops
        s1, s2 = areas(eta, momentum=momentum, warmup=warm)
        history[str(run)] = (eta, warm)
        idx = part["step"].to_numpy(dtype=int)
        keep = idx >= 1
        part = part[keep].copy()
        idx = idx[keep]
        part["lr"], part["S1"], part["S2"] = eta[idx - 1], s1[idx - 1], s2[idx - 1]
        part["peak_lr"] = float(eta.max())
        cut = max(warm if drop_warmup else 0, early * last)
        part = part[part["step"] > cut]
        part = _thin(part, max_points)
        sources[str(run)] = source
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    if out.empty:
        raise ScaleFitError(
            f"{where}: no checkpoint is left after dropping warm-up and early steps."
        )
    out.attrs["scalefit_curves"] = {
        **meta,
        "lr_source": sources,
        "momentum": momentum,
        "drop_warmup": drop_warmup,
        "early": early,
        "max_points": max_points,
    }
    out.attrs[HISTORY_KEY] = LrHistory(history)
    return out


def _thin(part: pd.DataFrame, max_points: int | None) -> pd.DataFrame:
    if max_points is None or len(part) <= max_points:
        return part
    pick = np.unique(np.round(np.linspace(0, len(part) - 1, max_points)).astype(int))
    return part.iloc[pick]


def schedule_frame(
    schedule: Schedule,
    *,
    steps=None,
    momentum: float = MOMENTUM,
    segments: int | None = None,
    **columns,
) -> pd.DataFrame:
    """Inputs of a schedule-aware law along ``schedule``: ``step, lr, S1, S2`` (+ ``columns``).

    Parameters
    ----------
    schedule : Schedule
        The schedule to evaluate.
    steps : array-like, optional
        Steps to report (default: every step).
    momentum : float
        Decay factor of the annealing area.
    segments : int, optional
        Also the multi-power law's quadrature columns with this many nodes
        (:func:`scalefit.curves.multipower.quadrature`).
    **columns
        Constant columns to add (e.g. ``params=1e8``).
    """
    if steps is None:
        steps = np.arange(1, schedule.steps + 1)
    lr, s1, s2 = areas_at(schedule, steps, momentum=momentum)
    idx = np.asarray(steps).astype(int).reshape(-1)
    frame = pd.DataFrame({"step": idx, "lr": lr, "S1": s1, "S2": s2})
    if segments is not None:
        q = quadrature(schedule.sequence(idx.max()), idx, segments=segments, warmup=schedule.warmup)
        frame = pd.concat([frame, pd.DataFrame(q)], axis=1)
    for key, value in columns.items():
        frame[key] = value
    return frame
