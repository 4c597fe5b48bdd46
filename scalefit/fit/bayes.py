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
import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core._validation import constraints, validate
from ..core.errors import ConvergenceWarning, ScaleFitError, require
from ..core.table import require_columns
from ..laws import Law, get_law
from .build import FitSettings, provenance
from .curve_marks import warn_ungrouped
from .data import group_codes
from .observation import add_noise, residual, response, standard_noise
from .report import hdi_frame as hdi_frame  # public here: docs/bayes.md
from .result import FitResult

LIKELIHOODS = ("student_t", "normal")
CHAIN_METHODS = ("vectorized", "parallel", "sequential")
#: Predictive distributions that can score a hold-out (the first is the default).
PREDICTIVES = ("calibrated", "law")
#: Packages whose versions a Bayesian result records.
_PACKAGES = ("jax", "numpyro", "arviz")
#: Default prior of ``tau``, the spread of the per-group offsets of log loss (``group=``): half of
#: its mass below 0.067 and 95 % below 0.2, i.e. runs whose losses differ by up to about 20 %.
TAU_PRIOR = {"dist": "halfnormal", "scale": 0.1}

#: The validated options of :func:`fit_bayes` (declared once in
#: :data:`scalefit.core._validation.VOCABULARY`, which the command line is generated from too).
OPTIONS = (
    "likelihood", "chain_method", "chains", "draws", "warmup", "seed", "ci_prob",
    "target_accept", "residuals", "drop_highest", "holdout", "progress",
)  # fmt: skip
_CONSTRAINTS = {
    **constraints(*OPTIONS),
    "predictive": constraints("predictive")["predictive"],
}


@dataclass(frozen=True)
class BayesSettings:
    """The keyword arguments of :func:`fit_bayes`, validated once and passed down whole."""

    likelihood: str
    chain_method: str
    chains: int
    draws: int
    warmup: int
    seed: int
    ci_prob: float
    target_accept: float
    residuals: str
    predictive: str
    priors: Mapping[str, Mapping[str, Any]] | None
    drop_highest: int
    law_options: Mapping[str, Any] | None
    holdout: float | None
    progress: bool | None
    weights: Any
    group: str | None = None
    ar1: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        validate("fit_bayes", vars(self), _CONSTRAINTS)

    @property
    def compiled(self) -> bool:
        """Whether the chains run as one program compiled ahead (vectorised, no progress bar)."""
        return self.chain_method == "vectorized" and not self.progress

    @property
    def nuts(self) -> dict[str, Any]:
        """The sampler's size and step settings (they key its compiled program)."""
        keys = ("chains", "draws", "warmup", "target_accept")
        return {k: getattr(self, k) for k in keys}

    def holdout_options(self, weight_column: str | None) -> dict[str, Any]:
        """Keywords of the hold-out's training fit: these settings on the prepared table."""
        skip = ("drop_highest", "law_options", "holdout", "progress", "weights")
        kept = {k: v for k, v in vars(self).items() if k not in skip}
        return {**kept, "weights": weight_column}


