"""Practical shapes: integer depth, width a multiple of the head dimension, optional bounds.

Around the continuous optimum every integer depth in range is tried with the few multiples of the
head dimension nearest the best continuous width at that depth; parameters are counted exactly
(:func:`scalefit.core.accounting.param_count_array` with ``exact=True``) and tokens fill the budget,
``tokens = C / (6 params)``. With draws, each candidate's loss is evaluated under every draw:
that gives its interval, its expected loss and its regret (see :func:`rank`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core._validation import Interval, constraints, validate
from ..core.accounting import tokens_for_budget
from ..core.errors import ScaleFitError
from .profile import inner
from .space import Space

MAX_DEPTHS = 2048


@dataclass(frozen=True)
class Constraints:
    """Constraints on practical shapes.

    Parameters
    ----------
    head_dim : int
        Width must be a positive multiple of this.
    min_depth, max_depth : int or None
        Depth bounds (inclusive).
    aspect_max : float or None
        Upper bound on width / depth.
    """

    head_dim: int = 64
    min_depth: int = 1
    max_depth: int | None = None
    aspect_max: float | None = None

    def __post_init__(self):
        declared = constraints("head_dim", "min_depth", "aspect_max")
        declared["max_depth"] = [Interval(int, self.min_depth, None), None]
        for name in ("head_dim", "min_depth", "max_depth", "aspect_max"):  # min_depth first
            validate("Constraints", {name: getattr(self, name)}, {name: declared[name]})


def depth_grid(cap: float, cons: Constraints) -> np.ndarray:
    """Integer depths tried: ``min_depth`` up to ``cap`` (and ``max_depth``)."""
    top = int(np.ceil(cap))
    if cons.max_depth is not None:
        top = min(top, cons.max_depth)
    top = max(top, cons.min_depth)
    return np.arange(cons.min_depth, min(top, cons.min_depth + MAX_DEPTHS) + 1, dtype=float)


def best_widths(
    space: Space,
    point: dict[str, float],
    budgets: np.ndarray,
    depths: list[np.ndarray],
    y_hint: np.ndarray,
    y_box: tuple[np.ndarray, np.ndarray],
) -> list[np.ndarray]:
    """Continuous best width at each depth of ``depths[i]`` under ``budgets[i]`` (one batch)."""
    sizes = [len(d) for d in depths]
    rep = np.repeat(np.arange(len(budgets)), sizes)
    prm = {k: np.full(len(rep), float(v)) for k, v in point.items()}
    dd = np.concatenate(depths)
    _, y = inner(space, prm, budgets[rep], np.log(dd), y_hint[rep], y_box[0][rep], y_box[1][rep])
    w = space.accounting.width(dd, np.exp(y))
    return np.split(w, np.cumsum(sizes)[:-1])


def candidates(
    space: Space,
    point: dict[str, float],
    budget: float,
    depths: np.ndarray,
    w_cont: np.ndarray,
    cons: Constraints,
) -> pd.DataFrame:
    """Candidate practical shapes at one budget (point-estimate losses).

    ``w_cont`` is the continuous best width at each depth (:func:`best_widths`); the multiples
    of the head dimension around it (and the aspect-ratio cap) are the candidates.
    """
    h = cons.head_dim
    base = np.floor(w_cont / h)
    mult = base[:, None] + np.arange(-1, 3)[None, :]  # (q, 4)
    widths = mult * h
    if cons.aspect_max is not None:
        cap = np.floor(cons.aspect_max * depths / h) * h
        widths = np.concatenate([np.minimum(widths, cap[:, None]), cap[:, None]], axis=1)
    dd = np.broadcast_to(depths[:, None], widths.shape).reshape(-1)
    ww = widths.reshape(-1)
    keep = ww >= h
    frame = pd.DataFrame({"depth": dd[keep].astype(int), "width": ww[keep].astype(int)})
    frame = frame.drop_duplicates().reset_index(drop=True)
    if frame.empty:
        raise ScaleFitError(
            f"no practical shape satisfies the constraints at budget "
            f"{budget:g} (head_dim {h}, aspect_max {cons.aspect_max})."
        )
    frame["params"] = space.accounting.params(
        frame["depth"].to_numpy(), frame["width"].to_numpy(), exact=True
    )
    frame["tokens"] = tokens_for_budget(budget, frame["params"])
    frame["loss"] = evaluate(space, point, frame)
    return frame


def evaluate(space: Space, params: dict, frame: pd.DataFrame) -> np.ndarray:
    """Law values at the shapes of ``frame``; array params (D,) give a (D, len(frame)) matrix."""
    law = space.law
    x = {k: frame[k].to_numpy(dtype=float) for k in law.inputs}
    arr = {k: np.asarray(v, dtype=float) for k, v in params.items()}
    if any(v.ndim for v in arr.values()):
        arr = {k: v.reshape(-1, 1) for k, v in arr.items()}
    with np.errstate(all="ignore"):
        return np.asarray(law.expr(np, arr, law.variables(np, x)))


def rank(
    space: Space,
    frame: pd.DataFrame,
    draws: dict | None,
    prob: float,
    eps: float,
    floor: np.ndarray | None = None,
) -> pd.DataFrame:
    """Rank candidates by the decision rule; add loss intervals and regrets under the draws.

    Decision rule: with draws, candidates are sorted by their **expected loss** over the draws
    (ties: fewer params first), so rank 1 is the shape that minimises the expected loss. Its
    **regret** under a draw is its loss minus that draw's own optimum (the lower of the draw's
    continuous compute-optimal loss ``floor`` and its best candidate); ``regret_mean`` and
    ``regret_p95`` summarise it over the draws. Without draws, candidates are sorted by the point
    estimate's loss and the draw columns are NaN.

    Parameters
    ----------
    space : Space
        Law and accounting.
    frame : DataFrame
        Candidates from :func:`candidates`.
    draws : dict of name -> array (D,), optional
        Parameter draws of the fit.
    prob : float
        Interval probability of ``loss_lo``/``loss_hi``.
    eps : float
        Loss tolerance (nats) of the near-optimal set ``within_eps`` (point estimate).
    floor : array (D,), optional
        Each draw's continuous optimum loss at this budget (NaN where it has none).

    Returns
    -------
    DataFrame
        ``rank, depth, width, params, tokens, loss, expected_loss, regret_mean, regret_p95,
        loss_lo, loss_hi, within_eps, within_interval``.
    """
    frame = frame.copy()
    nan = np.full(len(frame), np.nan)
    frame["expected_loss"], frame["regret_mean"], frame["regret_p95"] = nan, nan, nan
    frame["loss_lo"], frame["loss_hi"] = nan, nan
    mat = evaluate(space, draws, frame) if draws is not None else None  # (D, K)
    if mat is not None:
        ok = np.all(np.isfinite(mat), axis=1)
        best = mat.min(axis=1)
        if floor is not None:
            f = np.asarray(floor, dtype=float)
            best = np.where(np.isfinite(f), np.minimum(best, f), best)
        regret = np.maximum(mat[ok] - best[ok, None], 0.0)
        mat = mat[ok]
    if mat is not None and len(mat):
        frame["loss_lo"], frame["loss_hi"] = np.quantile(
            mat, [(1 - prob) / 2, (1 + prob) / 2], axis=0
        )
        frame["expected_loss"] = mat.mean(axis=0)
        frame["regret_mean"] = regret.mean(axis=0)
        frame["regret_p95"] = np.quantile(regret, 0.95, axis=0)
        frame = frame.sort_values(["expected_loss", "params"]).reset_index(drop=True)
        frame["within_interval"] = frame["loss"] <= frame["loss_hi"].iloc[0]
    else:
        frame = frame.sort_values(["loss", "params"]).reset_index(drop=True)
    point_best = float(frame["loss"].min())
    frame["within_eps"] = frame["loss"] <= point_best + eps
    if "within_interval" not in frame:
        frame["within_interval"] = frame["within_eps"]
    frame.insert(0, "rank", np.arange(1, len(frame) + 1))
    return frame
