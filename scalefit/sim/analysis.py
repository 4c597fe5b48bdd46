"""Aggregate toy sweep results and fit the depth exponent α_ℓ per group (torch-free).

The fit itself is :func:`scalefit.fit` with the ``depth_power`` law ``L = c/ℓ^α + L0``; this
module only groups the tidy table and collects the results.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .._validation import fmt_value
from ..errors import ScaleFitError
from ..table import read_csv

#: Columns that always define a group.
GROUP_KEYS = ("teacher_mode", "rho", "temperature", "steps")
#: Columns added to the group when they vary across the table.
OPTIONAL_KEYS = ("loss_kind", "block", "width", "teacher_depth", "batch", "total_steps", "lr")
LOSS_COLUMNS = ("test_loss", "train_loss")
#: The law fitted to each group (its depth exponent's range [0, 5] is a validity condition).
LAW = "depth_power"


def load_results(path: str | os.PathLike) -> pd.DataFrame:
    """Read a toy sweep's tidy table from a sweep folder or a results CSV.

    Parameters
    ----------
    path : path-like
        A sweep output folder (its ``results.csv`` is read, or rebuilt from ``runs/`` when
        missing) or a CSV file with the same columns.

    Raises
    ------
    ScaleFitError
        Missing file or missing columns.
    """
    path = Path(path)
    if path.is_dir():
        csv = path / "results.csv"
        if not csv.is_file():
            from ..sweep import collect_results

            if not list(path.glob("runs/*/result.json")):
                raise ScaleFitError(f"{path}: no results.csv and no finished runs in runs/.")
            return collect_results(path)
        path = csv
    if not path.is_file():
        raise ScaleFitError(f"{path}: no such file or folder.")
    table = read_csv(path)
    need = {"teacher_mode", "rho", "temperature", "depth", "steps", *LOSS_COLUMNS}
    missing = sorted(need - set(table.columns))
    if missing:
        raise ScaleFitError(f"{path}: missing column(s) {missing}; is this a toy sweep table?")
    for col in ("depth", "steps", "temperature", *LOSS_COLUMNS):
        raw = table[col]
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
        bad = ~(np.isfinite(values) & (values > 0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ScaleFitError(
                f"{path}: column {col!r}, row {i + 1}: expected a finite positive number, got "
                f"{fmt_value(raw.iloc[i])}."
            )
    return table


def group_keys(table: pd.DataFrame) -> list[str]:
    """The grouping columns: :data:`GROUP_KEYS` plus optional keys that vary in ``table``."""
    extra = [k for k in OPTIONAL_KEYS if k in table.columns and table[k].nunique() > 1]
    return [*GROUP_KEYS, *extra]


def fit_depth_exponents(
    table: pd.DataFrame,
    *,
    loss_column: str = "test_loss",
    bootstrap: int = 200,
    seed: int = 0,
    final_only: bool = False,
) -> pd.DataFrame:
    """Fit ``L = c/ℓ^α + L0`` to each group of a toy table.

    Parameters
    ----------
    table : DataFrame
        Tidy toy results (see :func:`load_results`): one row per student depth, seed, replica
        and checkpoint. Every row of a group is a data point (seeds and replicas included).
    loss_column : {"test_loss", "train_loss"}
    bootstrap : int, default 200
        Bootstrap resamples for the intervals (0: asymptotic standard errors only).
    seed : int, default 0
    final_only : bool, default False
        Keep only each run's last checkpoint.

    Returns
    -------
    DataFrame
        Group columns, then ``alpha, alpha_lo, alpha_hi, alpha_se, c, L0, n_rows, n_depths,
        converged, warnings`` (intervals are 95% bootstrap percentiles; NaN without bootstrap,
        or when fewer than 80 % of the resamples converged, with the reason in ``warnings``).

    Raises
    ------
    ScaleFitError
        When a group has fewer distinct depths than the law's parameters plus one.
    """
    import scalefit

    if loss_column not in LOSS_COLUMNS:
        raise ScaleFitError(f"loss_column must be one of {LOSS_COLUMNS}, got {loss_column!r}.")
    if final_only and "final" in table.columns:
        table = table[table["final"].astype(str).str.lower() == "true"]
    keys = group_keys(table)
    need = len(scalefit.get_law(LAW).params) + 1
    groups = list(table.groupby(keys, sort=True, dropna=False))
    for values, group in groups:
        n_depths = int(group["depth"].nunique())
        if n_depths < need:
            named = ", ".join(f"{k}={v}" for k, v in zip(keys, values, strict=True))
            raise ScaleFitError(
                f"toy fit: group {named} has {n_depths} distinct depths; the {LAW} law has "
                f"{need - 1} parameters and needs at least {need} depths."
            )
    rows = []
    for values, group in groups:
        data = pd.DataFrame({"depth": group["depth"], "loss": group[loss_column]})
        out = dict(zip(keys, values, strict=True))
        out.update(n_rows=len(data), n_depths=int(data["depth"].nunique()))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = scalefit.fit(data, LAW, bootstrap=bootstrap, seed=seed, progress=False)
        lo, hi = res.ci.get("alpha", (float("nan"), float("nan")))
        notes = list(res.warnings) + [str(w.message) for w in caught]
        rows.append(
            {
                **out,
                "alpha": res.params["alpha"],
                "alpha_lo": lo,
                "alpha_hi": hi,
                "alpha_se": res.stderr.get("alpha", float("nan")),
                "c": res.params["c"],
                "L0": res.params["L0"],
                "converged": bool(res.converged),
                "warnings": " | ".join(dict.fromkeys(notes)),
            }
        )
    return pd.DataFrame(rows)


def mean_by_depth(table: pd.DataFrame, loss_column: str = "test_loss") -> pd.DataFrame:
    """Mean and spread of the loss per group and depth (over seeds and replicas)."""
    keys = [*group_keys(table), "depth"]
    agg = table.groupby(keys, sort=True)[loss_column].agg(["mean", "std", "count"]).reset_index()
    return agg.rename(columns={"mean": loss_column, "std": f"{loss_column}_std", "count": "n"})