@dataclass(frozen=True)
class _Prepared:
    """The table, law, observations and priors of one Bayesian fit."""

    law: Law
    tab: pd.DataFrame
    lsq: FitSettings  # residual scale and weights, as least squares records them
    y: np.ndarray
    obs: np.ndarray  # the observed response (log loss or loss)
    w: np.ndarray | None
    specs: dict[str, Any]
    raw: dict[str, np.ndarray]
    refs: dict[str, float]
    lmin: float
    group: tuple[np.ndarray, int] | None = None  # each row's group index, number of groups
    group_labels: tuple[str, ...] = ()
    ar: tuple[np.ndarray, np.ndarray] | None = None  # each row's previous row, gap (AR(1))
    ar_spacing: float = 1.0  # the typical gap of the order column (rho's unit)


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
    group: str | None = None,
    ar1: tuple[str, str] | None = None,
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
        Show numpyro's progress bar (``True`` only: it runs numpyro's own MCMC driver instead
        of the compiled sampler; default no bar).
    residuals : {"log", "linear"}, default "log"
        Observation scale (see :mod:`scalefit.fit.observation`): the likelihood scores
        ``log y`` around ``log f`` or ``y`` around ``f``.
    weights : str or array-like, optional
        Per-row weights (a column name or one non-negative number per row) multiplying each
        row's log likelihood, as in least squares.
    predictive : {"calibrated", "law"}, default "calibrated"
        Predictive that scores the ``holdout`` rows (:func:`holdout_bayes`).
    group : str, optional
        A column whose rows share a random offset of log loss (e.g. ``"run"`` for the
        checkpoints of one training run): ``log y = log f(x) + u_g + eps`` with
        ``u_g ~ Normal(0, tau)`` per group and ``tau`` half-normal (scale 0.1; override with
        ``priors={"tau": ...}``). Parameter intervals then count groups, not rows, as the
        independent evidence; predictions for a new group draw a fresh ``u``
        (:func:`predictive_draws`). Default None: every row independent.
    ar1 : (str, str), optional
        ``(series, order)`` columns, e.g. ``("run", "step")``: the errors of the rows of one
        series, taken in ``order``, follow a stationary AR(1) process with correlation ``rho``
        between rows one typical gap apart (the median gap of ``order`` between consecutive
        rows of a series; ``rho ** (gap / typical)`` for others), ``rho ~ Uniform(0, 1)``.
        The likelihood is the exact one (each row conditional on the previous row of its
        series, innovation scale ``sigma * sqrt(1 - phi**2)``); ``sigma`` stays the marginal
        scale. ``diagnostics["ar1"]`` holds the posterior median and interval of ``rho``.

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
    # every keyword argument, collected once by name and validated
    settings = BayesSettings(**{k: v for k, v in locals().items() if k not in ("table", "law")})
    require("numpyro", "bayes")
    if importlib.util.find_spec("arviz") is None:
        require("arviz", "bayes")  # the missing-extra error before any work
    import jax

    # float64 inside this call only (JAX's scoped switch); the caller's setting is untouched
    with jax.enable_x64(True):
        res = _fit_bayes(table, law, settings)
    for w in res.warnings:
        warnings.warn(w, ConvergenceWarning, stacklevel=2)
    return res


def _fit_bayes(table, law, s: BayesSettings) -> FitResult:
    """The body of :func:`fit_bayes`: prepare, sample, summarise, and build the result once."""
    from .bayes_checks import RHAT_MAX

    t_start = time.perf_counter()
    d = _prepare(table, law, s)
    idata, seconds, cpu = _sample(d, s)
    post = _posterior(d, idata, s.ci_prob)
    diag, warns = _diagnose(d, idata, s, post.pop("diagnostics"), (seconds, cpu))
    hold = None
    if s.holdout is not None:
        hold = holdout_bayes(d.tab, d.law, s.holdout, **s.holdout_options(d.lsq.weight_column))
    return FitResult(
        law=d.law,
        method="bayes",
        converged=bool(diag["divergences"] == 0 and not diag["r_hat_max"] > RHAT_MAX),
        n_rows=len(d.tab),
        ci_prob=s.ci_prob,
        refs=dict(d.refs),
        **post,
        warnings=tuple(warns),
        diagnostics={**diag, "total_seconds": time.perf_counter() - t_start},
        conventions=provenance(
            d.tab, d.law, d.refs, d.lsq, _conventions(d, s), _PACKAGES, group=_group_record(d, s)
        ),
        holdout=hold,
        extras={"inference_data": idata, "table": d.tab, "group_labels": d.group_labels},
    )


