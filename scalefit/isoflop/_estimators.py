"""Point estimators of ``N*`` at new budgets, their run bootstrap, and the reference optimum.

Private pieces of :mod:`scalefit.isoflop.decision`.

Everything works on ``x = ln N`` and ``ln C``. A training table is split into :class:`Budget`
groups (one per budget); every estimator maps the groups to ``ln N*`` at target ``ln C``.

* ``law_huber`` / ``law_mse``: the Chinchilla law ``E + A/N^α + B/T^β`` fitted by
  :func:`scalefit.fit` on log loss (Huber δ = 1e-3, or squared error); ``N*`` in closed form.
* ``law_frontier``: the same Huber fit with each run weighted by ``exp(-½ ((x - x_b)/h)²)``,
  ``x_b`` its budget's parabola vertex (or its best run), ``h`` = :data:`FRONTIER_WIDTH`: the runs
  near each budget's optimum, where the decision is made, count most.
* ``law_near``: the same Huber fit on only the runs within :data:`NEAR_WIDTH` (in ln N) of their
  budget's parabola vertex (or best run), and at least the 3 nearest per budget: the law fitted
  where the decision is made, the runs far from each minimum dropped.
* ``parabola``: Hoffmann et al.'s Approach 2 (a parabola of loss in ``x`` per budget with 4 or
  more runs, an ordinary least-squares line of the vertices against ``ln C``).
* ``parabola_wls``: the same line weighted by the vertices' delta-method precision.
* ``parabola_recent``: the ordinary line through the three highest training vertices only.
* ``anchored``: the law's exponent ``a = β/(α+β)`` (Huber fit) with the intercept placed through
  the vertices (precision-weighted mean of ``x* - a ln C``).
* ``average``: the mean ``ln N*`` of ``parabola``, ``parabola_wls`` and ``anchored``;
  ``average_all`` adds the three law fits.
* ``parabola_shared``: the per-budget parabolas fitted jointly with ONE curvature shared by all
  budgets (per budget its own level and slope), on every budget with 3 or more distinct sizes, so
  that a budget with few runs borrows the others' curvature; OLS line of the vertices.
* ``parabola_sharedc``: the same with the log-curvature linear in ``ln C`` (two shared
  parameters: the curvature in loss units shrinks as the loss falls with compute).
* ``slope_prior``: the precision-weighted line of the ``parabola`` vertices with a normal prior
  ``N(β/(α+β), SLOPE_PRIOR_SD²)`` on its slope from the law's exponent (Huber fit): between
  ``parabola_wls`` (no prior) and ``anchored`` (slope fixed).
* ``stack``: a weighted mean of the ``ln N*`` of :data:`STACK_PARTS` (weights non-negative,
  summing to 1), the weights learned from rolling-origin errors
  (:func:`scalefit.isoflop.decision.fit_stack_weights`); by default the constants
  :data:`scalefit.allocate.misfit.STACK_WEIGHTS` learned on the public sweeps.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.errors import ScaleFitError
from ._curves import fit_parabolas

METHODS = (
    "law_huber",
    "law_mse",
    "law_frontier",
    "law_near",
    "parabola",
    "parabola_wls",
    "parabola_recent",
    "anchored",
    "average",
    "average_all",
    "parabola_shared",
    "parabola_sharedc",
    "slope_prior",
    "stack",
)
#: Base estimators the ``stack`` weighs (fixed a priori, not chosen on scores).
STACK_PARTS = ("parabola", "parabola_wls", "anchored", "law_huber", "parabola_sharedc")
#: Parts averaged by the model-averaging estimators.
AVERAGES = {
    "average": ("parabola", "parabola_wls", "anchored"),
    "average_all": ("parabola", "parabola_wls", "anchored", "law_huber", "law_mse", "law_frontier"),
}
#: Law fits each estimator needs.
LAW_NEEDS = {
    "law_huber": ("law_huber",),
    "law_mse": ("law_mse",),
    "law_frontier": ("law_frontier",),
    "law_near": ("law_near",),
    "anchored": ("law_huber",),
    "average": ("law_huber",),
    "average_all": ("law_huber", "law_mse", "law_frontier"),
    "slope_prior": ("law_huber",),
    "stack": ("law_huber",),
}
#: Prior standard deviation of the vertex line's slope about the law's exponent (``slope_prior``);
#: set a priori (a typical spread of published ``a`` estimates, 0.45-0.55), not tuned on scores.
SLOPE_PRIOR_SD = 0.05
#: Bound on the log-curvature's slope in ``ln C`` (``parabola_sharedc``); under the Chinchilla law
#: it is about ``-αβ/(α+β) ≈ -0.15``: the bound keeps a curvature from vanishing at one budget.
CURVATURE_SLOPE = 0.5
#: Width (in ln N) of the frontier weights of ``law_frontier``.
FRONTIER_WIDTH = 0.7
#: Half-width (in ln N) of the window about each budget's optimum that ``law_near`` fits; set a
#: priori (sizes within a factor e of the optimum), not tuned on scores.
NEAR_WIDTH = 1.0
#: A budget needs this many runs to give a vertex to the Approach-2 estimators.
MIN_RUNS = 4
DELTA = 1e-3


@dataclass(frozen=True)
class Budget:
    """The runs of one budget: ``ln C`` and per-run ``params, tokens, loss``."""

    logc: float
    n: np.ndarray
    t: np.ndarray
    y: np.ndarray

    @property
    def x(self) -> np.ndarray:
        return np.log(self.n)

    def resample(self, rng: np.random.Generator) -> Budget:
        i = rng.integers(0, len(self.y), len(self.y))
        return Budget(self.logc, self.n[i], self.t[i], self.y[i])


def groups_of(table: pd.DataFrame, where: str = "recommend") -> list[Budget]:
    """Budgets of an IsoFLOP table (``params, tokens, loss, budget``), sorted by compute."""
    need = {"params", "tokens", "loss", "budget"}
    if not need <= set(table.columns):
        raise ScaleFitError(
            f"{where}: the table needs columns {sorted(need)}. "
            f"Got {sorted(map(str, table.columns))} instead."
        )
    cols = table[sorted(need)].to_numpy(float)
    if not np.all(np.isfinite(cols) & (cols > 0)):
        raise ScaleFitError(f"{where}: params, tokens, loss and budget must be finite and > 0.")
    out = []
    for c, rows in table.groupby("budget", sort=True):
        out.append(
            Budget(
                float(np.log(c)),
                rows["params"].to_numpy(float),
                rows["tokens"].to_numpy(float),
                rows["loss"].to_numpy(float),
            )
        )
    return out


def usable(groups: list[Budget]) -> list[Budget]:
    """Budgets that can give a vertex: :data:`MIN_RUNS` runs or more over distinct sizes."""
    return [g for g in groups if len(g.y) >= MIN_RUNS and np.ptp(g.x) > 0]


def _vertices(groups: list[Budget]):
    """``(ln C, x*, se of x*)`` of the budgets whose parabola has a minimum."""
    good = usable(groups)
    if len(good) < 1:
        return np.array([]), np.array([]), np.array([])
    opt = fit_parabolas([(g.x, g.y) for g in good])
    ok = opt.ok & np.isfinite(opt.x)
    se = np.sqrt(np.clip(np.diag(opt.cov), 1e-12, None))
    if not np.all(np.isfinite(se)):  # no residual degree of freedom: equal weights
        se = np.ones_like(se)
    lc = np.array([g.logc for g in good])
    return lc[ok], opt.x[ok], se[ok]


def _line(lc, xv, logc, w=None) -> np.ndarray:
    """The least-squares line of ``xv`` on ``lc`` at ``logc`` (NaN with fewer than 3 points)."""
    if len(lc) < 3:
        return np.full(len(logc), np.nan)
    return np.polyval(np.polyfit(lc, xv, 1, w=None if w is None else np.sqrt(w)), logc)


def _law_fit(groups: list[Budget], kind: str, seed: int, x0=None) -> dict | None:
    from .. import fit
    from ..core.errors import ConvergenceWarning

    if kind == "law_near":
        groups = [_near(g) for g in groups]
    n = np.concatenate([g.n for g in groups])
    t = np.concatenate([g.t for g in groups])
    y = np.concatenate([g.y for g in groups])
    w = np.concatenate([_frontier_weights(g) for g in groups]) if kind == "law_frontier" else None
    # a resample repeats runs: fit each distinct run once, weighted by its multiplicity
    rows, inv, count = np.unique(
        np.stack([n, t, y], 1), axis=0, return_inverse=True, return_counts=True
    )
    weights = count.astype(float)
    if w is not None:
        weights = np.bincount(inv.ravel(), weights=w, minlength=len(rows))
    table = pd.DataFrame({"params": rows[:, 0], "tokens": rows[:, 1], "loss": rows[:, 2]})
    if np.all(weights == 1.0):
        weights = None
    loss = "mse" if kind == "law_mse" else "huber"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        res = fit(
            table,
            "chinchilla",
            loss=loss,
            delta=DELTA,
            weights=weights,
            starts=64 if x0 is None else 8,
            seed=seed,
            x0=x0,
            progress=False,
        )
    p = dict(res.params)
    return p if all(np.isfinite(list(p.values()))) else None


def _centre(g: Budget) -> float:
    """A budget's optimum in ``ln N``: its parabola's vertex inside the sizes, else its best run."""
    x = g.x
    centre = float(x[np.argmin(g.y)])
    if len(np.unique(x)) >= 3:
        c2, c1, _ = np.polyfit(x - x.mean(), g.y, 2)
        if c2 > 0:
            xs = x.mean() - c1 / (2 * c2)
            if x.min() <= xs <= x.max():
                centre = float(xs)
    return centre


def _frontier_weights(g: Budget) -> np.ndarray:
    return np.exp(-0.5 * ((g.x - _centre(g)) / FRONTIER_WIDTH) ** 2)


def _near(g: Budget) -> Budget:
    """The runs within :data:`NEAR_WIDTH` of the budget's optimum (at least the 3 nearest)."""
    dist = np.abs(g.x - _centre(g))
    keep = dist <= max(NEAR_WIDTH, float(np.sort(dist)[min(2, len(dist) - 1)]))
    return Budget(g.logc, g.n[keep], g.t[keep], g.y[keep])


