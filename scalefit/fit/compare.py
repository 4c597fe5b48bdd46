"""Model comparison across laws (PSIS-LOO, WAIC) of Bayesian fits.

Every law is scored on the same observable, ``log(loss)`` of the same rows with the same
likelihood family, so the expected log predictive densities are comparable across laws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..core.errors import ScaleFitError
from ..laws import Law

#: The columns of :func:`compare_fits`: ArviZ's comparison, PSIS-LOO/WAIC, the sampler's checks.
RANKING = ["rank", "elpd_loo", "se", "elpd_diff", "dse", "p_loo", "weight"]
LOO = ["pareto_k_max", "n_pareto_k_bad", "elpd_waic", "p_waic"]
SAMPLER = ["r_hat_max", "ess_bulk_min", "divergences"]
COLUMNS = ["law", *RANKING, *LOO, *SAMPLER, "converged", "n_params", "n_rows"]


def compare_laws(
    table,
    laws: Sequence[str | Law],
    *,
    likelihood: str = "student_t",
    chains: int = 4,
    draws: int = 1000,
    warmup: int = 1000,
    seed: int = 0,
    drop_highest: int = 0,
    law_options: Mapping[str, Mapping[str, Any]] | None = None,
    priors: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    progress: bool | None = None,
    return_results: bool = False,
) -> pd.DataFrame | tuple[pd.DataFrame, dict]:
    """Fit several laws to one table with :func:`fit_bayes` and rank them by PSIS-LOO.

    Parameters
    ----------
    table : DataFrame, path or dataset name
        The loss table (the same rows for every law).
    laws : sequence of str or Law
        At least two laws.
    likelihood, chains, draws, warmup, seed, progress
        Passed to :func:`~scalefit.fit.bayes.fit_bayes`.
    drop_highest : int, default 0
        Outlier rule when ``table`` is a path or dataset name.
    law_options : mapping, optional
        ``law name -> options``.
    priors : mapping, optional
        ``law name -> prior overrides``.
    return_results : bool, default False
        Also return ``{law: FitResult}``.

    Returns
    -------
    DataFrame
        One row per law, best first: ``rank, elpd_loo, se, elpd_diff, dse, p_loo, weight``
        (ArviZ's stacking weights), Pareto-k summary, WAIC and the sampler diagnostics.
        ``elpd_diff`` is the loss in expected log predictive density against the best law;
        differences smaller than about twice ``dse`` are not decisive.

    Examples
    --------
    >>> from scalefit.fit.compare import compare_laws
    >>> compare_laws("depth_delusion", ["critical_depth", "decomposed"])  # doctest: +SKIP
    """
    from .bayes import fit_bayes
    from .data import as_table

    names = [law if isinstance(law, str) else law.name for law in laws]
    if len(names) < 2 or len(set(names)) != len(names):
        raise ScaleFitError(
            f"The 'laws' parameter of compare_laws must name at least two different laws. "
            f"Got {names!r} instead."
        )
    tab = as_table(table, drop_highest)
    results = {}
    for name, law in zip(names, laws, strict=True):
        results[name] = fit_bayes(
            tab,
            law,
            likelihood=likelihood,
            chains=chains,
            draws=draws,
            warmup=warmup,
            seed=seed,
            law_options=(law_options or {}).get(name),
            priors=(priors or {}).get(name),
            progress=progress,
        )
    frame = compare_fits(results)
    return (frame, results) if return_results else frame


def compare_fits(results: Mapping[str, Any]) -> pd.DataFrame:
    """Rank Bayesian fits of one table by PSIS-LOO (see :func:`compare_laws` for the columns).

    Parameters
    ----------
    results : mapping
        ``name -> FitResult`` from :func:`~scalefit.fit.bayes.fit_bayes` in this session (with
        ``extras["inference_data"]``), all fitted to the same rows.

    Returns
    -------
    DataFrame
    """
    from . import _arviz

    if len(results) < 2:
        raise ScaleFitError("compare_fits needs at least two fits.")
    missing = [n for n, r in results.items() if "inference_data" not in r.extras]
    if missing:
        raise ScaleFitError(f"fits {missing} carry no posterior (fit them with fit_bayes).")
    n_rows = {r.n_rows for r in results.values()}
    if len(n_rows) != 1:
        raise ScaleFitError(f"the fits have different numbers of rows {sorted(n_rows)}.")
    cmp = _arviz.compare({n: r.extras["inference_data"] for n, r in results.items()})
    rows = []
    for name, row in cmp.iterrows():
        r = results[name]
        d = r.diagnostics
        rows.append(
            {"law": name, **row[RANKING].astype(float), "rank": int(row["rank"])}
            | {k: d["loo"][k] for k in LOO}
            | {k: d[k] for k in SAMPLER}
            | {"converged": r.converged, "n_params": len(r.params), "n_rows": r.n_rows}
        )
    return pd.DataFrame(rows, columns=COLUMNS).set_index("law")