def _prepare(table, law, s: BayesSettings) -> _Prepared:
    """Read and check the table, resolve weights and priors: everything the model is built on."""
    from .data import as_table, check_design, inputs_of, resolve_weights, weights_of
    from .priors import check_prior, resolve_priors

    law_obj = get_law(law, **dict(s.law_options or {}))
    keep = (*law_obj.inputs, *([s.group] if isinstance(s.group, str) else []), *(s.ar1 or ()))
    tab = as_table(table, s.drop_highest, positive_loss=s.residuals == "log", keep=keep)
    require_columns(tab, law_obj.inputs, f"law {law_obj.name!r}")
    if s.group is None:
        warn_ungrouped(tab, "fit_bayes without a group", "group='run'")
    tab, weight_column, weights_label = resolve_weights(tab, s.weights)
    y = tab["loss"].to_numpy(float)
    obs = response(y, s.residuals, where=tab.attrs.get("scalefit", {}).get("source", "<table>"))
    w = weights_of(tab, weight_column)
    check_design(tab, law_obj, y, w)
    group, labels = _groups(tab, s.group)
    priors, tau = s.priors, TAU_PRIOR
    if group is not None and isinstance(priors, Mapping) and "tau" in priors:
        priors, tau = {k: v for k, v in priors.items() if k != "tau"}, priors["tau"]
    specs = resolve_priors(law_obj, y, priors, s.residuals)
    if s.likelihood == "normal":
        specs.pop("nu")
    if group is not None:
        specs["tau"] = check_prior("tau", tau, None)
        if specs["tau"]["dist"] == "fixed":
            raise ScaleFitError("prior for 'tau' must be a distribution, not fixed.")
    raw = inputs_of(tab, law_obj)
    lsq = FitSettings(
        residuals=s.residuals, weight_column=weight_column, weights_label=weights_label
    )
    refs = law_obj.references(raw)
    ar, spacing = _ar1_structure(tab, s.ar1)
    return _Prepared(
        law_obj, tab, lsq, y, obs, w, specs, raw, refs, float(y.min()), group, labels, ar, spacing
    )


def _ar1_structure(tab: pd.DataFrame, ar1) -> tuple[tuple[np.ndarray, np.ndarray] | None, float]:
    """Each row's previous row in its series (-1: first), its gap in typical gaps; the gap."""
    if ar1 is None:
        return None, 1.0
    where = tab.attrs.get("scalefit", {}).get("source", "<table>")
    ok = isinstance(ar1, tuple | list) and len(ar1) == 2 and all(isinstance(c, str) for c in ar1)
    if not ok:
        raise ScaleFitError(
            f"The 'ar1' parameter of fit_bayes must be a pair of column names (series, order), "
            f"e.g. ('run', 'step'). Got {ar1!r} instead."
        )
    series, order = ar1
    for col in (series, order):
        if col not in tab.columns:
            raise ScaleFitError(
                f"The 'ar1' parameter of fit_bayes must name columns of {where}; got {col!r}; "
                f"columns: {', '.join(map(str, tab.columns))}."
            )
    key = pd.to_numeric(tab[order], errors="coerce").to_numpy(float)
    if not np.isfinite(key).all() or tab[series].isna().any():
        raise ScaleFitError(
            f"{where}: ar1 columns {series!r}, {order!r} need a value in every row."
        )
    codes = pd.factorize(tab[series])[0]
    rows = np.lexsort((key, codes))  # by series, then order
    prev = np.full(len(tab), -1)
    same = codes[rows[1:]] == codes[rows[:-1]]
    gaps = key[rows[1:]] - key[rows[:-1]]
    if np.any(same & (gaps <= 0)):
        raise ScaleFitError(f"{where}: two rows of one {series!r} share a value of {order!r}.")
    prev[rows[1:][same]] = rows[:-1][same]
    if not same.any():
        raise ScaleFitError(f"{where}: ar1 needs a {series!r} with two rows or more.")
    spacing = float(np.median(gaps[same]))
    gap = np.ones(len(tab))
    gap[rows[1:][same]] = gaps[same] / spacing
    return (prev, gap), spacing


def _groups(tab: pd.DataFrame, column: str | None) -> tuple[tuple[np.ndarray, int] | None, tuple]:
    """Each row's group index and the number of groups of ``column``, and the group labels."""
    if column is None:
        return None, ()
    index, labels = group_codes(
        tab, column, owner="fit_bayes", name="group", fewer_than_rows=True, sort=True
    )
    return (index.astype(np.int32), len(labels)), tuple(labels)


