"""Bayesian fits of any catalogued law with numpyro (NUTS) and ArviZ diagnostics.

:func:`fit_bayes` builds the numpyro model from the law (see :mod:`scalefit.fit.bayes_model`),
samples it in the reference-pinned coordinates, and returns a :class:`~scalefit.fit.FitResult`
with ``method="bayes"``: posterior medians as ``params``, equal-tailed intervals in ``ci``, HDIs,
R-hat/ESS/divergence/BFMI diagnostics, posterior and prior predictive checks, PSIS-LOO and WAIC,
the draws in raw units, and the ArviZ object in ``result.extras["inference_data"]``
(:func:`save_netcdf` writes it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._validation import MAX_SEED, Interval, Options, validate
from ..errors import ConvergenceWarning, ScaleFitError, require
from ..laws import Law, get_law
from ..table import require_columns
from .observation import RESIDUALS, add_noise, residual, response
from .result import FitResult

LIKELIHOODS = ("student_t", "normal")
CHAIN_METHODS = ("vectorized", "parallel", "sequential")
#: Predictive distributions that can score a hold-out (the first is the default).
PREDICTIVES = ("calibrated", "law")


#: The declared constraints of the options of :func:`fit_bayes` and :func:`holdout_bayes`.
OPTIONS = {
    "likelihood": [Options(set(LIKELIHOODS))],
    "chain_method": [Options(set(CHAIN_METHODS))],
    "chains": [Interval(int, 1, None)],
    "draws": [Interval(int, 10, None)],
    "warmup": [Interval(int, 10, None)],
    "seed": [Interval(int, 0, MAX_SEED)],
    "ci_prob": [Interval(float, 0, 1, closed="neither")],
    "target_accept": [Interval(float, 0, 1, closed="neither")],
    "residuals": [Options(set(RESIDUALS))],
    "predictive": [Options(set(PREDICTIVES))],
}


def _check_options(likelihood, chains, draws, warmup, seed, chain_method, ci_prob) -> None:
    validate("fit_bayes", locals(), OPTIONS)


class _BackgroundImport:
    """Import a module on a helper thread while the caller keeps working.

    ``scalefit bayes`` needs ArviZ only after sampling, and importing it (with xarray, SciPy's
    statistics and matplotlib) takes about 1.8 s; started just before the sampler runs (which
    releases the GIL), the import overlaps with sampling. :meth:`result` waits for it and
    imports on the calling thread when the helper failed, so any error surfaces there.
    """

    def __init__(self, module: str, extra: str):
        import sys
        import threading

        self.module, self.extra, self.thread = module, extra, None
        if module in sys.modules:
            return
        if importlib.util.find_spec(module) is None:
            require(module, extra)  # raises the helpful missing-extra error
        self.thread = threading.Thread(
            target=self._run, name=f"scalefit-import-{module}", daemon=True
        )
        self.thread.start()

    def _run(self) -> None:
        import importlib

        with contextlib.suppress(Exception):  # retried (and reported) by result()
            importlib.import_module(self.module)

    def result(self):
        """The imported module (waits for the helper thread)."""
        if self.thread is not None:
            self.thread.join()
        return require(self.module, self.extra)


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("jax", "numpyro", "arviz")}


def fit_bayes(
    table,
    law: str | Law,
    *,
    likelihood: str = "student_t",
    priors: Mapping[str, Mapping[str, Any]] | None = None,
    chains: int = 4,
    draws: int = 1000,
    warmup: int = 1000,
    seed: int = 0,
    drop_highest: int = 0,
    law_options: Mapping[str, Any] | None = None,
    chain_method: str = "vectorized",
    ci_prob: float = 0.95,
    holdout: float | None = None,
    target_accept: float = 0.99,
    progress: bool | None = None,
    residuals: str = "log",
    weights: Any = None,
    predictive: str = "calibrated",
) -> FitResult:
    """Fit a scaling law by Bayesian inference (NUTS) on log loss.

    The model is generated from the law: every parameter is sampled in its internal coordinate
    (log of the term at a reference point for coefficients, log for positive parameters and
    floors), mapped to public values by the law, and the observed ``log(loss)`` is scored with a
    Student-t (or normal) likelihood around ``log f(x)``. Chains start near a quick least-squares
    optimum (jittered). See ``docs/bayes.md`` for the default priors.

    Parameters
    ----------
    table : DataFrame, path or dataset name
        The loss table.
    law : str or Law
        Law name or object.
    likelihood : {"student_t", "normal"}, default "student_t"
        Noise model of log loss (scale ``sigma``; Student-t adds ``nu``).
    priors : mapping, optional
        Per-parameter overrides in internal coordinates, e.g.
        ``{"a_depth": {"dist": "normal", "loc": 1, "scale": 0.5}}``; ``sigma`` and ``nu`` too.
    chains, draws, warmup : int
        Number of chains, kept draws per chain, warm-up steps per chain.
    seed : int, default 0
        Seed of the sampler, jitter and predictive draws.
    drop_highest : int, default 0
        Outlier rule when ``table`` is a path or dataset name.
    law_options : mapping, optional
        Options for a named law.
    chain_method : {"vectorized", "parallel", "sequential"}, default "vectorized"
        How numpyro runs the chains (``parallel`` needs several XLA devices).
    ci_prob : float, default 0.95
        Probability of the equal-tailed intervals (``ci``) and HDIs.
    holdout : float, optional
        Also fit on the lowest-compute ``1 - holdout`` share of rows and report the predictive
        coverage on the rest (``result.holdout``, see :func:`holdout_bayes`).
    target_accept : float, default 0.99
        NUTS target acceptance probability (0.99 removes the divergences that 0.8-0.95 leave in
        the skewed tail of ``a_depth`` on the Chinchilla table; see ``docs/bayes.md``).
    progress : bool, optional
        Show numpyro's progress bar.
    residuals : {"log", "linear"}, default "log"
        Observation scale (see :mod:`scalefit.fit.observation`): the likelihood scores
        ``log y`` around ``log f`` or ``y`` around ``f``.
    weights : str or array-like, optional
        Per-row weights (a column name or one non-negative number per row) multiplying each
        row's log likelihood, as in least squares.
    predictive : {"calibrated", "law"}, default "calibrated"
        Predictive that scores the ``holdout`` rows (:func:`holdout_bayes`).

    Returns
    -------
    FitResult
        ``method="bayes"``; diagnostics in ``result.diagnostics``; the ArviZ object in
        ``result.extras["inference_data"]`` (``InferenceData`` with ArviZ 0.x,
        ``xarray.DataTree`` with ArviZ 1.x). JAX computes in float64 inside the call only.

    Examples
    --------
    >>> from scalefit.fit.bayes import fit_bayes
    >>> res = fit_bayes("chinchilla", "decomposed", drop_highest=40)  # doctest: +SKIP
    >>> res.ci["a_depth"]  # doctest: +SKIP
    """
    _check_options(likelihood, chains, draws, warmup, seed, chain_method, ci_prob)
    validate("fit_bayes", locals(), OPTIONS)
    require("numpyro", "bayes")
    if importlib.util.find_spec("arviz") is None:
        require("arviz", "bayes")  # the missing-extra error before any work
    import jax

    # float64 inside this call only (JAX's scoped switch); the caller's setting is untouched
    with jax.enable_x64(True):
        return _fit_bayes(
            table,
            law,
            likelihood=likelihood,
            priors=priors,
            chains=chains,
            draws=draws,
            warmup=warmup,
            seed=seed,
            drop_highest=drop_highest,
            law_options=law_options,
            chain_method=chain_method,
            ci_prob=ci_prob,
            holdout=holdout,
            target_accept=target_accept,
            progress=progress,
            residuals=residuals,
            weights=weights,
            predictive=predictive,
        )


def _fit_bayes(
    table,
    law,
    *,
    likelihood,
    priors,
    chains,
    draws,
    warmup,
    seed,
    drop_highest,
    law_options,
    chain_method,
    ci_prob,
    holdout,
    target_accept,
    progress,
    residuals="log",
    weights=None,
    predictive="calibrated",
) -> FitResult:
    """The body of :func:`fit_bayes` (options already validated)."""
    import jax.numpy as jnp

    from . import bayes_checks as checks
    from . import bayes_model as bm
    from .build import FitSettings
    from .data import as_table, check_design, inputs_of, resolve_weights, weights_of
    from .observation import metrics, response
    from .priors import resolve_priors

    t_start = time.perf_counter()
    law_obj = get_law(law, **dict(law_options or {}))
    tab = as_table(table, drop_highest, positive_loss=residuals == "log", keep=law_obj.inputs)
    require_columns(tab, law_obj.inputs, f"law {law_obj.name!r}")
    tab, weight_column, weights_label = resolve_weights(tab, weights)
    y = tab["loss"].to_numpy(float)
    where = tab.attrs.get("scalefit", {}).get("source", "<table>")
    obs = response(y, residuals, where=where)
    w = weights_of(tab, weight_column)
    check_design(tab, law_obj, y, w)
    specs = resolve_priors(law_obj, y, priors, residuals)
    if likelihood == "normal":
        specs.pop("nu")
    raw = inputs_of(tab, law_obj)
    refs = law_obj.references(raw)
    lmin = float(y.min())
    model = bm.build_model(law_obj, specs, refs, lmin, likelihood, residuals, w)
    x = {k: jnp.asarray(v) for k, v in law_obj.variables(np, raw).items()}
    logy = jnp.asarray(obs)
    settings = FitSettings(
        residuals=residuals, weight_column=weight_column, weights_label=weights_label
    )
    key = bm.program_key(
        law_obj,
        specs,
        refs,
        lmin,
        likelihood,
        residuals,
        w,
        {"chains": chains, "draws": draws, "warmup": warmup, "target_accept": target_accept},
    )
    # the sampler's modules first, on this thread; then the sampler program is traced and
    # compiled on a helper thread (it needs the starting values' shapes only) while this thread
    # finds the least-squares start
    import numpyro.infer.hmc  # noqa: F401
    import numpyro.infer.util  # noqa: F401

    prepared = None
    if chain_method == "vectorized" and not progress:
        prepared = bm.PreparedNuts(
            model,
            x,
            logy,
            bm.init_values(law_obj, specs, None, 1.0, lmin),
            chains=chains,
            draws=draws,
            warmup=warmup,
            target_accept=target_accept,
            key=key,
        )
    z_lsq, rmse = bm.least_squares_start(tab, law_obj, seed, settings)
    init = bm.init_values(law_obj, specs, z_lsq, rmse, lmin)
    # ArviZ (needed after sampling) on another helper thread while the sampler runs
    arviz = _BackgroundImport("arviz", "bayes")
    samples, stats, seconds, cpu = bm.run_nuts(
        model,
        x,
        logy,
        init,
        chains=chains,
        draws=draws,
        warmup=warmup,
        seed=seed,
        chain_method=chain_method,
        progress=bool(progress),
        target_accept=target_accept,
        key=key,
        prepared=prepared,
    )
    arviz.result()
    idata = bm.inference_data(
        samples,
        stats,
        specs,
        refs,
        lmin,
        law_obj,
        raw,
        obs,
        likelihood,
        seed=seed,
        residuals=residuals,
    )
    names = [p.name for p in law_obj.params if specs[p.name]["dist"] != "fixed"]
    noise = [n for n in ("sigma", "nu") if n in specs and specs[n]["dist"] != "fixed"]
    diag, warns = checks.diagnose(idata, names + noise, chains)
    loo, loo_warn = checks.loo(idata)
    res = _assemble(tab, law_obj, idata, refs, y, ci_prob, metrics, residuals, w)
    diag.update(res.diagnostics)
    diag.update(
        {
            "loo": loo,
            "ppc": checks.ppc(idata, obs),
            "chains": chains,
            "draws": draws,
            "warmup": warmup,
            "mcmc_seconds": seconds,
            "mcmc_cpu_seconds": cpu,
            # CPU devices the compiled sampler split the chains over (1: all vectorised on one)
            "chain_devices": bm.chain_devices(chains)
            if chain_method == "vectorized" and not progress
            else 1,
            "ess_bulk_per_s_min": diag["ess_bulk_min"] / seconds,
        }
    )
    conventions = {
        **res.conventions,
        **{
            "likelihood": likelihood,
            "residuals": residuals,
            "weights": weights_label or None,
            "weight_column": weight_column,
            "priors": specs,
            "chains": chains,
            "draws": draws,
            "warmup": warmup,
            "seed": seed,
            "chain_method": chain_method,
            "sampler": "NUTS",
            "target_accept_prob": target_accept,
            "dense_mass": True,
            "init": "least-squares optimum (32 starts), jittered by N(0, 0.05) per chain in "
            "unconstrained space",
        },
    }
    res = res.replace(
        diagnostics=diag,
        warnings=tuple(warns + loo_warn),
        converged=bool(diag["divergences"] == 0 and not diag["r_hat_max"] > checks.RHAT_MAX),
        conventions=conventions,
        extras={"inference_data": idata, "table": tab},
    )
    if holdout is not None:
        hold = holdout_bayes(
            tab,
            law_obj,
            holdout,
            likelihood=likelihood,
            priors=priors,
            chains=chains,
            draws=draws,
            warmup=warmup,
            seed=seed,
            chain_method=chain_method,
            ci_prob=ci_prob,
            target_accept=target_accept,
            residuals=residuals,
            weights=weight_column,
            predictive=predictive,
        )
        res = res.replace(holdout=hold)
    res.diagnostics["total_seconds"] = time.perf_counter() - t_start
    for w in res.warnings:
        warnings.warn(w, ConvergenceWarning, stacklevel=3)
    return res


def _assemble(
    tab: pd.DataFrame, law: Law, idata, refs, y, ci_prob, metrics, residuals, w
) -> FitResult:
    """Posterior medians, intervals, HDIs, draws and conventions as a FitResult."""
    from . import _arviz
    from .build import data_range

    post = _arviz.group(idata, "posterior")
    names = list(law.param_names)
    cube = np.stack([np.asarray(post[n]) * np.ones(post["sigma"].shape) for n in names], -1)
    draws = cube.reshape(-1, len(names))  # (chains * draws, n_params), raw units
    med = {n: float(np.median(draws[:, i])) for i, n in enumerate(names)}
    q = np.quantile(draws, [(1 - ci_prob) / 2, (1 + ci_prob) / 2], axis=0)
    ci = {n: (float(q[0, i]), float(q[1, i])) for i, n in enumerate(names)}
    hdi = {}
    for i, n in enumerate(names):
        h = _arviz.hdi(draws[:, i], ci_prob) if np.ptp(draws[:, i]) > 0 else (med[n], med[n])
        hdi[n] = [h[0], h[1]]
    internal = np.stack(
        [
            law.to_internal(dict(zip(names, d, strict=True)), refs)
            for d in draws[:: max(1, len(draws) // 2000)]
        ]
    )
    corr = np.corrcoef(internal.T) if len(internal) > 1 else np.eye(len(names))
    pred = np.asarray(law.evaluate(med, tab), dtype=float)
    obs = response(y, residuals)
    meta = tab.attrs.get("scalefit", {})
    return FitResult(
        law=law,
        params=med,
        method="bayes",
        objective=float(
            np.sum((1.0 if w is None else w) * residual(np, obs, pred, residuals) ** 2)
        ),
        converged=False,
        n_rows=len(tab),
        metrics=metrics(y, pred),
        stderr={n: float(np.std(draws[:, i], ddof=1)) for i, n in enumerate(names)},
        corr=np.round(np.nan_to_num(corr), 6).tolist(),
        ci=ci,
        ci_prob=ci_prob,
        draws=draws,
        internal=np.median(internal, axis=0).tolist(),
        refs=dict(refs),
        diagnostics={
            "hdi": hdi,
            "hdi_prob": ci_prob,
            "noise": {k: float(np.median(post[k])) for k in ("sigma", "nu") if k in post},
        },
        conventions={
            "law": law.name,
            "law_options": dict(law.options),
            "loss": "bayes",
            "residuals": residuals,
            "objective": "sum over rows of (weighted) squared residuals at the posterior median",
            "source": meta.get("source"),
            "n_read": meta.get("n_read", len(tab)),
            "outlier_rule": meta.get("outlier_rule", "none"),
            "drop_highest": meta.get("drop_highest", 0),
            "derived": meta.get("derived", []),
            "reference_points": {k: float(np.exp(v)) for k, v in refs.items()},
            "data_range": data_range(tab),
            **_versions(),
        },
    )


def predictive_draws(
    result: FitResult, x, *, noise: bool = True, max_draws: int = 2000, seed: int = 0
) -> np.ndarray:
    """Posterior (predictive) draws of the loss at inputs ``x``, shape (n_draws, n_rows).

    With ``noise=True`` each draw is multiplied by ``exp(eps)``, ``eps`` from the fitted
    likelihood (Student-t with that draw's ``sigma`` and ``nu`` when the ArviZ object is at hand,
    else the posterior medians of ``sigma``/``nu``).
    """
    if result.draws is None:
        raise ScaleFitError("predictive_draws needs a result with draws (fit_bayes).")
    law = result.law
    d = np.asarray(result.draws)
    idx = np.linspace(0, len(d) - 1, min(max_draws, len(d))).astype(int)
    sims = np.asarray(
        law.evaluate({k: d[idx, i][:, None] for i, k in enumerate(result.params)}, x), dtype=float
    )
    if not noise:
        return sims
    rng = np.random.default_rng(seed)
    sigma, nu = noise_draws(result, idx)
    eps = rng.standard_t(nu, sims.shape) if nu is not None else rng.standard_normal(sims.shape)
    return add_noise(sims, sigma * eps, result.conventions.get("residuals", "log"))


def noise_draws(result: FitResult, idx) -> tuple[Any, Any]:
    """The likelihood's ``sigma`` and ``nu`` of the posterior draws ``idx``, as (n, 1) arrays.

    Without the ArviZ object (a result read back from JSON) the posterior medians are returned
    as scalars (the RMSE when no median was kept); ``nu`` is ``None`` for a normal likelihood.
    """
    from . import _arviz

    idata = result.extras.get("inference_data")
    post = _arviz.group(idata, "posterior") if idata is not None else {}
    if "sigma" in post:
        sigma = np.asarray(post["sigma"]).reshape(-1)[idx][:, None]
        nu = np.asarray(post["nu"]).reshape(-1)[idx][:, None] if "nu" in post else None
        return sigma, nu
    med = result.diagnostics.get("noise", {})
    key = "rmse_log" if result.conventions.get("residuals", "log") == "log" else "rmse"
    return med.get("sigma", result.metrics[key]), med.get("nu")


def save_netcdf(result: FitResult, path: str | os.PathLike) -> Path:
    """Write the ArviZ object of a Bayesian fit to NetCDF-4 atomically (temporary file, rename).

    Either ArviZ series (``InferenceData`` on 0.x, ``xarray.DataTree`` on 1.x) writes the same
    groups; :func:`load_netcdf` reads a file from either.

    Parameters
    ----------
    result : FitResult
        A :func:`fit_bayes` result of this session (with ``extras["inference_data"]``).
    path : path-like
        Destination file; parent folders are created.

    Returns
    -------
    pathlib.Path
        The path written.
    """
    from . import _arviz

    idata = result.extras.get("inference_data")
    if idata is None:
        raise ScaleFitError(
            "this result has no posterior to save: NetCDF needs a fit_bayes "
            "result from this session (JSON results do not keep it)."
        )
    return _arviz.write_netcdf(idata, path)


def load_netcdf(path: str | os.PathLike):
    """Read a posterior written by :func:`save_netcdf` into memory.

    Parameters
    ----------
    path : path-like
        A NetCDF file written by :func:`save_netcdf`.

    Returns
    -------
    InferenceData or xarray.DataTree
        ``InferenceData`` with ArviZ 0.x, ``xarray.DataTree`` with ArviZ 1.x; groups
        ``posterior``, ``sample_stats``, ``log_likelihood``, ``posterior_predictive``, ``prior``,
        ``prior_predictive`` and ``observed_data``.
    """
    from . import _arviz

    path = Path(path)
    if not path.is_file():
        raise ScaleFitError(f"{path}: no such NetCDF file.")
    try:
        obj = _arviz.read_netcdf(path)
    except (OSError, ValueError) as exc:
        raise ScaleFitError(
            f"{path}: expected a NetCDF-4 posterior written by save_netcdf; could not read it "
            f"({type(exc).__name__})."
        ) from exc
    if "posterior" not in _arviz.group_names(obj):
        raise ScaleFitError(
            f"{path}: expected a posterior written by save_netcdf (a 'posterior' group); "
            f"found groups {_arviz.group_names(obj)}."
        )
    return obj


def hdi_frame(result: FitResult) -> pd.DataFrame:
    """Posterior summary: median, equal-tailed interval, HDI, R-hat and ESS per parameter."""
    d = result.diagnostics
    rows = []
    for n, v in result.params.items():
        rows.append(
            {
                "param": n,
                "median": v,
                "sd": result.stderr.get(n, math.nan),
                "eti_lo": result.ci[n][0],
                "eti_hi": result.ci[n][1],
                "hdi_lo": d["hdi"][n][0],
                "hdi_hi": d["hdi"][n][1],
                "r_hat": d.get("r_hat", {}).get(n, math.nan),
                "ess_bulk": d.get("ess_bulk", {}).get(n, math.nan),
                "ess_tail": d.get("ess_tail", {}).get(n, math.nan),
            }
        )
    return pd.DataFrame(rows).set_index("param")


def holdout_bayes(
    tab: pd.DataFrame,
    law: Law,
    fraction: float,
    *,
    ci_prob: float = 0.95,
    seed: int = 0,
    predictive: str = "calibrated",
    **kwargs: Any,
) -> dict[str, Any]:
    """Fit on the lowest-compute ``1 - fraction`` of rows; posterior-predictive check on the rest.

    Parameters
    ----------
    tab : DataFrame
        The full table.
    law : Law
        The law.
    fraction : float
        Share of rows held out, in (0, 1).
    ci_prob : float, default 0.95
        Probability of the predictive interval whose coverage is reported.
    seed : int, default 0
        Seed of the fit and the predictive draws.
    predictive : {"calibrated", "law"}, default "calibrated"
        Which predictive distribution scores the held-out rows: the calibrated one of
        :mod:`scalefit.fit.discrepancy` (per-model random effect, a discrepancy growing beyond
        the data in log-compute and Student-t tails, learned from the training rows; the same
        posterior draws), or the law's own posterior predictive (the fitted likelihood around
        the law). The calibrated predictive is the default because it scored better on held-out
        rows in every table and cut measured (``docs/extrapolation.md``). Coverages and widths
        are exact for the mixture over the posterior draws, and ``pit`` holds each held-out
        row's predictive CDF at its loss.
    **kwargs
        Passed to :func:`~scalefit.fit.bayes.fit_bayes`.

    Returns
    -------
    dict
        ``n_train, n_test, split_by, threshold, mae_log, max_rel_err, coverage, band_prob,
        coverage_50, width_log`` (mean width of the ``ci_prob`` interval on log loss), ``lpd``
        (mean log predictive density of the held-out log losses), ``predictive`` (the
        observation model that produced them, one line) and the training fit's parameters and
        convergence. With ``predictive="calibrated"``, ``uncalibrated`` holds the law's own
        ``predictive, coverage, coverage_50, width_log, lpd`` beside them and ``calibration``
        the calibration's ``sigma, gamma, tau, kappa, nu``.
    """
    from .discrepancy import calibrated_holdout
    from .validate import split_by_compute

    validate("holdout_bayes", {"predictive": predictive}, OPTIONS)
    train, test, key, threshold = split_by_compute(tab, law, fraction, who="fit_bayes")
    with warnings.catch_warnings():
        # the training fit's convergence is reported as ``train_converged``
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        res = fit_bayes(train, law, seed=seed, ci_prob=ci_prob, **kwargs)
    y = test["loss"].to_numpy(float)
    sims = predictive_draws(res, test, noise=True, seed=seed)
    out: dict[str, Any] = {
        "fraction": float(fraction),
        "split_by": key,
        "threshold": threshold,
        "n_train": int(len(train)),
        "n_test": int(len(test)),
    }
    means = predictive_draws(res, test, noise=False)
    pred = np.median(means, axis=0)
    out["mae_log"] = float(np.mean(np.abs(np.log(y) - np.log(pred))))
    out["max_rel_err"] = float(np.max(np.abs(pred - y) / y))
    law_part = _law_holdout_scores(res, y, sims, means, ci_prob)
    if predictive == "calibrated":
        cal = calibrated_holdout(res, train, test, law, ci_prob=ci_prob, seed=seed)
        keys = ("predictive", "coverage", "coverage_50", "width_log", "lpd", "pit")
        out.update({k: cal[k] for k in keys})
        out["uncalibrated"] = law_part
        out["calibration"] = {k: cal[k] for k in ("sigma", "gamma", "tau", "kappa", "nu")}
    else:
        out.update(law_part)
    out["band_prob"] = float(ci_prob)
    out["train_params"] = res.params
    out["train_converged"] = res.converged
    return out


def _law_holdout_scores(res: FitResult, y, sims, means, ci_prob) -> dict[str, Any]:
    """Coverage, width and log predictive density of the law's own posterior predictive.

    With log residuals and the posterior's ``sigma``/``nu`` at hand the predictive is a mixture
    of Student-t (or normal) terms on log loss and is scored exactly
    (:func:`~scalefit.fit.discrepancy.score_holdout`); otherwise the intervals are quantiles of
    the simulated draws ``sims`` and ``lpd`` is ``None``.
    """
    from .discrepancy import sample_scores, score_holdout

    likelihood = res.conventions.get("likelihood", "student_t")
    residuals = res.conventions.get("residuals", "log")
    tag = f"{100 * ci_prob:g}"
    idata = res.extras.get("inference_data")
    if residuals == "log" and idata is not None:
        idx = np.linspace(0, len(res.draws) - 1, len(means)).astype(int)
        sigma, nu = noise_draws(res, idx)
        sc = score_holdout(y, np.log(means), sigma, nu, probs=(0.5, ci_prob))
    else:
        sc = {**sample_scores(y, sims, probs=(0.5, ci_prob)), "lpd": None, "pit": None}
    return {
        "predictive": f"law: posterior predictive ({likelihood} likelihood on {residuals} loss)",
        "coverage": sc[f"coverage_{tag}"],
        "coverage_50": sc["coverage_50"],
        "width_log": sc[f"width_log_{tag}"],
        "lpd": sc["lpd"],
        "pit": sc["pit"],
    }
