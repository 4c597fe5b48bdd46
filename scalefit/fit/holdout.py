"""The one hold-out (:func:`holdout`): fit on the lowest-compute rows, score the rest.

Least squares (:func:`holdout_check`) and the Bayesian fitter
(:func:`scalefit.fit.bayes.holdout_bayes`) pass it their training fit and the law's predictive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..core._validation import Options, validate
from ..laws import Law
from .bootstrap import bootstrap as run_bootstrap
from .build import FitSettings
from .lsq import Backend, least_squares
from .split import split_by_compute

__all__ = ["holdout", "holdout_check"]

SCORES = ("predictive", "coverage", "coverage_50", "width_log", "lpd", "pit")
CALIBRATION = ("sigma", "gamma", "tau", "kappa", "nu")


def holdout(
    tab: pd.DataFrame,
    law: Law,
    fraction: float,
    fit_train: Callable[[pd.DataFrame], Any],
    law_scores: Callable[[Any, pd.DataFrame], tuple[np.ndarray, dict[str, Any]]],
    *,
    who: str,
    ci_prob: float,
    seed: int,
    predictive: str,
) -> dict[str, Any]:
    """Fit on the lowest-compute ``1 - fraction`` of ``tab``, score the highest-compute rest.

    ``fit_train(train)`` returns the training fit (with draws); ``law_scores(result, test)`` the
    median prediction at the test rows and the law's own predictive's scores (``predictive``,
    ``coverage``, ...). ``who`` is the public function whose ``holdout`` option this is. With
    ``predictive="calibrated"`` the calibrated predictive's scores (seeded by ``seed``) are the
    report's own, the law's go under ``uncalibrated`` and the calibration's constants under
    ``calibration``. Returns ``fraction, split_by, threshold, n_train, n_test, mae_log, mae,
    max_rel_err``, the scores, ``band_prob`` (``ci_prob``), ``train_params, train_converged``.
    """
    train, test, key, threshold = split_by_compute(tab, law, fraction, who=who)
    res = fit_train(train)
    y = test["loss"].to_numpy(float)
    pred, law_part = law_scores(res, test)
    with np.errstate(all="ignore"):
        out: dict[str, Any] = {
            "fraction": float(fraction),
            "split_by": key,
            "threshold": threshold,
            "n_train": int(len(train)),
            "n_test": int(len(test)),
            "mae_log": float(np.mean(np.abs(np.log(y) - np.log(pred)))),
            "mae": float(np.mean(np.abs(y - pred))),
            "max_rel_err": float(np.max(np.abs(pred - y) / np.abs(y))),
        }
    if predictive == "calibrated":
        from .discrepancy import calibrated_holdout

        cal = calibrated_holdout(res, train, test, law, ci_prob=ci_prob, seed=seed)
        out.update({k: cal[k] for k in SCORES})
        out["uncalibrated"] = law_part
        out["calibration"] = {k: cal[k] for k in CALIBRATION}
    else:
        out.update(law_part)
    out.update(band_prob=float(ci_prob), train_params=res.params, train_converged=res.converged)
    return out


def holdout_check(
    tab: pd.DataFrame,
    law: Law,
    fraction: float,
    settings: FitSettings,
    *,
    backend: Backend | None = None,
    bootstrap: int = 200,
    progress: bool | None = None,
    predictive: str = "law",
) -> dict[str, Any]:
    """The least-squares hold-out (:func:`holdout`): what ``fit(holdout=...)`` reports.

    Parameters
    ----------
    tab, law, fraction
        The full table, the law and the share of rows held out, in (0, 1).
    settings : FitSettings
        The fit's settings (loss, residual scale, weights, starts, seed, ``ci_prob``).
    backend : Backend, optional
        Least-squares backend (default: the JAX engine).
    bootstrap : int, default 200
        Resamples of the training fit used for the predictive interval.
    progress : bool, optional
        Progress bars.
    predictive : {"law", "calibrated"}, default "law"
        Which predictive scores the held-out rows: the bootstrap draws with normal noise of the
        training RMSE, or the calibrated predictive of :mod:`scalefit.fit.discrepancy`
        on the same draws (off by default for least squares: it loses on one case measured in
        ``docs/extrapolation.md``; the Bayesian hold-out uses it by default).

    Returns
    -------
    dict
        See :func:`holdout`; the law's scores are ``predictive`` (one line) and ``coverage``.
    """
    validate("holdout_check", locals(), {"predictive": [Options({"law", "calibrated"})]})

    def fit_train(train):
        res = least_squares(train, law, settings, backend=backend)
        return run_bootstrap(
            res, train, bootstrap, seed=settings.seed, ci_prob=settings.ci_prob, progress=progress
        )

    def law_scores(res, test):
        band = res.predict(test, bands=True, noise=True, ci_prob=settings.ci_prob)
        y = test["loss"].to_numpy(float)
        inside = (y >= band["lo"].to_numpy()) & (y <= band["hi"].to_numpy())
        return band["loss"].to_numpy(), {
            "predictive": "law: bootstrap draws with normal noise of the training RMSE",
            "coverage": float(np.mean(inside)),
        }

    kw = {"ci_prob": settings.ci_prob, "seed": settings.seed, "predictive": predictive}
    return holdout(tab, law, fraction, fit_train, law_scores, who="fit", **kw)
