"""The law's misfit in the compute-optimal size, and decision intervals that include it.

A law fitted to a ladder places the compute-optimal size ``N*`` at a new budget with an error that
its parameters' spread does not carry: on the public IsoFLOP sweeps the bootstrap intervals of a
Chinchilla fit's ``N*`` held the held-out optimum at 25–50 % of budgets at a nominal 95 %. The
misfit term ``s_misfit(d) = sqrt(s0² + (kappa·d)²)`` (standard deviation of ``ln N*``, growing with
the extrapolation distance ``d = ln(C / C_max)`` past the largest training compute) is fitted by
maximum likelihood to rolling-origin errors, never to the rows a point estimate was fitted to
(:func:`scalefit.isoflop.fit_calibration`). :func:`widen` adds it, in quadrature, to the
intervals an allocation draws from a fit's bootstrap.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Calibration:
    """Misfit term ``s_misfit(d) = sqrt(s0² + (kappa·d)²)`` of the ``ln N*`` error.

    Attributes
    ----------
    s0, kappa : float
        Error floor (``ln N*`` units) and growth per unit of ``d = ln(C / C_max_train)``.
    n_origins, n_scored : int
        Rolling origins and scored budgets it was fitted to.
    source : str
        Which data (``"pooled: ..."`` or ``"own: ..."``).
    method : str
        Estimator it calibrates.
    """

    s0: float
    kappa: float
    n_origins: int
    n_scored: int
    source: str
    method: str

    def s_misfit(self, d) -> np.ndarray:
        """Misfit standard deviation of ``ln N*`` at extrapolation distance ``d`` (``d < 0``: 0)."""
        d = np.clip(np.asarray(d, float), 0.0, None)
        return np.sqrt(self.s0**2 + (self.kappa * d) ** 2)

    def describe(self) -> str:
        """One phrase: the term and where it comes from."""
        return (
            f"s0 = {self.s0:.3g}, kappa = {self.kappa:.3g} per e-fold of compute past the data "
            f"({self.method}; {self.source}; {self.n_origins} rolling origins, "
            f"{self.n_scored} scored budgets)"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dictionary."""
        keys = ("s0", "kappa", "n_origins", "n_scored", "source", "method")
        return {k: getattr(self, k) for k in keys}


#: ``(s0, kappa, n_origins, n_scored)`` per estimator, by maximum likelihood on the rolling origins
#: of the eight public IsoFLOP sweeps (each sweep weighted equally; their two highest budgets never
#: used). ``benchmarks/bench_decision.py`` prints them; its slow test checks that they match.
POOLED: dict[str, tuple[float, float, int, int]] = {
    "law_huber": (0.0415, 0.1575, 35, 65),
    "law_mse": (0.1091, 0.1343, 35, 65),
    "law_frontier": (0.0352, 0.1540, 35, 65),
    "law_near": (0.0622, 0.1251, 35, 65),
    "parabola": (0.0644, 0.1338, 33, 62),
    "parabola_wls": (0.0539, 0.1358, 33, 62),
    "parabola_recent": (0.0578, 0.1087, 33, 62),
    "anchored": (0.0584, 0.1483, 35, 65),
    "average": (0.0622, 0.1255, 33, 62),
    "average_all": (0.0251, 0.1463, 33, 62),
    "parabola_shared": (0.1562, 0.1318, 35, 65),
    "parabola_sharedc": (0.0990, 0.1049, 35, 65),
    "slope_prior": (0.0558, 0.1475, 34, 64),
    # the stack's term is fitted to its leave-one-sweep-out rolling errors (each sweep's weights
    # learned without it), not to STACK_WEIGHTS applied in-sample
    "stack": (0.0873, 0.1270, 33, 62),
}
#: Weights of the ``stack`` estimator's parts (``scalefit.isoflop._estimators.STACK_PARTS``) on
#: ``ln N*``: the convex combination with the least mean |error| on the rolling origins of the eight
#: public IsoFLOP sweeps (each sweep weighted equally; their two highest budgets never used), by
#: :func:`scalefit.isoflop.decision.fit_stack_weights`. ``benchmarks/bench_decision.py``
#: regenerates them (and scores the stack leave-one-sweep-out); its slow test checks they match.
STACK_WEIGHTS: dict[str, float] = {
    "parabola": 0.4038,
    "parabola_wls": 0.5962,
    "anchored": 0.0,
    "law_huber": 0.0,
    "parabola_sharedc": 0.0,
}
POOLED_SOURCE = "rolling origins of the eight public IsoFLOP sweeps (benchmarks/bench_decision.py)"