def _sample(d: _Prepared, s: BayesSettings) -> tuple[Any, float, float]:
    """Run NUTS from the least-squares start; the ArviZ object, wall and CPU seconds."""
    import jax.numpy as jnp

    from . import bayes_model as bm

    model = bm.build_model(
        d.law, d.specs, d.refs, d.lmin, s.likelihood, s.residuals, d.w, group=d.group, ar=d.ar
    )
    x = {k: jnp.asarray(v) for k, v in d.law.variables(np, d.raw).items()}
    logy = jnp.asarray(d.obs)
    nuts = s.nuts if d.group is None else {**s.nuts, "group": d.group[0].tolist()}
    if d.ar is not None:
        nuts = {**nuts, "ar1": [d.ar[0].tolist(), d.ar[1].tolist()]}
    key = bm.program_key(d.law, d.specs, d.refs, d.lmin, s.likelihood, s.residuals, d.w, nuts)
    # the sampler's modules first, on this thread; then the sampler program is traced and
    # compiled on a helper thread (it needs the starting values' shapes only) while this thread
    # finds the least-squares start
    import numpyro.infer.hmc  # noqa: F401
    import numpyro.infer.util  # noqa: F401

    prepared = None
    if s.compiled:
        shapes = {**bm.init_values(d.law, d.specs, None, 1.0, d.lmin), **_group_init(d, 1.0)}
        prepared = bm.PreparedNuts(model, x, logy, shapes, **s.nuts, key=key)
    z_lsq, rmse = bm.least_squares_start(d.tab, d.law, s.seed, d.lsq)
    init = {**bm.init_values(d.law, d.specs, z_lsq, rmse, d.lmin), **_group_init(d, rmse)}
    # ArviZ (needed after sampling) on another helper thread while the sampler runs
    arviz = _BackgroundImport("arviz", "bayes")
    samples, stats, seconds, cpu = bm.run_nuts(
        model,
        x,
        logy,
        init,
        **s.nuts,
        seed=s.seed,
        chain_method=s.chain_method,
        progress=bool(s.progress),
        key=key,
        prepared=prepared,
    )
    arviz.result()
    offset = None if d.group is None else samples["u"][..., d.group[0]]  # (chains, draws, rows)
    idata = bm.inference_data(
        samples, stats, d.specs, d.refs, d.lmin, d.law, d.raw, d.obs, s.likelihood,
        seed=s.seed, residuals=s.residuals, offset=offset, ar=d.ar,
    )  # fmt: skip
    return idata, seconds, cpu


def _group_init(d: _Prepared, rmse: float) -> dict[str, Any]:
    """Starting values of the group sites: ``tau`` at half the start's RMSE, offsets at zero.

    With AR(1) errors, ``rho`` starts at 0.5.
    """
    out = {} if d.ar is None else {"rho": 0.5}
    if d.group is None:
        return out
    return {**out, "tau": max(0.5 * float(rmse), 1e-3), "u_raw": np.zeros(d.group[1])}


def _diagnose(d: _Prepared, idata, s: BayesSettings, extra: Mapping[str, Any], timing):
    """Chain diagnostics, PSIS-LOO, predictive checks and ``timing`` (wall, CPU seconds).

    ``extra`` (the posterior's HDIs and noise medians) is merged in after the chain diagnostics.
    """
    from . import _arviz
    from . import bayes_checks as checks
    from .bayes_model import chain_devices

    names = [p.name for p in d.law.params if d.specs[p.name]["dist"] != "fixed"]
    noise = [n for n in ("sigma", "nu", "tau") if n in d.specs and d.specs[n]["dist"] != "fixed"]
    noise += ["rho"] if d.ar is not None else []
    diag, warns = checks.diagnose(idata, names + noise, s.chains)
    loo, loo_warn = checks.loo(idata)
    diag = {
        **diag,
        **extra,
        "loo": loo,
        "ppc": checks.ppc(idata, d.obs),
        "chains": s.chains,
        "draws": s.draws,
        "warmup": s.warmup,
        "mcmc_seconds": timing[0],
        "mcmc_cpu_seconds": timing[1],
        # CPU devices the compiled sampler split the chains over (1: all vectorised on one)
        "chain_devices": chain_devices(s.chains) if s.compiled else 1,
        "ess_bulk_per_s_min": diag["ess_bulk_min"] / timing[0],
    }
    post = _arviz.group(idata, "posterior")

    def median_ci(site: str) -> dict[str, Any]:
        v = np.asarray(post[site]).reshape(-1)
        lo, hi = np.quantile(v, [(1 - s.ci_prob) / 2, (1 + s.ci_prob) / 2])
        return {site: float(np.median(v)), f"{site}_ci": [float(lo), float(hi)]}

    if d.group is not None:
        diag["groups"] = {"column": s.group, "n_groups": int(d.group[1]), **median_ci("tau")}
    if d.ar is not None:
        ar1 = {"series": s.ar1[0], "order": s.ar1[1], "spacing": d.ar_spacing}
        diag["ar1"] = {**ar1, **median_ci("rho")}
    return diag, warns + loo_warn


