"""The numpyro model generated from a law, its initial values and the NUTS run.

The model samples each parameter in its internal ("ridge") coordinate, maps the vector to public
values with :meth:`Law.to_public`, evaluates :attr:`Law.expr` with ``xp = jax.numpy`` and scores
the observed log loss with a Student-t (or normal) likelihood. Nothing here knows any formula.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..core.errors import ConvergenceWarning, ScaleFitError
from ..laws import Law
from .observation import noise_logpdf, numpyro_noise, on_scale, standard_noise
from .priors import POSITIVE_DISTS, numpyro_distribution, scipy_distribution

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


def build_model(
    law: Law,
    specs: Mapping[str, Mapping[str, Any]],
    refs: Mapping[str, float],
    lmin: float,
    likelihood: str,
    residuals: str = "log",
    weights: np.ndarray | None = None,
    group: tuple[np.ndarray, int] | None = None,
    ar: tuple[np.ndarray, np.ndarray] | None = None,
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
    group : (ndarray, int), optional
        Each row's group index and the number of groups: adds a per-group offset of log loss
        (:func:`group_offset`, prior ``specs["tau"]`` on its scale).
    ar : (ndarray, ndarray), optional
        Each row's previous row in its series (-1 for a series' first row) and the gap to it
        in units of the typical spacing: AR(1) errors within each series (:func:`ar1_terms`).
    """
    import jax.numpy as jnp
    import numpyro

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
        f = law.expr(jnp, pub, x)
        if group is not None:
            f = f * jnp.exp(group_offset(specs["tau"], *group))
        mu = on_scale(jnp, f, residuals)
        sigma = draw("sigma", None)
        if ar is not None:
            rho = numpyro.sample("rho", AR1_PRIOR())
            mu, sigma = ar1_terms(jnp, mu, sigma, rho, ar, logy)
        noise = numpyro_noise(mu, sigma, draw("nu", None) if likelihood == "student_t" else None)
        if w is not None and logy is not None:
            # weighted likelihood: each row's log density times its weight (zero allowed)
            numpyro.factor(OBS, jnp.sum(w * noise.log_prob(logy)))
            return
        with numpyro.plate("row", mu.shape[-1]):
            numpyro.sample(OBS, noise, obs=logy)

    return model


def AR1_PRIOR():  # noqa: N802 - a constant's constructor
    """The prior of ``rho``, the AR(1) correlation per typical checkpoint spacing: Uniform(0, 1)."""
    import numpyro.distributions as dist

    return dist.Uniform(0.0, 1.0)


def ar1_terms(xp, mu, sigma, rho, ar: tuple[np.ndarray, np.ndarray], logy):
    """Conditional centre and scale of each row given the previous row of its series (AR(1)).

    The errors ``e = logy - mu`` of one series (one run, in step order) are a stationary AR(1)
    process with marginal scale ``sigma``: ``e_i = phi_i e_prev + innovation``, ``phi_i = rho **
    gap_i`` (``gap_i`` is the step gap to the previous row over the typical spacing) and the
    innovation's scale ``sigma * sqrt(1 - phi_i**2)``; a series' first row has ``phi = 0``. The
    product of these conditional densities is the exact likelihood for normal noise (for
    Student-t noise the innovations are Student-t). Without ``logy`` (predictive draws) the
    marginal ``(mu, sigma)`` is returned.
    """
    prev, gap = ar
    if logy is None:
        return mu, sigma
    has = xp.asarray(prev >= 0)
    idx = xp.asarray(np.maximum(prev, 0))
    phi = xp.where(has, rho ** xp.asarray(gap), 0.0)
    centre = mu + phi * (logy[..., idx] - mu[..., idx])
    return centre, sigma * xp.sqrt(xp.maximum(1.0 - phi**2, 1e-12))


