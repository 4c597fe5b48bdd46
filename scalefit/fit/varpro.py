"""Variable projection: the linear block of a law solved exactly inside every evaluation.

Many laws are linear in some of their parameters: ``E + A/N**alpha + B/D**beta`` is linear in
``E``, ``A`` and ``B`` once the exponents are fixed. Under linear residuals the best linear
coefficients for given nonlinear parameters are a (weighted, robust) linear least-squares
problem, so the search only has to move the nonlinear parameters (Golub and Pereyra 1973): a
five-parameter search becomes a two-parameter one, and the valley between a coefficient and its
exponent disappears from the search.

This module

1. finds the linear block of any law from its expression (:func:`linear_block`): a set of
   parameters is linear when the expression is exactly affine in it, its second derivatives
   within the set vanishing (JAX, random points) and finite steps changing it linearly on the
   data's own rows (no law is listed by hand);
2. solves the linear block exactly for fixed nonlinear parameters: non-negative least squares
   for coefficients of a non-negative kind (by enumerating the active sets, exact for
   the few coefficients a law has), Huber and LAD by iteratively reweighted least squares;
3. runs a vectorised Levenberg–Marquardt search over the nonlinear parameters only, with the
   envelope gradient and the Kaufman-projected Gauss–Newton matrix (:class:`VarproBackend`);
4. hands the best point to the full-parameter solver of :mod:`scalefit.fit.engine`, which
   polishes and certifies it on *all* parameters, exactly as for a plain fit.

Under log residuals the problem is not separable; the same machinery, run on relative residuals
``(y - f) / y`` (the first-order expansion of ``log y - log f``), generates starting points for the
full solver.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from ..laws.base import Law
from .build import Optimum
from .engine import CHUNK as ENGINE_CHUNK
from .engine import (
    Problem,
    float64,
    jax_modules,
    law_key,
    lm_solve,
    robust_rho,
    robust_weight,
)
from .lsq import (
    BEST_ATOL_FLOORS,
    BEST_RTOL,
    POLISH_TOL,
    JaxBackend,
    few_best_warning,
    solve_many,
)

#: Most sign-constrained linear coefficients solved by enumerating active sets (2**k systems).
MAX_ENUMERATED = 10
#: Iterations of the reduced (nonlinear-parameter) Levenberg–Marquardt search per start.
REDUCED_MAX_ITER = 100
#: Most iteratively reweighted least-squares passes per evaluation of the linear block (robust
#: losses), and the relative decrease of the objective below which the passes stop.
IRLS_MAX_ITER = 30
IRLS_RTOL = 1e-12
#: Random points at which the second derivatives of the expression are checked.
CHECK_POINTS = 3
#: Relative size below which a second derivative counts as zero.
ZERO_TOL = 1e-9
#: Finite steps (multiples of ``max(|theta_j|, 1)``) along which exact affinity is checked.
AFFINE_STEPS = (1e-2, 1.0, 1e2, 1e4)
#: Departure from affinity, relative to the values compared, that counts as nonlinear.
AFFINE_RTOL = 1e-9
#: Parameter kinds sign-constrained (non-negative) in the linear solve: the coefficient kinds.
COEF_KINDS = ("coef", "positive", "floor")


@dataclass(frozen=True)
class LinearBlock:
    """The parameters of a law in which its expression is linear (jointly), and the rest.

    Attributes
    ----------
    linear : tuple of str
        Parameters that enter the expression linearly (all second derivatives within the set are
        zero), in the law's order.
    nonlinear : tuple of str
        The other parameters, in the law's order.
    nonneg : tuple of bool
        For each linear parameter, whether it is of a coefficient kind (``coef``, ``positive``,
        ``floor``: non-negative by construction); those are solved by non-negative least
        squares. A declared range of another kind is judged after the fit, as for any method.
    """

    linear: tuple[str, ...]
    nonlinear: tuple[str, ...]
    nonneg: tuple[bool, ...]

    @property
    def usable(self) -> bool:
        """True when there is a linear block and at least one nonlinear parameter to search."""
        return bool(self.linear) and bool(self.nonlinear)


def _sample_public(law: Law, rng: np.random.Generator) -> np.ndarray:
    """A random public parameter vector inside each parameter's start range."""
    out = np.empty(len(law.params))
    for i, p in enumerate(law.params):
        if p.kind in ("coef", "floor"):
            out[i] = rng.uniform(0.5, 2.0)
        elif p.kind == "positive":
            lo, hi = p.start
            out[i] = np.exp(rng.uniform(np.log(lo), np.log(hi)))
        else:
            lo, hi = p.start
            out[i] = rng.uniform(lo, hi)
    return out


_SCREENS: dict[str, np.ndarray] = {}
_BLOCKS: dict[tuple, LinearBlock] = {}
#: Most linear blocks kept (per law and rows); the cache is emptied beyond.
MAX_BLOCKS = 256


