"""Held-out validation: fit on the lowest-compute rows, predict the rest."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._validation import Options, validate
from ..laws import Law
from .bootstrap import bootstrap as run_bootstrap
from .build import FitSettings
from .lsq import Backend, least_squares
from .split import compute_key, split_by_compute

__all__ = ["compute_key", "holdout_check", "split_by_compute"]


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
    """Fit on the lowest-compute ``1 - fraction`` of rows and test on the highest-compute rest.

    Parameters
    ----------
    tab : DataFrame
        The full table.
    law : Law
        The law.
    fraction : float
        Share of rows held out, in (0, 1).
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
        training RMSE, or the calibrated predictive of :mod:`scalefit.fit.discrepancy` on the
        same draws (off by default for least squares: it loses on one case measured in
        ``docs/extrapolation.md``; the Bayesian hold-out uses it by default).

    Returns
    -------
    dict
        ``n_train, n_test, split_by, threshold, mae_log, max_rel_err, coverage, band_prob,
        predictive`` (the observation model, one line) and the training fit's parameters; with
        ``predictive="calibrated"`` also ``coverage_50, width_log, lpd`` of the calibrated
        predictive, ``uncalibrated`` (the law's own ``predictive`` and ``coverage``) and
        ``calibration`` (``sigma, gamma, tau, kappa, nu``).
    """
    validate("holdout_check", locals(), {"predictive": [Options({"law", "calibrated"})]})
    train, test, key, threshold = split_by_compute(tab, law, fraction, who="fit")
    res = least_squares(train, law, settings, backend=backend)
    res = run_bootstrap(
        res, train, bootstrap, seed=settings.seed, ci_prob=settings.ci_prob, progress=progress
    )
    y = test["loss"].to_numpy(float)
    band = res.predict(test, bands=True, noise=True, ci_prob=settings.ci_prob)
    pred = band["loss"].to_numpy()
    inside = (y >= band["lo"].to_numpy()) & (y <= band["hi"].to_numpy())
    with np.errstate(all="ignore"):
        mae_log = float(np.mean(np.abs(np.log(y) - np.log(pred))))
        mae = float(np.mean(np.abs(y - pred)))
    out = {
        "fraction": float(fraction),
        "split_by": key,
        "threshold": threshold,
        "n_train": int(len(train)),
        "n_test": int(len(test)),
        "mae_log": mae_log,
        "mae": mae,
        "max_rel_err": float(np.max(np.abs(pred - y) / np.abs(y))),
        "predictive": "law: bootstrap draws with normal noise of the training RMSE",
        "coverage": float(np.mean(inside)),
        "band_prob": float(settings.ci_prob),
        "train_params": res.params,
        "train_converged": res.converged,
    }
    if predictive == "calibrated":
        from .discrepancy import calibrated_holdout

        cal = calibrated_holdout(
            res, train, test, law, ci_prob=settings.ci_prob, seed=settings.seed
        )
        out["uncalibrated"] = {"predictive": out["predictive"], "coverage": out["coverage"]}
        keys = ("predictive", "coverage", "coverage_50", "width_log", "lpd", "pit")
        out.update({k: cal[k] for k in keys})
        out["calibration"] = {k: cal[k] for k in ("sigma", "gamma", "tau", "kappa", "nu")}
    return out