def group_offset(tau_spec: Mapping[str, Any], index: np.ndarray, n_groups: int):
    """Sample the per-group offsets of log loss; each row's offset ``u[index]``.

    ``u_g = tau * z_g`` with ``z_g ~ Normal(0, 1)`` (non-centred, so NUTS does not meet the funnel
    of ``tau`` near zero) and ``tau`` from ``tau_spec``; ``tau`` and ``u`` are recorded.
    """
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    tau = numpyro.sample("tau", numpyro_distribution(tau_spec))
    with numpyro.plate("group", n_groups):
        z = numpyro.sample("u_raw", dist.Normal(0.0, 1.0))
    return numpyro.deterministic("u", tau * z)[jnp.asarray(index)]


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
        elif spec["dist"] in POSITIVE_DISTS:
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


#: Sampler statistics collected per draw (numpyro's ``HMCState`` fields).
STAT_FIELDS = ("diverging", "energy", "num_steps", "accept_prob", "potential_energy")
#: Standard deviation of the per-chain jitter added to the start in unconstrained space.
JITTER = 0.05


def _source_hashes() -> list[str]:
    from pathlib import Path

    from ._programs import file_hash

    here = Path(__file__).resolve().parent
    return [file_hash(str(here / f)) for f in ("bayes_model.py", "priors.py", "observation.py")]


def program_key(
    law: Law,
    specs: Mapping[str, Mapping[str, Any]],
    refs: Mapping[str, float],
    lmin: float,
    likelihood: str,
    residuals: str,
    weights: np.ndarray | None,
    settings: Mapping[str, Any],
) -> str | None:
    """Disk-cache key of the compiled sampler of one model, or None when the law has no identity.

    Everything baked into the program as a constant is part of the key: the law's identity, the
    priors, the reference points, the smallest loss, the likelihood, the residual scale, a hash of
    the row weights and the sampler settings, with the versions of numpyro and of the sources that
    build the model.
    """
    import hashlib
    import json
    from importlib.metadata import version

    from ._programs import law_identity

    ident = law_identity(law)
    if ident is None:
        return None
    wsum = None
    if weights is not None:
        wsum = hashlib.sha256(np.ascontiguousarray(weights, dtype=float).tobytes()).hexdigest()
    return json.dumps(
        {
            "kind": "nuts",
            "law": ident,
            "specs": {k: dict(v) for k, v in specs.items()},
            "refs": {k: float(v) for k, v in refs.items()},
            "lmin": float(lmin),
            "likelihood": likelihood,
            "residuals": residuals,
            "weights": wsum,
            "settings": dict(settings),
            "numpyro": version("numpyro"),
            "src": _source_hashes(),
        },
        sort_keys=True,
        default=str,
    )


def even_split(chains: int, cap: int) -> int:
    """The largest divisor of ``chains`` not above ``cap`` (at least 1).

    How many devices can share ``chains`` evenly when at most ``cap`` are available.
    """
    n = min(int(chains), int(cap))
    while n > 1 and chains % n:
        n -= 1
    return max(n, 1)


def chain_devices(chains: int) -> int:
    """How many CPU devices the compiled sampler spreads ``chains`` over (1: all on one).

    The largest divisor of ``chains`` not above the number of JAX devices of the default backend
    (each device then runs the same number of vectorised chains on its own thread). A process has
    several CPU devices only when it asked for them before JAX started (``jax_num_cpu_devices``,
    as ``scalefit bayes`` does, or ``XLA_FLAGS=--xla_force_host_platform_device_count``).
    """
    import jax

    return even_split(chains, jax.local_device_count())