def _law_nstar(p: dict | None, logc: np.ndarray) -> np.ndarray:
    from ..allocate import chinchilla_optimum

    if p is None:
        return np.full(len(logc), np.nan)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # a failed fit: NaN
        n, _ = chinchilla_optimum(p["E"], p["A"], p["B"], p["alpha"], p["beta"], np.exp(logc))
        return np.log(n)


def estimate(
    groups: list[Budget],
    logc: np.ndarray,
    methods,
    *,
    seed: int = 0,
    x0: dict | None = None,
    stack_weights: dict[str, float] | None = None,
) -> tuple[dict[str, np.ndarray], dict]:
    """``ln N*`` at ``logc`` per method (NaN where it cannot be computed), and the law fits.

    ``stack_weights`` (a weight per part of :data:`STACK_PARTS`) replaces the shipped
    :data:`scalefit.allocate.misfit.STACK_WEIGHTS` for ``stack``.
    """
    logc = np.asarray(logc, float)
    needs = {k for m in methods for k in LAW_NEEDS.get(m, ())}
    laws = {k: _law_fit(groups, k, seed, (x0 or {}).get(k)) for k in sorted(needs)}
    lc, xv, se = _vertices(groups)
    out: dict[str, np.ndarray] = {}
    for k in ("law_huber", "law_mse", "law_frontier", "law_near"):
        if k in laws:
            out[k] = _law_nstar(laws[k], logc)
    out["parabola"] = _line(lc, xv, logc)
    out["parabola_wls"] = _line(lc, xv, logc, 1 / se**2)
    out["parabola_recent"] = _line(lc[-3:], xv[-3:], logc)
    p = laws.get("law_huber")
    out["anchored"] = _prior_line(lc, xv, se, p, logc, sd=0.0)
    out["parabola_shared"] = _shared_line(groups, logc, by_budget=False)
    out["parabola_sharedc"] = _shared_line(groups, logc, by_budget=True)
    out["slope_prior"] = _prior_line(lc, xv, se, p, logc)
    for name, parts in AVERAGES.items():
        if all(q in out for q in parts):
            out[name] = np.mean([out[q] for q in parts], axis=0)
    if "stack" in methods:
        out["stack"] = stacked(out, stack_weights)
    return {m: out[m] for m in methods}, laws


