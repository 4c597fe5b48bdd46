"""The numpyro model generated from a law, its initial values and the NUTS run.

The model samples each parameter in its internal ("ridge") coordinate, maps the vector to public
values with :meth:`Law.to_public`, evaluates :attr:`Law.expr` with ``xp = jax.numpy`` and scores
the observed log loss with a Student-t (or normal) likelihood. Nothing here knows any formula.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ConvergenceWarning, ScaleFitError
from ..laws import Law

OBS = "log_loss"


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


def _inf_none(v: float) -> float | None:
    return None if not math.isfinite(v) else v


def _distribution(spec: Mapping[str, Any]):
    import numpyro.distributions as dist

    d = spec["dist"]
    if d == "normal":
        return dist.Normal(spec["loc"], spec["scale"])
    if d == "student_t":
        return dist.StudentT(spec["df"], spec["loc"], spec["scale"])
    if d == "cauchy":
        return dist.Cauchy(spec["loc"], spec["scale"])
    if d == "laplace":
        return dist.Laplace(spec["loc"], spec["scale"])
    if d == "logistic":
        return dist.Logistic(spec["loc"], spec["scale"])
    if d == "uniform":
        return dist.Uniform(spec["low"], spec["high"])
    if d == "truncated_normal":
        return dist.TruncatedNormal(
            spec["loc"], spec["scale"], low=_inf_none(spec["low"]), high=_inf_none(spec["high"])
        )
    if d == "halfnormal":
        return dist.HalfNormal(spec["scale"])
    if d == "halfcauchy":
        return dist.HalfCauchy(spec["scale"])
    if d == "lognormal":
        return dist.LogNormal(spec["loc"], spec["scale"])
    if d == "exponential":
        return dist.Exponential(spec["rate"])
    if d == "gamma":
        return dist.Gamma(spec["concentration"], spec["rate"])
    if d == "below_min":
        return dist.Uniform(0.0, 1.0)
    raise AssertionError(d)  # pragma: no cover - validated in priors.check_prior


def build_model(
    law: Law,
    specs: Mapping[str, Mapping[str, Any]],
    refs: Mapping[str, float],
    lmin: float,
    likelihood: str,
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
    """
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    refs_j = {k: float(v) for k, v in refs.items()}

    def draw(name: str, kind: str | None):
        spec = specs[name]
        site = site_name(name, kind or "noise", spec)
        if site is None:
            return jnp.asarray(spec["value"])  # internal coordinate (noise: the value)
        value = numpyro.sample(site, _distribution(spec))
        if spec["dist"] == "below_min":
            return math.log(spec["fraction"] * lmin) + jnp.log(value)
        return value

    def model(x, logy=None):
        z = jnp.stack([draw(p.name, p.kind) for p in law.params], axis=-1)
        pub = law.to_public(z, refs_j, xp=jnp)
        for p in law.params:
            if site_name(p.name, p.kind, specs[p.name]) != p.name:
                numpyro.deterministic(p.name, pub[p.name])
        mu = jnp.log(law.expr(jnp, pub, x))
        sigma = draw("sigma", None)
        if likelihood == "student_t":
            nu = draw("nu", None)
            noise = dist.StudentT(nu, mu, sigma)
        else:
            noise = dist.Normal(mu, sigma)
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


def least_squares_start(tab, law: Law, seed: int) -> tuple[np.ndarray | None, float]:
    """A quick least-squares optimum (32 starts) in internal coordinates and its log-RMSE."""
    from .lsq import _fit_jax

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = _fit_jax(
                tab, law, loss="mse", delta=1e-3, starts=32, seed=seed, x0=None, progress=False
            )
    except ScaleFitError:
        return None, float(np.std(np.log(tab["loss"].to_numpy(float))))
    return np.asarray(res.internal), float(res.metrics["rmse_log"])


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
    """Run NUTS from jittered copies of ``init`` (one per chain); returns ``(mcmc, seconds)``."""
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
    t0 = time.perf_counter()
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
    return mcmc, time.perf_counter() - t0


def inference_data(mcmc, model, x, logy, *, seed: int, n_prior: int = 500):
    """ArviZ object with posterior, sample stats, log likelihood, posterior and prior predictive."""
    import arviz as az
    import jax
    from numpyro.infer import Predictive

    k_post, k_prior = jax.random.split(jax.random.PRNGKey(seed + 1))
    samples = mcmc.get_samples()
    post_pred = Predictive(model, posterior_samples=samples, return_sites=[OBS])(k_post, x)
    prior = Predictive(model, num_samples=n_prior)(k_prior, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return az.from_numpyro(
            mcmc,
            prior=prior,
            posterior_predictive=post_pred,
            log_likelihood=True,
            dims={OBS: ["row"]},
        )
