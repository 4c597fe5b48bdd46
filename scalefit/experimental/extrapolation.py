"""The extrapolation validation protocol: fit below a compute cut, score the rows above it.

Experimental (``docs/experimental.md``). At each cut (a share of rows held out, highest compute
first) the law is fitted below and the held-out rows are scored with today's predictive
(bootstrap draws × residual noise, or the posterior predictive) and the calibrated one
(:mod:`scalefit.fit.discrepancy`): ``coverage`` and ``width_log`` (mean interval width on
log loss) at each probability, ``lpd`` (mean log predictive density, higher is better) and
``mae_log`` (mean absolute error of the median prediction on log loss).

Example::

    from scalefit.experimental.extrapolation import extrapolation_check
    frame = extrapolation_check("chinchilla", "decomposed", drop_highest=40)
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from ..core._validation import Interval, Options, validate
from ..core.errors import ConvergenceWarning, ScaleFitError
from ..fit.discrepancy import draw_means, fit_discrepancy, predictive_sims
from ..fit.observation import score_holdout
from ..fit.split import split_by_compute

PROBS = (0.5, 0.8, 0.95)
CUTS = (0.1, 0.2, 0.3)


def _rows(head: dict, y, logmean, scale, nu, probs, tail: dict) -> list[dict]:
    """One row per probability: exact coverage and width, and the lpd, of a mixture predictive."""
    sc = score_holdout(y, logmean, scale, nu, probs=tuple(probs))
    rows = []
    for p in probs:
        cov = {"coverage": sc[f"coverage_{100 * p:g}"], "width_log": sc[f"width_log_{100 * p:g}"]}
        rows.append({**head, "prob": float(p), **cov, "lpd": sc["lpd"], **tail})
    return rows


def _fit(train, law, method, seed, n_boot, fit_kw):
    if method == "lsq":
        from ..fit import fit

        return fit(train, law, bootstrap=n_boot, seed=seed, progress=False, **fit_kw)
    from ..fit.bayes import fit_bayes

    with warnings.catch_warnings():  # each split's chains: the check reports its own scores
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit_bayes(train, law, seed=seed, **fit_kw)


def _baseline(res, test, method):
    """Today's predictive on log loss: draws' means, noise scale and degrees of freedom.

    Least squares: the bootstrap draws with normal noise of the training RMSE. Bayes: the
    posterior draws with each draw's own ``sigma`` and ``nu`` (what ``scalefit bayes --holdout
    --predictive law`` scores).
    """
    idx, mean = draw_means(res, test)
    if method == "lsq":
        return np.log(mean), float(res.metrics["rmse_log"]), None
    from ..fit.bayes import noise_draws

    sigma, nu = noise_draws(res, idx)
    return np.log(mean), sigma, nu


def extrapolation_check(
    table,
    law,
    *,
    cuts=CUTS,
    probs=PROBS,
    method: str = "lsq",
    n_boot: int = 100,
    drop_highest: int = 0,
    seed: int = 0,
    calibrated: bool = True,
    tails: str = "student_t",
    **fit_kw: Any,
) -> pd.DataFrame:
    """Score extrapolation to the highest-compute rows at several cuts.

    Parameters
    ----------
    table : DataFrame, path or dataset name
        The loss table.
    law : str or Law
        The law.
    cuts : sequence of float
        Shares of rows held out (highest compute), each in (0, 1).
    probs : sequence of float
        Interval probabilities scored.
    method : {"lsq", "bayes"}, default "lsq"
        Least squares with ``n_boot`` bootstrap resamples, or the Bayesian fitter.
    n_boot : int, default 100
        Bootstrap resamples (``lsq``).
    drop_highest : int, default 0
        Outlier rule applied when ``table`` is read.
    seed : int, default 0
        Seed of the fits and predictive draws.
    calibrated : bool, default True
        Also score the calibrated predictive distribution.
    tails : {"student_t", "normal"}, default "student_t"
        Tails of the calibrated predictive (:func:`scalefit.fit.discrepancy.fit_discrepancy`).
    **fit_kw
        Passed to the fitter.

    Returns
    -------
    DataFrame
        One row per cut, predictive (``"today"``/``"calibrated"``) and probability: ``coverage,
        width_log, lpd, mae_log, n_train, n_test, seed`` and, for calibrated rows, ``sigma, gamma,
        tau, kappa, nu`` (``nu`` NaN for a normal predictive).
    """
    from ..fit.data import as_table
    from ..laws import get_law

    options = {"method": method, "n_boot": n_boot, "seed": seed, "calibrated": calibrated}
    validate(
        "extrapolation_check",
        {**options, "tails": tails},
        {
            "method": [Options({"lsq", "bayes"})],
            "n_boot": [Interval(int, 20, None)],
            "seed": [Interval(int, 0, None)],
            "calibrated": ["boolean"],
            "tails": [Options({"student_t", "normal"})],
        },
    )
    for name, values in (("cuts", cuts), ("probs", probs)):
        vals = list(np.atleast_1d(values))
        if not vals or not all(isinstance(v, float) and 0 < v < 1 for v in vals):
            raise ScaleFitError(
                f"The '{name}' parameter of extrapolation_check must be floats in (0, 1). "
                f"Got {values!r} instead."
            )
    law = get_law(law)
    tab = as_table(table, drop_highest)
    rows = []
    for cut in cuts:
        train, test, _, _ = split_by_compute(
            tab, law, float(cut), who="extrapolation_check", option="cuts"
        )
        res = _fit(train, law, method, seed, n_boot, fit_kw)
        y = test["loss"].to_numpy(float)
        base = {"cut": float(cut), "n_train": len(train), "n_test": len(test), "method": method}
        base["seed"] = int(seed)
        logmean, scale, nu = _baseline(res, test, method)
        mae = {"mae_log": float(np.mean(np.abs(np.log(y) - np.median(logmean, axis=0))))}
        rows += _rows({**base, "predictive": "today"}, y, logmean, scale, nu, probs, mae)
        if calibrated:
            disc = fit_discrepancy(train, law, seed=seed, tails=tails)
            _, logmean, sd = predictive_sims(res, test, disc, seed=seed)
            extra = {k: getattr(disc, k) for k in ("sigma", "gamma", "tau", "kappa")}
            extra["nu"] = np.nan if disc.nu is None else disc.nu
            head = {**base, "predictive": "calibrated"}
            rows += _rows(head, y, logmean, sd[None, :], disc.nu, probs, {**mae, **extra})
    return pd.DataFrame(rows)