def unconstrain(model, args: tuple, kwargs: Mapping[str, Any], values: Mapping[str, Any]):
    """Unconstrained values of the latent sites given their constrained ``values``.

    Runs the model once with ``values`` substituted (public handlers ``seed``, ``substitute`` and
    ``trace``) and maps each latent site's value through the inverse of
    :func:`numpyro.distributions.biject_to` of its support: the transform numpyro's samplers
    use. Traceable under ``jax.jit``.
    """
    from numpyro import handlers
    from numpyro.distributions import biject_to

    run = handlers.substitute(handlers.seed(model, 0), data=dict(values))
    tr = handlers.trace(run).get_trace(*args, **kwargs)
    return {
        name: biject_to(site["fn"].support).inv(values[name])
        for name, site in tr.items()
        if site["type"] == "sample" and not site["is_observed"] and name in values
    }


def jittered_start(model, args: tuple, kwargs: Mapping[str, Any], init, key, chains: int):
    """Each chain's start: ``init`` unconstrained plus N(0, ``JITTER``); and the run's key.

    The same starts for the compiled sampler and numpyro's MCMC (so they draw the same chains).
    """
    from jax import random

    u0 = unconstrain(model, args, kwargs, init)
    names = sorted(u0)
    key_init, key_run = random.split(key)
    keys = random.split(key_init, len(names))
    start = {
        n: u0[n] + JITTER * random.normal(k, (chains,) + u0[n].shape)
        for k, n in zip(keys, names, strict=True)
    }
    return start, key_run


def nuts_program(
    model,
    *,
    chains: int,
    draws: int,
    warmup: int,
    target_accept: float,
    dense_mass: bool = True,
    devices: int = 1,
):
    """The whole NUTS run as one function of ``(key, init, x, logy)``, ready for ``jax.jit``.

    ``init`` holds the constrained starting value of every sample site. The function maps it to
    unconstrained space (:func:`unconstrain`), adds N(0, ``JITTER``) per chain, runs numpyro's
    documented functional NUTS interface (:func:`numpyro.infer.hmc.hmc`, the kernel
    :class:`numpyro.infer.NUTS` wraps, with the same settings: adapted step size and mass
    matrix, tree depth 10) for ``warmup`` adaptation steps and ``draws`` kept steps on
    ``chains`` vectorised chains, and returns the constrained draws
    (deterministic sites included), each ``(chains, draws, ...)``, and the per-draw statistics
    :data:`STAT_FIELDS`. As one program it is traced, lowered and compiled once, with no eager
    set-up operations, and can be serialised (see :func:`run_nuts`).

    With ``devices`` > 1 (a divisor of ``chains``; see :func:`chain_devices`) the chains are split
    evenly over the first ``devices`` JAX devices (``shard_map`` over the chain axis), so on CPU
    devices they sample on as many threads. Each chain gets the same key and start whatever the
    split, so the draws are the same as with one device up to rounding.
    """
    from functools import partial

    import jax
    from jax import lax, random
    from numpyro.infer.hmc import hmc
    from numpyro.infer.util import constrain_fn, potential_energy

    def program(key, init, x, logy):
        args, kwargs = (x,), {"logy": logy}
        start, key_run = jittered_start(model, args, kwargs, init, key, chains)
        names = sorted(start)
        init_kernel, sample_kernel = hmc(
            potential_fn_gen=lambda *a, **k: partial(potential_energy, model, a, k), algo="NUTS"
        )

        def step(state, _):
            state = sample_kernel(state, model_args=args, model_kwargs=kwargs)
            return state, tuple(getattr(state, f) for f in ("z",) + STAT_FIELDS)

        def chain(rng, u):
            rng, _ = random.split(rng)  # as numpyro's MCMC does before initialising a chain
            state = init_kernel(
                u,
                warmup,
                step_size=1.0,
                adapt_step_size=True,
                adapt_mass_matrix=True,
                dense_mass=[tuple(names)] if dense_mass else [],
                target_accept_prob=target_accept,
                trajectory_length=None,
                max_tree_depth=10,
                find_heuristic_step_size=False,
                regularize_mass_matrix=True,
                model_args=args,
                model_kwargs=kwargs,
                rng_key=rng,
            )
            # one loop over warm-up and kept draws (one copy of the kernel to compile); the
            # warm-up part of its output is dropped
            _, out = lax.scan(step, state, None, length=warmup + draws)
            return jax.tree.map(lambda v: v[warmup:], out)

        run = jax.vmap(chain)
        if devices > 1:
            from jax.sharding import Mesh, PartitionSpec

            mesh = Mesh(np.asarray(jax.devices()[:devices]), ("chain",))
            by_chain = PartitionSpec("chain")
            run = jax.shard_map(
                run, mesh=mesh, in_specs=by_chain, out_specs=by_chain, check_vma=False
            )
        out = run(random.split(key_run, chains), start)
        constrain = partial(constrain_fn, model, args, kwargs, return_deterministic=True)
        samples = jax.vmap(jax.vmap(constrain))(out[0])
        return samples, dict(zip(STAT_FIELDS, out[1:], strict=True))

    return program