def _screen(law: Law) -> np.ndarray:
    """``(P, P)`` booleans: which second derivatives of the expression vanish (JAX, float64).

    Checked at :data:`CHECK_POINTS` random points (inputs log-uniform in [2, 1e4], parameters
    inside their start ranges); cached per law. Necessary for linearity, not sufficient: a
    parameter entering through ``max``, ``abs`` or ``where`` has zero second derivatives almost
    everywhere (:func:`_affine` decides).
    """
    key = law_key(law)
    if key in _SCREENS:
        return _SCREENS[key]
    jax, jnp = jax_modules()
    names = law.param_names
    n_par = len(names)
    rng = np.random.default_rng(20260327)
    hess = np.zeros((n_par, n_par))

    def f(t, x):
        return law.expr(jnp, {n: t[i] for i, n in enumerate(names)}, x)

    # one compiled program for the value and the Hessian (rows, P, P) at every check point
    both = jax.jit(lambda t, x: (f(t, x), jax.jacfwd(jax.jacrev(f))(t, x)))
    with float64():
        for _ in range(CHECK_POINTS):
            x = law.variables(jnp, _random_inputs(law, rng))
            theta = _sample_public(law, rng)
            val, h = (np.asarray(a) for a in both(jnp.asarray(theta), x))
            scale = np.maximum(np.abs(theta), 1.0)
            hn = np.abs(h) * scale[None, :, None] * scale[None, None, :]
            size = 1.0 + np.abs(val)[:, None, None]
            bad = ~np.isfinite(hn) | ~np.isfinite(size)
            rel = np.where(bad, np.inf, hn / np.where(bad, 1.0, size))
            hess = np.maximum(hess, rel.max(axis=0))
    _SCREENS[key] = hess <= ZERO_TOL
    return _SCREENS[key]


