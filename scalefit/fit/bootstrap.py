"""Bootstrap intervals where every resample is a converged fit, solved as one vectorised batch."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import ScaleFitError
from ..laws import sample_starts
from .engine import Problem
from .result import FitResult


def _problem(res: FitResult, tab: pd.DataFrame) -> Problem:
    prob = res.extras.get("problem")
    if isinstance(prob, Problem) and prob.n == len(tab):
        return prob
    return Problem(
        res.get_law(),
        tab,
        tab["loss"].to_numpy(float),
        loss=res.conventions["loss"],
        delta=res.conventions["delta"],
        refs=res.refs,
    )


def resample_weights(
    tab: pd.DataFrame, n_boot: int, *, cluster: str | None, rng: np.random.Generator
) -> np.ndarray:
    """Row weights (counts) for ``n_boot`` resamples of rows, or of clusters of rows."""
    n = len(tab)
    if cluster is None:
        return rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)
    if cluster not in tab.columns:
        raise ScaleFitError(
            f"The 'cluster' column {cluster!r} is not in the table; columns: "
            f"{', '.join(map(str, tab.columns))}."
        )
    codes, uniques = pd.factorize(tab[cluster])
    g = len(uniques)
    if g < 2:
        raise ScaleFitError(
            f"The 'cluster' column {cluster!r} has a single value; need ≥ 2 groups."
        )
    counts = rng.multinomial(g, np.full(g, 1.0 / g), size=n_boot).astype(float)
    return counts[:, codes]


def _bca(draws: np.ndarray, theta: np.ndarray, jack: np.ndarray, prob: float) -> np.ndarray:
    """BCa interval per column given draws (B, P), estimate (P,) and jackknife values (n, P)."""
    from scipy import stats

    out = np.empty((draws.shape[1], 2))
    zq = stats.norm.ppf([(1 - prob) / 2, (1 + prob) / 2])
    for j in range(draws.shape[1]):
        d = draws[:, j][np.isfinite(draws[:, j])]
        frac = np.clip(np.mean(d < theta[j]), 1e-6, 1 - 1e-6)
        z0 = stats.norm.ppf(frac)
        dev = jack[:, j].mean() - jack[:, j]
        den = 6.0 * np.sum(dev**2) ** 1.5
        a = np.sum(dev**3) / den if den > 0 else 0.0
        adj = stats.norm.cdf(z0 + (z0 + zq) / (1 - a * (z0 + zq)))
        out[j] = np.quantile(d, np.clip(adj, 0, 1))
    return out


def bootstrap(
    res: FitResult,
    tab: pd.DataFrame,
    n_boot: int,
    *,
    boot_starts: int = 7,
    cluster: str | None = None,
    seed: int = 0,
    ci_prob: float = 0.95,
    ci_method: str = "percentile",
    progress: bool | None = None,
) -> FitResult:
    """Add bootstrap draws and intervals to a least-squares result (in place).

    Each resample (multinomial row counts, or counts of whole clusters) is fitted from the
    full-data optimum plus ``boot_starts`` random starts, and keeps its best converged solution, so
    no resample is left in the wrong basin. All resamples and starts are solved together.

    Parameters
    ----------
    res : FitResult
        A least-squares result on ``tab``.
    tab : DataFrame
        The table that was fitted.
    n_boot : int
        Number of resamples.
    boot_starts : int, default 7
        Random starts per resample besides the warm start.
    cluster : str, optional
        Column whose groups are resampled whole.
    seed : int, default 0
        Seed for resampling and starts.
    ci_prob : float, default 0.95
        Interval probability.
    ci_method : {"percentile", "bca"}
        Interval type (BCa uses a jackknife of warm-started leave-one-out fits).
    progress : bool, optional
        Progress bar (default: when stderr is a terminal).

    Returns
    -------
    FitResult
        ``res`` with ``draws``, ``ci`` and bootstrap diagnostics filled in.
    """
    from .lsq import solve_many

    law = res.get_law()
    problem = _problem(res, tab)
    rng = np.random.default_rng([seed, 1])
    w = resample_weights(tab, n_boot, cluster=cluster, rng=rng)
    k = 1 + int(boot_starts)
    y = tab["loss"].to_numpy(float)
    rand = sample_starts(law, n_boot * max(k - 1, 1), y, seed=seed + 7919)
    z0 = np.empty((n_boot, k, len(law.params)))
    z0[:, 0] = np.asarray(res.internal)
    if k > 1:
        z0[:, 1:] = rand[: n_boot * (k - 1)].reshape(n_boot, k - 1, -1)
    z, obj, conv, _ = solve_many(
        problem,
        z0.reshape(n_boot * k, -1),
        np.repeat(w, k, axis=0),
        progress=progress,
        desc="bootstrap",
    )
    z, obj, conv = z.reshape(n_boot, k, -1), obj.reshape(n_boot, k), conv.reshape(n_boot, k)
    obj_ok = np.where(conv & np.isfinite(obj), obj, np.inf)
    # A resample with no more distinct design points than parameters cannot identify the law:
    # it counts as failed rather than contributing an arbitrary point of a flat valley.
    design = pd.factorize(pd.MultiIndex.from_frame(tab[list(law.inputs)]))[0]
    distinct = np.array([len(np.unique(design[row > 0])) for row in w])
    degenerate = distinct <= len(law.params)
    obj_ok[degenerate] = np.inf
    best = np.argmin(obj_ok, axis=1)
    rows = np.arange(n_boot)
    ok = np.isfinite(obj_ok[rows, best])
    zb = z[rows, best]
    pub = law.to_public(zb, problem.refs)
    draws = np.column_stack([np.asarray(pub[name], dtype=float) for name in law.param_names])
    draws[~ok] = np.nan
    good = draws[ok]
    lo_q, hi_q = (1 - ci_prob) / 2, (1 + ci_prob) / 2
    if len(good) < 2:
        # Too few usable resamples (e.g. a 4-row table and a 3-parameter law): no interval.
        bounds = np.full((len(law.params), 2), np.nan)
        res.warnings.append(
            f"bootstrap gave no interval: only {len(good)} of {n_boot} resamples were usable "
            f"({int(degenerate.sum())} had no more distinct design points than parameters)."
        )
    elif ci_method == "bca":
        jack = _jackknife(problem, res, tab, cluster)
        theta = np.array([res.params[n] for n in law.param_names])
        bounds = _bca(good, theta, jack, ci_prob)
    else:
        bounds = np.quantile(good, [lo_q, hi_q], axis=0).T
    res.draws = draws
    res.ci = {
        name: (float(bounds[i, 0]), float(bounds[i, 1])) for i, name in enumerate(law.param_names)
    }
    with np.errstate(all="ignore"):
        zc = np.corrcoef(zb[ok].T) if len(good) >= 2 else np.zeros((len(law.params),) * 2)
        raw = np.corrcoef(good.T) if len(good) >= 2 else zc
    iu = np.triu_indices(len(law.params), 1)
    res.diagnostics.update(
        {
            "n_boot": int(n_boot),
            "boot_failed": int((~ok).sum()),
            "resample": f"clusters of {cluster!r}" if cluster else "rows",
            "boot_starts": int(boot_starts),
            "boot_warm_start_best": float(np.mean(best == 0)),
            "boot_corr_max_internal": float(np.max(np.abs(np.nan_to_num(zc[iu]))))
            if len(iu[0])
            else 0.0,
            "boot_corr_max_raw": float(np.max(np.abs(np.nan_to_num(raw[iu]))))
            if len(iu[0])
            else 0.0,
        }
    )
    res.conventions.update(
        {
            "bootstrap": int(n_boot),
            "boot_starts": int(boot_starts),
            "cluster": cluster,
            "ci_method": ci_method,
        }
    )
    res.diagnostics["boot_degenerate"] = int(degenerate.sum())
    if (~ok).any():
        res.warnings.append(
            f"{int((~ok).sum())} of {n_boot} bootstrap resamples failed "
            f"({int(degenerate.sum())} with no more distinct design points than parameters, "
            f"the rest not converged); intervals use the {int(ok.sum())} others."
        )
    for p in law.params:
        lo, hi = res.ci[p.name]
        if np.isfinite(lo) and (lo < p.bounds[0] or hi > p.bounds[1]):
            res.warnings.append(
                f"the bootstrap interval of {p.name} [{lo:.3g}, {hi:.3g}] leaves its declared "
                f"range [{p.bounds[0]:g}, {p.bounds[1]:g}]: some resamples fit a different "
                f"regime; the data do not pin {p.name} down."
            )
    for i, j in zip(*iu, strict=True):
        if abs(zc[i, j]) > 0.99:
            a, b = law.param_names[i], law.param_names[j]
            res.warnings.append(
                f"bootstrap draws of {a} and {b} correlate at {zc[i, j]:+.3f} "
                f"(reference-pinned coordinates): the data pin down a combination of them "
                f"better than either alone."
            )
    return res


def _jackknife(
    problem: Problem, res: FitResult, tab: pd.DataFrame, cluster: str | None
) -> np.ndarray:
    """Leave-one-out (or leave-one-cluster-out) refits from the optimum, in raw units."""
    from .lsq import solve_many

    law = res.get_law()
    n = len(tab)
    if cluster is None:
        w = 1.0 - np.eye(n)
    else:
        codes, uniques = pd.factorize(tab[cluster])
        w = (codes[None, :] != np.arange(len(uniques))[:, None]).astype(float)
    z0 = np.repeat(np.asarray(res.internal)[None], len(w), axis=0)
    z, _, _, _ = solve_many(problem, z0, w, progress=False)
    pub = law.to_public(z, problem.refs)
    return np.column_stack([np.asarray(pub[name], dtype=float) for name in law.param_names])
