"""Group runs by training budget: a given ``budget`` column, given budgets, or detected clusters."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..allocate.api import check_budgets
from ..core._validation import Interval, spelled, validate
from ..core.accounting import training_flops
from ..core.errors import ScaleFitError


def flops_of(table: pd.DataFrame, where: str = "isoflop") -> np.ndarray:
    """Training compute of each row: the ``flops`` column, else ``6·params·tokens``."""
    if "flops" in table.columns:
        c = table["flops"].to_numpy(float)
    elif {"params", "tokens"} <= set(table.columns):
        c = training_flops(table["params"], table["tokens"])
    else:
        raise ScaleFitError(
            f"{where}: the table needs a 'flops' column or both 'params' and 'tokens'. "
            f"Got columns {sorted(map(str, table.columns))} instead."
        )
    if not np.all(np.isfinite(c) & (c > 0)):
        bad = int(np.flatnonzero(~(np.isfinite(c) & (c > 0)))[0])
        raise ScaleFitError(f"{where}: flops must be finite and positive; row {bad} is not.")
    return c


def detect_budgets(flops, *, tol: float = 0.06, min_runs: int = 4) -> np.ndarray:
    """Budgets at the modes of ``log10 flops`` (clusters of runs at about the same compute).

    A Gaussian kernel of width ``tol / 2`` dex is placed on every run; local maxima of the density
    with at least ``min_runs`` runs within ``tol`` dex become budgets, and modes closer than
    ``2·tol`` dex are merged (the larger cluster wins). The budget value is the geometric mean of
    the runs assigned to it.

    Parameters
    ----------
    flops : array-like
        Compute of each run.
    tol : float, default 0.06
        Half-width of a budget cluster in dex (decades of FLOPs).
    min_runs : int, default 4
        Smallest cluster kept (a parabola needs at least 4 runs to leave a residual).

    Returns
    -------
    ndarray
        Sorted budgets (FLOPs).
    """
    logc = np.log10(np.asarray(flops, dtype=float))
    grid = np.arange(logc.min() - tol, logc.max() + tol, tol / 20)
    dens = np.exp(-0.5 * ((grid[:, None] - logc[None, :]) / (tol / 2)) ** 2).sum(axis=1)
    peak = np.flatnonzero((dens[1:-1] >= dens[:-2]) & (dens[1:-1] > dens[2:])) + 1
    counts = np.array([(np.abs(logc - grid[i]) <= tol).sum() for i in peak])
    keep: list[float] = []
    for i in np.argsort(-counts, kind="stable"):
        if counts[i] < min_runs:
            break
        if all(abs(grid[peak[i]] - k) >= 2 * tol for k in keep):
            keep.append(float(grid[peak[i]]))
    out = []
    for k in sorted(keep):
        near = np.abs(logc - k) <= tol
        out.append(10 ** float(np.mean(logc[near])))
    return np.array(out)


def assign_budgets(
    table: pd.DataFrame,
    budgets=None,
    *,
    tol: float = 0.06,
    min_runs: int = 4,
    where: str = "isoflop",
) -> pd.Series:
    """The budget each row belongs to (NaN for rows near no budget).

    Parameters
    ----------
    table : DataFrame
        Canonical table with ``flops`` (or ``params`` and ``tokens``); a ``budget`` column, when
        present and ``budgets`` is None, is used as is.
    budgets : array-like, optional
        Nominal budgets; each row goes to the nearest one within ``tol`` dex. Default: detected
        with :func:`detect_budgets`.
    tol : float, default 0.06
        Largest distance in dex between a run's compute and its budget.
    min_runs : int, default 4
        Smallest cluster when budgets are detected.
    where : str
        Caller name for error messages.

    Returns
    -------
    Series
        Budget per row, aligned with ``table``.
    """
    validate(
        where,
        {"tol": tol, "min_runs": min_runs},
        {"tol": [Interval(float, 0, 1, closed="right")], "min_runs": [Interval(int, 4, None)]},
    )
    if budgets is None and "budget" in table.columns:
        b = table["budget"].to_numpy(float)
        if not np.all(np.isfinite(b) & (b > 0)):
            raise ScaleFitError(f"{where}: the 'budget' column must hold positive FLOP counts.")
        return pd.Series(b, index=table.index, name="budget")
    flops = flops_of(table, where)
    if budgets is None:
        nominal = detect_budgets(flops, tol=tol, min_runs=min_runs)
    else:
        nominal = np.sort(check_budgets(budgets, where))
    if nominal.size == 0:
        raise ScaleFitError(
            f"{where}: found no cluster of at least {min_runs} runs within {tol} dex of one "
            f"budget; pass {spelled('budgets=[...]', '--budget FLOPS')} or add a 'budget' column."
        )
    dist = np.abs(np.log10(flops)[:, None] - np.log10(nominal)[None, :])
    nearest = dist.argmin(axis=1)
    out = np.where(dist[np.arange(len(flops)), nearest] <= tol, nominal[nearest], np.nan)
    return pd.Series(out, index=table.index, name="budget")
