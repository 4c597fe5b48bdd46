"""Calibrated extrapolation: per-model random effect plus a discrepancy growing beyond the data.

Observation model on log loss for a row ``i`` of model (group) ``g``::

    log y_i = log f(x_i; θ) + u_g + δ_i + ε_i,
    u_g + ε_i ~ s(C_i) · t_ν,   s(C) = σ · exp(γ · (log C - m)),
    δ_i ~ (κ · d_i) · t_ν,      d_i = max(0, log C_i - log C_max)

(natural logs; ``m`` is the training rows' mean log-compute, ``C_max`` their largest compute),
with ``u_g ~ N(0, τ²)`` a per-model random effect (rows of one training run are not independent),
``s(C)`` the scatter about the law, allowed to change with compute, and ``δ_i`` a law misfit that
grows by ``κ`` per e-fold of compute beyond the data. ``σ, γ`` are fitted by maximum likelihood
to a least-squares fit's residuals on the training rows, ``τ`` by the method of moments, ``κ``
and ``ν`` jointly by maximum likelihood from forward validation inside the training rows
(:data:`INNER`); ``tails="normal"`` fixes ``ν = ∞``. An empirical-Bayes layer on any fit's draws,
not a joint hierarchical model; ``docs/extrapolation.md`` explains it and what it was measured to
do.

Off by default for least squares (``fit(holdout=..., predictive="calibrated")``), the default
predictive of the Bayesian hold-out (``fit_bayes(holdout=...)``); its estimation may change between
versions (``docs/experimental.md``).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize

from ..core._readonly import ReadOnlyMappings
from ..core._validation import Options, validate
from ..core.errors import ScaleFitError
from .observation import holdout_scores, noise_logpdf, score_holdout, standard_noise
from .split import compute_key, split_by_compute

#: Inner held-out shares used to learn the growth of the discrepancy.
INNER = (0.15, 0.25, 0.35)
#: Tail models of the calibrated predictive.
TAILS = ("student_t", "normal")
#: Largest degrees of freedom reported (beyond it the Student-t is a normal in effect).
NU_MAX = 1000.0


@dataclass(frozen=True)
class Discrepancy(ReadOnlyMappings):
    """Fitted calibration of the predictive distribution (see the module docstring).

    Attributes
    ----------
    sigma, gamma : float
        Scatter about the law at the training rows' mean log-compute ``log_c_ref`` and its growth
        rate per e-fold of compute (``s(C) = sigma·exp(gamma·(log C - log_c_ref))``).
    tau : float
        Per-model random-effect sd (log loss), for information (included in ``s``).
    kappa : float
        The discrepancy's sd growth per e-fold of compute beyond ``log_c_max``.
    log_c_ref, log_c_max : float
        Natural log of the training rows' mean and largest compute.
    group : tuple of str
        Columns that identify a model.
    nu : float or None
        Degrees of freedom of the Student-t predictive (``None``: normal).
    """

    sigma: float
    gamma: float
    tau: float
    kappa: float
    log_c_ref: float
    log_c_max: float
    group: tuple[str, ...]
    details: dict[str, Any] = field(default_factory=dict)
    nu: float | None = None

    @property
    def tails(self) -> str:
        """``"student_t"`` or ``"normal"``."""
        return "normal" if self.nu is None else "student_t"

    def describe(self) -> str:
        """One line naming the observation model (for reports and JSON)."""
        t = "normal" if self.nu is None else f"Student-t (nu {self.nu:.3g})"
        return (
            f"calibrated: law + per-model random effect + log-compute discrepancy, {t} "
            f"(sigma {self.sigma:.3g}, gamma {self.gamma:.3g}, tau {self.tau:.3g}, "
            f"kappa {self.kappa:.3g})"
        )

    def sd(self, log_c, keep=1.0) -> np.ndarray:
        """Predictive sd of log loss at ``log C``, ``keep`` of the scatter's variance left."""
        lc = np.asarray(log_c, dtype=float)
        d = np.clip(lc - self.log_c_max, 0.0, None)
        return np.sqrt(self.scatter(lc) ** 2 * keep + (self.kappa * d) ** 2)

    def scatter(self, log_c) -> np.ndarray:
        """Scatter ``s(C)`` of a row about the law (no discrepancy) at ``log C``."""
        return self.sigma * np.exp(self.gamma * (np.asarray(log_c, dtype=float) - self.log_c_ref))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dictionary."""
        out = asdict(self)
        out["group"], out["details"] = list(self.group), dict(out["details"])
        return out


def log_compute(tab: pd.DataFrame, law) -> np.ndarray:
    """Natural log of each row's compute (:func:`scalefit.fit.split.compute_key`)."""
    return np.log(compute_key(tab, law)[1])


