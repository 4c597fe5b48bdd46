"""Calibrated extrapolation: per-model random effect plus a discrepancy growing beyond the data.

Observation model on log loss for a row ``i`` of model (group) ``g``::

    log y_i = log f(x_i; θ) + u_g + δ_i + ε_i,
    u_g + ε_i ~ s(C_i) · t_ν,   s(C) = σ · exp(γ · (log C - m)),
    δ_i ~ (κ · d_i) · t_ν,      d_i = max(0, log C_i - log C_max)

(natural logs; ``m`` is the training rows' mean log-compute, ``C_max`` their largest compute),
where ``u_g ~ N(0, τ²)`` is a per-model random effect and ``ε_i`` the noise within a model:

* ``u_g`` — a random effect per model: several rows of a table are the same training run (points
  digitised from one curve, one recipe per size), so their residuals are not independent; ``τ`` is
  reported, and for a new model the predictive includes it through ``s(C)``;
* ``s(C)`` — the scatter of a row about the law, allowed to change with compute (on Chinchilla it
  grows: 0.0032 at 1.6e19 FLOPs to 0.0051 at 4e20 in the training rows of the 0.2 cut);
* ``δ_i`` — law misfit that grows with the distance from the data in log-compute: zero inside the
  data, and an extrapolation error whose sd rises by ``κ`` per e-fold of compute beyond it.

Estimation (empirical Bayes, two stages, cheap enough for any fitter):

1. ``σ`` and ``γ`` by maximum likelihood from the residuals of a least-squares fit on the training
   rows (``r_i ~ N(0, s(C_i)²)``); ``τ`` by the method of moments (pooled within-model variance of
   models with two or more rows against the total).
2. ``κ`` (and, with ``tails="student_t"``, the predictive's degrees of freedom ``ν``) by maximum
   likelihood from *forward validation inside the training data*: for each inner share ``h``
   (default 0.15, 0.25, 0.35) the law is refitted on the lowest-compute ``1 - h`` of the training
   rows; its residuals ``r_j`` on the rest, less their model's shrunken shift from the inner fit
   (the same correction the predictive applies), at distances ``d_j``, are modelled as
   ``sqrt(s_j² + κ² d_j²) · t_ν`` (``s_j``: the scatter left after the shift). The inner fits are
   point fits, so ``κ`` absorbs both the misfit and the parameter error of extrapolating that
   far; adding the outer fit's draws on top is slightly conservative. ``ν`` lets the predictive
   have the heavier tails that held-out errors of a law show (whole models off the law); when
   the forward-validation residuals are normal, its estimate is large and the predictive is
   normal in effect. ``tails="normal"`` fixes ``ν = ∞`` (the calibration of issue 14's first
   version).

This is not a joint hierarchical model fitted with the law (``τ`` and ``κ`` are plugged in after
the fit); it calibrates the *predictive* distribution, which is what extrapolation needs.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize

from .._validation import Options, validate
from ..errors import ScaleFitError

#: Inner held-out shares used to learn the growth of the discrepancy.
INNER = (0.15, 0.25, 0.35)
#: Tail models of the calibrated predictive.
TAILS = ("student_t", "normal")
#: Largest degrees of freedom reported (beyond it the Student-t is a normal in effect).
NU_MAX = 1000.0


@dataclass(frozen=True)
class Discrepancy:
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

    def sd(self, log_c) -> np.ndarray:
        """Predictive sd of log loss (noise + random effect + discrepancy) at ``log C``."""
        lc = np.asarray(log_c, dtype=float)
        d = np.clip(lc - self.log_c_max, 0.0, None)
        return np.hypot(self.scatter(lc), self.kappa * d)

    def scatter(self, log_c) -> np.ndarray:
        """Scatter ``s(C)`` of a row about the law (no discrepancy) at ``log C``."""
        return self.sigma * np.exp(self.gamma * (np.asarray(log_c, dtype=float) - self.log_c_ref))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dictionary."""
        out = asdict(self)
        out["group"] = list(self.group)
        return out


def log_compute(tab: pd.DataFrame, law) -> np.ndarray:
    """Natural log of each row's compute (``flops``, else the product of the law's inputs)."""
    from .split import compute_key

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
    from scipy import stats

    def nll(th):
        scale = np.sqrt(s0**2 + np.exp(2 * th[0]) * d**2)
        return -float(np.sum(stats.t.logpdf(r / scale, 1.0 + np.exp(th[1])) - np.log(scale)))

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
    keys = train[list(group)].astype(str).agg("|".join, axis=1)
    with warnings.catch_warnings(record=True) as caught:  # the calibration's own fits: recorded
        warnings.simplefilter("always")
        return _fit_discrepancy(train, law, group, keys, inner, starts, seed, loss, tails, caught)


