"""The observation model, written once: on which scale residuals are taken.

``residuals="log"`` (the default): ``log y = log f(x) + noise``, so residuals are
``log y - log f`` and the noise is multiplicative; every loss must be positive.
``residuals="linear"``: ``y = f(x) + noise``, residuals ``y - f`` and additive noise; the
response may be any finite number (variable-projection fitters and certified reference problems
work on this scale).

The noise family, also written once: ``scale · ε``, ``ε`` Student-t with ``nu`` degrees of
freedom or (``nu=None``) normal, for the Bayesian likelihood, the predictives and their scores.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import ScaleFitError

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
    return observed - on_scale(xp, pred, residuals)


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


def standard_noise(rng: np.random.Generator, nu: Any, shape) -> np.ndarray:
    """Draws of ``ε``: Student-t with ``nu`` degrees of freedom (scalar or array), or normal."""
    return rng.standard_normal(shape) if nu is None else rng.standard_t(nu, shape)


def noise_logpdf(z: Any, nu: Any) -> np.ndarray:
    """Log density of ``ε`` at ``z`` (subtract ``log scale`` for ``scale · ε``)."""
    from scipy import stats

    return stats.norm.logpdf(z) if nu is None else stats.t.logpdf(z, nu)


def noise_cdf(z: Any, nu: Any) -> np.ndarray:
    """Distribution function of ``ε`` at ``z``."""
    from scipy import special

    return special.ndtr(z) if nu is None else special.stdtr(nu, z)


def noise_pdf(z: Any, nu: Any) -> np.ndarray:
    """Density of ``ε`` at ``z`` (closed forms, no scipy distribution objects: a hot loop)."""
    from scipy import special

    if nu is None:
        return np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi)
    logc = special.gammaln((nu + 1) / 2) - special.gammaln(nu / 2) - 0.5 * np.log(nu * np.pi)
    return np.exp(logc - (nu + 1) / 2 * np.log1p(z**2 / nu))


def noise_ppf(q: float, nu: Any) -> np.ndarray:
    """Quantile of ``ε`` at probability ``q``."""
    from scipy import special

    return special.ndtri(q) if nu is None else special.stdtrit(nu, q)


def numpyro_noise(loc: Any, scale: Any, nu: Any):
    """The numpyro distribution of ``loc + scale · ε`` (the Bayesian model's likelihood)."""
    import numpyro.distributions as dist

    return dist.Normal(loc, scale) if nu is None else dist.StudentT(nu, loc, scale)


class Mixture:
    """Predictive distribution of log loss: an equal-weight mixture over draws of ``m + s·ε``.

    ``ε`` is the noise family's (normal, or Student-t with ``nu`` degrees of freedom); ``m``
    (draws × rows), ``s`` and ``nu`` broadcast against each other (per draw, per row or both).
    The intervals and coverages of :func:`score_holdout` are computed from this distribution
    exactly (its CDF, and its quantiles by safeguarded Newton iterations), not from simulated
    draws: a count of rows inside a 95 % interval then carries no Monte Carlo noise.

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

    def cdf(self, v) -> np.ndarray:
        """Mixture CDF at ``v`` (one value per row), shape (n_rows,)."""
        return np.mean(noise_cdf((np.asarray(v, float)[None, :] - self.m) / self.s, self.nu), 0)

    def logpdf(self, v) -> np.ndarray:
        """Log mixture density at ``v`` (one value per row), shape (n_rows,)."""
        from scipy import special

        z = (np.asarray(v, float)[None, :] - self.m) / self.s
        lp = noise_logpdf(z, self.nu) - np.log(self.s)
        return special.logsumexp(lp, axis=0) - np.log(len(self.m))

    def ppf(self, q: float, *, tol: float = 1e-10, max_iter: int = 60) -> np.ndarray:
        """Mixture quantile at probability ``q`` for every row, shape (n_rows,).

        The quantile lies between the smallest and largest of the components' own ``q``-quantiles;
        Newton steps on the CDF are taken inside that bracket and bisection replaces any step that
        leaves it.
        """
        comp = self.m + self.s * noise_ppf(q, self.nu)
        lo, hi = comp.min(axis=0), comp.max(axis=0)
        x = np.median(comp, axis=0)
        for _ in range(max_iter):
            z = (x[None, :] - self.m) / self.s
            f = np.mean(noise_cdf(z, self.nu), axis=0) - q
            if np.all(np.abs(f) < tol):
                break
            lo = np.where(f < 0, x, lo)
            hi = np.where(f > 0, x, hi)
            dens = np.mean(noise_pdf(z, self.nu) / self.s, axis=0)
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


def holdout_scores(predictive: str, sc: dict[str, Any], ci_prob: float) -> dict[str, Any]:
    """A hold-out's scores of one predictive at ``ci_prob`` from ``sc`` at ``(0.5, ci_prob)``.

    ``sc``: :func:`score_holdout`'s, or :func:`sample_scores`' with ``lpd`` and ``pit`` None.
    """
    tag = f"{100 * ci_prob:g}"
    keys = {"coverage": f"coverage_{tag}", "coverage_50": "coverage_50"}
    keys.update(width_log=f"width_log_{tag}", lpd="lpd", pit="pit")
    return {"predictive": predictive, **{k: sc[v] for k, v in keys.items()}}