def _groups(tab: pd.DataFrame, law) -> tuple[str, ...]:
    shape = [c for c in ("depth", "width") if c in tab.columns and c in law.inputs]
    if shape:
        return tuple(shape)
    if "params" in tab.columns:
        return ("params",)
    return tuple(c for c in law.inputs if c != "tokens")


def _moments(resid: np.ndarray, keys: pd.Series) -> tuple[float, float]:
    frame = pd.DataFrame({"r": resid, "g": keys.to_numpy()})
    sizes = frame.groupby("g")["r"].transform("size")
    multi = frame[sizes >= 2]
    if len(multi) >= 2 and multi["g"].nunique() < len(multi):
        dev = multi["r"] - multi.groupby("g")["r"].transform("mean")
        dof = len(multi) - multi["g"].nunique()
        sigma2 = float((dev**2).sum() / dof)
    else:
        sigma2 = float(np.var(resid, ddof=1))
    tau2 = max(0.0, float(np.var(resid, ddof=1)) - sigma2)
    return float(np.sqrt(sigma2)), float(np.sqrt(tau2))


def _scatter(r: np.ndarray, lc: np.ndarray) -> tuple[float, float]:
    """Maximum-likelihood ``(σ, γ)`` for ``r ~ N(0, (σ·exp(γ·lc))²)`` (``lc`` centred)."""

    def nll(th):
        log_s = th[0] + th[1] * lc
        return float(np.sum(log_s + 0.5 * r**2 * np.exp(-2 * log_s)))

    x0 = np.array([np.log(np.sqrt(np.mean(r**2))), 0.0])
    sol = optimize.minimize(nll, x0, method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10})
    return float(np.exp(sol.x[0])), float(sol.x[1])


def _kappa_nu(r: np.ndarray, d: np.ndarray, s0: np.ndarray) -> tuple[float, float]:
    """Joint maximum-likelihood ``(κ, ν)`` for ``r ~ sqrt(s0² + κ² d²) · t_ν``."""

    def nll(th):
        scale = np.sqrt(s0**2 + np.exp(2 * th[0]) * d**2)
        return -float(np.sum(noise_logpdf(r / scale, 1.0 + np.exp(th[1])) - np.log(scale)))

    best = None
    for a0 in (-8.0, -5.0, -3.0) if np.any(d > 0) else (-30.0,):
        for b0 in (0.5, 1.5, 3.0):
            sol = optimize.minimize(
                nll,
                [a0, b0],
                method="Nelder-Mead",
                options={"xatol": 1e-6, "fatol": 1e-9, "maxiter": 2000},
            )
            if best is None or sol.fun < best.fun:
                best = sol
    k = float(np.exp(best.x[0])) if np.any(d > 0) else 0.0
    nu = float(min(1.0 + np.exp(best.x[1]), NU_MAX))
    return (0.0 if k < 1e-5 else k), nu


def _kappa(r: np.ndarray, d: np.ndarray, s0: np.ndarray) -> float:
    """Maximum-likelihood ``κ`` for ``r ~ N(0, s0² + κ² d²)``."""
    if not np.any(d > 0):
        return 0.0

    def nll(log_k):
        v = s0**2 + np.exp(2 * log_k) * d**2
        return 0.5 * float(np.sum(np.log(v) + r**2 / v))

    sol = optimize.minimize_scalar(nll, bounds=(-12.0, 2.0), method="bounded")
    k = float(np.exp(sol.x))
    return 0.0 if k < 1e-5 else k


def fit_discrepancy(
    train: pd.DataFrame,
    law,
    *,
    inner=INNER,
    starts: int = 64,
    seed: int = 0,
    loss: str = "mse",
    tails: str = "student_t",
) -> Discrepancy:
    """Estimate ``σ, γ, τ, κ`` (and ``ν``) from the training rows (see the module docstring).

    Parameters
    ----------
    train : DataFrame
        The rows the law is fitted to (canonical columns).
    law : Law or str
        The law.
    inner : sequence of float
        Inner held-out shares for forward validation.
    starts, seed, loss
        Passed to :func:`scalefit.fit` for the least-squares fits.
    tails : {"student_t", "normal"}, default "student_t"
        Tails of the predictive: Student-t with ``ν`` estimated with ``κ`` from the forward
        validation, or normal.

    Returns
    -------
    Discrepancy
    """
    from ..laws import get_law

    validate("fit_discrepancy", {"tails": tails}, {"tails": [Options(set(TAILS))]})
    law = get_law(law)
    if len(train) < 3 * len(law.params):
        raise ScaleFitError(
            f"fit_discrepancy: {len(train)} training rows are too few to calibrate "
            f"{len(law.params)} parameters by forward validation."
        )
    group = _groups(train, law)
    keys = pd.Series(_keys(train, group))
    with warnings.catch_warnings(record=True) as caught:  # the calibration's own fits: recorded
        warnings.simplefilter("always")
        return _fit_discrepancy(train, law, group, keys, inner, starts, seed, loss, tails, caught)


