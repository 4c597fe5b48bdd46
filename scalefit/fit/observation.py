"""The observation model, written once: on which scale residuals are taken.

``residuals="log"`` (the default): ``log y = log f(x) + noise``, so residuals are
``log y - log f`` and the noise is multiplicative; every loss must be positive.
``residuals="linear"``: ``y = f(x) + noise``, residuals ``y - f`` and additive noise; the
response may be any finite number (variable-projection fitters and certified reference problems
work on this scale).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ScaleFitError

RESIDUALS = ("log", "linear")


def response(y: np.ndarray, residuals: str, *, where: str = "the table") -> np.ndarray:
    """The observed response on the residual scale (``log y`` or ``y``), checked.

    Raises
    ------
    ScaleFitError
        When a value is not finite, not positive on the log scale, or too large to fit.
    """
    y = np.asarray(y, dtype=float)
    bad = ~np.isfinite(y)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ScaleFitError(f"{where}: loss in row {i} is {y[i]!r}; losses must be finite.")
    big = np.abs(y) > 1e150
    if big.any():
        i = int(np.flatnonzero(big)[0])
        raise ScaleFitError(
            f"{where}: loss in row {i} is {y[i]:g}, too large to fit in float64 (model values and "
            "squared residuals of that size overflow); rescale the column."
        )
    if residuals == "log":
        if (y <= 0).any():
            i = int(np.flatnonzero(y <= 0)[0])
            raise ScaleFitError(
                f"{where}: loss in row {i} is {y[i]:g}; log residuals need positive losses "
                "(use residuals='linear' for a response that may be zero or negative)."
            )
        return np.log(y)
    return y


def on_scale(xp: Any, pred: Any, residuals: str) -> Any:
    """The model's prediction on the residual scale: ``log f`` or ``f``."""
    return xp.log(pred) if residuals == "log" else pred


def residual(xp: Any, observed: Any, pred: Any, residuals: str) -> Any:
    """Residual ``observed - model`` on the chosen scale (``observed`` from :func:`response`)."""
    if residuals == "log":
        return observed - xp.log(pred)
    return observed - pred


def add_noise(pred: np.ndarray, eps: np.ndarray, residuals: str) -> np.ndarray:
    """Simulated observations: ``pred * exp(eps)`` (log scale) or ``pred + eps`` (linear)."""
    if residuals == "log":
        return pred * np.exp(eps)
    return pred + eps


def metrics(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """Fit quality on the loss scale and, where defined, on the log scale."""
    y, pred = np.asarray(y, dtype=float), np.asarray(pred, dtype=float)
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    with np.errstate(all="ignore"):
        r_log = np.log(y) - np.log(pred)
        rel = np.abs(pred - y) / np.abs(y)
    return {
        "r2": 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan"),
        "rmse": float(np.sqrt(np.mean((y - pred) ** 2))),
        "rmse_log": float(np.sqrt(np.mean(r_log**2))),
        "mean_rel_err": float(np.mean(rel)),
        "max_rel_err": float(np.max(rel)),
    }