def _random_inputs(law: Law, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {k: np.exp(rng.uniform(np.log(2.0), np.log(1e4), 8)) for k in law.inputs}


def _affine(law: Law, idx: list[int], raw: dict, rng: np.random.Generator) -> bool:
    """Whether the expression is exactly affine in the parameters ``idx`` on the rows ``raw``.

    At :data:`CHECK_POINTS` random parameter vectors ``theta`` and along the last parameter's
    axis and a random direction ``d`` within ``idx`` (scaled by ``max(|theta_j|, 1)``):
    ``f(theta + t d) - f(theta) - t (f(theta + d) - f(theta - d)) / 2`` vanishes (relative
    :data:`AFFINE_RTOL`) for every ``t`` in ``+-AFFINE_STEPS``. Finite steps over the rows'
    own inputs see the kink of a ``max``, ``abs`` or ``where`` that a second derivative misses;
    a non-finite value counts as not affine.
    """
    names = law.param_names
    x = law.variables(np, raw)

    def f(theta: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            out = law.expr(np, dict(zip(names, theta, strict=True)), x)
        return np.broadcast_to(np.asarray(out, dtype=float), len(next(iter(raw.values()))))

    steps = np.concatenate([AFFINE_STEPS, -np.asarray(AFFINE_STEPS)])
    for _ in range(CHECK_POINTS):
        theta = _sample_public(law, rng)
        axis, mixed = np.zeros(len(names)), np.zeros(len(names))
        axis[idx[-1]] = 1.0
        mixed[idx] = rng.uniform(0.5, 1.5, len(idx)) * rng.choice([-1.0, 1.0], len(idx))
        for d in (axis, mixed):
            d = d * np.maximum(np.abs(theta), 1.0)
            f0 = f(theta)
            slope = (f(theta + d) - f(theta - d)) / 2.0
            for t in steps:
                ft = f(theta + t * d)
                gap = np.abs(ft - f0 - t * slope)
                size = np.abs(ft) + np.abs(f0) + np.abs(t * slope)
                if not np.all(np.isfinite(gap) & (gap <= AFFINE_RTOL * size)):
                    return False
    return True


def _detect(law: Law, raw: dict | None) -> LinearBlock:
    names = law.param_names
    zero = _screen(law)
    rng = np.random.default_rng(20260328)
    rows = raw if raw is not None else _random_inputs(law, rng)
    chosen: list[int] = []
    for j in range(len(names)):
        candidate = zero[j, j] and all(zero[i, j] for i in chosen)
        if candidate and _affine(law, [*chosen, j], rows, rng):
            chosen.append(j)
    linear = tuple(names[j] for j in chosen)
    nonneg = tuple(law.params[j].kind in COEF_KINDS for j in chosen)
    nonlinear = tuple(n for n in names if n not in linear)
    return LinearBlock(linear, nonlinear, nonneg)


def linear_block(law: Law, inputs: Mapping[str, np.ndarray] | None = None) -> LinearBlock:
    """The linear block of ``law``, detected from its expression.

    A set of parameters is linear when the expression is exactly affine in it: every second
    derivative within the set vanishes (JAX, float64, at :data:`CHECK_POINTS` random points:
    inputs log-uniform in [2, 1e4], parameters inside their start ranges), *and* finite steps
    over many scales change the expression exactly linearly on ``inputs`` (the data's own rows;
    default the random inputs), so a parameter entering through ``max``, ``abs`` or ``where``
    (linear between kinks, not across them) is not taken for a coefficient. Parameters are
    added greedily in the law's order, so the set is maximal (a product ``A * B`` keeps only
    ``A``). A non-finite value counts as nonlinear. Only coefficient kinds (``coef``,
    ``positive``, ``floor``) are sign-constrained in the linear solve.

    Parameters
    ----------
    law : Law
        Any law (catalogue, formula or user-written).
    inputs : mapping, optional
        ``input name -> values``: the rows the law will be fitted on.

    Returns
    -------
    LinearBlock

    Examples
    --------
    >>> from scalefit.laws import get_law
    >>> linear_block(get_law("chinchilla")).linear
    ('E', 'A', 'B')
    """
    raw = None if inputs is None else {k: np.asarray(inputs[k], dtype=float) for k in law.inputs}
    digest = None
    if raw is not None:
        digest = hashlib.sha256(b"".join(raw[k].tobytes() for k in law.inputs)).hexdigest()
    key = (law_key(law), digest)
    if key not in _BLOCKS:
        if len(_BLOCKS) >= MAX_BLOCKS:  # every bootstrap resample has its own rows
            _BLOCKS.clear()
        _BLOCKS[key] = _detect(law, raw)
    return _BLOCKS[key]


# ------------------------------------------------------------------------------ compiled program
_CACHE: dict[tuple, object] = {}


def _subsets(nonneg: tuple[bool, ...]) -> np.ndarray:
    """Support masks to enumerate: every subset of the sign-constrained coefficients."""
    k = len(nonneg)
    idx = [i for i in range(k) if nonneg[i]]
    masks = []
    for code in range(2 ** len(idx)):
        m = np.ones(k, dtype=bool)
        for b, i in enumerate(idx):
            m[i] = bool((code >> b) & 1)
        masks.append(m)
    return np.asarray(masks)


class _Reduced:
    """The reduced problem of a law with a linear block, for one start (traced under ``vmap``).

    For nonlinear parameters ``znl`` (internal coordinates) the expression is affine in the
    linear coefficients ``c``: ``f = phi0 + Phi c``. Residuals are ``ys - s f`` (``s`` the row
    scale: ones, or ``1 / y`` for relative residuals).
    """

    def __init__(self, law: Law, block: LinearBlock, loss: str, delta: float):
        self.jax, self.jnp = jax_modules()
        self.law, self.block, self.loss = law, block, loss
        names = law.param_names
        self.nl_idx = [names.index(n) for n in block.nonlinear]
        self.k = len(block.linear)
        self.masks = _subsets(block.nonneg).astype(np.float64)  # (S, k), made jnp when traced
        self.nonneg = np.asarray(block.nonneg)
        self.rho, _, _ = robust_rho(self.jnp, loss, delta)
        self.weight = robust_weight(self.jnp, loss, delta)

    def model(self, znl, c, x, refs):
        """The law's expression at nonlinear parameters ``znl`` and linear coefficients ``c``."""
        jnp, law = self.jnp, self.law
        z = jnp.zeros(len(law.params), dtype=znl.dtype).at[jnp.asarray(self.nl_idx)].set(znl)
        pub = law.to_public(z, refs, xp=jnp)
        p = {n: pub[n] for n in self.block.nonlinear}
        p.update({n: c[i] for i, n in enumerate(self.block.linear)})
        return law.expr(jnp, p, x)

    def basis(self, znl, x, refs):
        """``(phi0, Phi)``: the affine map in ``c`` (exact, the block is linear)."""
        zero = self.jnp.zeros(self.k, dtype=znl.dtype)
        phi0 = self.model(znl, zero, x, refs)
        phi = self.jax.jacfwd(self.model, argnums=1)(znl, zero, x, refs)  # (rows, k)
        return phi0, phi

    def wnnls(self, phi, t, u):
        """argmin_c sum u (t - phi c)^2 subject to c_i >= 0 where constrained (exact)."""
        jnp = self.jnp
        g = phi.T @ (u[:, None] * phi)
        b = phi.T @ (u * t)
        dg = jnp.sqrt(jnp.maximum(jnp.diag(g), 1e-300))
        gs = g / (dg[:, None] * dg[None, :])
        bs = b / dg
        eye = jnp.eye(self.k)
        nonneg = jnp.asarray(self.nonneg)

        def one(m):
            a = gs * (m[:, None] * m[None, :]) + eye * (1.0 - m)[None, :] + 1e-13 * eye
            cs = jnp.linalg.solve(a, bs * m) * m
            val = cs @ (gs @ cs) - 2.0 * (bs @ cs)
            feasible = jnp.all((cs >= 0.0) | ~nonneg | (m == 0))
            return cs / dg, jnp.where(feasible & jnp.isfinite(val), val, jnp.inf)

        masks = jnp.asarray(self.masks)
        cs, vals = self.jax.vmap(one)(masks)
        best = jnp.argmin(vals)
        return cs[best], masks[best]

    def linear_solve(self, znl, c0, w, x, s, ys, refs):
        """The linear block for fixed nonlinear parameters (IRLS from ``c0`` for robust losses)."""
        jnp = self.jnp
        phi0, phi = self.basis(znl, x, refs)
        t = ys - s * phi0
        phis = s[:, None] * phi
        if self.loss == "mse":
            c, m = self.wnnls(phis, t, w)
            return c, m, phi0, phi
        # IRLS from the coefficients of the last accepted point, to convergence (majorise-minimise:
        # no pass raises the robust objective)

        def body(state):
            c, _, f_old, it, _ = state
            c_new, m = self.wnnls(phis, t, w * self.weight(t - phis @ c))
            f_new = jnp.sum(w * self.rho(t - phis @ c_new))
            return c_new, m, f_new, it + 1, f_old - f_new

        def cond(state):
            _, _, f, it, change = state
            return (it < IRLS_MAX_ITER) & (change > IRLS_RTOL * f)

        f0 = jnp.sum(w * self.rho(t - phis @ c0))
        init = (c0, jnp.ones(self.k, dtype=c0.dtype), f0, 0, jnp.inf)
        c, m, _, _, _ = self.jax.lax.while_loop(cond, body, init)
        return c, m, phi0, phi

    def evaluate(self, znl, c0, w, x, s, ys, refs):
        """Objective, envelope gradient, Kaufman Gauss–Newton matrix and the coefficients."""
        jnp, k = self.jnp, self.k
        c, m, phi0, phi = self.linear_solve(znl, c0, w, x, s, ys, refs)
        c = self.jax.lax.stop_gradient(c)
        r = ys - s * (phi0 + phi @ c)
        f = jnp.sum(w * self.rho(r))
        # Jacobian of the residual in the nonlinear parameters at fixed c (envelope gradient)
        jac = -s[:, None] * self.jax.jacfwd(self.model)(znl, c, x, refs)  # (rows, q)
        u = w * self.weight(r)
        grad = jac.T @ (u * r)
        # Kaufman: project the columns of the active linear basis out of the Jacobian
        pm = s[:, None] * phi * m[None, :]
        gpp = pm.T @ (u[:, None] * pm) + jnp.diag(1.0 - m) + 1e-13 * jnp.eye(k)
        coef = jnp.linalg.solve(gpp, pm.T @ (u[:, None] * jac))
        jr = jac - pm @ coef
        h = jr.T @ (u[:, None] * jr)
        return jnp.where(jnp.isfinite(f), f, jnp.inf), grad, h, c


def _build(law: Law, block: LinearBlock, loss: str, delta: float):
    """The vmapped reduced solver for (law, loss, delta), compiled once per shapes.

    The damped Gauss–Newton loop is the engine's (:func:`~scalefit.fit.engine.lm_solve`), with
    the linear coefficients carried along with each accepted point.
    """
    key = (law_key(law), block, loss, float(delta))
    if key in _CACHE:
        return _CACHE[key]
    jax, jnp = jax_modules()
    reduced = _Reduced(law, block, loss, delta)

    def solve_one(z0, max_iter, w, x, s, ys, refs, tol, atol):
        def evaluate(z, c):
            return reduced.evaluate(z, c, w, x, s, ys, refs)

        lam0, nu0 = jnp.asarray(1e-3), jnp.asarray(2.0)
        c0 = jnp.zeros(reduced.k, dtype=z0.dtype)
        z, c, f, _, _, it, _, dec = lm_solve(evaluate, z0, c0, lam0, nu0, max_iter, tol, atol)
        return {"z": z, "c": c, "objective": f, "iterations": it, "decrement": dec}

    solver = jax.jit(
        jax.vmap(solve_one, in_axes=(0, None, None, None, None, None, None, None, None))
    )
    _CACHE[key] = solver
    return solver


#: Starts per compiled call: a vectorised loop runs until its slowest start stops, so starts are
#: solved in chunks (one compiled shape) rather than all in one batch.
CHUNK = 32


def reduced_solve(
    problem: Problem,
    z0: np.ndarray,
    *,
    block: LinearBlock | None = None,
    relative: bool | None = None,
    max_iter: int = REDUCED_MAX_ITER,
    tol: float = 1e-10,
) -> dict[str, np.ndarray]:
    """Search the nonlinear parameters with the linear block solved exactly, from every start.

    Parameters
    ----------
    problem : Problem
        The engine problem (law, inputs, response, loss, row weights).
    z0 : ndarray, shape (m, P)
        Starts in internal coordinates; only their nonlinear entries are used.
    block : LinearBlock, optional
        Default :func:`linear_block` of the problem's law on its rows.
    relative : bool, optional
        Take residuals ``(y - f) / y`` (the linearised log residual). Default: true under log
        residuals, false under linear ones.
    max_iter, tol : int, float
        Iteration budget and relative Newton-decrement tolerance of the reduced search.

    Returns
    -------
    dict
        ``z`` (m, P) full internal coordinates (linear coefficients mapped back; a coefficient
        of a log-space kind that sits at zero is floored at a tiny positive value), ``values``
        (m, P) public values, ``objective`` (m,) of the reduced problem, ``iterations`` (m,).
    """
    law = problem.law
    block = block or linear_block(law, problem.inputs)
    if not block.usable:
        raise ValueError(f"law {law.name!r} has no linear block with nonlinear parameters.")
    if sum(block.nonneg) > MAX_ENUMERATED:
        raise ValueError(
            f"law {law.name!r} has {sum(block.nonneg)} sign-constrained linear coefficients; "
            f"variable projection enumerates at most {MAX_ENUMERATED}."
        )
    if relative is None:
        relative = problem.residuals == "log"
    names = law.param_names
    nl_idx = [names.index(n) for n in block.nonlinear]
    z0 = np.atleast_2d(np.asarray(z0, dtype=float))
    m = len(z0)
    size = -(-m // CHUNK) * CHUNK
    zn = np.zeros((size, len(nl_idx)))
    zn[:m] = z0[:, nl_idx]
    zn[m:] = z0[:1, nl_idx]
    n, npad = problem.n, problem.n_padded
    w = np.zeros(npad)
    w[:n] = 1.0 if problem.weights is None else problem.weights
    y = np.concatenate([problem._y, np.repeat(problem._y[-1:], npad - n)])
    s = 1.0 / np.abs(y) if relative else np.ones(npad)
    ys = s * y
    eps = float(np.finfo(float).eps)
    atol = max(n * (8.0 * eps * float(np.max(np.abs(ys[:n])))) ** 2, 1e-300)
    solver = _build(law, block, problem.loss, problem.delta)
    args = (
        np.int64(max_iter),
        w,
        problem._x,
        s,
        ys,
        problem._refs,
        np.float64(tol),
        np.float64(atol),
    )
    with float64():
        parts = [solver(zn[i : i + CHUNK], *args) for i in range(0, size, CHUNK)]
        parts = [{k: np.asarray(v) for k, v in part.items()} for part in parts]
    out = {k: np.concatenate([p[k] for p in parts])[:m] for k in parts[0]}
    return _assemble(law, block, problem.refs, z0, out)


def _assemble(law, block, refs, z0, out) -> dict[str, np.ndarray]:
    names = law.param_names
    nl_idx = [names.index(n) for n in block.nonlinear]
    m = len(z0)
    zfull = z0.copy()
    values = np.empty_like(zfull)
    for i in range(m):
        zi = z0[i].copy()
        zi[nl_idx] = out["z"][i]
        pub = law.to_public(zi, refs)
        vals = {n: float(pub[n]) for n in block.nonlinear}
        cmax = float(np.max(np.abs(out["c"][i]))) if len(out["c"][i]) else 1.0
        for j, nme in enumerate(block.linear):
            c = float(out["c"][i][j])
            if law.param(nme).kind in COEF_KINDS:
                c = max(c, 1e-12 * max(cmax, 1e-300))
            vals[nme] = c
        values[i] = [vals[n] for n in names]
        with np.errstate(all="ignore"):
            zfull[i] = law.to_internal(vals, refs)
    return {
        "z": zfull,
        "values": values,
        "objective": out["objective"],
        "iterations": out["iterations"],
    }


@dataclass(frozen=True)
class VarproBackend:
    """Least squares by variable projection, certified by the full-parameter solver.

    Under linear residuals, for a law with a linear block (:func:`linear_block`): every start's
    nonlinear parameters are searched with the linear block solved exactly
    (:func:`reduced_solve`); the best point is then polished on all parameters by the JAX
    Levenberg–Marquardt engine to :data:`~scalefit.fit.lsq.POLISH_TOL`, whose convergence test
    is the certificate reported, as for ``method="jax"``. Under log residuals, the reduced
    solutions on relative residuals are the starts of a plain multi-start fit. A law without a
    linear block (or with more than :data:`MAX_ENUMERATED` sign-constrained coefficients), and a
    table large enough to be screened on a row subsample, are fitted as by
    :class:`~scalefit.fit.lsq.JaxBackend`. ``diagnostics["varpro_stage"]`` says which path ran.
    """

    name: str = "varpro"
    progress: bool | None = None

    def minimize(self, problem: Problem, z0: np.ndarray) -> Optimum:
        """Minimise the problem's objective from the starts ``z0`` (n_starts, n_params)."""
        law = problem.law
        block = linear_block(law, problem.inputs)
        full = JaxBackend(progress=self.progress)
        if not block.usable or sum(block.nonneg) > MAX_ENUMERATED or problem.screening():
            opt = full.minimize(problem, z0)
            return _relabel(opt, block, "full solve (no linear block to project)")
        red = reduced_solve(problem, z0, block=block)
        finite = np.isfinite(red["objective"]) & np.all(np.isfinite(red["z"]), axis=1)
        if problem.residuals == "log" or not finite.any():
            starts = np.where(finite[:, None], red["z"], z0)
            opt = full.minimize(problem, starts)
            return _relabel(opt, block, "reduced solutions as starts of the full solve")
        obj = np.where(finite, red["objective"], np.inf)
        best = int(np.argmin(obj))
        fbest = float(obj[best])
        at_best = obj <= fbest * (1 + BEST_RTOL) + BEST_ATOL_FLOORS * problem.atol
        n_best = int(np.sum(at_best))
        # the full-parameter certificate, as for method="jax": the batch test (1e-12) on all
        # parameters, then the polish to POLISH_TOL
        zc, fc, cc, ic = solve_many(problem, red["z"][best][None, :])
        zp, fp, cp, ip = solve_many(problem, zc, tol=POLISH_TOL)
        if not (np.isfinite(fp[0]) and fp[0] <= fc[0]):
            zp, fp, cp, ip = zc, fc, np.zeros(1, dtype=bool), np.zeros(1, dtype=int)
        cp = cp | cc
        ip = ip + ic
        if not np.isfinite(fp[0]):
            opt = full.minimize(problem, z0)
            return _relabel(opt, block, "full solve (the reduced optimum did not polish)")
        z_all = red["z"].copy()
        obj_all = obj.copy()
        z_all[best], obj_all[best] = zp[0], fp[0]
        return Optimum(
            z=zp[0],
            objective=float(fp[0]),
            solver_converged=bool(cp[0]),
            method="varpro",
            diagnostics={
                "n_starts": int(len(z0)),
                "n_best": n_best,
                "n_converged": int(np.sum(finite)),
                "max_iterations": int(np.max(red["iterations"])),
                "polish_iterations": int(ip[0]),
                "screened_on_rows": None,
                "varpro_linear": list(block.linear),
                "varpro_stage": "reduced search, polished on all parameters",
            },
            warnings=few_best_warning(n_best, len(z0)),
            extras={"z_all": z_all, "obj_all": obj_all},
        )


def _relabel(opt: Optimum, block: LinearBlock, stage: str) -> Optimum:
    diag = {**opt.diagnostics, "varpro_linear": list(block.linear), "varpro_stage": stage}
    return replace(opt, method="varpro", diagnostics=diag)


# ------------------------------------------------------------------ grid over the nonlinear block
#: Grid cells over the nonlinear parameters (points per axis: this total to the power 1/q).
GRID_CELLS = 324
#: Most numbers held by one block of grid cells' basis (cells x rows x linear coefficients).
GRID_BLOCK = 1 << 21
#: Iteratively reweighted passes per grid cell (robust losses); the ranking needs no more.
GRID_IRLS = 8
#: Best distinct grid cells handed to the full-parameter solver as starts.
GRID_KEEP = 8


def _grid_axis(param, y: np.ndarray, points: int) -> np.ndarray | None:
    """Grid values of one nonlinear parameter over its start range (None: no finite range).

    A ``free`` parameter's default start range says nothing about where it lies: it is gridded
    over its declared bounds when both are finite, else not at all.
    """
    lmin, lmean = float(np.min(y)), float(np.mean(y))
    if param.kind == "coef":
        lo, hi, log = 0.01 * lmean, lmean, True
    elif param.kind == "floor":
        lo, hi, log = 0.05 * lmin, 0.995 * lmin, True
    elif param.kind == "free":  # its start range is a default, not knowledge: its bounds or none
        (lo, hi), log = param.bounds, False
    elif param.start is not None:
        (lo, hi), log = param.start, param.kind == "positive"
    else:
        return None
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo and (lo > 0 or not log)):
        return None
    # cell centres: a bound such as an exponent of 0 is approached, not sat on
    u = (np.arange(points) + 0.5) / points
    return np.exp(np.log(lo) + u * np.log(hi / lo)) if log else lo + u * (hi - lo)


def _nnls_batch(g: np.ndarray, b: np.ndarray, nonneg: np.ndarray) -> np.ndarray:
    """``argmin c^T g c - 2 b^T c`` with ``c_i >= 0`` where ``nonneg``, for a batch (exact).

    ``g`` (G, k, k) symmetric positive semi-definite, ``b`` (G, k). The unconstrained solution
    where it is feasible; elsewhere every support of the constrained coefficients is solved
    and the best feasible one kept (few coefficients, so the enumeration is cheap).
    """
    k = g.shape[-1]
    dg = np.sqrt(np.maximum(np.einsum("gii->gi", g), 1e-300))
    gs = g / (dg[:, :, None] * dg[:, None, :]) + 1e-13 * np.eye(k)
    bs = b / dg
    with np.errstate(all="ignore"):
        cs = np.linalg.solve(gs, bs[..., None])[..., 0]
    bad = ~np.all((cs >= 0.0) | ~nonneg, axis=1) | ~np.all(np.isfinite(cs), axis=1)
    if bad.any():
        masks = _subsets(tuple(bool(v) for v in nonneg)).astype(float)  # (S, k)
        gb, bb = gs[bad][:, None], bs[bad][:, None]  # (B, 1, k, k), (B, 1, k)
        mm = masks[:, :, None] * masks[:, None, :]
        a = gb * mm + np.eye(k) * (1.0 - masks)[:, None, :]
        with np.errstate(all="ignore"):
            c = np.linalg.solve(a, (bb * masks)[..., None])[..., 0] * masks  # (B, S, k)
            val = np.einsum("bsi,bsij,bsj->bs", c, np.broadcast_to(gb, a.shape), c)
            val = val - 2.0 * np.einsum("bsi,bsi->bs", np.broadcast_to(bb, c.shape), c)
        ok = np.all((c >= 0.0) | ~nonneg | (masks == 0), axis=2) & np.isfinite(val)
        best = np.argmin(np.where(ok, val, np.inf), axis=1)
        cs[bad] = c[np.arange(len(best)), best]
    return cs / dg


def _grid_block(law, block, theta, x, ys, s, w, rho, weight):
    """Objectives and linear coefficients of the grid cells ``theta`` (G, q): exact inner solves."""
    names = block.nonlinear
    k = len(block.linear)
    p = {n: theta[:, i, None] for i, n in enumerate(names)}
    zero = dict.fromkeys(block.linear, 0.0)
    n = len(ys)
    with np.errstate(all="ignore"):
        phi0 = np.broadcast_to(law.expr(np, {**p, **zero}, x), (len(theta), n))
        phi = np.stack(
            [
                np.broadcast_to(law.expr(np, {**p, **zero, nm: 1.0}, x), phi0.shape) - phi0
                for nm in block.linear
            ],
            axis=-1,
        )  # (G, n, k)
    t = ys - s * phi0
    phis = s[:, None] * phi
    nonneg = np.asarray(block.nonneg)
    # products of basis columns, fixed across the reweighted passes: (G, k(k+1)/2, n)
    iu = np.triu_indices(k)
    phit = np.ascontiguousarray(phis.transpose(0, 2, 1))  # (G, k, n)
    pairs = phit[:, iu[0]] * phit[:, iu[1]]
    pt = phit * t[:, None, :]
    u = np.broadcast_to(w, t.shape)
    for _ in range(1 if weight is None else GRID_IRLS):
        g = np.empty((len(theta), k, k))
        g[:, iu[0], iu[1]] = g[:, iu[1], iu[0]] = np.matmul(pairs, u[:, :, None])[..., 0]
        c = _nnls_batch(g, np.matmul(pt, u[:, :, None])[..., 0], nonneg)
        r = t - np.matmul(c[:, None, :], phit)[:, 0]
        if weight is None:
            break
        u = w * weight(r)
    f = np.sum(w * rho(r), axis=1)
    ok = np.isfinite(f) & np.all(np.isfinite(c), axis=1)
    return np.where(ok, f, np.inf), c


def grid_starts(
    problem: Problem, block: LinearBlock | None = None, keep: int = GRID_KEEP
) -> np.ndarray | None:
    """The best cells of a grid over the nonlinear parameters, as full-parameter starts.

    Every cell fixes the nonlinear parameters (points per axis ``GRID_CELLS ** (1/q)`` over each
    parameter's start range) and solves the linear block exactly in numpy: non-negative least
    squares by active sets for mean squares, a few iteratively reweighted passes of it for Huber
    and LAD, on linear residuals (relative residuals ``(y - f) / y`` under log residuals). The
    ``keep`` best cells, at most one per cell neighbourhood, are returned in internal
    coordinates. None when a nonlinear parameter has no finite range to grid, when there are too
    many of them (more than ``4 * GRID_CELLS`` cells at three points per axis), or when the
    law's expression does not broadcast over a batch of parameter values.
    """
    law, y = problem.law, problem._y
    block = block or linear_block(law, problem.inputs)
    q = len(block.nonlinear)
    points = max(int(GRID_CELLS ** (1.0 / q)), 3)
    if points**q > 4 * GRID_CELLS:  # too many nonlinear parameters for a grid
        return None
    axes = [_grid_axis(law.param(nm), y, points) for nm in block.nonlinear]
    if any(a is None for a in axes):
        return None
    theta = np.stack([a.ravel() for a in np.meshgrid(*axes, indexing="ij")], axis=1)
    x = law.variables(np, problem.inputs)
    s = 1.0 / np.abs(y) if problem.residuals == "log" else np.ones_like(y)
    w = np.ones_like(y) if problem.weights is None else problem.weights
    rho = robust_rho(np, problem.loss, problem.delta)[0]
    weight = None if problem.loss == "mse" else robust_weight(np, problem.loss, problem.delta)
    step = max(GRID_BLOCK // (len(y) * len(block.linear)), 1)
    try:
        parts = [
            _grid_block(law, block, theta[i : i + step], x, s * y, s, w, rho, weight)
            for i in range(0, len(theta), step)
        ]
    except ValueError:  # an expression that does not broadcast over a batch of parameters
        return None
    f = np.concatenate([p[0] for p in parts])
    c = np.concatenate([p[1] for p in parts])
    # the best cells, skipping any next to one already kept (one start per basin of the grid)
    idx = np.stack(np.unravel_index(np.arange(len(theta)), (points,) * q), axis=1)
    chosen: list[int] = []
    for i in np.argsort(f):
        if not np.isfinite(f[i]) or len(chosen) >= keep:
            break
        if all(np.max(np.abs(idx[i] - idx[j])) > 1 for j in chosen):
            chosen.append(int(i))
    if not chosen:
        return None
    out = {"z": theta[chosen], "c": c[chosen], "objective": f[chosen], "iterations": None}
    z0 = np.zeros((len(chosen), len(law.params)))
    names = law.param_names
    nl = [names.index(nm) for nm in block.nonlinear]
    for i, row in enumerate(theta[chosen]):  # internal nonlinear entries from public values
        vals = {nm: 1.0 for nm in names} | dict(zip(block.nonlinear, row, strict=True))
        z0[i, nl] = law.to_internal(vals, problem.refs)[nl]
    out["z"] = z0[:, nl]
    return _assemble(law, block, problem.refs, z0, out)["z"]


@dataclass(frozen=True)
class GridBackend:
    """The default least squares: a grid over the nonlinear parameters, then the full solver.

    For a law with a linear block (:func:`linear_block`), the best cells of a grid over the
    nonlinear parameters with the linear block solved exactly (:func:`grid_starts`) and the
    first of the given starts (``x0``, the law's start points, then random ones), one compiled
    chunk of :data:`~scalefit.fit.engine.CHUNK` in all, are solved on all parameters by
    :class:`~scalefit.fit.lsq.JaxBackend`, whose polish and convergence test certify the result
    as for any fit. The other given starts are solved too unless at least half of those in the
    chunk reached its best point (:func:`_agreeing`: the basin the starts fall into most).
    Fewer given starts than the grid keeps, other laws, and tables screened on a row subsample
    go to
    :class:`~scalefit.fit.lsq.JaxBackend` with the given starts only.
    ``diagnostics["grid_stage"]`` says which path ran.
    """

    name: str = "jax"
    progress: bool | None = None

    def minimize(self, problem: Problem, z0: np.ndarray) -> Optimum:
        """Minimise the problem's objective from the grid's cells and the starts ``z0``."""
        full = JaxBackend(progress=self.progress)
        z0 = np.asarray(z0, dtype=float)
        block = linear_block(problem.law, problem.inputs)
        cells = None
        if len(z0) > GRID_KEEP and block.usable and sum(block.nonneg) <= MAX_ENUMERATED:
            cells = None if problem.screening() else grid_starts(problem, block)
        if cells is None:
            return _staged(full.minimize(problem, z0), "given starts only (no grid)")
        head = z0[: max(ENGINE_CHUNK - len(cells), 1)]
        opt = full.minimize(problem, np.concatenate([cells, head]))
        if len(head) == len(z0) or 2 * _agreeing(problem, opt, len(cells)) >= len(head):
            return _staged(opt, f"grid cells and the first {len(head)} starts")
        opt = full.minimize(problem, np.concatenate([cells, z0]))
        return _staged(opt, "grid cells and every start")


#: Relative difference of every public parameter within which a start reached the best point
#: (a batch start stops at 1e-12 and the best is polished further: an ill-determined pair such
#: as Gemstones' c_tokens and a_tokens still differs by 2e-4 there; a plateau by far more).
AGREE_RTOL = 1e-2


def _agreeing(problem: Problem, opt: Optimum, skip: int) -> int:
    """How many starts after the first ``skip`` reached the best objective *at the best point*.

    A start on a plateau (a coefficient run to zero, an exponent run off) can tie the best
    objective far from its parameters; only starts whose every public parameter is within
    :data:`AGREE_RTOL` of the best point's (or within 1e-12 of it, for one at zero) count.
    """
    law, refs = problem.law, problem.refs
    obj, z = opt.extras["obj_all"][skip:], opt.extras["z_all"][skip:]
    fbest = opt.objective * (1 + BEST_RTOL) + BEST_ATOL_FLOORS * problem.atol

    def public(zi):
        pub = law.to_public(zi, refs)
        return np.array([float(pub[n]) for n in law.param_names])

    best = public(opt.z)
    with np.errstate(all="ignore"):
        close = [
            np.all(np.abs(public(zi) - best) <= AGREE_RTOL * np.abs(best) + 1e-12)
            for zi in z[obj <= fbest]
        ]
    return int(np.sum(close))


def _staged(opt: Optimum, stage: str) -> Optimum:
    return replace(opt, diagnostics={**opt.diagnostics, "grid_stage": stage})