def _fit_discrepancy(
    train, law, group, keys, inner, starts, seed, loss, tails, caught
) -> Discrepancy:
    full = _least_squares_fit(train, law, starts=starts, seed=seed, loss=loss, progress=False)
    resid = np.log(train["loss"].to_numpy(float)) - np.log(full.predict(train))
    lc_train = log_compute(train, law)
    ref = float(lc_train.mean())
    sigma_w, tau = _moments(resid, keys)
    means, sizes = _group_means(keys.to_numpy(), resid)
    offsets = {str(g): [float(means[g]), int(sizes[g])] for g in means}
    sigma, gamma = _scatter(resid, lc_train - ref)
    rs, ds, ss, per = [], [], [], []
    for h in inner:
        tr, te, _, _ = split_by_compute(train, law, float(h), who="fit_discrepancy", option="inner")
        res = _least_squares_fit(tr, law, starts=starts, seed=seed, loss=loss, progress=False)
        r = np.log(te["loss"].to_numpy(float)) - np.log(res.predict(te))
        r_tr = np.log(tr["loss"].to_numpy(float)) - np.log(res.predict(tr))
        shift, keep = _shrink(*_group_means(_keys(tr, group), r_tr), _keys(te, group), tau, sigma_w)
        lc = log_compute(te, law)
        rs.append(r - shift)
        ds.append(np.clip(lc - log_compute(tr, law).max(), 0.0, None))
        ss.append(sigma * np.exp(gamma * (lc - ref)) * np.sqrt(keep))
        per.append(
            {"inner": float(h), "n_test": len(te), "rmse_log": float(np.sqrt(np.mean(r**2)))}
        )
    r_all, d_all, s_all = (np.concatenate(v) for v in (rs, ds, ss))
    if tails == "student_t":
        kappa, nu = _kappa_nu(r_all, d_all, s_all)
    else:
        kappa, nu = _kappa(r_all, d_all, s_all), None
    details = {"inner": per, "n_train": len(train), "n_models": int(keys.nunique())}
    details.update(sigma_within=sigma_w, offsets=offsets)
    details["fit_warnings"] = sorted({str(w.message) for w in caught})
    return Discrepancy(sigma, gamma, tau, kappa, ref, float(lc_train.max()), group, details, nu)


def _least_squares_fit(table, law, *, starts: int, seed: int, loss: str, progress: bool):
    """:func:`scalefit.fit` with its defaults but ``starts, seed, loss``, built from the engine.

    (``fit`` runs the hold-out, which calls this module: calling it would be an import cycle.)
    """
    from ..core.errors import ConvergenceWarning
    from .build import FitSettings
    from .data import as_table
    from .engine import LOSSES
    from .lsq import JaxBackend, least_squares

    validate("fit_discrepancy", {"loss": loss}, {"loss": [Options(set(LOSSES))]})
    tab = as_table(table, keep=law.inputs)
    settings = FitSettings(loss=loss, starts=int(starts), seed=int(seed))
    res = least_squares(tab, law, settings, backend=JaxBackend(progress=progress))
    for note in res.warnings:
        warnings.warn(note, ConvergenceWarning, stacklevel=2)
    return res


def _keys(tab: pd.DataFrame, group) -> np.ndarray:
    return tab[list(group)].astype(str).agg("|".join, axis=1).to_numpy()


def _group_means(keys, resid) -> tuple[dict, dict]:
    """Each model's mean residual and row count, ``({key: mean}, {key: n})``."""
    grp = pd.DataFrame({"g": keys, "r": resid}).groupby("g")["r"].agg(["mean", "size"])
    return grp["mean"].to_dict(), grp["size"].to_dict()


