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
import pandas as pd
from scipy import stats

from ..core.accounting import tokens_for_budget

#: Points per axis of the joint profile fit's grid over ``ln(alpha, beta)`` within the bounds.
GRID = 10
#: Most Gauss–Newton steps of the profile's shape search (it converges in under 10 on the sweeps).
MAX_STEPS = 50
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


def exponent_table(a, lo, hi, intercept, *, se=None, chi2_dof=None) -> pd.DataFrame:
    """The line ``ln N* = a ln C + intercept`` as rows ``params`` (a) and ``tokens`` (``1 - a``).

    ``T* = C / (6 N*)`` gives the tokens' row; ``se`` and ``chi2_dof`` are columns when given.
    """
    exps = pd.DataFrame(
        {
            "exponent": [a, 1 - a],
            "se": [se, se],
            "lo": [lo, 1 - hi],
            "hi": [hi, 1 - lo],
            "intercept": [intercept, np.log(tokens_for_budget(1.0, 1.0)) - intercept],
        },
        index=pd.Index(["params", "tokens"], name="quantity"),
    )
    if chi2_dof is not None:
        exps["chi2_dof"] = chi2_dof
    return exps if se is not None else exps.drop(columns="se")


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
    note: str = ""  # why the fit is not to be trusted (a shape search that did not converge)

    @property
    def at_bound(self) -> bool:
        """Whether the profile's shape sits at a bound of :data:`SHAPE_BOUNDS` (not identified)."""
        near = (min(abs(np.log(v / b)) for b in SHAPE_BOUNDS) < 1e-3 for v in self.shape or ())
        return any(near)


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


def _columns(u, a, b):
    """The profile's two shape columns ``(e^{-a u} - 1)/a`` and ``(e^{b u} - 1)/b``.

    Written this way they tend to ``-u`` and ``u`` as an exponent shrinks, so the linear block
    stays well conditioned down to the smallest shape the bounds allow.
    """
    return np.expm1(-a * u) / a, np.expm1(b * u) / b


def profile_value(x, curve: dict, alpha: float, beta: float):
    """Loss on one budget's fitted profile (a ``curve`` of :class:`Optima`) at ``x = ln N``."""
    c1, c2 = _columns(np.asarray(x, float) - curve["mean"], alpha, beta)
    e, p, q = curve["coef"]
    return e + p * c1 + q * c2


class _Profile:
    """The joint profile fit over ``K`` budgets, by variable projection.

    Under the law the profile of one budget is ``E + P e^{-α u} + Q e^{β u}`` (``u = x - mean``,
    ``P, Q >= 0``): linear in ``(E, P, Q)`` once the shared shape ``(α, β)`` is fixed. So each
    shape gets its exact per-budget non-negative least squares in closed form (a 2 × 2 problem
    after centring), and only the two exponents are searched: a grid over the bounded box, then
    projected Gauss–Newton from its best cell. The optimum of a budget is where the two terms
    balance, ``x* = mean + ln(P'/Q') / (α + β)`` in the well-conditioned columns of
    :func:`_columns` (``P' = αP``, ``Q' = βQ``).
    """

    def __init__(self, groups):
        self.y = np.concatenate([g[1] for g in groups])
        self.mean = np.array([float(g[0].mean()) for g in groups])
        self.idx = np.concatenate([np.full(len(g[0]), i) for i, g in enumerate(groups)])
        self.u = np.concatenate([g[0] for g in groups]) - self.mean[self.idx]
        self.starts = np.r_[0, np.cumsum([len(g[0]) for g in groups])[:-1]]
        self.count = np.array([len(g[0]) for g in groups], float)
        self.yc = self._centre(self.y)

    def _centre(self, v):  # (..., n) minus its per-budget mean
        return v - (np.add.reduceat(v, self.starts, axis=-1) / self.count)[..., self.idx]

    def inner(self, th):
        """Per-budget NNLS at shapes ``th = ln(α, β)`` ``(S, 2)``: residuals ``(S, n)``, P', Q'."""
        a, b = np.exp(th[:, :1]), np.exp(th[:, 1:])
        c1, c2 = (self._centre(c) for c in _columns(self.u, a, b))

        def sums(v):
            return np.add.reduceat(v, self.starts, axis=-1)

        s11, s22, s12, r1, r2 = (
            sums(v) for v in (c1 * c1, c2 * c2, c1 * c2, c1 * self.yc, c2 * self.yc)
        )
        det = s11 * s22 - s12 * s12
        with np.errstate(divide="ignore", invalid="ignore"):
            p, q = (s22 * r1 - s12 * r2) / det, (s11 * r2 - s12 * r1) / det
            both = (det > 1e-12 * s11 * s22) & (p >= 0) & (q >= 0)
            p1, q1 = np.maximum(r1, 0) / s11, np.maximum(r2, 0) / s22  # one term only
        one = p1 * r1 >= q1 * r2
        p = np.where(both, p, np.where(one, p1, 0.0))
        q = np.where(both, q, np.where(one, 0.0, q1))
        return self.yc - p[:, self.idx] * c1 - q[:, self.idx] * c2, p, q

    def search(self) -> tuple[np.ndarray, bool]:
        """The shape ``ln(α, β)`` of least RSS, and whether Gauss–Newton converged to it."""
        lo, hi = np.log(SHAPE_BOUNDS)
        grid = np.linspace(lo, hi, GRID)
        cells = np.stack([v.ravel() for v in np.meshgrid(grid, grid)], axis=1)
        th = cells[np.argmin(np.sum(self.inner(cells)[0] ** 2, axis=1))]

        def stencil(th):  # the point and a forward step in each exponent, inside the bounds
            h = 1e-7 * np.where(th < hi, 1.0, -1.0)
            return self.inner(np.array([th, th + [h[0], 0.0], th + [0.0, h[1]]]))[0], h

        r, h = stencil(th)
        for _ in range(MAX_STEPS):
            jac = (r[1:] - r[0]) / h[:, None]  # (2, n)
            g, rss = jac @ r[0], r[0] @ r[0]
            free = ~(((th <= lo) & (g > 0)) | ((th >= hi) & (g < 0)))  # not held by a bound
            step = np.zeros(2)
            if free.any():
                step[free] = -np.linalg.lstsq(jac[free] @ jac[free].T, g[free], rcond=None)[0]
            for _ in range(30):  # halve until the RSS does not rise
                new = np.clip(th + step, lo, hi)
                r_new, h = stencil(new)
                if r_new[0] @ r_new[0] <= rss:
                    break
                step /= 2
            done = np.max(np.abs(new - th)) < 1e-8 or rss - r_new[0] @ r_new[0] <= 1e-12 * rss
            th, r = new, r_new
            if done:
                return th, True
        return th, False


