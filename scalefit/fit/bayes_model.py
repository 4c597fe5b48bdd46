"""The numpyro model generated from a law, its initial values and the NUTS run.

The model samples each parameter in its internal ("ridge") coordinate, maps the vector to public
values with :meth:`Law.to_public`, evaluates :attr:`Law.expr` with ``xp = jax.numpy`` and scores
the observed log loss with a Student-t (or normal) likelihood. Nothing here knows any formula.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ConvergenceWarning, ScaleFitError
from ..laws import Law
from .observation import on_scale
from .priors import numpyro_distribution, scipy_distribution

OBS = "log_loss"


@contextlib.contextmanager
def cache_small_compiles():
    """Enable float64 and the persistent compile cache, caching even sub-0.2 s compilations.

    numpyro's set-up runs a few hundred small eager operations, each compiled once per process
    (about 0.03 s each); caching them too saves several seconds in every later process. The
    previous threshold is restored afterwards.
    """
    from .engine import load_jax as _jax

    jax, _ = _jax()
    key = "jax_persistent_cache_min_compile_time_secs"
    before = getattr(jax.config, key)
    if jax.config.jax_compilation_cache_dir:
        jax.config.update(key, 0.0)
    try:
        yield
    finally:
        jax.config.update(key, before)


def site_name(name: str, kind: str, spec: Mapping[str, Any]) -> str | None:
    """Name of the sample site of one parameter (None when it is fixed).

    ``coef`` → ``t_<name>``; ``positive``/``floor`` → ``log_<name>`` (``frac_<name>`` under the
    ``below_min`` prior); ``exponent``/``free`` and the noise parameters → ``<name>``.
    """
    if spec["dist"] == "fixed":
        return None
    if kind == "coef":
        return f"t_{name}"
    if kind in ("positive", "floor"):
        return f"frac_{name}" if spec["dist"] == "below_min" else f"log_{name}"
    return name


def build_model(
    law: Law,
    specs: Mapping[str, Mapping[str, Any]],
    refs: Mapping[str, float],
    lmin: float,
    likelihood: str,
    residuals: str = "log",
    weights: np.ndarray | None = None,
):
    """Return ``model(x, logy=None)``: the numpyro model of ``law`` with priors ``specs``.

    Parameters
    ----------
    law : Law
        The law (its ``expr`` is evaluated with ``jax.numpy``).
    specs : mapping
        Validated priors (see :func:`scalefit.fit.priors.resolve_priors`).
    refs : mapping
        Log reference points of the pivot variables.
    lmin : float
        Smallest observed loss (for the ``below_min`` floor prior).
    likelihood : {"student_t", "normal"}
        Likelihood of the observed log loss.
    residuals : {"log", "linear"}, default "log"
        Scale of the observations (``logy`` is then ``log y`` or ``y``; see
        :mod:`scalefit.fit.observation`).
    weights : ndarray, optional
        Per-row weights: each row's log likelihood is multiplied by its weight.
    """
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    refs_j = {k: float(v) for k, v in refs.items()}
    w = None if weights is None else jnp.asarray(weights, dtype=float)

    def draw(name: str, kind: str | None):
        spec = specs[name]
        site = site_name(name, kind or "noise", spec)
        if site is None:
            value = jnp.asarray(spec["value"])  # internal coordinate (noise: the value)
            return numpyro.deterministic(name, value) if kind is None else value
        value = numpyro.sample(site, numpyro_distribution(spec))
        if spec["dist"] == "below_min":
            return math.log(spec["fraction"] * lmin) + jnp.log(value)
        return value

    def model(x, logy=None):
        z = jnp.stack([draw(p.name, p.kind) for p in law.params], axis=-1)
        pub = law.to_public(z, refs_j, xp=jnp)
        for p in law.params:
            if site_name(p.name, p.kind, specs[p.name]) != p.name:
                numpyro.deterministic(p.name, pub[p.name])
        mu = on_scale(jnp, law.expr(jnp, pub, x), residuals)
        sigma = draw("sigma", None)
        if likelihood == "student_t":
            nu = draw("nu", None)
            noise = dist.StudentT(nu, mu, sigma)
        else:
            noise = dist.Normal(mu, sigma)
        if w is not None and logy is not None:
            # weighted likelihood: each row's log density times its weight (zero allowed)
            numpyro.factor(OBS, jnp.sum(w * noise.log_prob(logy)))
            return
        with numpyro.plate("row", mu.shape[-1]):
            numpyro.sample(OBS, noise, obs=logy)

    return model


def init_values(
    law: Law,
    specs: Mapping[str, Mapping[str, Any]],
    z_lsq: np.ndarray | None,
    sigma0: float,
    lmin: float,
) -> dict[str, float]:
    """Constrained starting values of every sample site from a least-squares optimum.

    Values are pulled inside the support of truncated priors; without an optimum (``z_lsq`` None)
    prior locations are used.
    """
    out: dict[str, float] = {}
    for i, p in enumerate(law.params):
        spec = specs[p.name]
        site = site_name(p.name, p.kind, spec)
        if site is None:
            continue
        if z_lsq is not None and np.isfinite(z_lsq[i]):
            z = float(z_lsq[i])
        else:
            z = spec.get("loc", 0.5 * (spec.get("low", 0.0) + spec.get("high", 1.0)))
        if spec["dist"] == "below_min":
            z = min(max(math.exp(z) / (spec["fraction"] * lmin), 0.02), 0.98)
        elif spec["dist"] in ("uniform", "truncated_normal"):
            lo, hi = spec["low"], spec["high"]
            pad = 1e-3 * (hi - lo) if math.isfinite(hi - lo) else 1e-3
            z = min(max(z, lo + pad), hi - pad)
        elif spec["dist"] in ("halfnormal", "halfcauchy", "lognormal", "exponential", "gamma"):
            z = max(z, 1e-3)
        out[site] = z
    if specs["sigma"]["dist"] != "fixed":
        out["sigma"] = max(float(sigma0), 1e-4)
    if "nu" in specs and specs["nu"]["dist"] != "fixed":
        out["nu"] = 10.0
    return out


def least_squares_start(tab, law: Law, seed: int, settings=None) -> tuple[np.ndarray | None, float]:
    """A quick least-squares optimum (32 starts) in internal coordinates and its residual RMSE.

    ``settings`` (a :class:`~scalefit.fit.build.FitSettings`) sets the residual scale and weights.
    """
    from .build import FitSettings
    from .lsq import JaxBackend, least_squares

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            base = settings or FitSettings()
            settings = dataclasses.replace(base, starts=32, seed=seed)
            res = least_squares(tab, law, settings, backend=JaxBackend(progress=False))
    except ScaleFitError:
        y = tab["loss"].to_numpy(float)
        log = settings is None or settings.residuals == "log"
        return None, float(np.std(np.log(y) if log else y))
    key = "rmse_log" if settings.residuals == "log" else "rmse"
    return np.asarray(res.internal), float(res.metrics[key])


def run_nuts(
    model,
    x,
    logy,
    init: Mapping[str, float],
    *,
    chains: int,
    draws: int,
    warmup: int,
    seed: int,
    chain_method: str,
    progress: bool,
    target_accept: float = 0.9,
    dense_mass: bool = True,
):
    """Run NUTS from jittered copies of ``init`` (one per chain).

    Returns ``(mcmc, wall_seconds, cpu_seconds)`` (compilation included).
    """
    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC, NUTS, init_to_value
    from numpyro.infer.util import unconstrain_fn

    kernel = NUTS(
        model,
        init_strategy=init_to_value(values=dict(init)),
        target_accept_prob=target_accept,
        dense_mass=dense_mass,
    )
    mcmc = MCMC(
        kernel,
        num_warmup=warmup,
        num_samples=draws,
        num_chains=chains,
        chain_method=chain_method,
        progress_bar=progress,
        jit_model_args=True,  # data as arguments: same-shaped fits reuse the compiled sampler
    )
    u0 = unconstrain_fn(model, (x,), {"logy": logy}, {k: jnp.asarray(v) for k, v in init.items()})
    key_init, key_run = jax.random.split(jax.random.PRNGKey(seed))
    keys = jax.random.split(key_init, len(u0))
    init_params = {
        k: u0[k] + 0.05 * jax.random.normal(kk, (chains,) + jnp.shape(u0[k]))
        for kk, k in zip(keys, sorted(u0), strict=True)
    }
    if chains == 1:
        init_params = {k: v[0] for k, v in init_params.items()}
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*There are not enough devices.*")
        mcmc.run(
            key_run,
            x,
            logy=logy,
            init_params=init_params,
            extra_fields=("diverging", "energy", "num_steps", "accept_prob", "potential_energy"),
        )
    jax.block_until_ready(mcmc.get_samples())
    return mcmc, time.perf_counter() - t0, time.process_time() - c0


def pointwise(
    law: Law,
    samples: Mapping[str, Any],
    raw: Mapping[str, np.ndarray],
    logy: np.ndarray,
    likelihood: str,
    *,
    seed: int,
    residuals: str = "log",
):
    """Pointwise log likelihood and posterior-predictive log loss, each (chains, draws, rows).

    Computed in numpy from the public draws (no extra JAX compilation).
    """
    from scipy import stats

    pub = {p.name: np.asarray(samples[p.name])[..., None] for p in law.params}
    mu = on_scale(np, np.asarray(law.evaluate(pub, raw), dtype=float), residuals)
    sigma = np.asarray(samples["sigma"])[..., None]
    rng = np.random.default_rng(seed + 1)
    if likelihood == "student_t":
        nu = np.asarray(samples["nu"])[..., None] * np.ones_like(mu)
        ll = stats.t.logpdf(logy, df=nu, loc=mu, scale=sigma)
        eps = rng.standard_t(nu)
    else:
        ll = stats.norm.logpdf(logy, loc=mu, scale=sigma)
        eps = rng.standard_normal(mu.shape)
    return ll, mu + sigma * eps


def prior_draws(
    law: Law,
    specs,
    refs,
    lmin: float,
    raw,
    likelihood: str,
    *,
    n: int,
    seed: int,
    residuals: str = "log",
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Prior draws of every site and public parameter, and prior-predictive log loss (n, rows).

    Drawn with numpy/scipy from the same distributions as the model (no JAX compilation).
    """
    rng = np.random.default_rng(seed + 2)
    out: dict[str, np.ndarray] = {}
    z = np.empty((n, len(law.params)))
    for i, p in enumerate(law.params):
        spec = specs[p.name]
        site = site_name(p.name, p.kind, spec)
        if site is None:
            z[:, i] = spec["value"]
            continue
        v = scipy_distribution(spec).rvs(n, random_state=rng)
        out[site] = v
        z[:, i] = np.log(spec["fraction"] * lmin) + np.log(v) if spec["dist"] == "below_min" else v
    with np.errstate(all="ignore"):
        pub = law.to_public(z, refs, np)
        out.update({k: np.asarray(v, dtype=float) for k, v in pub.items() if k not in out})
        for name in ("sigma", "nu"):
            spec = specs.get(name)
            if spec is not None:
                out[name] = (
                    np.full(n, spec["value"])
                    if spec["dist"] == "fixed"
                    else scipy_distribution(spec).rvs(n, random_state=rng)
                )
        pred = np.asarray(law.evaluate({k: out[k][:, None] for k in pub}, raw), float)
        mu = on_scale(np, pred, residuals)
        if likelihood == "student_t":
            eps = rng.standard_t(out["nu"][:, None] * np.ones_like(mu))
        else:
            eps = rng.standard_normal(mu.shape)
        return out, mu + out["sigma"][:, None] * eps


def inference_data(
    mcmc,
    specs,
    refs,
    lmin,
    law: Law,
    raw,
    logy: np.ndarray,
    likelihood: str,
    *,
    seed: int,
    n_prior: int = 500,
    residuals: str = "log",
):
    """ArviZ object with posterior, sample stats, log likelihood, posterior and prior predictive."""
    import arviz as az

    samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    ll, pp = pointwise(law, samples, raw, logy, likelihood, seed=seed, residuals=residuals)
    prior, prior_pp = prior_draws(
        law, specs, refs, lmin, raw, likelihood, n=n_prior, seed=seed, residuals=residuals
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = az.from_numpyro(mcmc, log_likelihood=False, dims={OBS: ["row"]})
        extra = az.from_dict(
            log_likelihood={OBS: ll},
            posterior_predictive={OBS: pp},
            prior={k: v[None] for k, v in prior.items()},
            prior_predictive={OBS: prior_pp[None]},
            observed_data={OBS: logy},
            dims={OBS: ["row"]},
        )
        idata.extend(extra)
    return idata
