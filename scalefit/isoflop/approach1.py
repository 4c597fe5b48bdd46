"""Approach 1: the envelope of training curves (lowest loss reached with at most C FLOPs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..core._validation import Interval, constraints, spelled, validate
from ..core.accounting import tokens_for_budget
from ..core.errors import ScaleFitError
from ._curves import PowerLawExponents, exponent_table
from .budgets import flops_of


@dataclass(frozen=True)
class EnvelopeResult(PowerLawExponents):
    """Result of :func:`approach1`.

    Attributes
    ----------
    envelope : DataFrame
        ``flops, loss, params, tokens, run``: the best run at each grid budget.
    exponents : DataFrame
        Rows ``params`` (a) and ``tokens`` (b): ``exponent, lo, hi, intercept``.
    ci_prob : float
        Interval probability (bootstrap over runs).
    n_runs : int
        Runs used.
    """

    envelope: pd.DataFrame
    exponents: pd.DataFrame
    ci_prob: float
    n_runs: int
    n_boot: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dictionary."""
        return {
            "prob": self.ci_prob,
            "n_runs": self.n_runs,
            "n_boot": self.n_boot,
            "seed": self.seed,
            "exponents": self.exponents.reset_index().to_dict(orient="records"),
        }


def _curves(table: pd.DataFrame, run: str, tokens_per_step: float | None = None) -> pd.DataFrame:
    need = {run, "loss", "params"}
    missing = sorted(need - set(table.columns))
    if missing:
        raise ScaleFitError(
            f"approach1: the long table needs columns {sorted(need)} and 'flops' or 'tokens'; "
            f"missing {missing}."
        )
    if not {"flops", "tokens"} & set(table.columns):
        if "step" not in table.columns or tokens_per_step is None:
            raise ScaleFitError(
                "approach1: the long table needs a 'flops' or a 'tokens' column, or a 'step' "
                f"column and {spelled('tokens_per_step=...', '--tokens-per-step N')}."
            )
        table = table.assign(tokens=table["step"].to_numpy(float) * tokens_per_step)
    c = flops_of(table, "approach1")
    out = pd.DataFrame(
        {
            "run": table[run].to_numpy(),
            "logc": np.log(c),
            "loss": table["loss"].to_numpy(float),
            "params": table["params"].to_numpy(float),
        }
    )
    bad = ~np.isfinite(out[["logc", "loss", "params"]].to_numpy()).all(axis=1)
    if bad.any():
        raise ScaleFitError(
            f"approach1: row {int(np.flatnonzero(bad)[0])} has a non-finite flops/params/loss."
        )
    return out.sort_values(["run", "logc"], kind="stable").reset_index(drop=True)