def _placed(args: tuple, devices: int) -> tuple:
    """``args`` replicated on the first ``devices`` devices (unchanged for one device).

    A saved program split over several devices must be called where that many take part.
    """
    if devices <= 1:
        return args
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.asarray(jax.devices()[:devices]), ("chain",))
    return jax.device_put(args, NamedSharding(mesh, PartitionSpec()))


class PreparedNuts:
    """The compiled sampler of one model, built on a helper thread while the caller works on.

    Tracing, lowering and compiling the sampler needs only the shapes of its inputs, not the
    starting values, so :func:`scalefit.fit.bayes.fit_bayes` starts it before its least-squares
    start and hands it to :func:`run_nuts`. ``init_like`` holds a value of every sample site
    (any values: only the names and shapes count). Any failure leaves :meth:`result` None and
    :func:`run_nuts` builds the program itself.
    """

    def __init__(
        self,
        model,
        x,
        logy,
        init_like: Mapping[str, float],
        *,
        chains: int,
        draws: int,
        warmup: int,
        target_accept: float,
        dense_mass: bool = True,
        key: str | None = None,
        devices: int | None = None,
    ):
        import threading

        self.devices = chain_devices(chains) if devices is None else int(devices)
        self.settings = (chains, draws, warmup, target_accept, dense_mass)
        self._compiled = None
        self._thread = threading.Thread(
            target=self._build,
            args=(model, x, logy, dict(init_like), key),
            name="scalefit-nuts-compile",
            daemon=True,
        )
        self._thread.start()

    def _build(self, model, x, logy, init_like, key) -> None:
        import jax
        import jax.numpy as jnp

        from ._programs import cached_program

        try:
            # JAX's float64 switch is per thread: this thread enters it as the caller did
            with jax.enable_x64(True):
                jitted, key = _sampler_program(model, self.settings, self.devices, key)
                init_j = {k: jnp.asarray(v, dtype=float) for k, v in init_like.items()}
                args = _placed((jax.random.PRNGKey(0), init_j, x, logy), self.devices)
                spec = jax.tree.map(
                    lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), args
                )
                program = cached_program(jitted, key, spec)
                # a jitted program compiles here, ahead of its call; another callable (one that
                # compiles on its first call) is kept as it is
                lower = getattr(program, "lower", None)
                self._compiled = program if lower is None else lower(*spec).compile()
        except Exception:  # noqa: BLE001 - run_nuts builds the program on its own thread
            self._compiled = None

    def result(self):
        """The compiled program (waits for the helper thread), or None when building failed."""
        self._thread.join()
        return self._compiled


