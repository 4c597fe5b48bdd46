"""Per-budget IsoFLOP curve fits (parabola, law profile) and the power law through their optima.

Everything here works on ``x = ln params`` and the loss itself (Hoffmann et al. fit their IsoFLOP
parabolas to the loss, not its logarithm).

* **parabola** (Hoffmann et al.'s Approach 2): ``L = c0 + c1·u + c2·u²`` per budget by ordinary
  least squares, ``u = x - mean(x)``; optimum ``x* = mean(x) - c1 / (2 c2)``; its variance by the
  delta method with the residual variance pooled over budgets.
* **profile** (the correction): under ``L = E + A/N^α + B/T^β`` and ``T = C/(6N)`` the IsoFLOP curve
  at every budget is exactly ``L = E_C + G_C·(β·e^{-α(x - x*)} + α·e^{β(x - x*)})``: asymmetric
  when ``α ≠ β``, with the same shape ``(α, β)`` at every budget. A symmetric parabola fitted to it
  moves its vertex towards the side with more runs, and when the sampling window drifts relative
  to the optimum from budget to budget that bias tilts the exponent. The profile is fitted to all
  budgets jointly (shared ``α, β``; per budget ``E_C, G_C, x*``), which removes the bias; its
  covariance (Gauss–Newton, residual variance from the joint fit) carries the uncertainty of the
  shared shape into every optimum, so the optima are correlated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

#: Starting shapes (alpha, beta) tried by the joint profile fit.
SHAPE_STARTS = ((0.3, 0.3), (0.5, 0.25), (0.25, 0.5))
#: Bounds on the fitted shape: an exponent at a bound means the data do not identify the shape.
SHAPE_BOUNDS = (0.02, 3.0)


class PowerLawExponents:
    """Mixin for results with an ``exponents`` table indexed by ``params`` and ``tokens``."""

    @property
    def a(self) -> float:
        """Exponent of ``N* ∝ C^a``."""
        return float(self.exponents.loc["params", "exponent"])

    @property
    def b(self) -> float:
        """Exponent of ``T* ∝ C^b``."""
        return float(self.exponents.loc["tokens", "exponent"])


@dataclass
class Optima:
    """Optimum ``x* = ln N*`` per budget and the covariance of the optima."""

    x: np.ndarray  # (K,)
    cov: np.ndarray  # (K, K)
    loss: np.ndarray  # (K,) loss at the optimum
    ok: np.ndarray  # (K,) bool: a minimum exists
    curve: list  # per budget, the coefficients needed to draw the fitted curve
    shape: tuple[float, float] | None = None  # (alpha, beta) of the profile fit
    shape_se: tuple[float, float] | None = None


def fit_parabolas(groups: list[tuple[np.ndarray, np.ndarray]]) -> Optima:
    """Ordinary least-squares parabola per budget; ``groups`` holds ``(x, loss)`` arrays."""
    k = len(groups)
    xs, var_unit, loss, ok, curve = np.full(k, np.nan), np.full(k, np.nan), [], [], []
    rss, dof = 0.0, 0
    for i, (x, y) in enumerate(groups):
        m = float(x.mean())
        u = x - m
        design = np.stack([np.ones_like(u), u, u * u], axis=1)
        coef, res, rank, _ = np.linalg.lstsq(design, y, rcond=None)
        c0, c1, c2 = coef
        resid = y - design @ coef
        rss += float(resid @ resid)
        dof += len(y) - 3
        good = rank == 3 and c2 > 0
        ok.append(good)
        curve.append({"kind": "parabola", "mean": m, "coef": coef.tolist()})
        if not good:
            loss.append(np.nan)
            continue
        xs[i] = m - c1 / (2 * c2)
        loss.append(c0 - c1 * c1 / (4 * c2))
        grad = np.array([0.0, -1 / (2 * c2), c1 / (2 * c2 * c2)])
        var_unit[i] = grad @ np.linalg.pinv(design.T @ design) @ grad
    sigma2 = rss / dof if dof > 0 else np.nan
    return Optima(xs, np.diag(var_unit * sigma2), np.array(loss), np.array(ok), curve)


def _f(u, a, b):
    return b * np.exp(-a * u) + a * np.exp(b * u)


def profile_value(x, e, g, xstar, alpha, beta):
    """The IsoFLOP profile ``E + G·(β e^{-α u} + α e^{β u})``, ``u = x - x*``."""
    return e + g * _f(np.asarray(x) - xstar, alpha, beta)


class _Profile:
    """Residuals and Jacobian of the joint profile fit over ``K`` budgets."""

    def __init__(self, groups, shape=None):
        self.x = np.concatenate([g[0] for g in groups])
        self.y = np.concatenate([g[1] for g in groups])
        self.idx = np.concatenate([np.full(len(g[0]), i) for i, g in enumerate(groups)])
        self.k = len(groups)
        self.fixed = shape

    def unpack(self, th):
        k = self.k
        if self.fixed is None:
            a, b, rest = np.exp(th[0]), np.exp(th[1]), th[2:]
        else:
            (a, b), rest = self.fixed, th
        return a, b, rest[:k], np.exp(rest[k : 2 * k]), rest[2 * k :]

    def resid(self, th):
        a, b, e, g, xs = self.unpack(th)
        i = self.idx
        return self.y - profile_value(self.x, e[i], g[i], xs[i], a, b)

    def jac(self, th):
        a, b, e, g, xs = self.unpack(th)
        i, k = self.idx, self.k
        u = self.x - xs[i]
        ea, eb = np.exp(-a * u), np.exp(b * u)
        gi = g[i]
        n = len(u)
        off = 0 if self.fixed is not None else 2
        jac = np.zeros((n, off + 3 * k))
        if self.fixed is None:
            jac[:, 0] = -gi * (-b * u * ea + eb) * a
            jac[:, 1] = -gi * (ea + a * u * eb) * b
        rows = np.arange(n)
        jac[rows, off + i] = -1.0
        jac[rows, off + k + i] = -gi * _f(u, a, b)
        jac[rows, off + 2 * k + i] = gi * a * b * (eb - ea)
        return jac


def fit_profile(groups, start: Optima, shape=None) -> Optima:
    """Joint least-squares fit of the law profile over all budgets (see the module docstring).

    ``start`` (the parabola fit) gives the starting optima; with ``shape=(alpha, beta)`` the shape
    is held fixed instead of fitted.
    """
    prob = _Profile(groups, shape)
    k = prob.k
    best = None
    for a0, b0 in SHAPE_STARTS if shape is None else [shape]:
        th0 = _start(groups, start, a0, b0)
        if shape is None:
            th0 = np.concatenate([[np.log(a0), np.log(b0)], th0])
        lo, hi = np.full(len(th0), -np.inf), np.full(len(th0), np.inf)
        if shape is None:
            lo[:2], hi[:2] = np.log(SHAPE_BOUNDS[0]), np.log(SHAPE_BOUNDS[1])
        try:
            sol = optimize.least_squares(
                prob.resid, th0, jac=prob.jac, bounds=(lo, hi), method="trf", max_nfev=2000
            )
        except (ValueError, np.linalg.LinAlgError):
            continue
        if np.all(np.isfinite(sol.x)) and (best is None or sol.cost < best.cost):
            best = sol
    if best is None:
        nan = np.full(k, np.nan)
        return Optima(nan, np.diag(nan), nan, np.zeros(k, bool), [None] * k)
    th = best.x
    a, b, e, g, xs = prob.unpack(th)
    jac = prob.jac(th)
    dof = len(prob.y) - len(th)
    sigma2 = 2 * best.cost / dof if dof > 0 else np.nan
    cov = sigma2 * np.linalg.pinv(jac.T @ jac)
    off = 0 if shape is not None else 2
    sl = slice(off + 2 * k, off + 3 * k)
    loss = e + g * (a + b)
    curve = [
        {"kind": "profile", "e": float(e[j]), "g": float(g[j]), "x": float(xs[j])} for j in range(k)
    ]
    shape_se = None if shape is not None else tuple(np.sqrt(np.diag(cov)[:2]) * (a, b))
    return Optima(xs, cov[sl, sl], loss, np.isfinite(xs), curve, (float(a), float(b)), shape_se)


def _start(groups, start: Optima, a0: float, b0: float) -> np.ndarray:
    e, lg, xs = [], [], []
    for j, (x, y) in enumerate(groups):
        lo, hi = float(x.min()), float(x.max())
        span = hi - lo
        x0 = start.x[j] if start.ok[j] else float(x[np.argmin(y)])
        x0 = float(np.clip(x0, lo - 0.5 * span, hi + 0.5 * span))
        c2 = start.curve[j]["coef"][2] if start.ok[j] else 1e-3
        g0 = max(2 * c2 / (a0 * b0 * (a0 + b0)), 1e-6)
        e.append(float(np.min(y)) - g0 * (a0 + b0))
        lg.append(np.log(g0))
        xs.append(x0)
    return np.array(e + lg + xs)


def power_law(
    logc: np.ndarray, x: np.ndarray, cov: np.ndarray, prob: float, *, weighted: bool = True
) -> dict:
    """Least squares of ``x = ln N*`` on ``ln C``: exponent, intercept, interval.

    With ``weighted=False`` this is Hoffmann et al.'s ordinary least-squares line (every optimum
    counts the same; the classical OLS standard error and a Student-t quantile). With
    ``weighted=True`` the covariance of the optima weights the fit (generalised least squares);
    when the scatter about the line exceeds what that covariance explains (chi² per degree of
    freedom above 1), the standard errors are scaled by ``sqrt(chi²/dof)`` and a Student-t
    quantile is used (the Birge ratio). A covariance that is not finite and positive falls back to
    the unweighted line.
    """
    k = len(x)
    design = np.stack([np.ones(k), logc - logc.mean()], axis=1)
    cov = np.asarray(cov, dtype=float)
    if not weighted or not np.all(np.isfinite(cov)) or np.any(np.diag(cov) <= 0):
        cov = np.eye(k)
        weighted = False
    prec = np.linalg.pinv(cov)
    info = design.T @ prec @ design
    beta_cov = np.linalg.pinv(info)
    coef = beta_cov @ design.T @ prec @ x
    r = x - design @ coef
    dof = k - 2
    chi2 = float(r @ prec @ r) / dof if dof > 0 else np.nan
    scale = max(chi2, 1.0) if weighted else chi2
    se = float(np.sqrt(beta_cov[1, 1] * scale)) if dof > 0 else np.nan
    q = (
        stats.t.ppf((1 + prob) / 2, dof)
        if (not weighted or chi2 > 1)
        else stats.norm.ppf((1 + prob) / 2)
    )
    return {
        "exponent": float(coef[1]),
        "se": se,
        "lo": float(coef[1] - q * se),
        "hi": float(coef[1] + q * se),
        "intercept": float(coef[0] - coef[1] * logc.mean()),
        "chi2_dof": chi2,
        "weighted": weighted,
    }