def _envelope(runs: list, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Best loss with at most ``exp(grid)`` FLOPs and the params of the run reaching it.

    ``runs`` holds one ``(log C, loss, params)`` triple of arrays per run, sorted by compute.
    """
    cand_c, cand_l, cand_n = [], [], []
    for lc, ls, n in runs:
        cand_c.append(lc)
        cand_l.append(ls)
        cand_n.append(np.full(len(lc), n))
        if len(lc) >= 2:
            inside = grid[(grid > lc[0]) & (grid < lc[-1])]
            cand_c.append(inside)
            cand_l.append(np.interp(inside, lc, ls))
            cand_n.append(np.full(len(inside), n))
    c, loss, n = (np.concatenate(v) for v in (cand_c, cand_l, cand_n))
    order = np.argsort(c, kind="stable")
    c, loss, n = c[order], loss[order], n[order]
    best = np.minimum.accumulate(loss)
    new_min = loss <= np.concatenate([[np.inf], best[:-1]])  # index of the running minimum:
    arg = np.maximum.accumulate(np.where(new_min, np.arange(len(loss)), 0))
    pos = np.searchsorted(c, grid, side="right") - 1
    ok = pos >= 0
    out_l, out_n = np.full(len(grid), np.nan), np.full(len(grid), np.nan)
    out_l[ok], out_n[ok] = best[pos[ok]], n[arg[pos[ok]]]
    return out_l, out_n


def approach1(
    table: pd.DataFrame,
    *,
    run: str = "run",
    n_grid: int = 200,
    min_runs: int = 3,
    ci_prob: float = 0.95,
    n_boot: int = 200,
    seed: int = 0,
    tokens_per_step: float | None = None,
) -> EnvelopeResult:
    """Chinchilla's Approach 1: the lowest loss reached with at most C FLOPs, and who reached it.

    Each run's loss curve (points ordered by compute, ``C = 6·N·tokens-so-far``) is interpolated
    linearly in ``log C``; at each of ``n_grid`` budgets spaced evenly in ``log C`` the envelope is
    the lowest loss reached by any run with at most that compute, and ``N*(C)`` the size of the run
    reaching it (a step function, as in Hoffmann et al.). ``log N*`` and ``log T* = log(C/(6N*))``
    are regressed on ``log C`` over the grid, starting where ``min_runs`` runs have been seen.
    The interval resamples runs (whole curves) with replacement.

    Parameters
    ----------
    table : DataFrame
        Long table: a run id column, ``params``, ``loss`` and ``flops`` or ``tokens`` (tokens seen
        so far) per row; a run with one row is a single point.
    run : str, default "run"
        Run id column.
    n_grid : int, default 200
        Grid budgets.
    min_runs : int, default 3
        Runs that must lie below the first grid budget.
    ci_prob : float, default 0.95
        Interval probability.
    n_boot : int, default 200
        Bootstrap resamples of runs.
    seed : int, default 0
        Bootstrap seed.
    tokens_per_step : float, optional
        Tokens per optimiser step, for a long table with ``step`` but no ``tokens``/``flops``
        (tokens seen = step × tokens_per_step).

    Returns
    -------
    EnvelopeResult
    """
    validate(
        "approach1",
        locals(),
        {
            "n_grid": [Interval(int, 10, None)],
            "min_runs": [Interval(int, 1, None)],
            "n_boot": [Interval(int, 0, None)],
            **constraints("ci_prob", "seed", "tokens_per_step"),
        },
    )
    cur = _curves(table, run, tokens_per_step)
    runs = cur["run"].unique()
    if len(runs) < max(3, min_runs):
        raise ScaleFitError(f"approach1: needs at least {max(3, min_runs)} runs; got {len(runs)}.")
    first = np.sort(cur.groupby("run")["logc"].min().to_numpy())[min_runs - 1]
    grid = np.linspace(first, cur["logc"].max(), n_grid)
    runs_arr = [
        (g["logc"].to_numpy(), g["loss"].to_numpy(), float(g["params"].iloc[0]))
        for _, g in cur.groupby("run", sort=False)
    ]
    loss, n = _envelope(runs_arr, grid)
    a, icpt = np.polyfit(grid, np.log(n), 1)
    boots = []
    rng = np.random.default_rng(seed)
    for _ in range(n_boot):
        pick = rng.integers(0, len(runs_arr), len(runs_arr))
        _, nb = _envelope([runs_arr[i] for i in pick], grid)
        ok = np.isfinite(nb)
        if ok.sum() >= 2 and np.ptp(grid[ok]) > 0:
            boots.append(np.polyfit(grid[ok], np.log(nb[ok]), 1)[0])
    lo, hi = (
        np.quantile(boots, [(1 - ci_prob) / 2, (1 + ci_prob) / 2])
        if len(boots) >= 10
        else (np.nan,) * 2
    )
    c = np.exp(grid)
    env = pd.DataFrame({"flops": c, "loss": loss, "params": n, "tokens": tokens_for_budget(c, n)})
    return EnvelopeResult(
        env, exponent_table(a, lo, hi, icpt), float(ci_prob), len(runs), int(n_boot), int(seed)
    )
