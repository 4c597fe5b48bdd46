"""The continuous compute-optimal solver, generic over the law catalogue.

:func:`solve` takes parameter values (one set or many draws, as arrays) and budgets and returns the
compute-optimal point of every (draw, budget) pair, computed the same way for every law: a coarse
grid, then a projected Newton method (:mod:`scalefit.allocate._newton`) on the law's own expression
evaluated with numpy, vectorised over draws and budgets. For shape laws it also returns the set of
near-optimal depths and whether the optimum is flat (:mod:`scalefit.allocate.profile`). Closed forms
(:mod:`scalefit.allocate.closed_form`) are used only to check it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..core.accounting import tokens_for_budget
from ._newton import Minimum, grid_start, minimise
from .profile import depth_profile, level_set, plateau_level
from .space import RATIO_RANGE, Space

GRID = {1: (41,), 2: (15, 21)}
GRID_WITH_HINT = {1: (9,), 2: (5, 7)}
PROFILE_POINTS = 64
SET_PROBLEM_LIMIT = 20_000  # per-draw sets above this many (draw, budget) pairs only if asked


def _problems(params: Mapping[str, np.ndarray], budgets: np.ndarray):
    """Flatten (draw, budget) pairs: draw-major, budget-minor."""
    n_draw = len(next(iter(params.values())))
    n_bud = len(budgets)
    rep = {k: np.repeat(np.asarray(v, dtype=float), n_bud) for k, v in params.items()}
    return rep, np.tile(budgets, n_draw), n_draw, n_bud


def solve(
    space: Space,
    params: Mapping[str, np.ndarray],
    budgets,
    *,
    depth_range: tuple[float, float] = (1.0, 1e4),
    eps: float = 1e-3,
    sets: bool | None = None,
    ratio_range: tuple[float, float] = RATIO_RANGE,
    hint: np.ndarray | None = None,
) -> pd.DataFrame:
    """Compute-optimal allocation for every (parameter set, budget) pair.

    Parameters
    ----------
    space : Space
        The law's search space (:meth:`Space.of`).
    params : mapping of name -> array (n_sets,)
        Public parameter values; several sets (e.g. bootstrap draws) are solved together.
        Parameters are used exactly as given (never rounded).
    budgets : array-like
        FLOP budgets C (> 0).
    depth_range : (float, float)
        Bounds on depth for shape laws.
    eps : float
        Loss tolerance (nats) of the near-optimal depth set.
    sets : bool, optional
        Compute the near-optimal depth set of every pair (default: when there are at most
        ``SET_PROBLEM_LIMIT`` pairs).
    ratio_range : (float, float)
        Allowed tokens-per-parameter ratios; an optimum on this edge is flagged ``unbounded``.
    hint : ndarray, shape (n_budgets, n), optional
        A good starting point per budget (``(log depth,) log params``, e.g. the optimum of the
        point estimate when solving bootstrap draws); a coarser grid is then searched beside it.

    Returns
    -------
    DataFrame
        One row per pair (``set`` index, ``budget``): ``params``, ``tokens``, ``loss``,
        ``unbounded`` (with ``unbounded_side`` +1 when the law wants ever more params and
        fewer tokens, -1 for the reverse); for shape laws also ``depth``, ``width``,
        ``depth_at_bound``, and with sets
        ``depth_lo``, ``depth_hi``, ``width_lo``, ``width_hi`` (near-optimal set within ``eps``),
        ``flat`` with ``flat_depth_lo``/``flat_depth_hi`` (the plateau of exactly optimal
        depths) and ``flat_width_lo``/``flat_width_hi`` (the widths at its deep and shallow ends).
        On a flat optimum ``depth`` and ``width`` are NaN: the law does not single out a shape.
    """
    budgets = np.atleast_1d(np.asarray(budgets, dtype=float))
    prm, bud, n_set, n_bud = _problems(params, budgets)
    lo, hi = space.box(bud, depth_range, ratio_range)
    extra = None if hint is None else np.tile(np.asarray(hint, dtype=float), (n_set, 1))[:, None]
    res = optimum(space, prm, bud, (lo, hi), extra)
    out = {"set": np.repeat(np.arange(n_set), n_bud), "budget": bud}
    unbounded = res.at_lo[:, -1] | res.at_hi[:, -1]
    if space.kind == "shape":
        want = sets if sets is not None else len(bud) <= SET_PROBLEM_LIMIT
        if want:
            _sets(space, prm, bud, res, lo, hi, eps, out)
        x = res.z[:, 0]
        out["depth"] = np.exp(x)
        out["width"] = space.accounting.width(out["depth"], np.exp(res.z[:, 1]))
        out["depth_at_bound"] = res.at_lo[:, 0] | res.at_hi[:, 0]
        if "flat" in out:
            out["depth"] = np.where(out["flat"], np.nan, out["depth"])
            out["width"] = np.where(out["flat"], np.nan, out["width"])
    n = np.exp(res.z[:, -1])
    out.update(
        params=n,
        tokens=tokens_for_budget(bud, n),
        loss=res.f,
        unbounded=unbounded,
        unbounded_side=res.at_hi[:, -1].astype(int) - res.at_lo[:, -1].astype(int),
        converged=res.converged,
    )
    frame = pd.DataFrame(out)
    bad = frame["unbounded"].to_numpy()
    for col in (
        "params",
        "tokens",
        "depth",
        "width",
        "depth_lo",
        "depth_hi",
        "width_lo",
        "width_hi",
        "flat_depth_lo",
        "flat_depth_hi",
        "flat_width_lo",
        "flat_width_hi",
    ):
        if col in frame:
            frame.loc[bad, col] = np.nan
    return frame


def optimum(space: Space, params, budgets: np.ndarray, box=None, extra=None) -> Minimum:
    """The compute-optimal point of each problem: parameter set ``i`` at budget ``budgets[i]``.

    Pairs are taken elementwise (:func:`solve` pairs every set with every budget); ``box``
    defaults to :meth:`Space.box` with the default depth and ratio ranges; ``extra`` (P, E, n)
    are further starting candidates (then a coarser grid is searched beside them).
    """
    lo, hi = space.box(budgets, (1.0, 1e4)) if box is None else box
    f = space.objective(params, budgets)
    grid = (GRID if extra is None else GRID_WITH_HINT)[space.ndim]
    return minimise(f, lo, hi, grid_start(f, lo, hi, grid, extra=extra)[0])


def _sets(space, prm, bud, res, lo, hi, eps, out) -> None:
    """Fill the near-optimal and plateau depth sets (and repair a missed global optimum)."""
    logd = np.linspace(lo[0, 0], hi[0, 0], PROFILE_POINTS)
    ylo, yhi = lo[:, 1], hi[:, 1]
    loss, y = depth_profile(space, prm, bud, logd, res.z[:, 1], ylo, yhi)
    k = np.argmin(loss, axis=1)
    rows = np.arange(len(bud))
    better = loss[rows, k] < res.f - 1e-12 * np.abs(res.f)
    if better.any():  # the grid start missed the global basin: restart there
        idx = np.flatnonzero(better)
        z0 = np.stack([logd[k[idx]], y[idx, k[idx]]], axis=1)
        sub = {kk: v[idx] for kk, v in prm.items()}
        f = space.objective(sub, bud[idx])
        again = minimise(f, lo[idx], hi[idx], z0)
        for name in ("z", "f", "at_lo", "at_hi", "converged"):
            getattr(res, name)[idx] = getattr(again, name)
    best = np.minimum(res.f, loss.min(axis=1))
    near = level_set(
        space, prm, bud, np.broadcast_to(logd, loss.shape), loss, y, best + eps, ylo, yhi
    )
    flat = level_set(
        space, prm, bud, np.broadcast_to(logd, loss.shape), loss, y, plateau_level(best), ylo, yhi
    )
    step = logd[1] - logd[0]
    is_flat = (flat["logd_hi"] - flat["logd_lo"]) > 1.5 * step
    acc = space.accounting
    out["depth_lo"], out["depth_hi"] = np.exp(near["logd_lo"]), np.exp(near["logd_hi"])
    w_a = acc.width(out["depth_hi"], np.exp(near["y_hi"]))
    w_b = acc.width(out["depth_lo"], np.exp(near["y_lo"]))
    out["width_lo"], out["width_hi"] = np.minimum(w_a, w_b), np.maximum(w_a, w_b)
    out["flat"] = is_flat
    out["flat_depth_lo"] = np.where(is_flat, np.exp(flat["logd_lo"]), np.nan)
    out["flat_depth_hi"] = np.where(is_flat, np.exp(flat["logd_hi"]), np.nan)
    out["flat_width_lo"] = acc.width(out["flat_depth_hi"], np.exp(flat["y_hi"]))
    out["flat_width_hi"] = acc.width(out["flat_depth_lo"], np.exp(flat["y_lo"]))
    out["set_gaps"] = near["gaps"]