def stacked(parts: dict[str, np.ndarray], weights: dict[str, float] | None = None) -> np.ndarray:
    """Weighted mean of the parts' ``ln N*`` (parts with weight 0 are not needed)."""
    if weights is None:
        from ..allocate.misfit import STACK_WEIGHTS

        weights = STACK_WEIGHTS
    use = {q: float(w) for q, w in weights.items() if w > 0}
    return np.sum([w * np.asarray(parts[q], float) for q, w in use.items()], axis=0)


def _shared_line(groups: list[Budget], logc: np.ndarray, *, by_budget: bool) -> np.ndarray:
    """``ln N*`` from jointly fitted parabolas with a shared curvature (see module docstring).

    The curvature is ``exp(k0 + k1 (ln C - mean))`` (``k1 = 0`` unless ``by_budget``); given it,
    each budget's level and slope are ordinary least squares (variable projection), and
    ``(k0, k1)`` minimise the total squared error, ``|k1| <=`` :data:`CURVATURE_SLOPE`.
    """
    from scipy import optimize

    good = [g for g in groups if len(np.unique(g.x)) >= 3]
    if len(good) < 3:
        return np.full(len(logc), np.nan)
    lcs = np.array([g.logc for g in good])
    lbar = float(lcs.mean())
    us = [g.x - g.x.mean() for g in good]

    def inner(k):
        curv = np.exp(k[0] + (k[1] if by_budget else 0.0) * (lcs - lbar))
        rss, slopes = 0.0, []
        for g, u, c in zip(good, us, curv, strict=True):
            r = g.y - c * u * u
            b = float(u @ (r - r.mean()) / (u @ u))
            rss += float(np.sum((r - r.mean() - b * u) ** 2))
            slopes.append(b)
        return rss, curv, np.array(slopes)

    c2 = [np.polyfit(u, g.y, 2)[0] for g, u in zip(good, us, strict=True)]
    start = np.log(max(float(np.median(c2)), 1e-4))
    res = optimize.minimize(
        lambda k: inner(k)[0],
        [start, 0.0],
        method="Nelder-Mead",
        bounds=[(start - 10, start + 10), (-CURVATURE_SLOPE, CURVATURE_SLOPE)],
        options={"xatol": 1e-4},
    )
    _, curv, slopes = inner(res.x)
    xv = np.array([g.x.mean() for g in good]) - slopes / (2 * curv)
    return _line(lcs, xv, logc)