def pooled(method: str) -> Calibration:
    """The pooled calibration of ``method`` (a key of :data:`POOLED`)."""
    s0, kappa, n_o, n_s = POOLED[method]
    return Calibration(s0, kappa, n_o, n_s, "pooled: " + POOLED_SOURCE, method)


def for_fit(conventions: dict[str, Any]) -> tuple[Calibration | None, float, str]:
    """The calibration that applies to a least-squares fit, its largest compute, or why none.

    A law fit by Huber or LAD loss takes the ``law_huber`` term, by squared error ``law_mse``
    (both measured on Chinchilla-law fits; other laws take them as the closest measured case).
    Returns ``(calibration, c_max, note)``; ``calibration`` is None when it cannot be applied,
    and ``note`` then says why.
    """
    flops = (conventions.get("data_range") or {}).get("flops")
    if not flops or not np.isfinite(flops[1]) or flops[1] <= 0:
        return None, np.nan, "the fit records no training compute (flops) to measure from"
    loss = conventions.get("loss", "mse")
    return pooled("law_mse" if loss == "mse" else "law_huber"), float(flops[1]), ""


def widen(
    summary: pd.DataFrame,
    cal: Calibration,
    c_max: float,
    prob: float,
    elasticity: dict[str, np.ndarray],
) -> pd.DataFrame:
    """Add the misfit term to the ``*_star`` intervals of an allocation summary.

    Each side's half-width in log units ``h`` becomes ``sqrt(h² + (e·z·s_misfit)²)`` about the
    point estimate, with ``e`` the quantity's elasticity to ``N*`` (1 for params, -1 for tokens at
    a fixed budget, the law's own frontier slope for depth and width) and ``z`` the normal quantile
    of ``prob``. Where the point estimate has no optimum the centre is the draws' median.
    The draws' intervals stay as ``*_star_lo_draws`` / ``*_star_hi_draws``; the new
    columns ``distance`` (``ln(C / c_max)``, 0 inside the data) and ``misfit_sd`` give the term.
    """
    out = summary.copy()
    d = np.log(out["budget"].to_numpy(float) / c_max)
    s = cal.s_misfit(d)
    z = NormalDist().inv_cdf((1 + prob) / 2)
    out["distance"], out["misfit_sd"] = np.maximum(d, 0.0), s
    for q, e in elasticity.items():
        point = out.get(f"{q}_star")
        if point is None:
            continue
        centre = point.to_numpy(float)
        if f"{q}_star_median" in out:  # no optimum under the point estimate: the draws' median
            median = out[f"{q}_star_median"].to_numpy(float)
            centre = np.where(np.isfinite(centre), centre, median)
        with np.errstate(invalid="ignore", divide="ignore"):
            x = np.log(centre)
        add = (np.asarray(e, float) * z * s) ** 2
        for side, sign in (("lo", -1.0), ("hi", 1.0)):
            col = f"{q}_star_{side}"
            old = out[col].to_numpy(float) if col in out else np.full(len(out), np.nan)
            out[f"{col}_draws"] = old
            h = np.where(np.isfinite(old), np.abs(x - np.log(np.where(old > 0, old, 1.0))), 0.0)
            widened = np.exp(x + sign * np.sqrt(h**2 + add))
            out[col] = np.where(np.isfinite(x), widened, old)
    return out
