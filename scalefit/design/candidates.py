"""Candidate runs: a grid of budgets and sizes around the fitted optimum, and the standard grid."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.accounting import tokens_for_budget, training_flops


def default_candidates(
    src,
    space,
    budget_for_runs: float,
    *,
    n_budgets: int = 6,
    n_sizes: int = 9,
    span: float = 2.0,
    depth_factors=(0.5, 1.0, 2.0),
    multiple_of: int = 8,
) -> pd.DataFrame:
    """Candidate runs around the point estimate's compute-optimal frontier.

    Run budgets are spaced evenly in log between ``budget_for_runs / 1000`` and
    ``budget_for_runs / 2``; at each, ``n_sizes`` model sizes span ``span`` decades around the
    optimum ``N*`` of the point estimate. For laws with depth and width, each size comes at
    ``depth_factors`` times the optimal depth, rounded to a whole depth and a width that is a
    multiple of ``multiple_of``; the parameter count is the exact one of that shape. Tokens are
    whole numbers rounded *down*, so a run never costs more than its budget: whether runs whose
    budgets add up to ``budget_for_runs`` fit within it then does not hinge on the last digits of
    the fit (rounding to nearest put ``6·N·T`` up to ~1e-9 above or below the budget).

    Returns
    -------
    DataFrame
        ``depth, width, params, tokens, flops`` (depth and width NaN without shape).
    """
    from ..allocate.solve import solve

    budgets = np.geomspace(budget_for_runs / 1000.0, budget_for_runs / 2.0, n_budgets)
    one = {k: np.array([v]) for k, v in src.point.items()}
    opt = solve(space, one, budgets, sets=False)
    rows = []
    steps = 10.0 ** np.linspace(-span / 2, span / 2, n_sizes)
    for b, (_, o) in zip(budgets, opt.iterrows(), strict=True):
        if not np.isfinite(o["params"]):
            continue
        for s in steps:
            n = o["params"] * s
            if space.kind != "shape":
                rows.append({"depth": np.nan, "width": np.nan, "params": n, "budget": b})
                continue
            base = o["depth"] if np.isfinite(o.get("depth", np.nan)) else 8.0
            for f in depth_factors:
                depth = max(1, int(round(base * f * s ** (1 / 3))))
                width = float(space.accounting.width(depth, n))
                width = max(multiple_of, int(round(width / multiple_of)) * multiple_of)
                p = float(space.accounting.params(depth, width, exact=True))
                rows.append({"depth": depth, "width": width, "params": p, "budget": b})
    if not rows:
        from ..core._validation import spelled
        from ..core.errors import ScaleFitError

        raise ScaleFitError(
            f"no candidate runs: the point estimate has no finite compute-optimal size at any "
            f"budget from {budgets[0]:.3g} to {budgets[-1]:.3g} FLOPs; pass "
            f"{spelled('candidates=...', '--candidates CSV')}."
        )
    frame = pd.DataFrame(rows).drop_duplicates(["depth", "width", "params", "budget"])
    frame["tokens"] = np.floor(tokens_for_budget(frame["budget"], frame["params"]))
    frame["flops"] = training_flops(frame["params"], frame["tokens"])
    return frame.drop(columns="budget").reset_index(drop=True)


def isoflop_grid(
    center_params,
    budgets,
    *,
    n_sizes: int = 4,
    span: float = 1.5,
) -> pd.DataFrame:
    """A standard IsoFLOP grid: ``n_sizes`` sizes over ``span`` decades around a centre per budget.

    Parameters
    ----------
    center_params : array-like
        Centre size per budget (e.g. today's estimate of ``N*``).
    budgets : array-like
        Budgets in FLOPs.
    n_sizes : int, default 4
        Sizes per budget.
    span : float, default 1.5
        Decades spanned.

    Returns
    -------
    DataFrame
        ``depth, width`` (NaN), ``params, tokens, flops``.
    """
    steps = 10.0 ** np.linspace(-span / 2, span / 2, n_sizes)
    n = (np.asarray(center_params, dtype=float)[:, None] * steps[None, :]).ravel()
    b = np.repeat(np.asarray(budgets, dtype=float), n_sizes)
    t = tokens_for_budget(b, n)
    return pd.DataFrame(
        {"depth": np.nan, "width": np.nan, "params": n, "tokens": t, "flops": training_flops(n, t)}
    )