def _shrink(means, sizes, keys_x, tau: float, sigma_w: float):
    """Shrunken per-model shift and the share of scatter it leaves (see :func:`model_effects`)."""
    t2, sw2 = tau**2, sigma_w**2
    shift, keep = np.zeros(len(keys_x)), np.ones(len(keys_x))
    if t2 == 0:
        return shift, keep
    for i, k in enumerate(keys_x):
        if k in means:
            w = sizes[k] * t2 / (sizes[k] * t2 + sw2)
            shift[i], keep[i] = w * means[k], 1.0 - t2 / (t2 + sw2) * w
    return shift, keep


def model_effects(disc: Discrepancy, x: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Shrunken random effect ``û_g`` of each row's model and the share of variance it leaves.

    A row whose model has ``n`` training rows with mean residual ``m`` is shifted by
    ``w·m``, ``w = n·τ² / (n·τ² + σ_w²)`` (the best linear unbiased predictor), and the random
    effect's share ``ρ = τ² / (τ² + σ_w²)`` of the scatter shrinks to ``ρ·(1 - w)``; a new model
    gets no shift and keeps the whole scatter.
    """
    offsets = disc.details.get("offsets", {})
    if not offsets or not set(disc.group) <= set(x.columns):
        return np.zeros(len(x)), np.ones(len(x))
    means, sizes = ({k: v[j] for k, v in offsets.items()} for j in (0, 1))
    sigma_w = float(disc.details.get("sigma_within", disc.sigma))
    return _shrink(means, sizes, _keys(x, disc.group), disc.tau, sigma_w)


def draw_means(result, x, max_draws: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """The law at ``x`` for up to ``max_draws`` evenly spaced finite draws (else the point fit).

    Returns ``(idx, means)``: the draws' rows in ``result.draws`` and the loss (n_draws, n_rows).
    """
    d = np.asarray(result.draws if result.draws is not None else [list(result.params.values())])
    finite = np.flatnonzero(np.all(np.isfinite(d), axis=1))
    idx = finite[np.linspace(0, len(finite) - 1, min(max_draws, len(finite))).astype(int)]
    pub = {k: d[idx, i][:, None] for i, k in enumerate(result.params)}
    return idx, np.asarray(result.law.evaluate(pub, x), dtype=float)


def predictive_sims(result, x: pd.DataFrame, disc: Discrepancy, *, seed: int = 0, max_draws=2000):
    """Calibrated predictive draws of the loss at ``x`` (n_draws, n_rows).

    Each of the result's draws (bootstrap or posterior) is shifted by the row's model effect
    (:func:`model_effects`) and combined with a noise term (normal, or Student-t with
    ``disc.nu`` degrees of freedom) whose scale is the scatter left by that effect plus the
    discrepancy (:meth:`Discrepancy.sd`).

    Returns
    -------
    tuple
        ``(sims, log_mean, sd)``: predictive draws (n_draws, n_rows), the log of each draw's
        shifted mean and the noise sd per row.
    """
    _, mean = draw_means(result, x, max_draws)
    shift, keep = model_effects(disc, x)
    sd = disc.sd(log_compute(x, result.law), keep)
    log_mean = np.log(mean) + shift[None, :]
    eps = standard_noise(np.random.default_rng(seed), disc.nu, mean.shape)
    return np.exp(log_mean + eps * sd[None, :]), log_mean, sd


def calibrated_holdout(
    result,
    train: pd.DataFrame,
    test: pd.DataFrame,
    law,
    *,
    ci_prob: float = 0.95,
    seed: int = 0,
    tails: str = "student_t",
) -> dict[str, Any]:
    """Score held-out rows with the calibrated predictive around the draws of ``result``.

    The calibration is learned from ``train`` (:func:`fit_discrepancy` with ``seed``, ``tails``);
    ``result`` is the fit on ``train``.

    Returns
    -------
    dict
        The scores of :func:`scalefit.fit.observation.holdout_scores` at ``ci_prob`` (exact for
        the mixture over the result's draws) and the calibration ``sigma, gamma, tau, kappa, nu``.
    """
    disc = fit_discrepancy(train, law, seed=seed, tails=tails)
    _, log_mean, sd = predictive_sims(result, test, disc, seed=seed)
    sc = score_holdout(test["loss"], log_mean, sd[None, :], disc.nu, probs=(0.5, ci_prob))
    out = holdout_scores(disc.describe(), sc, ci_prob)
    out.update({k: float(getattr(disc, k)) for k in ("sigma", "gamma", "tau", "kappa")})
    out["nu"] = disc.nu
    return out