def fit_profile(groups, shape=None) -> Optima:
    """Joint least-squares fit of the law profile over all budgets (see the module docstring).

    With ``shape=(alpha, beta)`` the shape is held fixed instead of fitted. ``Optima.note`` says
    when the shape search did not converge.
    """
    prob = _Profile(groups)
    k = len(groups)
    converged = True
    if shape is None:
        th, converged = prob.search()
        a, b = (float(v) for v in np.exp(th))
    else:
        a, b = shape
    _, p, q = prob.inner(np.log([[a, b]]))
    p, q = p[0], q[0]
    c1, c2 = _columns(prob.u, a, b)
    e = np.add.reduceat(prob.y - p[prob.idx] * c1 - q[prob.idx] * c2, prob.starts) / prob.count
    ok = (p > 0) & (q > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(ok, np.log(p / q) / (a + b), np.nan)  # optimum minus the budget's mean
    cov, shape_se = _covariance(prob, a, b, e, p, q, v, fitted=shape is None)
    curve = [
        {
            "kind": "profile",
            "mean": float(prob.mean[j]),
            "coef": [float(e[j]), float(p[j]), float(q[j])],
        }
        for j in range(k)
    ]
    loss = np.array([profile_value(prob.mean[j] + v[j], curve[j], a, b) for j in range(k)])
    note = "" if converged else "the profile's shape search stopped before converging"
    return Optima(prob.mean + v, cov, loss, ok, curve, (a, b), shape_se, note)


def _covariance(prob: _Profile, a, b, e, p, q, v, *, fitted: bool):
    """Gauss–Newton covariance of the optima (and of the shape when ``fitted``).

    Parameters: the shared ``(α, β)`` and per budget ``(E, P', Q')``; the residual variance is the
    joint fit's. The normal matrix is block-diagonal but for the shape, so its inverse comes from
    the 3 × 3 budget blocks and a 2 × 2 Schur complement; the optima follow by the delta method
    (NaN where a budget has no minimum).
    """
    i, u, k = prob.idx, prob.u, len(e)
    c1, c2 = _columns(u, a, b)
    jb = np.stack([np.ones_like(u), c1, c2], axis=1)  # (n, 3) per-budget columns
    ja = np.stack([p[i] * (-u * np.exp(-a * u) - c1) / a, q[i] * (u * np.exp(b * u) - c2) / b], 1)
    resid = prob.y - e[i] - p[i] * c1 - q[i] * c2
    dof = len(u) - 3 * k - (2 if fitted else 0)
    sigma2 = resid @ resid / dof if dof > 0 else np.nan
    d_inv = np.linalg.pinv(np.add.reduceat(jb[:, :, None] * jb[:, None, :], prob.starts))
    with np.errstate(divide="ignore", invalid="ignore"):
        gb = np.stack([np.zeros(k), 1 / ((a + b) * p), -1 / ((a + b) * q)], axis=1)  # (K, 3)
    cov_x = np.diag(np.einsum("ki,kij,kj->k", gb, d_inv, gb))
    shape_se = None
    if fitted:
        bmat = np.add.reduceat(ja[:, :, None] * jb[:, None, :], prob.starts)  # (K, 2, 3)
        schur = ja.T @ ja - np.einsum("kai,kij,kbj->ab", bmat, d_inv, bmat)
        s_inv = np.linalg.pinv(schur)
        w = (-v / (a + b))[:, None] - np.einsum("kai,kij,kj->ka", bmat, d_inv, gb)
        cov_x = cov_x + w @ s_inv @ w.T
        shape_se = tuple(float(s) for s in np.sqrt(sigma2 * np.diag(s_inv)))
    ok = np.isfinite(v)
    cov_x[~ok, :] = cov_x[:, ~ok] = np.nan
    return sigma2 * cov_x, shape_se


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
