"""What a fitted law implies: scaling exponents, critical depth, audits and iso-FLOP curves."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..core.accounting import tokens_for_budget
from ..core.errors import ScaleFitError
from .api import check_budgets, resolve
from .practical import evaluate
from .profile import depth_profile
from .solve import solve
from .space import Accounting, Space

DEFAULT_BUDGETS = np.logspace(19, 25, 13)


def _slopes(logc: np.ndarray, logq: np.ndarray) -> np.ndarray:
    """Least-squares slope of each row of ``logq`` (S, B) against ``logc`` (B,); NaN if gaps."""
    xc = logc - logc.mean()
    ok = np.all(np.isfinite(logq), axis=1)
    out = np.full(len(logq), np.nan)
    yc = logq[ok] - logq[ok].mean(axis=1, keepdims=True)
    out[ok] = yc @ xc / (xc @ xc)
    return out


def scaling_exponents(
    source: Any,
    budgets=None,
    *,
    params: dict | None = None,
    law_options: dict | None = None,
    accounting: Accounting | None = None,
    min_depth: float = 1.0,
    max_depth: float = 1e4,
    eps: float = 1e-3,
    ci_prob: float | None = None,
    use_draws: bool = True,
) -> pd.DataFrame:
    """Exponents ``a`` of ``q* ∝ C^a`` fitted over a budget range, with intervals from draws.

    For each parameter set (the point estimate and every draw) the continuous optimum is solved
    at every budget and ``log q*`` regressed on ``log C``. Quantities: ``params``, ``tokens`` and,
    for shape laws, ``depth``, ``width`` and ``width_per_depth``; for a flat optimum ``depth`` and
    ``width`` are undefined and the ends of the plateau are reported instead
    (``depth_max_opt``: the deepest exactly-optimal depth, ``width_at_depth_max_opt``).

    Parameters
    ----------
    source, params, law_options, accounting
        As in :func:`scalefit.allocate.allocate`.
    budgets : array-like, optional
        Budgets spanning the range (default ``1e19 … 1e25``, 13 points).
    min_depth, max_depth : float
        Depth bounds of the continuous search.
    eps : float
        Tolerance for the near-optimal sets (only used to detect flat optima).
    ci_prob : float, optional
        Interval probability.
    use_draws : bool
        Use the draws of a fit result.

    Returns
    -------
    DataFrame
        One row per quantity: ``exponent`` (point estimate), ``median``, ``lo``, ``hi``,
        ``n_draws`` (draws with a finite optimum at every budget), ``budget_lo``, ``budget_hi``.
    """
    src = resolve(source, params, law_options, ci_prob)
    budgets = check_budgets(DEFAULT_BUDGETS if budgets is None else budgets, "scaling_exponents")
    if len(budgets) < 2:
        raise ScaleFitError("scaling exponents need at least two budgets.")
    space = Space.of(src.law, accounting)
    rng = (float(min_depth), float(max_depth))
    one = {k: np.array([v]) for k, v in src.point.items()}
    point = solve(space, one, budgets, depth_range=rng, eps=eps, sets=True)
    flat = space.kind == "shape" and bool(point["flat"].all())
    draws = None
    if use_draws and src.draws is not None:
        sets = space.kind == "shape" and flat
        draws = solve(space, src.draws, budgets, depth_range=rng, eps=eps, sets=sets)
    logc = np.log(budgets)
    rows = []
    for name, col in _quantities(space, flat):
        row = {"quantity": name, "exponent": _slopes(logc, _log(point, col, 1))[0]}
        if draws is not None:
            s = _slopes(logc, _log(draws, col, len(next(iter(src.draws.values())))))
            s = s[np.isfinite(s)]
            qs = (
                np.quantile(s, [(1 - src.prob) / 2, 0.5, (1 + src.prob) / 2])
                if len(s)
                else [np.nan] * 3
            )
            row.update(lo=qs[0], median=qs[1], hi=qs[2], n_draws=len(s))
        row.update(budget_lo=budgets.min(), budget_hi=budgets.max())
        rows.append(row)
    return pd.DataFrame(rows)


def _quantities(space: Space, flat: bool) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [("params", "params"), ("tokens", "tokens")]
    if space.kind == "shape" and not flat:
        out += [("depth", "depth"), ("width", "width"), ("width_per_depth", ("width", "depth"))]
    elif space.kind == "shape":
        out += [("depth_max_opt", "flat_depth_hi"), ("width_at_depth_max_opt", "flat_width_lo")]
    return out


def _log(frame: pd.DataFrame, col, n_set: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        if isinstance(col, tuple):
            v = np.log(frame[col[0]].to_numpy(float)) - np.log(frame[col[1]].to_numpy(float))
        else:
            v = np.log(frame[col].to_numpy(float))
    return v.reshape(n_set, -1)


# ----------------------------------------------------------------------------- critical depth
def critical_depth_of(p: dict, width) -> np.ndarray:
    """``lc(W)`` of a critical-depth law: ``kappa ln W`` or ``c_crit W^a_crit`` (broadcasts)."""
    width = np.asarray(width, dtype=float)
    if "kappa" in p:
        return np.asarray(p["kappa"]) * np.log(width)
    if "c_crit" in p and "a_crit" in p:
        return np.asarray(p["c_crit"]) * width ** np.asarray(p["a_crit"])
    raise ScaleFitError(
        "this law has no critical depth (needs 'kappa', or 'c_crit' and 'a_crit': "
        "critical_depth or critical_depth_power)."
    )


def _band(values: np.ndarray, prob: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return tuple(np.nanquantile(values, [(1 - prob) / 2, 0.5, (1 + prob) / 2], axis=0))


def critical_depth_table(
    source: Any,
    widths,
    *,
    params: dict | None = None,
    law_options: dict | None = None,
    ci_prob: float | None = None,
) -> pd.DataFrame:
    """Critical depth ``lc(W)`` at the given widths, with its interval from the draws.

    Returns
    -------
    DataFrame
        ``width, lc`` (point estimate) and, with draws, ``lc_lo, lc_median, lc_hi``.
    """
    src = resolve(source, params, law_options, ci_prob)
    widths = np.atleast_1d(np.asarray(widths, dtype=float))
    out = pd.DataFrame({"width": widths, "lc": critical_depth_of(src.point, widths)})
    if src.draws is not None:
        d = critical_depth_of({k: v[:, None] for k, v in src.draws.items()}, widths[None])
        out["lc_lo"], out["lc_median"], out["lc_hi"] = _band(d, src.prob)
    return out


def audit(
    source: Any,
    architectures,
    *,
    params: dict | None = None,
    law_options: dict | None = None,
    accounting: Accounting | None = None,
    ci_prob: float | None = None,
) -> pd.DataFrame:
    """Critical-depth audit of given architectures.

    Parameters
    ----------
    source, params, law_options, accounting, ci_prob
        As in :func:`scalefit.allocate.allocate` (a ``critical_depth`` law).
    architectures : DataFrame or sequence of (name, depth, width)
        Shapes to audit; an optional ``tokens`` column (default ``20·params``) only matters for
        the ``loss`` column, not for the penalty.

    Returns
    -------
    DataFrame
        ``name, depth, width, params, lc, depth_over_lc, penalty, loss`` and, with draws,
        ``*_lo``/``*_hi`` intervals of ``lc``, ``depth_over_lc`` and ``penalty``. The penalty is
        the law's loss minus the same loss with ``gamma = 0``.
    """
    src = resolve(source, params, law_options, ci_prob)
    space = Space.of(src.law, accounting)
    arch = (
        architectures.copy()
        if isinstance(architectures, pd.DataFrame)
        else pd.DataFrame(list(architectures), columns=["name", "depth", "width"])
    )
    for col in ("depth", "width"):
        if col not in arch or not np.all(np.asarray(arch[col], dtype=float) > 0):
            raise ScaleFitError(f"audit: column {col!r} must be present and positive.")
    arch["params"] = space.accounting.params(arch["depth"], arch["width"])
    if "tokens" not in arch:
        arch["tokens"] = 20.0 * arch["params"]
    sets = [("point", src.point)] + ([("draws", src.draws)] if src.draws is not None else [])
    for label, p in sets:
        if "gamma" not in p:
            raise ScaleFitError(f"law {src.law.name!r} has no depth penalty ('gamma').")
        lc = critical_depth_of(
            p if label == "point" else {k: v[:, None] for k, v in p.items()},
            arch["width"].to_numpy(float)[None]
            if label == "draws"
            else arch["width"].to_numpy(float),
        )
        loss = evaluate(space, p, arch)
        pen = loss - evaluate(space, dict(p, gamma=np.zeros_like(p["gamma"])), arch)
        ratio = arch["depth"].to_numpy(float) / lc
        if label == "point":
            arch["lc"], arch["depth_over_lc"], arch["penalty"], arch["loss"] = lc, ratio, pen, loss
        else:
            for name, v in (("lc", lc), ("depth_over_lc", ratio), ("penalty", pen)):
                lo, _, hi = _band(v, src.prob)
                arch[f"{name}_lo"], arch[f"{name}_hi"] = lo, hi
    return arch


# ----------------------------------------------------------------------------- iso-FLOP curve
def isoflop_curve(
    source: Any,
    budget: float,
    depths=None,
    *,
    params: dict | None = None,
    law_options: dict | None = None,
    accounting: Accounting | None = None,
    ci_prob: float | None = None,
    n_points: int = 60,
) -> pd.DataFrame:
    """Best predicted loss against depth at a fixed budget (the iso-FLOP profile).

    At each depth the width (and with it params and tokens = C / (6 params)) minimising the
    point-estimate loss is found; with draws the loss of that shape under every draw gives a band.

    Returns
    -------
    DataFrame
        ``depth, width, params, tokens, loss`` and, with draws, ``loss_lo, loss_hi``.
    """
    src = resolve(source, params, law_options, ci_prob)
    budget = float(check_budgets(budget, "isoflop_curve")[0])
    space = Space.of(src.law, accounting)
    if space.kind != "shape":
        raise ScaleFitError(f"law {src.law.name!r} has no depth: no iso-FLOP depth curve.")
    one = {k: np.array([v]) for k, v in src.point.items()}
    if depths is None:
        opt = solve(space, one, [budget], sets=True).iloc[0]
        top = np.nanmax([opt["depth_hi"], opt.get("flat_depth_hi", np.nan)])
        depths = np.geomspace(1.0, max(8.0, 4.0 * top), n_points)
    depths = np.asarray(depths, dtype=float)
    if depths.ndim != 1 or not np.all(depths > 0):
        raise ScaleFitError("isoflop_curve: depths must be a 1-D array of positive numbers.")
    lo, hi = space.box(np.array([budget]), (1.0, 1e4))
    y0 = np.array([0.5 * (lo[0, 1] + hi[0, 1])])
    loss, y = depth_profile(space, one, np.array([budget]), np.log(depths), y0, lo[:, 1], hi[:, 1])
    n = np.exp(y[0])
    out = pd.DataFrame(
        {
            "depth": depths,
            "width": space.accounting.width(depths, n),
            "params": n,
            "tokens": tokens_for_budget(budget, n),
            "loss": loss[0],
        }
    )
    if src.draws is not None:
        vals = evaluate(space, src.draws, out)
        out["loss_lo"], _, out["loss_hi"] = _band(vals, src.prob)
    return out
