"""Candidate point estimators of ``N*`` scored by ``bench_decision.py`` beside the library's.

Issue 36, item 2: a better point estimate than the global law fit or the per-budget parabola,
chosen on the rolling origins only. Every candidate here works from the per-budget parabola
vertices (``scalefit.isoflop._estimators``: the library's ``parabola`` and ``parabola_sharedc``
are the pieces) and differs in how the line ``x* = p + a ln C`` is drawn through them or how
several lines are averaged. The set was fixed before the benchmark run that scores it; which one
wins is decided by the rolling-origin mean |ln N*| error (``bench_decision.choose``), never by the
final budgets. None is a library method (``scalefit.isoflop`` is not edited here): a winner
that should ship has to move into ``_estimators.METHODS``.

* ``vertex_re``: random-effects weighted line: weights ``1/(se_k² + τ²)``, ``τ²`` by
  DerSimonian-Laird for a two-parameter meta-regression (between ``parabola``, ``τ² → ∞``, and
  ``parabola_wls``, ``τ² = 0``);
* ``vertex_huber``: Huber line (IRLS, ``c = 1.345``, scale from the median absolute deviation);
* ``vertex_theil``: Theil-Sen line (median of the pairwise slopes, median intercept);
* ``vertex_joint``: the budgets' parabolas fitted jointly with their vertices ON one line (per
  budget a level and a curvature by least squares, the line's two parameters by Nelder-Mead):
  Approach 2 in one step, each budget weighted by the information its runs carry;
* ``vertex_recent{h}``: the line weighted by ``exp((ln C - ln C_max)/h)``, ``h`` = 1, 2, 4;
* ``mean_*`` / ``median_*``: equal-weight means (medians) of the named lines' ``ln N*``
  (``par`` = ``parabola``, ``sharedc`` = ``parabola_sharedc``; ``mean_vertex4`` = ``par``,
  ``sharedc``, ``theil`` and ``re``);
* ``vertex_eb``: the random-effects line's slope shrunk towards the OTHER sweeps' slopes (a
  two-level meta-analysis). Each sweep's slope ``a_j`` and its variance ``v_j`` come from the
  random-effects line through its training vertices (the budgets below its two final ones); the
  prior for sweep ``s`` is DerSimonian-Laird over the other SOURCES (sweeps that share runs or a
  ladder count as one source and leave together: ``bench_decision.SOURCES``),
  ``N(mu, tau² + var(mu))``
  (the predictive distribution of a new sweep's slope); the slope used is the precision-weighted
  mean of the sweep's own ``a`` (variance from the random-effects fit) and ``mu``, the line drawn
  through the weighted centroid of the vertices. With few vertices the slope leans on the other
  sweeps; with many it is the sweep's own. No constant is tuned. Added in a later stop as the one
  new candidate of that stop, written down (committed) before any of its scores was computed;
  its designer had read the earlier candidates' final scores (see docs/peers.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

HUBER_C = 1.345
RECENT = (1.0, 2.0, 4.0)
#: ``name: parts`` of the averaged candidates (parts: library methods or candidates above).
MEANS = {
    "mean_par_sharedc": ("parabola", "parabola_sharedc"),
    "mean_par_joint": ("parabola", "vertex_joint"),
    "mean_par_re_sharedc": ("parabola", "vertex_re", "parabola_sharedc"),
    "mean_re_sharedc": ("vertex_re", "parabola_sharedc"),
    "mean_par_theil_sharedc": ("parabola", "vertex_theil", "parabola_sharedc"),
    "mean_theil_sharedc": ("vertex_theil", "parabola_sharedc"),
    "mean_vertex4": ("parabola", "parabola_sharedc", "vertex_theil", "vertex_re"),
}
MEDIANS = {"median_par_re_sharedc": ("parabola", "vertex_re", "parabola_sharedc")}
NAMES = (
    ("vertex_re", "vertex_huber", "vertex_theil", "vertex_joint")
    + tuple(f"vertex_recent{h:g}" for h in RECENT)
    + tuple(MEANS)
    + tuple(MEDIANS)
    + ("vertex_eb",)
)


def _re_fit(lc, xv, se):
    """Random-effects line: ``(slope, intercept)``, the slope's variance, the weighted centroid.

    Weights ``1/(se² + τ²)``, ``τ²`` by DerSimonian-Laird for a two-parameter meta-regression.
    """
    k = len(lc)
    w = 1 / se**2
    X = np.stack([np.ones(k), lc], 1)
    XtW = X.T * w
    coef = np.linalg.solve(XtW @ X, XtW @ xv)
    q = float(np.sum(w * (xv - X @ coef) ** 2))
    trace = float(np.sum(w) - np.trace(np.linalg.solve(XtW @ X, XtW * w @ X)))
    tau2 = max(0.0, (q - (k - 2)) / trace) if trace > 0 else 0.0
    w = 1 / (se**2 + tau2)
    line = np.polyfit(lc, xv, 1, w=np.sqrt(w))
    lbar = float(np.sum(w * lc) / np.sum(w))
    var = 1 / float(np.sum(w * (lc - lbar) ** 2))
    return line, var, (lbar, float(np.sum(w * xv) / np.sum(w)))


def _re_line(lc, xv, se):
    return _re_fit(lc, xv, se)[0]


def sweep_slope(groups) -> tuple[float, float]:
    """``(slope, variance)`` of the random-effects vertex line of one sweep's training budgets."""
    from scalefit.isoflop._estimators import _vertices

    lc, xv, se = _vertices(groups)
    if len(lc) < 3:
        raise ValueError(f"{len(lc)} training vertices; the slope needs 3")
    line, var, _ = _re_fit(lc, xv, se)
    return float(line[0]), var