def _sampler_program(model, settings, devices: int, key: str | None):
    """The jitted sampler for ``settings`` split over ``devices``, and its cache key.

    ``settings`` is ``(chains, draws, warmup, target_accept, dense_mass)``; a program split over
    another number of devices is a different program, so the device count joins the key.
    """
    import jax

    chains, draws, warmup, target_accept, dense_mass = settings
    fn = nuts_program(
        model,
        chains=chains,
        draws=draws,
        warmup=warmup,
        target_accept=target_accept,
        dense_mass=dense_mass,
        devices=devices,
    )
    return jax.jit(fn), (None if key is None else f"{key}\ndevices={devices}")


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
    key: str | None = None,
    devices: int | None = None,
    prepared: PreparedNuts | None = None,
):
    """Run NUTS from jittered copies of ``init`` (one per chain).

    Vectorised chains without a progress bar run as one compiled program
    (:func:`nuts_program`); with a ``key`` (see :func:`program_key`) that program is serialised
    into the user's compile cache, so a later process with the same model skips tracing it.
    Other chain methods, or a progress bar, use numpyro's :class:`~numpyro.infer.MCMC`; with
    vectorised chains it draws the same chains from the same seed (equal to rounding; tested).
    The compiled program spreads the chains over ``devices`` JAX devices (default
    :func:`chain_devices`: as many as divide ``chains`` evenly), the same draws to rounding.
    ``prepared`` (a :class:`PreparedNuts` of the same model and settings) is that program
    already being compiled on a helper thread; the times then count only the wait for it.

    Returns ``(samples, stats, wall_seconds, cpu_seconds)``: constrained draws of every sample
    and deterministic site and the per-draw statistics :data:`STAT_FIELDS`, each as numpy arrays
    of shape ``(chains, draws, ...)``; the times include tracing and compilation.
    """
    import jax
    import jax.numpy as jnp

    init_j = {k: jnp.asarray(v, dtype=float) for k, v in init.items()}
    rng = jax.random.PRNGKey(seed)
    t0, c0 = time.perf_counter(), time.process_time()
    settings = (chains, draws, warmup, target_accept, dense_mass)
    if chain_method == "vectorized" and not progress:
        from ._programs import cached_program

        compiled = None
        if prepared is not None and prepared.settings == settings:
            compiled, devices = prepared.result(), prepared.devices
        devices = chain_devices(chains) if devices is None else int(devices)
        args = _placed((rng, init_j, x, logy), devices)
        if compiled is not None:
            samples, stats = compiled(*args)
        else:
            jitted, key = _sampler_program(model, settings, devices, key)
            samples, stats = cached_program(jitted, key, args)(*args)
    else:
        samples, stats = _run_mcmc(model, x, logy, init_j, rng, settings, chain_method, progress)
    samples = {k: np.asarray(v) for k, v in samples.items()}
    stats = {k: np.asarray(v) for k, v in stats.items()}
    return samples, stats, time.perf_counter() - t0, time.process_time() - c0


def _run_mcmc(model, x, logy, init, rng, settings: tuple, chain_method: str, progress: bool):
    """NUTS through numpyro's :class:`~numpyro.infer.MCMC` (any chain method, progress bar).

    ``settings`` is ``(chains, draws, warmup, target_accept, dense_mass)``.
    """
    import jax
    from numpyro.infer import MCMC, NUTS, init_to_value

    chains, draws, warmup, target_accept, dense_mass = settings
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
    init_params, key_run = jittered_start(model, (x,), {"logy": logy}, dict(init), rng, chains)
    if chains == 1:
        init_params = {k: v[0] for k, v in init_params.items()}
    with warnings.catch_warnings():
        # chain_method="parallel" on one device: numpyro falls back to sequential chains
        warnings.filterwarnings(
            "ignore", message="There are not enough devices", category=UserWarning
        )
        mcmc.run(key_run, x, logy=logy, init_params=init_params, extra_fields=STAT_FIELDS)
    samples = mcmc.get_samples(group_by_chain=True)
    stats = mcmc.get_extra_fields(group_by_chain=True)
    jax.block_until_ready((samples, stats))
    return samples, {k: stats[k] for k in STAT_FIELDS}