def _conventions(d: _Prepared, s: BayesSettings) -> dict[str, Any]:
    """What a Bayesian fit records of its settings (see :func:`scalefit.fit.build.provenance`)."""
    return {
        "loss": "bayes",
        "objective": "sum over rows of (weighted) squared residuals at the posterior median",
        "likelihood": s.likelihood,
        "priors": d.specs,
        "chains": s.chains,
        "draws": s.draws,
        "warmup": s.warmup,
        "seed": s.seed,
        "chain_method": s.chain_method,
        "sampler": "NUTS",
        "target_accept_prob": s.target_accept,
        "dense_mass": True,
        "init": "least-squares optimum (32 starts), jittered by N(0, 0.05) per chain in "
        "unconstrained space",
        **({} if d.ar is None else {"ar1": _ar1_record(d, s)}),
    }


def _ar1_record(d: _Prepared, s: BayesSettings) -> dict[str, Any]:
    """What a fit with AR(1) errors records of its error model."""
    return {
        "series": s.ar1[0],
        "order": s.ar1[1],
        "spacing": d.ar_spacing,
        "model": "errors of one series in order: e_i = phi_i e_prev + innovation, phi_i = "
        "rho ** (gap_i / spacing), innovation scale sigma * sqrt(1 - phi_i**2); exact "
        "conditional likelihood",
        "rho_prior": "uniform(0, 1)",
    }


def _group_record(d: _Prepared, s: BayesSettings) -> dict[str, Any] | None:
    """What a grouped fit records of its grouping (None without ``group``)."""
    if d.group is None:
        return None
    return {
        "column": s.group,
        "n_groups": int(d.group[1]),
        "model": "log loss = log f(x) + u[group] + noise; u[group] ~ Normal(0, tau), "
        "non-centred (u = tau * z, z ~ Normal(0, 1))",
        "tau_prior": dict(d.specs["tau"]),
        "new_group_predictions": "a fresh u ~ Normal(0, tau) per posterior draw",
    }