def _fit_discrepancy(
    train, law, group, keys, inner, starts, seed, loss, tails, caught
) -> Discrepancy:
    from .split import split_by_compute

    full = _least_squares_fit(train, law, starts=starts, seed=seed, loss=loss, progress=False)
    resid = np.log(train["loss"].to_numpy(float)) - np.log(full.predict(train))
    lc_train = log_compute(train, law)
    ref = float(lc_train.mean())
    sigma_w, tau = _moments(resid, keys)
    grp = pd.DataFrame({"g": keys.to_numpy(), "r": resid}).groupby("g")["r"].agg(["mean", "size"])
    offsets = {str(g): [float(m), int(n)] for g, (m, n) in grp.iterrows()}
    sigma, gamma = _scatter(resid, lc_train - ref)
    rs, ds, ss, per = [], [], [], []
    for h in inner:
        tr, te, _, _ = split_by_compute(train, law, float(h), who="fit_discrepancy")
        res = _least_squares_fit(tr, law, starts=starts, seed=seed, loss=loss, progress=False)
        r = np.log(te["loss"].to_numpy(float)) - np.log(res.predict(te))
        r_tr = np.log(tr["loss"].to_numpy(float)) - np.log(res.predict(tr))
        shift, keep = _effects(r_tr, _keys(tr, group), _keys(te, group), tau, sigma_w)
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
    return Discrepancy(
        sigma,
        gamma,
        tau,
        kappa,
        ref,
        float(lc_train.max()),
        group,
        {
            "inner": per,
            "n_train": len(train),
            "n_models": int(keys.nunique()),
            "sigma_within": sigma_w,
            "offsets": offsets,
            "fit_warnings": sorted({str(w.message) for w in caught}),
        },
        nu,
    )


def _least_squares_fit(table, law, *, starts: int, seed: int, loss: str, progress: bool):
    """:func:`scalefit.fit` with its defaults but ``starts, seed, loss``, built from the engine.

    The steps of ``fit`` for a law object and no weights, bootstrap or hold-out: read the table,
    fit by least squares, warn each convergence note. ``fit`` itself runs the hold-out, which
    calls this module, so calling ``fit`` from here would be an import cycle.
    """
    from ..errors import ConvergenceWarning
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


def _effects(resid, keys_train, keys_x, tau: float, sigma_w: float):
    """Shrunken per-model shift and the share of scatter it leaves (see :func:`model_effects`)."""
    t2, sw2 = tau**2, sigma_w**2
    shift, keep = np.zeros(len(keys_x)), np.ones(len(keys_x))
    if t2 == 0 or t2 + sw2 == 0:
        return shift, keep
    rho = t2 / (t2 + sw2)
    grp = pd.DataFrame({"g": keys_train, "r": resid}).groupby("g")["r"].agg(["mean", "size"])
    means, sizes = grp["mean"].to_dict(), grp["size"].to_dict()
    for i, k in enumerate(keys_x):
        if k in means:
            w = sizes[k] * t2 / (sizes[k] * t2 + sw2)
            shift[i] = w * means[k]
            keep[i] = 1.0 - rho * w
    return shift, keep