def pointwise(
    law: Law,
    samples: Mapping[str, Any],
    raw: Mapping[str, np.ndarray],
    logy: np.ndarray,
    likelihood: str,
    *,
    seed: int,
    residuals: str = "log",
    offset: np.ndarray | None = None,
    ar: tuple[np.ndarray, np.ndarray] | None = None,
):
    """Pointwise log likelihood and posterior-predictive log loss, each (chains, draws, rows).

    Computed in numpy from the public draws (no extra JAX compilation); ``offset`` (chains,
    draws, rows) is each row's group offset of log loss (:func:`group_offset`). With ``ar``
    (AR(1) errors, :func:`ar1_terms`) each row's log likelihood is conditional on the previous
    row of its series; the predictive draws are the marginal ones.
    """
    pub = {p.name: np.asarray(samples[p.name])[..., None] for p in law.params}
    f = np.asarray(law.evaluate(pub, raw), dtype=float)
    mu = on_scale(np, f if offset is None else f * np.exp(offset), residuals)
    sigma = np.asarray(samples["sigma"])[..., None]
    nu = None
    if likelihood == "student_t":
        nu = np.asarray(samples["nu"])[..., None] * np.ones_like(mu)
    centre, scale = mu, sigma
    if ar is not None:
        rho = np.asarray(samples["rho"])[..., None]
        centre, scale = ar1_terms(np, mu, sigma, rho, ar, np.broadcast_to(logy, mu.shape))
    ll = noise_logpdf((logy - centre) / scale, nu) - np.log(scale)
    return ll, mu + sigma * standard_noise(np.random.default_rng(seed + 1), nu, mu.shape)


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
        nu = out["nu"][:, None] * np.ones_like(mu) if likelihood == "student_t" else None
        return out, mu + out["sigma"][:, None] * standard_noise(rng, nu, mu.shape)


def inference_data(
    samples: Mapping[str, np.ndarray],
    stats: Mapping[str, np.ndarray],
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
    offset: np.ndarray | None = None,
    ar: tuple[np.ndarray, np.ndarray] | None = None,
):
    """ArviZ object with posterior, sample stats, log likelihood, posterior and prior predictive.

    ``InferenceData`` on ArviZ 0.x, ``xarray.DataTree`` on 1.x (see :mod:`._arviz`).
    ``samples`` and ``stats`` are what :func:`run_nuts` returns. Sample statistics carry ArviZ's
    names (as :func:`arviz.from_numpyro` writes them): ``diverging``, ``energy``, ``lp`` (minus
    the potential energy), ``n_steps``, ``tree_depth`` and ``acceptance_rate``.
    """
    from . import _arviz

    samples = {k: np.asarray(v) for k, v in samples.items()}
    ll, pp = pointwise(
        law, samples, raw, logy, likelihood, seed=seed, residuals=residuals, offset=offset, ar=ar
    )
    prior, prior_pp = prior_draws(
        law, specs, refs, lmin, raw, likelihood, n=n_prior, seed=seed, residuals=residuals
    )
    steps = np.asarray(stats["num_steps"])
    sample_stats = {
        "diverging": np.asarray(stats["diverging"], dtype=bool),
        "energy": np.asarray(stats["energy"]),
        "lp": -np.asarray(stats["potential_energy"]),
        "n_steps": steps,
        "tree_depth": np.log2(np.maximum(steps, 1)).astype(int) + 1,
        "acceptance_rate": np.asarray(stats["accept_prob"]),
    }
    row = {OBS: ("row",)}
    return _arviz.build(
        {
            "posterior": _arviz.dataset(samples),
            "posterior_predictive": _arviz.dataset({OBS: pp}, **row),
            "log_likelihood": _arviz.dataset({OBS: ll}, **row),
            "sample_stats": _arviz.dataset(sample_stats),
            "prior": _arviz.dataset({k: v[None] for k, v in prior.items()}),
            "prior_predictive": _arviz.dataset({OBS: prior_pp[None]}, **row),
            "observed_data": _arviz.dataset({OBS: np.asarray(logy)}, sample_dims=(), **row),
        }
    )