def _posterior(d: _Prepared, idata, ci_prob: float) -> dict[str, Any]:
    """Posterior medians, intervals, HDIs, draws and metrics: the result's posterior fields."""
    from . import _arviz
    from .observation import metrics

    law = d.law
    post = _arviz.group(idata, "posterior")
    names = list(law.param_names)
    cube = np.stack([np.asarray(post[n]) * np.ones(post["sigma"].shape) for n in names], -1)
    draws = cube.reshape(-1, len(names))  # (chains * draws, n_params), raw units
    med = {n: float(np.median(draws[:, i])) for i, n in enumerate(names)}
    q = np.quantile(draws, [(1 - ci_prob) / 2, (1 + ci_prob) / 2], axis=0)
    hdi = {}
    for i, n in enumerate(names):
        h = _arviz.hdi(draws[:, i], ci_prob) if np.ptp(draws[:, i]) > 0 else (med[n], med[n])
        hdi[n] = [h[0], h[1]]
    thinned = draws[:: max(1, len(draws) // 2000)]
    internal = np.stack(
        [law.to_internal(dict(zip(names, t, strict=True)), d.refs) for t in thinned]
    )
    corr = np.corrcoef(internal.T) if len(internal) > 1 else np.eye(len(names))
    pred = np.asarray(law.evaluate(med, d.tab), dtype=float)
    r = residual(np, d.obs, pred, d.lsq.residuals)
    return {
        "params": med,
        "objective": float(np.sum((1.0 if d.w is None else d.w) * r**2)),
        "metrics": metrics(d.y, pred),
        "stderr": {n: float(np.std(draws[:, i], ddof=1)) for i, n in enumerate(names)},
        "corr": np.round(np.nan_to_num(corr), 6).tolist(),
        "ci": {n: (float(q[0, i]), float(q[1, i])) for i, n in enumerate(names)},
        "draws": draws,
        "internal": np.median(internal, axis=0).tolist(),
        "diagnostics": {
            "hdi": hdi,
            "hdi_prob": ci_prob,
            "noise": {k: float(np.median(post[k])) for k in ("sigma", "nu") if k in post},
        },
    }


def predictive_draws(
    result: FitResult,
    x,
    *,
    noise: bool = True,
    max_draws: int = 2000,
    seed: int = 0,
    group: bool | None = None,
) -> np.ndarray:
    """Posterior (predictive) draws of the loss at inputs ``x``, shape (n_draws, n_rows).

    With ``noise=True`` each draw is multiplied by ``exp(eps)``, ``eps`` from the fitted
    likelihood (Student-t with that draw's ``sigma`` and ``nu`` when the ArviZ object is at hand,
    else the posterior medians of ``sigma``/``nu``).

    For a fit with ``group=`` (per-group offsets), ``group=True`` (default: as ``noise``) also
    multiplies each draw by ``exp(u)``: the fitted offset of a group the fit saw, a fresh
    ``u ~ Normal(0, tau)`` per draw for a new one. Rows of ``x`` are grouped by the group
    column; without that column all rows of ``x`` are one new group (one run).
    """
    from .discrepancy import draw_means

    if result.draws is None:
        raise ScaleFitError("predictive_draws needs a result with draws (fit_bayes).")
    idx, sims = draw_means(result, x, max_draws)
    if (noise if group is None else group) and result.conventions.get("group"):
        sims = sims * np.exp(group_effects(result, x, idx, sims.shape, seed=seed))
    if not noise:
        return sims
    rng = np.random.default_rng(seed)
    sigma, nu = noise_draws(result, idx)
    return add_noise(
        sims,
        sigma * standard_noise(rng, nu, sims.shape),
        result.conventions.get("residuals", "log"),
    )


def group_effects(result: FitResult, x, idx, shape: tuple[int, int], *, seed: int) -> np.ndarray:
    """Group offsets of log loss for posterior draws ``idx`` at the rows of ``x``, ``shape``.

    A row whose group (the fit's group column in ``x``) was fitted takes that group's posterior
    offset; any other group a fresh ``u ~ Normal(0, tau)`` per draw, shared by its rows. Without
    the column every row is one new group. Without the ArviZ object (a result read from JSON)
    ``tau`` is its posterior median and every group is new.
    """
    rec = result.conventions["group"]
    post = _session_posterior(result)
    if "tau" in post:
        tau = np.asarray(post["tau"]).reshape(-1)[idx][:, None]
    else:
        tau = result.diagnostics.get("groups", {}).get("tau", 0.0)
    col = rec["column"]
    labels = np.asarray(x[col]).astype(str) if col in x else np.full(shape[1], "\0new")
    names, inverse = np.unique(labels, return_inverse=True)
    rng = np.random.default_rng(seed + 3)  # its own stream: noise draws stay as without groups
    u = tau * rng.standard_normal((shape[0], len(names)))
    known = list(result.extras.get("group_labels", ()))
    if "u" in post:
        fitted = np.asarray(post["u"]).reshape(-1, len(known))[idx]
        for j, name in enumerate(names):
            if name in known:
                u[:, j] = fitted[:, known.index(name)]
    return u[:, inverse]


def noise_draws(result: FitResult, idx) -> tuple[Any, Any]:
    """The likelihood's ``sigma`` and ``nu`` of the posterior draws ``idx``, as (n, 1) arrays.

    Without the ArviZ object (a result read back from JSON) the posterior medians are returned
    as scalars (the RMSE when no median was kept); ``nu`` is ``None`` for a normal likelihood.
    """
    post = _session_posterior(result)
    if "sigma" in post:
        sigma = np.asarray(post["sigma"]).reshape(-1)[idx][:, None]
        nu = np.asarray(post["nu"]).reshape(-1)[idx][:, None] if "nu" in post else None
        return sigma, nu
    med = result.diagnostics.get("noise", {})
    key = "rmse_log" if result.conventions.get("residuals", "log") == "log" else "rmse"
    return med.get("sigma", result.metrics[key]), med.get("nu")


def _session_posterior(result: FitResult) -> Any:
    """The posterior group of a fit of this session (``{}`` for a result read from JSON)."""
    from . import _arviz

    idata = result.extras.get("inference_data")
    return {} if idata is None else _arviz.group(idata, "posterior")


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
    tab, law, fraction
        The full table, the law and the share of rows held out, in (0, 1).
    ci_prob : float, default 0.95
        Probability of the predictive interval whose coverage is reported.
    seed : int, default 0
        Seed of the fit and the predictive draws.
    predictive : {"calibrated", "law"}, default "calibrated"
        Which predictive scores the held-out rows: the calibrated one of
        :mod:`scalefit.fit.discrepancy` around the same posterior draws (the default: it
        scored better in every table and cut measured, ``docs/extrapolation.md``), or the law's
        own posterior predictive. Coverages and widths are exact for the mixture over the draws.
    **kwargs
        Passed to :func:`~scalefit.fit.bayes.fit_bayes`.

    Returns
    -------
    dict
        See :func:`scalefit.fit.holdout.holdout`; the scores are ``predictive`` (one line),
        ``coverage, coverage_50, width_log`` (mean width of the ``ci_prob`` interval on log
        loss), ``lpd`` (mean log predictive density of the held-out log losses) and ``pit``.
    """
    from .discrepancy import draw_means
    from .holdout import holdout

    validate("holdout_bayes", {"predictive": predictive}, _CONSTRAINTS)

    def fit_train(train):
        with warnings.catch_warnings():
            # the training fit's convergence is reported as ``train_converged``
            warnings.filterwarnings("ignore", category=ConvergenceWarning)
            return fit_bayes(train, law, seed=seed, ci_prob=ci_prob, **kwargs)

    def law_scores(res, test):
        idx, means = draw_means(res, test)  # the law at the draws predictive_draws takes
        sims = predictive_draws(res, test, noise=True, seed=seed)
        y = test["loss"].to_numpy(float)
        return np.median(means, axis=0), _law_holdout_scores(res, y, sims, means, idx, ci_prob)

    kw = {"ci_prob": ci_prob, "seed": seed, "predictive": predictive}
    return holdout(tab, law, fraction, fit_train, law_scores, who="fit_bayes", **kw)


def _law_holdout_scores(res: FitResult, y, sims, means, idx, ci_prob) -> dict[str, Any]:
    """Coverage, width and log predictive density of the law's own posterior predictive.

    With log residuals and the posterior's ``sigma``/``nu`` at hand the predictive is a mixture
    of Student-t (or normal) terms on log loss (the law at draws ``idx``) and is scored exactly
    (:func:`~scalefit.fit.observation.score_holdout`); otherwise the intervals are quantiles of
    the simulated draws ``sims`` and ``lpd`` is ``None``.
    """
    from .observation import holdout_scores, sample_scores, score_holdout

    likelihood = res.conventions.get("likelihood", "student_t")
    residuals = res.conventions.get("residuals", "log")
    idata = res.extras.get("inference_data")
    if residuals == "log" and idata is not None and not res.conventions.get("group"):
        sigma, nu = noise_draws(res, idx)
        sc = score_holdout(y, np.log(means), sigma, nu, probs=(0.5, ci_prob))
    else:
        sc = {**sample_scores(y, sims, probs=(0.5, ci_prob)), "lpd": None, "pit": None}
    what = f"law: posterior predictive ({likelihood} likelihood on {residuals} loss)"
    return holdout_scores(what, sc, ci_prob)