def model_effects(disc: Discrepancy, x: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Shrunken random effect ``û_g`` of each row's model and the share of variance it leaves.

    A row whose model has ``n`` training rows with mean residual ``m`` is shifted by
    ``w·m``, ``w = n·τ² / (n·τ² + σ_w²)`` (the best linear unbiased predictor), and the random
    effect's share ``ρ = τ² / (τ² + σ_w²)`` of the scatter shrinks to ``ρ·(1 - w)``; a new model
    gets no shift and keeps the whole scatter.
    """
    offsets = disc.details.get("offsets", {})
    sw2 = float(disc.details.get("sigma_within", disc.sigma)) ** 2
    t2 = disc.tau**2
    rho = t2 / (t2 + sw2) if t2 + sw2 > 0 else 0.0
    shift, keep = np.zeros(len(x)), np.ones(len(x))
    if not offsets or t2 == 0 or not set(disc.group) <= set(x.columns):
        return shift, keep
    keys = x[list(disc.group)].astype(str).agg("|".join, axis=1).to_numpy()
    for i, k in enumerate(keys):
        if k in offsets:
            m, n = offsets[k]
            w = n * t2 / (n * t2 + sw2)
            shift[i] = w * m
            keep[i] = 1.0 - rho * w
    return shift, keep


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
    law = result.get_law()
    d = np.asarray(result.draws if result.draws is not None else [list(result.params.values())])
    d = d[np.all(np.isfinite(d), axis=1)]
    idx = np.linspace(0, len(d) - 1, min(max_draws, len(d))).astype(int)
    mean = np.asarray(
        law.evaluate({k: d[idx, i][:, None] for i, k in enumerate(result.params)}, x), dtype=float
    )
    lc = log_compute(x, law)
    shift, keep = model_effects(disc, x)
    scatter = disc.scatter(lc)
    dist = np.clip(lc - disc.log_c_max, 0.0, None)
    sd = np.sqrt(scatter**2 * keep + (disc.kappa * dist) ** 2)
    log_mean = np.log(mean) + shift[None, :]
    rng = np.random.default_rng(seed)
    eps = (
        rng.standard_normal(mean.shape) if disc.nu is None else rng.standard_t(disc.nu, mean.shape)
    )
    sims = np.exp(log_mean + eps * sd[None, :])
    return sims, log_mean, sd


class Mixture:
    """Predictive distribution of log loss: an equal-weight mixture over draws of ``m + s·ε``.

    ``ε`` is standard normal or Student-t with ``nu`` degrees of freedom; ``m`` (draws × rows),
    ``s`` and ``nu`` broadcast against each other (per draw, per row or both). The intervals and
    coverages of :func:`score_holdout` are computed from this distribution exactly (its CDF, and
    its quantiles by safeguarded Newton iterations), not from simulated draws: a count of rows
    inside a 95 % interval then carries no Monte Carlo noise.

    Parameters
    ----------
    log_mean : array (n_draws, n_rows)
        Centre of each draw's noise term on log loss.
    scale : float or array
        Scale of the noise (broadcast to ``log_mean``).
    nu : float or array, optional
        Student-t degrees of freedom (scalar, or per draw as an ``(n_draws, 1)`` array); ``None``:
        normal.
    """

    def __init__(self, log_mean, scale, nu=None) -> None:
        self.m = np.asarray(log_mean, dtype=float)
        self.s = np.broadcast_to(np.asarray(scale, dtype=float), self.m.shape)
        self.nu = None if nu is None else np.asarray(nu, dtype=float)

    def _std(self, z, what: str):
        from scipy import special

        if self.nu is None:
            return special.ndtr(z) if what == "cdf" else np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi)
        if what == "cdf":
            return special.stdtr(self.nu, z)
        nu = self.nu
        logc = special.gammaln((nu + 1) / 2) - special.gammaln(nu / 2) - 0.5 * np.log(nu * np.pi)
        return np.exp(logc - (nu + 1) / 2 * np.log1p(z**2 / nu))

    def cdf(self, v) -> np.ndarray:
        """Mixture CDF at ``v`` (one value per row), shape (n_rows,)."""
        return np.mean(self._std((np.asarray(v, float)[None, :] - self.m) / self.s, "cdf"), axis=0)

    def logpdf(self, v) -> np.ndarray:
        """Log mixture density at ``v`` (one value per row), shape (n_rows,)."""
        from scipy import special, stats

        z = (np.asarray(v, float)[None, :] - self.m) / self.s
        lp = (stats.norm.logpdf(z) if self.nu is None else stats.t.logpdf(z, self.nu)) - np.log(
            self.s
        )
        return special.logsumexp(lp, axis=0) - np.log(len(self.m))

    def ppf(self, q: float, *, tol: float = 1e-10, max_iter: int = 60) -> np.ndarray:
        """Mixture quantile at probability ``q`` for every row, shape (n_rows,).

        The quantile lies between the smallest and largest of the components' own ``q``-quantiles;
        Newton steps on the CDF are taken inside that bracket and bisection replaces any step that
        leaves it.
        """
        from scipy import special

        if self.nu is None:
            zq = special.ndtri(q)
        else:
            zq = special.stdtrit(self.nu, q)
        comp = self.m + self.s * zq
        lo, hi = comp.min(axis=0), comp.max(axis=0)
        x = np.median(comp, axis=0)
        for _ in range(max_iter):
            z = (x[None, :] - self.m) / self.s
            f = np.mean(self._std(z, "cdf"), axis=0) - q
            if np.all(np.abs(f) < tol):
                break
            lo = np.where(f < 0, x, lo)
            hi = np.where(f > 0, x, hi)
            dens = np.mean(self._std(z, "pdf") / self.s, axis=0)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = x - f / dens
            bad = ~np.isfinite(step) | (step <= lo) | (step >= hi)
            x = np.where(bad, 0.5 * (lo + hi), step)
        return x


def score_holdout(y, log_mean, scale, nu=None, *, probs=(0.5, 0.95)) -> dict[str, Any]:
    """Coverage, interval width and log predictive density of held-out losses, computed exactly.

    The predictive distribution of each row's log loss is the mixture over draws of
    ``log_mean + scale·ε`` (:class:`Mixture`); a row is inside the central ``p`` interval when
    its predictive CDF lies in ``[(1 - p)/2, (1 + p)/2]``.

    Parameters
    ----------
    y : array (n_rows,)
        Held-out losses.
    log_mean : array (n_draws, n_rows)
        Log of each draw's mean (the centre of its noise term).
    scale : float or array
        Scale of the noise on log loss (per row, or per draw and row).
    nu : float or array, optional
        Student-t degrees of freedom of the noise (per draw allowed, as ``(n_draws, 1)``);
        ``None``: normal.
    probs : sequence of float
        Interval probabilities: ``coverage_{p}`` and ``width_log_{p}`` for each (percent).

    Returns
    -------
    dict
        ``coverage_50``, ``width_log_50``, ..., ``lpd``: the mean over rows of
        ``log mean_draws p(log y | draw)`` (higher is better), and ``pit``: each row's predictive
        CDF at its loss (the probability integral transform; a list, a value near 0 or 1 is a
        row far outside the predictive).
    """
    logy = np.log(np.asarray(y, dtype=float))
    mix = Mixture(log_mean, scale, nu)
    cdf = mix.cdf(logy)
    out: dict[str, Any] = {}
    for prob in probs:
        tag = f"{100 * prob:g}"
        out[f"coverage_{tag}"] = float(np.mean((cdf >= (1 - prob) / 2) & (cdf <= (1 + prob) / 2)))
        out[f"width_log_{tag}"] = float(np.mean(mix.ppf((1 + prob) / 2) - mix.ppf((1 - prob) / 2)))
    out["lpd"] = float(np.mean(mix.logpdf(logy)))
    out["pit"] = [float(v) for v in cdf]
    return out


def sample_scores(y, sims, *, probs=(0.5, 0.95)) -> dict[str, Any]:
    """Coverage and width of intervals taken as quantiles of predictive draws ``sims``.

    For predictive distributions that are not a location-scale mixture on log loss (a law fitted
    with residuals on the linear scale); :func:`score_holdout` is exact where it applies.
    """
    y = np.asarray(y, dtype=float)
    out: dict[str, Any] = {}
    for prob in probs:
        lo, hi = np.quantile(sims, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
        tag = f"{100 * prob:g}"
        out[f"coverage_{tag}"] = float(np.mean((y >= lo) & (y <= hi)))
        out[f"width_log_{tag}"] = float(np.mean(np.log(hi) - np.log(lo)))
    return out


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
    """Score held-out rows with the calibrated predictive (for a hold-out report).

    Parameters
    ----------
    result : FitResult
        The fit on ``train`` (its draws are used).
    train, test : DataFrame
        Training and held-out rows.
    law : Law
        The law.
    ci_prob : float, default 0.95
        Probability of the interval whose coverage is reported as ``coverage``.
    seed : int, default 0
        Seed of the calibration fits and the predictive draws.
    tails : {"student_t", "normal"}, default "student_t"
        Passed to :func:`fit_discrepancy`.

    Returns
    -------
    dict
        ``coverage`` (at ``ci_prob``), ``coverage_50``, ``width_log`` (mean width of the
        ``ci_prob`` interval on log loss), ``lpd`` (mean log predictive density of the held-out
        log losses), ``pit`` (each held-out row's predictive CDF at its loss), ``predictive``
        (the observation model, one line) and the calibration ``sigma, gamma, tau, kappa, nu``.
        Coverages and widths are exact for the mixture over the result's draws
        (:func:`score_holdout`).
    """
    disc = fit_discrepancy(train, law, seed=seed, tails=tails)
    _, log_mean, sd = predictive_sims(result, test, disc, seed=seed)
    sc = score_holdout(test["loss"], log_mean, sd[None, :], disc.nu, probs=(0.5, ci_prob))
    tag = f"{100 * ci_prob:g}"
    out: dict[str, Any] = {
        "predictive": disc.describe(),
        "coverage": sc[f"coverage_{tag}"],
        "coverage_50": sc["coverage_50"],
        "width_log": sc[f"width_log_{tag}"],
        "lpd": sc["lpd"],
        "pit": sc["pit"],
    }
    out.update({k: float(getattr(disc, k)) for k in ("sigma", "gamma", "tau", "kappa")})
    out["nu"] = disc.nu
    return out
