"""Approach 3 (the law fit) and one table with Approaches 1, 2 and 3 side by side."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..core.errors import ScaleFitError

#: Hoffmann et al. (2022), Table 2: a of N* ∝ C^a and b of T* ∝ C^b, with the table's ranges
#: (10th–90th percentiles from a bootstrap of 80 % subsamples, i.e. 80 % ranges, not 95 %;
#: see docs/isoflop.md for the source).
PUBLISHED = pd.DataFrame(
    [
        {"approach": "1 (published)", "a": 0.50, "a_lo": 0.488, "a_hi": 0.502, "b": 0.50,
         "b_lo": 0.501, "b_hi": 0.512},
        {"approach": "2 (published)", "a": 0.49, "a_lo": 0.462, "a_hi": 0.534, "b": 0.51,
         "b_lo": 0.483, "b_hi": 0.529},
        {"approach": "3 (published)", "a": 0.46, "a_lo": 0.454, "a_hi": 0.455, "b": 0.54,
         "b_lo": 0.542, "b_hi": 0.543},
    ]
)  # fmt: skip


def approach3(result: Any, budgets=None, *, ci_prob: float | None = None) -> pd.DataFrame:
    """Exponents of ``N* ∝ C^a`` and ``T* ∝ C^b`` implied by a law fit (Approach 3).

    Parameters
    ----------
    result : FitResult
        A fit of any law with a compute-optimal allocation (draws give the interval).
    budgets : array-like, optional
        Budget range over which the optima are regressed on ``log C`` (default: Chinchilla's
        IsoFLOP budgets, 6e18 … 3e21, so all three approaches describe the same range).
    ci_prob : float, optional
        Interval probability (default: the result's).

    Returns
    -------
    DataFrame
        Rows ``params`` and ``tokens``: ``exponent, lo, hi``.
    """
    from ..allocate.analysis import scaling_exponents
    from .synthetic import CHINCHILLA_BUDGETS

    b = CHINCHILLA_BUDGETS if budgets is None else budgets
    tab = scaling_exponents(result, np.geomspace(min(b), max(b), 9), ci_prob=ci_prob)
    tab = tab.set_index("quantity").loc[["params", "tokens"]]
    for col in ("lo", "hi"):
        if col not in tab:
            tab[col] = np.nan
    return tab[["exponent", "lo", "hi"]]


def _row(name: str, frame: pd.DataFrame, note: str = "") -> dict:
    p, t = frame.loc["params"], frame.loc["tokens"]
    return {
        "approach": name,
        "a": float(p["exponent"]),
        "a_lo": float(p["lo"]),
        "a_hi": float(p["hi"]),
        "b": float(t["exponent"]),
        "b_lo": float(t["lo"]),
        "b_hi": float(t["hi"]),
        "note": note,
    }


def compare_approaches(
    *,
    envelope=None,
    isoflops=(),
    result=None,
    published: bool = False,
    budgets=None,
) -> pd.DataFrame:
    """One table with Approaches 1, 2 and 3 (and, on request, Hoffmann et al.'s published values).

    Parameters
    ----------
    envelope : EnvelopeResult, optional
        Approach 1 (:func:`scalefit.isoflop.approach1`).
    isoflops : IsoFLOPResult or sequence of them
        Approach 2 (e.g. parabola and profile).
    result : FitResult, optional
        A law fit (Approach 3; its draws give the interval).
    published : bool, default False
        Append the published rows (:data:`PUBLISHED`). They are Hoffmann et al.'s exponents for
        their Chinchilla runs: ask for them only when the runs are that table (the ``chinchilla``
        and ``chinchilla_epoch`` datasets), never beside another sweep.
    budgets : array-like, optional
        Budget range for Approach 3 (see :func:`approach3`).

    Returns
    -------
    DataFrame
        ``approach, a, a_lo, a_hi, b, b_lo, b_hi, note``.
    """
    from .approach2 import IsoFLOPResult

    if isinstance(isoflops, IsoFLOPResult):
        isoflops = (isoflops,)
    rows = []
    if envelope is not None:
        rows.append(
            _row(
                "1 (envelope)",
                envelope.exponents,
                f"{envelope.n_runs} runs, bootstrap over runs",
            )
        )
    for iso in isoflops:
        note = f"{len(iso.budgets)} budgets, {iso.interval}"
        label = iso.method
        if iso.shape:
            fixed = "alpha_se" not in iso.shape
            note += f", alpha {iso.shape['alpha']:.3g}, beta {iso.shape['beta']:.3g}"
            note += " (held fixed)" if fixed else " (fitted)"
            label += ", fixed shape" if fixed else ""
        rows.append(_row(f"2 ({label})", iso.exponents, note))
    if result is not None:
        name = getattr(result, "law_name", result.law)  # FitResult v2 holds the Law object
        rows.append(_row(f"3 ({name} fit)", approach3(result, budgets), f"{result.n_boot} draws"))
    if not rows and not published:
        raise ScaleFitError("compare_approaches: give at least one of envelope, isoflops, result.")
    out = pd.DataFrame(rows)
    if published:
        pub = PUBLISHED.assign(note="Hoffmann et al. 2022, Table 2; 10th-90th percentiles")
        out = pd.concat([out, pub], ignore_index=True)
    return out