def slope_prior(slopes) -> tuple[float, float]:
    """DerSimonian-Laird over ``(slope, variance)`` pairs: the predictive ``(mean, variance)``.

    The variance is ``τ² + var(mean)``: a new sweep's slope, not the mean's.
    """
    a, v = np.array(slopes, float).T
    w = 1 / v
    m0 = np.sum(w * a) / np.sum(w)
    q = float(np.sum(w * (a - m0) ** 2))
    tau2 = max(0.0, (q - (len(a) - 1)) / (np.sum(w) - np.sum(w**2) / np.sum(w)))
    w = 1 / (v + tau2)
    return float(np.sum(w * a) / np.sum(w)), float(tau2 + 1 / np.sum(w))


def _eb_line(lc, xv, se, prior):
    line, var, (lbar, xbar) = _re_fit(lc, xv, se)
    mu, v0 = prior
    slope = (line[0] / var + mu / v0) / (1 / var + 1 / v0)
    return np.array([slope, xbar - slope * lbar])


def _huber_line(lc, xv):
    b = np.polyfit(lc, xv, 1)
    for _ in range(50):
        r = xv - np.polyval(b, lc)
        s = 1.4826 * np.median(np.abs(r - np.median(r))) + 1e-12
        w = np.minimum(1.0, HUBER_C / np.maximum(np.abs(r) / s, 1e-12))
        new = np.polyfit(lc, xv, 1, w=np.sqrt(w))
        if np.allclose(new, b, rtol=0, atol=1e-10):
            break
        b = new
    return b


def _theil_line(lc, xv):
    i, j = np.triu_indices(len(lc), 1)
    slope = float(np.median((xv[j] - xv[i]) / (lc[j] - lc[i])))
    return np.array([slope, float(np.median(xv - slope * lc))])


def _joint_line(groups, start):
    from scipy import optimize

    good = [g for g in groups if len(np.unique(g.x)) >= 3]
    lbar = float(np.mean([g.logc for g in good]))
    idx = np.concatenate([np.full(len(g.x), i) for i, g in enumerate(good)])
    x, y = np.concatenate([g.x for g in good]), np.concatenate([g.y for g in good])
    lc = np.concatenate([np.full(len(g.x), g.logc - lbar) for g in good])
    count = np.bincount(idx)
    yc = y - (np.bincount(idx, y) / count)[idx]

    def rss(theta):  # per budget y = level + curvature (x - vertex)^2, both by least squares
        z = (x - theta[1] - theta[0] * lc) ** 2
        zc = z - (np.bincount(idx, z) / count)[idx]
        szz, szy = np.bincount(idx, zc * zc), np.bincount(idx, zc * yc)
        return float(yc @ yc - np.sum(szy**2 / np.maximum(szz, 1e-300)))

    th0 = [start[0], start[1] + start[0] * lbar]
    opts = {"xatol": 1e-6, "fatol": 1e-14, "maxiter": 2000}
    a, p = optimize.minimize(rss, th0, method="Nelder-Mead", options=opts).x
    return np.array([a, p - a * lbar])


