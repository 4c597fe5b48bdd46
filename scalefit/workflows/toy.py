"""The toy's depth exponents: a toy sweep's groups, each fitted with ``L = c/ℓ^α + L0``.

The sweep's tidy table is read and grouped by :mod:`scalefit.sim.analysis` (a producer); the fit
of each group is :func:`scalefit.fit` with the ``depth_power`` law.
"""

from __future__ import annotations

import warnings

import pandas as pd

from ..core._validation import Options, constraints, validate
from ..core.errors import ScaleFitError
from ..sim.analysis import LAW, LOSS_COLUMNS, group_keys


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
        converged, warnings`` (intervals are 95% bootstrap percentiles; NaN without bootstrap,
        or when fewer than 80 % of the resamples converged, with the reason in ``warnings``).

    Raises
    ------
    ScaleFitError
        When a group has fewer distinct depths than the law's parameters plus one.
    """
    from ..fit import fit
    from ..laws import get_law

    validate(
        "fit_depth_exponents",
        {"loss_column": loss_column, "bootstrap": bootstrap, "seed": seed},
        {"loss_column": [Options(set(LOSS_COLUMNS))], **constraints("bootstrap", "seed")},
    )
    if final_only and "final" in table.columns:
        table = table[table["final"].astype(str).str.lower() == "true"]
    keys = group_keys(table)
    need = len(get_law(LAW).params) + 1
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
            res = fit(data, LAW, bootstrap=bootstrap, seed=seed, progress=False)
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