def _prior_line(lc, xv, se, p: dict | None, logc: np.ndarray, sd=SLOPE_PRIOR_SD) -> np.ndarray:
    """Precision-weighted vertex line with a normal prior ``N(a, sd²)`` on its slope.

    ``a`` is the law's exponent; with ``sd = 0`` the slope is ``a`` (``anchored``).
    """
    if p is None or len(lc) < (2 if sd else 1):
        return np.full(len(logc), np.nan)
    a = p["beta"] / (p["alpha"] + p["beta"])
    w = 1 / se**2
    m = float(np.sum(w * lc) / np.sum(w))
    u = lc - m
    xbar = float(np.sum(w * xv) / np.sum(w))
    if sd == 0:
        return xbar + a * (logc - m)
    # posterior mode of the slope: (sum w u x + a / sd^2) / (sum w u^2 + 1 / sd^2)
    tau = 1.0 / sd**2
    slope = (float(np.sum(w * u * (xv - xbar))) + a * tau) / (float(np.sum(w * u * u)) + tau)
    return xbar + slope * (logc - m)


def bootstrap(
    groups: list[Budget],
    logc: np.ndarray,
    methods,
    laws: dict,
    *,
    n_boot: int,
    seed: int,
    stack_weights: dict[str, float] | None = None,
) -> dict[str, np.ndarray]:
    """Spread of ``ln N*`` over ``n_boot`` resamples of runs within each budget.

    A robust standard deviation (half the 16-84 % range); NaN where fewer than half the resamples
    gave a value.
    """
    rng = np.random.default_rng(seed)
    draws = {m: [] for m in methods}
    for b in range(n_boot):
        res = [g.resample(rng) for g in groups]
        est, _ = estimate(
            res, logc, methods, seed=seed + b + 1, x0=laws, stack_weights=stack_weights
        )
        for m in methods:
            draws[m].append(est[m])
    out = {}
    for m in methods:
        d = np.asarray(draws[m], float).reshape(n_boot, len(logc))
        ok = np.isfinite(d)
        s = np.full(len(logc), np.nan)
        for j in range(len(logc)):
            if ok[:, j].sum() >= max(3, n_boot // 2):
                q16, q84 = np.quantile(d[ok[:, j], j], [0.16, 0.84])
                s[j] = 0.5 * (q84 - q16)
        out[m] = s
    return out


# ---- the reference optimum of a scored budget --------------------------------------------------


def pooled_sigma(groups: list[Budget]) -> float:
    """Residual standard deviation of the per-budget parabolas (loss units), pooled over budgets."""
    rss, dof = 0.0, 0
    for g in groups:
        if len(g.y) > 3 and len(np.unique(g.x)) >= 3:
            coef = np.polyfit(g.x - g.x.mean(), g.y, 2)
            r = g.y - np.polyval(coef, g.x - g.x.mean())
            rss, dof = rss + float(r @ r), dof + len(g.y) - 3
    return float(np.sqrt(rss / dof)) if dof > 0 else float("nan")


@dataclass(frozen=True)
class Reference:
    """A scored budget's own optimum.

    Vertex ``x`` (NaN if none inside the sampled sizes), its bootstrap standard deviation ``se``,
    and the parabola (coefficients in ``x - mean``).
    """

    x: float
    se: float
    coef: np.ndarray
    mean: float
    lo: float
    hi: float

    def regret(self, xpred: float) -> tuple[float, float]:
        """Parabola at ``xpred`` (clamped to the sampled sizes) minus its minimum.

        Returns the regret in loss units and relative to the minimum.
        """
        if not (np.isfinite(self.x) and np.isfinite(xpred)):
            return float("nan"), float("nan")
        at = float(np.clip(xpred, self.lo, self.hi))
        best = np.polyval(self.coef, self.x - self.mean)
        r = float(np.polyval(self.coef, at - self.mean) - best)
        return r, r / float(best)


def reference(g: Budget, sigma: float, *, n_boot: int = 200, seed: int = 0) -> Reference:
    """Vertex of a parabola of loss in ``ln N`` through one budget's runs, with its spread.

    The spread is that of the vertex under a parametric bootstrap: fitted values plus normal noise
    of the sweep's pooled parabola residual ``sigma``, vertices clamped to the sampled range.
    """
    x, y = g.x, g.y
    m = float(x.mean()) if len(x) else 0.0
    nan = Reference(float("nan"), float("nan"), np.full(3, np.nan), m, np.nan, np.nan)
    if len(np.unique(x)) < 3:
        return nan
    u = x - m
    coef = np.polyfit(u, y, 2)
    lo, hi = float(x.min()), float(x.max())
    if coef[0] <= 0:
        return nan
    xs = m - coef[1] / (2 * coef[0])
    if not lo <= xs <= hi:
        return Reference(float("nan"), float("nan"), coef, m, lo, hi)
    se = float("nan")
    if np.isfinite(sigma) and sigma > 0:
        rng = np.random.default_rng(seed)
        design = np.stack([u * u, u, np.ones_like(u)], axis=1)
        fitted = design @ coef
        ys = fitted[None, :] + rng.normal(0.0, sigma, (n_boot, len(y)))
        cb = np.linalg.lstsq(design, ys.T, rcond=None)[0]  # (3, n_boot)
        with np.errstate(divide="ignore", invalid="ignore"):
            v = m - cb[1] / (2 * cb[0])
        edge = np.where(np.polyval(coef, lo - m) < np.polyval(coef, hi - m), lo, hi)
        v = np.where(cb[0] > 0, v, edge)
        v = np.clip(v, lo, hi)
        q16, q84 = np.quantile(v, [0.16, 0.84])
        se = float(0.5 * (q84 - q16))
    return Reference(float(xs), se, coef, m, lo, hi)