def estimate(groups, logc, prior=None) -> dict[str, np.ndarray]:
    """``ln N*`` at ``logc`` of every candidate (NaN below 3 training vertices).

    ``prior``: ``(mean, variance)`` of the slope from other sweeps (:func:`slope_prior`);
    ``vertex_eb`` is NaN without it.
    """
    from scalefit.isoflop._estimators import _shared_line, _vertices

    logc = np.asarray(logc, float)
    lc, xv, se = _vertices(groups)
    base = np.polyfit(lc, xv, 1) if len(lc) >= 3 else None
    out = {"parabola_sharedc": _shared_line(groups, logc, by_budget=True)}
    out["parabola"] = np.full(len(logc), np.nan) if base is None else np.polyval(base, logc)
    lines = {}
    if base is not None:
        lines["vertex_re"] = _re_line(lc, xv, se)
        lines["vertex_huber"] = _huber_line(lc, xv)
        lines["vertex_theil"] = _theil_line(lc, xv)
        lines["vertex_joint"] = _joint_line(groups, base)
        for h in RECENT:
            w = np.exp((lc - lc.max()) / h)
            lines[f"vertex_recent{h:g}"] = np.polyfit(lc, xv, 1, w=np.sqrt(w))
        if prior is not None:
            lines["vertex_eb"] = _eb_line(lc, xv, se, prior)
    for name in NAMES[: 4 + len(RECENT)] + ("vertex_eb",):
        line = lines.get(name)
        out[name] = np.full(len(logc), np.nan) if line is None else np.polyval(line, logc)
    for name, parts in MEANS.items():
        out[name] = np.mean([out[q] for q in parts], axis=0)
    for name, parts in MEDIANS.items():
        out[name] = np.median([out[q] for q in parts], axis=0)
    return {m: out[m] for m in NAMES}


def _spread(groups, logc, *, n_boot, seed, prior=None):
    """Run bootstrap within budgets, as the library's: half the 16-84 % range per candidate."""
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):  # one resample per draw, every candidate on it
        est = estimate([g.resample(rng) for g in groups], logc, prior)
        draws.append([est[m] for m in NAMES])
    draws = np.array(draws)  # (B, M, J)
    out = {}
    for i, m in enumerate(NAMES):
        s = np.full(len(logc), np.nan)
        for j in range(len(logc)):
            d = draws[:, i, j][np.isfinite(draws[:, i, j])]
            if len(d) >= max(3, n_boot // 2):
                q16, q84 = np.quantile(d, [0.16, 0.84])
                s[j] = 0.5 * (q84 - q16)
        out[m] = s
    return out


def score_origin(train, targets, *, sigma_ref, n_boot, seed, prior=None) -> pd.DataFrame:
    """The library's ``score_origin`` rows for the candidates (same columns and reference).

    ``prior``: the slope prior of ``vertex_eb`` (:func:`slope_prior`; its rows are NaN without).
    """
    from scalefit.isoflop._estimators import reference

    logc = np.array([g.logc for g in targets])
    est = estimate(train, logc, prior)
    spread = _spread(train, logc, n_boot=n_boot, seed=seed, prior=prior) if n_boot else {}
    top = max(g.logc for g in train)
    refs = [reference(g, sigma_ref, seed=seed) for g in targets]
    rows = []
    for m in NAMES:
        for j, (g, ref) in enumerate(zip(targets, refs, strict=True)):
            reg, rel = ref.regret(est[m][j])
            rows.append(
                {"origin": float(np.exp(top)), "budget": float(np.exp(g.logc)),
                 "distance": float(g.logc - top), "method": m, "pred": float(est[m][j]),
                 "s_param": float(spread[m][j]) if spread else np.nan, "ref": ref.x,
                 "s_ref": ref.se, "err": float(est[m][j] - ref.x), "regret": reg,
                 "regret_rel": rel}
            )  # fmt: skip
    return pd.DataFrame(rows)


def rolling_origins(table, *, n_boot, seed, horizon=2, prior=None) -> pd.DataFrame:
    """The library's ``rolling_origins`` for the candidates (same origins and references)."""
    from scalefit.isoflop._estimators import groups_of, pooled_sigma, usable
    from scalefit.isoflop.decision import MIN_TRAIN

    groups = groups_of(table)
    sigma = pooled_sigma(groups)
    frames = [
        score_origin(groups[: k + 1], groups[k + 1 : k + 1 + horizon], sigma_ref=sigma,
                     n_boot=n_boot, seed=seed, prior=prior)
        for k in range(len(groups) - horizon)
        if len(usable(groups[: k + 1])) >= MIN_TRAIN
    ]  # fmt: skip
    return pd.concat(frames, ignore_index=True)
