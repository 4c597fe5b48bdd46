"""The toy's depth exponents: a toy sweep's groups, each fitted with ``L = c/ℓ^α + L0``.

The sweep's tidy table is read and grouped by :mod:`scalefit.sim.analysis` (a producer); the fit
of each group is :func:`scalefit.fit` with the ``depth_power`` law.
"""

from __future__ import annotations

import warnings

import pandas as pd

from ..errors import ScaleFitError
from ..sim.analysis import LOSS_COLUMNS, group_keys


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
        Tidy toy results (see :func:`scalefit.sim.analysis.load_results`): one row per student
        depth, seed, replica and checkpoint. Every row of a group is a data point (seeds and
        replicas included).
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
        converged, warnings`` (intervals are 95% bootstrap percentiles, NaN without bootstrap).
    """
    from ..fit import fit

    if loss_column not in LOSS_COLUMNS:
        raise ScaleFitError(f"loss_column must be one of {LOSS_COLUMNS}, got {loss_column!r}.")
    if final_only and "final" in table.columns:
        table = table[table["final"].astype(str).str.lower() == "true"]
    keys = group_keys(table)
    rows = []
    for values, group in table.groupby(keys, sort=True, dropna=False):
        data = pd.DataFrame({"depth": group["depth"], "loss": group[loss_column]})
        out = dict(zip(keys, values, strict=True))
        out.update(n_rows=len(data), n_depths=int(data["depth"].nunique()))
        if out["n_depths"] < 4:
            rows.append({**out, "converged": False, "warnings": "fewer than 4 depths"})
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = fit(data, "depth_power", bootstrap=bootstrap, seed=seed, progress=False)
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
