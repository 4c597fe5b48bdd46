"""Recipe comparisons as compute multipliers, with bootstrap intervals.

Fit one law of ``params`` and ``tokens`` to each of two tables (two recipes, architectures or data
mixes) and compare the compute each fitted law needs to reach a target loss ``L*`` at its
compute-optimal allocation (``C = 6 · params · tokens``): the multiplier ``C_A(L*) / C_B(L*)``.
A multiplier of 2 means recipe A needs twice B's compute to reach ``L*``: B saves half of it.

The compute-optimal loss at ``C`` is the law minimised over ``params`` with ``tokens = C / (6
params)`` (:func:`scalefit.allocate.solve.optimum`, the solver of :func:`scalefit.allocate`); it
is inverted in ``C`` by bisection. Both steps run on every bootstrap draw at once.
The interval pairs draw ``i`` of A's fit with draw ``i`` of B's (the two resamples are
independent) and takes the percentiles of the per-draw multiplier::

    from scalefit import datasets
    from scalefit.multiplier import compute_multiplier
    hot = datasets.load("gemstones", file="hot")
    ablation = datasets.load("gemstones", file="lr_ablation_hot")
    compute_multiplier(ablation, hot, cluster="run").report()
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .allocate.solve import optimum
from .allocate.space import Space
from .core.accounting import training_flops
from .core.errors import ScaleFitError
from .fit import FitResult, fit
from .laws import Law, get_law

_INPUTS = ("params", "tokens")
_FLOORS = ("E", "L0")


def _frontier(law: Law, p: dict, log_c: np.ndarray) -> np.ndarray:
    """Loss at the compute-optimal split of ``exp(log_c)`` FLOPs (allocate's solver)."""
    return optimum(Space.of(law), p, np.exp(log_c)).f


def _compute_at(law: Law, p: dict, target: float, bounds: tuple[float, float]) -> np.ndarray:
    """Log of the compute where the optimal loss falls to ``target`` (NaN: never)."""
    n = len(next(iter(p.values())))
    lo, hi = np.full(n, bounds[0]), np.full(n, bounds[1])
    reached = _frontier(law, p, hi) <= target
    for _ in range(60):
        mid = (lo + hi) / 2
        above = _frontier(law, p, mid) > target
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return np.where(reached, (lo + hi) / 2, np.nan)


@dataclass(frozen=True)
class Multiplier:
    """A compute multiplier ``C_A(L*) / C_B(L*)`` with its bootstrap interval.

    Attributes
    ----------
    multiplier, lo, hi : float
        Point estimate (from the two fits) and percentile interval (NaN without draws).
    target_loss : float
        ``L*``.
    flops_a, flops_b : float
        Compute each fitted law needs to reach ``L*`` at its compute-optimal allocation.
    ci_prob : float
        Interval probability.
    n_draws, n_unreached : int
        Paired draws used (both fits' draws finite), and paired draws left out because one
        law never reaches ``L*`` there.
    floor : float or None
        The irreducible loss both fits share (``shared_floor=True``), else None.
    fit_a, fit_b : FitResult
        The two fits.
    """

    multiplier: float
    lo: float
    hi: float
    target_loss: float
    flops_a: float
    flops_b: float
    ci_prob: float
    n_draws: int
    n_unreached: int
    floor: float | None
    fit_a: FitResult
    fit_b: FitResult

    def report(self) -> str:
        """The multiplier, its interval and what it means, in a few lines."""
        m = self.multiplier
        if self.n_draws:
            ci = f"{self.ci_prob:.0%} interval [{self.lo:.3g}, {self.hi:.3g}], "
            ci += f"{self.n_draws} paired bootstrap draws"
            ci += f", {self.n_unreached} left out: a law never reaches L*" * bool(self.n_unreached)
        else:
            ci = "no interval: bootstrap=0"
        who, factor = ("A", m) if m >= 1 else ("B", 1 / m)
        lines = [
            f"compute multiplier C_A / C_B at L* = {self.target_loss:.4g}: {m:.3g} ({ci})",
            f"A needs {self.flops_a:.3g} FLOPs and B {self.flops_b:.3g} at their compute-optimal "
            f"allocations: recipe {who} needs {factor:.3g}x the other's compute to reach L*",
        ]
        if self.floor is not None:
            lines.append(f"both fits share the irreducible loss {self.floor:.4g} (pooled fit)")
        return "\n".join(lines)


def _checked(table: pd.DataFrame, name: str) -> np.ndarray:
    """The table's compute ``6 · params · tokens``, after checking its columns."""
    missing = [c for c in (*_INPUTS, "loss") if c not in getattr(table, "columns", ())]
    if missing:
        raise ScaleFitError(
            f"compute_multiplier: {name} needs the columns params, tokens and loss; "
            f"missing {', '.join(missing)}."
        )
    return training_flops(table["params"].to_numpy(float), table["tokens"].to_numpy(float))


def compute_multiplier(
    table_a: pd.DataFrame,
    table_b: pd.DataFrame,
    *,
    law: str | Law = "chinchilla",
    target_loss: float | None = None,
    shared_floor: bool = False,
    bootstrap: int = 200,
    cluster: str | None = None,
    seed: int = 0,
    ci_prob: float = 0.95,
) -> Multiplier:
    """How much more compute recipe A needs than recipe B to reach a target loss.

    Parameters
    ----------
    table_a, table_b : pandas.DataFrame
        The two recipes' runs: ``params``, ``tokens``, ``loss`` (and the ``cluster`` column).
    law : str or Law, default "chinchilla"
        A law of ``params`` and ``tokens``, fitted to each table with :func:`scalefit.fit`.
    target_loss : float, optional
        ``L*``. Default: the larger of the two fitted compute-optimal losses at the geometric
        middle of the compute range both tables cover, so both laws reach it inside that range.
    shared_floor : bool, default False
        Fix the irreducible loss (``E`` or ``L0``) of both fits to the value a fit of the law to
        the union of the two tables gives, then fit each table with it held (the draws too: the
        floor's own uncertainty is not carried).
    bootstrap : int, default 200
        Resamples of each table (0: no interval).
    cluster : str, optional
        Resample whole groups sharing this column's value (e.g. ``"run"`` when rows are the
        checkpoints of runs).
    seed : int, default 0
        Seed of the fits and resamples (B's resamples use ``seed + 1``).
    ci_prob : float, default 0.95
        Interval probability.

    Returns
    -------
    Multiplier

    Raises
    ------
    ScaleFitError
        A table without the law's columns, a law not of params and tokens, tables whose compute
        ranges do not overlap, a target loss one fitted law never reaches.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> n, d = np.meshgrid(np.geomspace(1e7, 1e9, 5), np.geomspace(1e9, 1e11, 5))
    >>> t = pd.DataFrame({"params": n.ravel(), "tokens": d.ravel()})
    >>> t["loss"] = 1.7 + 400 / t.params**0.34 + 410 / t.tokens**0.28
    >>> round(compute_multiplier(t, t, bootstrap=0).multiplier, 6)
    1.0
    """
    c_a, c_b = _checked(table_a, "table_a"), _checked(table_b, "table_b")
    law = get_law(law) if isinstance(law, str) else law
    if set(law.inputs) != set(_INPUTS):
        raise ScaleFitError(
            f"compute_multiplier needs a law of params and tokens; {law.name!r} has inputs "
            f"{', '.join(law.inputs)}."
        )
    lo, hi = max(c_a.min(), c_b.min()), min(c_a.max(), c_b.max())
    if lo > hi:
        raise ScaleFitError(
            f"compute_multiplier: the compute ranges of table_a ({c_a.min():.3g}-{c_a.max():.3g} "
            f"FLOPs) and table_b ({c_b.min():.3g}-{c_b.max():.3g}) do not overlap."
        )
    floor = None
    kw = {"bootstrap": bootstrap, "cluster": cluster, "ci_prob": ci_prob}
    if shared_floor:
        name = next((n for n in _FLOORS if n in law.param_names), None)
        if name is None:
            raise ScaleFitError(f"shared_floor: the law {law.name!r} has no floor (E or L0).")
        both = pd.concat([table_a, table_b], ignore_index=True)[[*_INPUTS, "loss"]]
        floor = float(fit(both, law, seed=seed).params[name])
        law = law.fixing({name: floor})
    fits = (fit(table_a, law, seed=seed, **kw), fit(table_b, law, seed=seed + 1, **kw))
    bounds = (float(np.log(lo)) - 46.0, float(np.log(hi)) + 46.0)  # e^46: 20 decades each side
    points = [{k: np.array([v]) for k, v in f.params.items()} for f in fits]
    if target_loss is None:
        mid = np.array([np.log(lo * hi) / 2])
        target_loss = float(
            max(_frontier(f.law, p, mid)[0] for f, p in zip(fits, points, strict=True))
        )
    log_c = [
        _compute_at(f.law, p, target_loss, bounds)[0] for f, p in zip(fits, points, strict=True)
    ]
    if np.isnan(log_c).any():
        which = "table_a" if np.isnan(log_c[0]) else "table_b"
        raise ScaleFitError(
            f"compute_multiplier: the law fitted to {which} never reaches target_loss="
            f"{target_loss:.4g} (its floor is at or above it)."
        )
    n = min(len(f.draws) if f.draws is not None else 0 for f in fits)
    tables = [np.zeros((0, len(f.params))) if f.draws is None else f.draws[:n] for f in fits]
    keep = np.isfinite(tables[0]).all(1) & np.isfinite(tables[1]).all(1)
    draws = [
        {k: t[keep, i] for i, k in enumerate(f.params)} for f, t in zip(fits, tables, strict=True)
    ]
    with warnings.catch_warnings():  # unreached draws are counted, not warned about
        warnings.simplefilter("ignore", RuntimeWarning)
        per = [_compute_at(f.law, d, target_loss, bounds) for f, d in zip(fits, draws, strict=True)]
    ratio = np.exp(per[0] - per[1]) if keep.any() else np.array([])
    unreached, ratio = int((~np.isfinite(ratio)).sum()), ratio[np.isfinite(ratio)]
    q = (1 - ci_prob) / 2
    ends = np.quantile(ratio, [q, 1 - q]) if len(ratio) else (np.nan, np.nan)
    return Multiplier(
        multiplier=float(np.exp(log_c[0] - log_c[1])),
        lo=float(ends[0]),
        hi=float(ends[1]),
        target_loss=float(target_loss),
        flops_a=float(np.exp(log_c[0])),
        flops_b=float(np.exp(log_c[1])),
        ci_prob=ci_prob,
        n_draws=len(ratio),
        n_unreached=unreached,
        floor=floor,
        fit_a=fits[0],
        fit_b=fits[1],
    )
