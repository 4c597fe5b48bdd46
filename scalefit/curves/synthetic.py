"""Synthetic curves from a schedule-aware law with known parameters (for tests and docs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..core._validation import Interval, validate
from ..core.schedule import MOMENTUM, Schedule, decay_drops, parse_schedule
from ..laws import Law, get_law
from .multipower import quadrature, segments_of
from .prepare import schedule_frame
from .table import validate_curves


def synthetic_curves(
    truth: Mapping[str, float],
    schedules: Sequence[str | Schedule],
    *,
    law: str | Law = "lr_annealing",
    params: Sequence[float] | None = None,
    every: int = 10,
    noise: float = 0.005,
    run_noise: float = 0.0,
    ar: float = 0.0,
    momentum: float = MOMENTUM,
    seed: int,
) -> pd.DataFrame:
    """Curves of ``law`` at ``truth``, one run per schedule, with log-normal noise.

    Parameters
    ----------
    truth : mapping
        Parameter values of the law.
    schedules : sequence of str or Schedule
        One schedule per run.
    law : str or Law, default "lr_annealing"
        The generating law. The multi-power law is evaluated with its exact per-step sum (one
        quadrature node per change of the learning rate), not with its fitted quadrature.
    params : sequence of float, optional
        Model size of each run (for laws with a ``params`` input).
    every : int, default 10
        Checkpoint interval in steps (the last step is always logged).
    noise : float, default 0.005
        Standard deviation of independent noise on log loss, per checkpoint.
    run_noise : float, default 0
        Standard deviation of a shared log-loss offset per run (correlated checkpoints).
    ar : float, default 0
        Lag-1 correlation of the per-checkpoint noise between consecutive logged checkpoints
        of a run, in [0, 1): a stationary AR(1) process whose marginal standard deviation is
        ``noise`` (innovations scaled by ``sqrt(1 - ar**2)``). 0: independent noise.
    momentum : float
        Decay factor of the annealing area.
    seed : int
        Random seed.

    Returns
    -------
    DataFrame
        The long table with ``run, step, loss, lr, schedule`` (and ``params``).
    """
    validate("synthetic_curves", {"ar": ar}, {"ar": [Interval(float, 0, 1, closed="left")]})
    law_obj = get_law(law)
    rng = np.random.default_rng(seed)
    parts = []
    for i, spec in enumerate(schedules):
        sched = parse_schedule(spec) if isinstance(spec, str) else spec
        steps = np.unique(np.append(np.arange(every, sched.steps + 1, every), sched.steps))
        extra = {} if params is None else {"params": float(params[i])}
        frame = schedule_frame(sched, steps=steps, momentum=momentum, **extra)
        mean = np.asarray(_exact(law_obj, sched).evaluate(truth, _inputs(law_obj, sched, frame)))
        eps = _ar1(rng.normal(0.0, noise, len(frame)), ar) + rng.normal(0.0, run_noise)
        frame["loss"] = mean * np.exp(eps)
        frame["run"] = f"run{i}"
        frame["schedule"] = str(sched)
        parts.append(frame.drop(columns=["S1", "S2"]))
    return validate_curves(pd.concat(parts, ignore_index=True), source="<synthetic>")


def _ar1(z: np.ndarray, rho: float) -> np.ndarray:
    """Independent draws ``z`` turned into a stationary AR(1) series with the same marginal."""
    if rho == 0.0 or z.size == 0:
        return z
    out = np.empty_like(z)
    out[0] = z[0]
    scale = np.sqrt(1.0 - rho**2)
    for i in range(1, z.size):
        out[i] = rho * out[i - 1] + scale * z[i]
    return out


def _changes(sched: Schedule) -> int:
    return max(1, int(np.count_nonzero(decay_drops(sched.sequence(), sched.warmup))))


def _exact(law: Law, sched: Schedule) -> Law:
    """The multi-power law with one node per lr change (its exact sum); other laws as they are."""
    if segments_of(law) is None:
        return law
    return get_law(law.name, **{**law.options, "segments": _changes(sched)})


def _inputs(law: Law, sched: Schedule, frame: pd.DataFrame):
    if segments_of(law) is None:
        return frame
    steps = frame["step"].to_numpy()
    q = quadrature(sched.sequence(), steps, segments=_changes(sched), warmup=sched.warmup)
    return {**{c: frame[c].to_numpy() for c in frame.columns}, **q}
