"""Least-squares fitting: multi-start, polish, standard errors, identifiability checks."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ConvergenceWarning, ScaleFitError
from ..laws import Law, get_law, sample_starts
from ..table import read_table, require_columns
from .engine import LOSSES, Problem, jax_version
from .result import FitResult

#: Relative objective tolerance within which a start counts as having reached the best optimum.
BEST_RTOL = 1e-9
#: ... plus this absolute slack (objective units), which matters only for noise-free data.
BEST_ATOL = 1e-20
CORR_WARN = 0.99
COND_WARN = 1e12
MAX_ITER = 1000


def _as_table(table, drop_highest: int) -> pd.DataFrame:
    from ..datasets import is_dataset_name, load

    if isinstance(table, str) and is_dataset_name(table):
        return load(table, drop_highest=drop_highest)
    if isinstance(table, pd.DataFrame) and "scalefit" in table.attrs and not drop_highest:
        return table
    return read_table(table, drop_highest=drop_highest)


def _check_options(loss: str, delta: float, starts: int, seed: Any) -> None:
    if loss not in LOSSES:
        raise ScaleFitError(
            f"The 'loss' parameter of fit must be one of {', '.join(LOSSES)}. Got {loss!r} instead."
        )
    if not (isinstance(delta, int | float) and np.isfinite(delta) and delta > 0):
        raise ScaleFitError(
            f"The 'delta' parameter of fit must be a positive float. Got {delta!r} instead."
        )
    if not isinstance(starts, int | np.integer) or starts < 1:
        raise ScaleFitError(
            f"The 'starts' parameter of fit must be a positive integer. Got {starts!r} instead."
        )
    if not isinstance(seed, int | np.integer):
        raise ScaleFitError(
            f"The 'seed' parameter of fit must be an integer. Got {seed!r} instead."
        )


def _progress(total: int, desc: str, enabled: bool | None):
    from tqdm.auto import tqdm

    if enabled is None:
        enabled = sys.stderr.isatty()
    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, unit="fit")


def solve_many(
    problem: Problem,
    z0: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    progress: bool | None = False,
    desc: str = "fitting",
    tol: float = 1e-12,
):
    """Solve many problems in chunks of :data:`~scalefit.fit.engine.CHUNK` (one compilation).

    Each problem runs until it passes the convergence test or reaches ``MAX_ITER`` iterations.

    Returns
    -------
    tuple of ndarray
        ``(z, objective, converged, iterations)``.
    """
    from .engine import CHUNK

    n = len(z0)
    z0 = np.asarray(z0, dtype=float)
    outs = []
    with _progress(n, desc, progress) as bar:
        for start in range(0, n, CHUNK):
            w = None if weights is None else weights[start : start + CHUNK]
            outs.append(problem.solve_raw(z0[start : start + CHUNK], w, max_iter=MAX_ITER, tol=tol))
            bar.update(len(outs[-1]["z"]))
    cat = {
        k: np.concatenate([o[k] for o in outs])
        for k in ("z", "objective", "converged", "iterations")
    }
    return cat["z"], cat["objective"], cat["converged"], cat["iterations"]


def _metrics(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    r_log = np.log(y) - np.log(pred)
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    rel = np.abs(pred - y) / y
    return {
        "r2": 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan"),
        "rmse": float(np.sqrt(np.mean((y - pred) ** 2))),
        "rmse_log": float(np.sqrt(np.mean(r_log**2))),
        "mean_rel_err": float(np.mean(rel)),
        "max_rel_err": float(np.max(rel)),
    }


def _uncertainty(problem: Problem, z: np.ndarray, law: Law, loss: str, delta: float):
    """Sandwich/asymptotic covariance in internal and public coordinates, and warnings."""
    loc = problem.local(z)
    g, h, meat, jt, r = loc["grad"], loc["gn"], loc["meat"], loc["tpub"], loc["resid"]
    n, p = len(r), len(z)
    out_warn: list[str] = []
    try:
        hinv = np.linalg.inv(h / 2.0 if loss == "mse" else h)
    except np.linalg.LinAlgError:
        hinv = np.full((p, p), np.nan)
    if loss == "mse":
        cov = float(np.sum(r**2) / max(n - p, 1)) * hinv
    else:
        cov = hinv @ (meat * n / max(n - p, 1)) @ hinv
    sd = np.sqrt(np.clip(np.diag(cov), 0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / np.outer(sd, sd)
    names = law.param_names
    for i in range(p):
        for j in range(i + 1, p):
            if np.isfinite(corr[i, j]) and abs(corr[i, j]) > CORR_WARN:
                out_warn.append(
                    f"{names[i]} and {names[j]} are correlated at {corr[i, j]:+.4f} even in "
                    f"reference-pinned coordinates: the data barely separate them."
                )
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = h / np.sqrt(np.outer(np.diag(h), np.diag(h)))
    cond = float(np.linalg.cond(scaled)) if np.all(np.isfinite(scaled)) else float("inf")
    if cond > COND_WARN:
        out_warn.append(
            f"ill-conditioned Hessian (scaled condition number {cond:.2e}): some "
            f"combination of parameters is not identified by the data."
        )
    cov_pub = jt @ cov @ jt.T
    stderr = dict(zip(names, np.sqrt(np.clip(np.diag(cov_pub), 0, None)).tolist(), strict=True))
    return stderr, corr, cond, out_warn, float(np.max(np.abs(g)))


def fit(
    table,
    law: str | Law,
    *,
    loss: str = "mse",
    delta: float = 1e-3,
    starts: int = 256,
    seed: int = 0,
    method: str = "jax",
    bootstrap: int = 0,
    boot_starts: int = 7,
    cluster: str | None = None,
    ci_prob: float = 0.95,
    ci_method: str = "percentile",
    holdout: float | None = None,
    drop_highest: int = 0,
    law_options: Mapping[str, Any] | None = None,
    x0: Mapping[str, float] | None = None,
    progress: bool | None = None,
) -> FitResult:
    """Fit a scaling law to a loss table by robust least squares on log loss.

    The objective is ``sum_i rho(log y_i - log f(x_i))`` (summed, not averaged), with ``rho``
    the squared error (``mse``), Huber with threshold ``delta`` (``huber``) or absolute error
    (``lad``). Gradients are exact (JAX, float64). ``starts`` random starting points (plus the
    law's published starting points and ``x0``) are solved together with a vectorised
    Levenberg–Marquardt loop run to a tight convergence test; the best is the result.

    Parameters
    ----------
    table : DataFrame, path or dataset name
        The loss table (validated with :func:`scalefit.read_table`).
    law : str or Law
        Law name (see :func:`scalefit.laws.list_laws`) or a :class:`~scalefit.laws.Law`.
    loss : {"mse", "huber", "lad"}, default "mse"
        Robust loss on log-loss residuals.
    delta : float, default 1e-3
        Huber threshold in log-loss units (Epoch AI's choice).
    starts : int, default 256
        Number of random starts.
    seed : int, default 0
        Seed for starts and resamples (recorded in the result).
    method : {"jax", "lmfit"}, default "jax"
        ``lmfit`` runs lmfit's least squares from the best of a small grid of starts and attaches
        lmfit's ``Parameters`` and report to ``result.extras``.
    bootstrap : int, default 0
        Number of bootstrap resamples (see :func:`scalefit.fit.bootstrap.bootstrap`).
    boot_starts : int, default 7
        Random starts per resample, besides the warm start from the full-data optimum.
    cluster : str, optional
        Resample whole groups of rows sharing this column's value instead of single rows.
    ci_prob : float, default 0.95
        Interval probability.
    ci_method : {"percentile", "bca"}, default "percentile"
        Bootstrap interval type.
    holdout : float, optional
        Also fit on the lowest-compute ``1 - holdout`` fraction and test on the rest.
    drop_highest : int, default 0
        Outlier rule applied when ``table`` is a path or dataset name.
    law_options : mapping, optional
        Options for a named law (e.g. ``{"form": "power"}`` for ``critical_depth``).
    x0 : mapping, optional
        An extra starting point in public units (e.g. published values).
    progress : bool, optional
        Show progress bars (default: when stderr is a terminal).

    Returns
    -------
    FitResult

    Examples
    --------
    >>> import scalefit
    >>> res = scalefit.fit("depth_delusion", "chinchilla", starts=64, seed=0)  # doctest: +SKIP
    >>> res.params["alpha"]  # doctest: +SKIP
    """
    _check_options(loss, delta, starts, seed)
    if not (isinstance(ci_prob, float) and 0 < ci_prob < 1):
        raise ScaleFitError(
            f"The 'ci_prob' parameter of fit must be a float in (0, 1). Got {ci_prob!r} instead."
        )
    if ci_method not in ("percentile", "bca"):
        raise ScaleFitError(
            f"The 'ci_method' parameter of fit must be 'percentile' or 'bca'. "
            f"Got {ci_method!r} instead."
        )
    if method not in ("jax", "lmfit"):
        raise ScaleFitError(
            f"The 'method' parameter of fit must be 'jax' or 'lmfit'. Got {method!r} instead."
        )
    if not isinstance(bootstrap, int | np.integer) or bootstrap < 0:
        raise ScaleFitError(
            f"The 'bootstrap' parameter of fit must be a non-negative integer. "
            f"Got {bootstrap!r} instead."
        )
    if holdout is not None and not (isinstance(holdout, float) and 0.0 < holdout < 1.0):
        raise ScaleFitError(
            f"The 'holdout' parameter of fit must be a float in (0, 1). Got {holdout!r} instead."
        )
    tab = _as_table(table, drop_highest)
    law_obj = get_law(law, **dict(law_options or {}))
    if holdout is not None:
        n_train = len(tab) - max(1, int(np.ceil(holdout * len(tab))))
        if n_train <= len(law_obj.params):
            raise ScaleFitError(
                f"The 'holdout' parameter of fit leaves {n_train} training rows, not more than "
                f"the law's {len(law_obj.params)} parameters. Got {holdout} instead."
            )
    require_columns(tab, law_obj.inputs, f"law {law_obj.name!r}")
    if len(tab) <= len(law_obj.params):
        raise ScaleFitError(
            f"law {law_obj.name!r} has {len(law_obj.params)} parameters but the "
            f"table has only {len(tab)} rows."
        )
    if method == "lmfit":
        from .lmfit_method import fit_lmfit

        res = fit_lmfit(tab, law_obj, loss=loss, delta=delta, seed=seed, x0=x0)
    else:
        res = _fit_jax(
            tab, law_obj, loss=loss, delta=delta, starts=starts, seed=seed, x0=x0, progress=progress
        )
    res.ci_prob = ci_prob
    res.conventions["ci_method"] = ci_method
    if bootstrap:
        from .bootstrap import bootstrap as run_bootstrap

        run_bootstrap(
            res,
            tab,
            bootstrap,
            boot_starts=boot_starts,
            cluster=cluster,
            seed=seed,
            ci_prob=ci_prob,
            ci_method=ci_method,
            progress=progress,
        )
    if holdout is not None:
        from .validate import holdout_check

        res.holdout = holdout_check(
            tab,
            law_obj,
            holdout,
            loss=loss,
            delta=delta,
            starts=starts,
            seed=seed,
            bootstrap=min(bootstrap, 200) or 200,
            ci_prob=ci_prob,
            progress=progress,
        )
    for w in res.warnings:
        warnings.warn(w, ConvergenceWarning, stacklevel=2)
    return res


def _range_warnings(law: Law, z: np.ndarray, pub: dict[str, float], y: np.ndarray) -> list[str]:
    """Warn when a positive parameter ran to zero or a value left its declared bounds."""
    out = []
    scale = float(np.log(np.min(y)))
    for i, p in enumerate(law.params):
        value = pub[p.name]
        if p.kind in ("floor", "positive", "coef") and z[i] < scale - 25.0:
            out.append(
                f"{p.name} = {value:.3g} ran to its lower bound 0: the data do not "
                f"support this term (a boundary optimum; its standard error is "
                f"meaningless)."
            )
        elif not (p.bounds[0] <= value <= p.bounds[1]):
            out.append(
                f"{p.name} = {value:.4g} is outside its declared range "
                f"[{p.bounds[0]:g}, {p.bounds[1]:g}]."
            )
    return out


def _starts_for(law: Law, y: np.ndarray, refs, n: int, seed: int, x0) -> np.ndarray:
    include = [law.to_internal(sp, refs) for sp in law.start_points]
    if x0 is not None:
        missing = set(law.param_names) - set(x0)
        if missing:
            raise ScaleFitError(
                f"The 'x0' parameter of fit must give every parameter of "
                f"{law.name!r}; missing {sorted(missing)}."
            )
        include.insert(0, law.to_internal(x0, refs))
    return sample_starts(law, max(n, len(include)), y, seed=seed, include=include)


def _fit_jax(
    tab, law: Law, *, loss, delta, starts, seed, x0, progress, problem: Problem | None = None
) -> FitResult:
    y = tab["loss"].to_numpy(dtype=float)
    problem = problem or Problem(law, tab, y, loss=loss, delta=delta)
    z0 = _starts_for(law, y, problem.refs, starts, seed, x0)
    z, obj, conv, iters = solve_many(problem, z0, progress=progress, desc=f"{law.name} starts")
    finite = np.isfinite(obj)
    if not finite.any():
        raise ScaleFitError(f"law {law.name!r}: no start gave a finite objective on this table.")
    best = int(np.nanargmin(np.where(finite, obj, np.inf)))
    fbest = float(obj[best])
    n_best = int(np.sum(obj <= fbest * (1 + BEST_RTOL) + BEST_ATOL))
    zb = z[best]
    pub = {k: float(v) for k, v in law.to_public(zb, problem.refs).items()}
    pred = np.asarray(law.evaluate(pub, tab), dtype=float)
    stderr, corr, cond, warns, gmax = _uncertainty(problem, zb, law, loss, delta)
    converged = bool(conv[best])
    warns.extend(_range_warnings(law, zb, pub, y))
    if not converged:
        warns.insert(0, "the best start did not pass the convergence test.")
    if n_best < 2 and len(z0) > 1:
        warns.append(
            f"only {n_best} of {len(z0)} starts reached the best objective: the "
            f"optimum may not be global; try more starts."
        )
    meta = tab.attrs.get("scalefit", {})
    return FitResult(
        law=law.name,
        law_options=dict(law.options),
        params=pub,
        method="jax",
        objective=fbest,
        converged=converged,
        n_rows=len(tab),
        metrics=_metrics(y, pred),
        stderr=stderr,
        corr=np.round(corr, 6).tolist(),
        warnings=warns,
        internal=zb.tolist(),
        refs=dict(problem.refs),
        diagnostics={
            "n_starts": int(len(z0)),
            "n_best": n_best,
            "n_converged": int(conv.sum()),
            "max_iterations": int(iters.max()),
            "grad_max": gmax,
            "hessian_cond": cond,
        },
        conventions={
            "law": law.name,
            "law_options": dict(law.options),
            "loss": loss,
            "delta": float(delta),
            "objective": "sum over rows of rho(log y - log f)",
            "starts": int(starts),
            "seed": int(seed),
            "source": meta.get("source"),
            "n_read": meta.get("n_read", len(tab)),
            "outlier_rule": meta.get("outlier_rule", "none"),
            "drop_highest": meta.get("drop_highest", 0),
            "derived": meta.get("derived", []),
            "reference_points": {k: float(np.exp(v)) for k, v in problem.refs.items()},
            "jax": jax_version(),
        },
        extras={"problem": problem, "z_all": z, "obj_all": obj},
    )
