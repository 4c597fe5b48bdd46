"""Variable projection: the linear block of a law solved exactly for fixed nonlinear parameters.

Many laws are linear in some of their parameters: ``E + A/N**alpha + B/D**beta`` is linear in
``E``, ``A`` and ``B`` once the exponents are fixed. The best linear coefficients for given
nonlinear parameters are then a (weighted, robust) linear least-squares problem (Golub and
Pereyra 1973), solved exactly, so only the nonlinear parameters need searching.

This module

1. finds the linear block of any law from its expression (:func:`linear_block`): a set of
   parameters is linear when the expression is exactly affine in it, finite steps along the
   parameters and random directions within the set changing it linearly on the data's own
   rows (no law is listed by hand);
2. solves the linear block exactly for a batch of fixed nonlinear parameters, in numpy:
   non-negative least squares for coefficients of a non-negative kind (by enumerating the
   active sets, exact for the few coefficients a law has), Huber and LAD by iteratively
   reweighted passes of it (:func:`_inner`);
3. turns those solves into starting points of the full-parameter solver of
   :mod:`scalefit.fit.engine`, which polishes and certifies the best on *all* parameters exactly
   as for a plain fit: the best cells of a grid over the nonlinear parameters (the default,
   :class:`GridBackend`), or every given start projected (``method="varpro"``,
   :class:`VarproBackend`).

Under log residuals the problem is not separable; the same solves on relative residuals
``(y - f) / y`` (the first-order expansion of ``log y - log f``) give the starting points.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from ..laws.base import Law, sample_starts
from .build import Optimum
from .engine import CHUNK as ENGINE_CHUNK
from .engine import SCREEN_ABOVE, Problem, law_key, robust_rho
from .lsq import BEST_ATOL_FLOORS, BEST_RTOL, JaxBackend

#: Most sign-constrained linear coefficients solved by enumerating active sets (2**k systems).
MAX_ENUMERATED = 10
#: Random parameter vectors at which the affinity of the expression is checked.
CHECK_POINTS = 3
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
        """True for a linear block and a nonlinear parameter, at most :data:`MAX_ENUMERATED` signed.

        A block with more sign-constrained coefficients than that is not enumerated.
        """
        return bool(self.linear) and bool(self.nonlinear) and sum(self.nonneg) <= MAX_ENUMERATED


_BLOCKS: dict[tuple, LinearBlock] = {}
#: Most linear blocks kept (per law and rows); the cache is emptied beyond.
MAX_BLOCKS = 256


def _affine(law: Law, idx: list[int], raw: dict, rng: np.random.Generator) -> bool:
    """Whether the expression is exactly affine in the parameters ``idx`` on the rows ``raw``.

    At :data:`CHECK_POINTS` random parameter vectors ``theta`` (random starts for unit losses,
    :func:`~scalefit.laws.sample_starts`) and along the last parameter's axis and a random
    direction ``d`` within ``idx`` (scaled by ``max(|theta_j|, 1)``):
    ``f(theta + t d) - f(theta) - t (f(theta + d) - f(theta - d)) / 2`` vanishes (relative
    :data:`AFFINE_RTOL`) for every ``t`` in ``+-AFFINE_STEPS``. Finite steps over the rows'
    own inputs see the kink of a ``max``, ``abs`` or ``where`` that a second derivative misses,
    and the random direction a product of two of them; a non-finite value counts as not affine.
    """
    names = law.param_names
    x = law.variables(np, raw)

    def f(theta: np.ndarray) -> np.ndarray:
        out = law.expr(np, dict(zip(names, theta, strict=True)), x)
        return np.broadcast_to(np.asarray(out, dtype=float), len(next(iter(raw.values()))))

    steps = np.concatenate([AFFINE_STEPS, -np.asarray(AFFINE_STEPS)])
    z = sample_starts(law, CHECK_POINTS, np.ones(1), seed=int(rng.integers(2**32)))
    pub = law.to_public(z, law.references(raw))
    with np.errstate(all="ignore"):  # an overflow is a non-finite gap: not affine
        for i in range(CHECK_POINTS):
            theta = np.array([float(pub[n][i]) for n in names])
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


def linear_block(law: Law, inputs: Mapping[str, np.ndarray] | None = None) -> LinearBlock:
    """The linear block of ``law``, detected from its expression.

    A set of parameters is linear when the expression is exactly affine in it: finite steps over
    many scales, along the newest parameter and along a random direction within the set, change
    the expression exactly linearly on ``inputs`` (the data's own rows; default random inputs
    log-uniform in [2, 1e4]) at :data:`CHECK_POINTS` random starts, so a parameter entering
    through ``max``, ``abs`` or ``where`` (linear between kinks, not across them) is not taken
    for a coefficient. Parameters are added greedily in the law's order, so the set is maximal
    (a product ``A * B`` keeps only ``A``). A non-finite value counts as nonlinear. Only
    coefficient kinds (``coef``, ``positive``, ``floor``) are sign-constrained in the linear
    solve.

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
    rng = np.random.default_rng(20260328)
    if inputs is None:
        raw, digest = (
            {k: np.exp(rng.uniform(np.log(2.0), np.log(1e4), 8)) for k in law.inputs},
            None,
        )
    else:
        raw = {k: np.asarray(inputs[k], dtype=float) for k in law.inputs}
        digest = hashlib.sha256(b"".join(raw[k].tobytes() for k in law.inputs)).hexdigest()
    key = (law_key(law), digest)
    if key in _BLOCKS:
        return _BLOCKS[key]
    names, chosen = law.param_names, []
    for j in range(len(names)):  # greedily, in the law's order
        if _affine(law, [*chosen, j], raw, rng):
            chosen.append(j)
    linear = tuple(names[j] for j in chosen)
    nonneg = tuple(law.params[j].kind in COEF_KINDS for j in chosen)
    if len(_BLOCKS) >= MAX_BLOCKS:  # every bootstrap resample has its own rows
        _BLOCKS.clear()
    _BLOCKS[key] = LinearBlock(linear, tuple(n for n in names if n not in linear), nonneg)
    return _BLOCKS[key]


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
        # every support of the constrained coefficients: (S, k)
        masks = np.array(list(itertools.product(*[(0.0, 1.0) if c else (1.0,) for c in nonneg])))
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


def _inner(problem: Problem, block: LinearBlock, theta: np.ndarray):
    """``(objective (G,), linear coefficients (G, k))`` at the public nonlinear values ``theta``.

    The linear block solved exactly in numpy for each row of ``theta`` (G, q), in blocks of
    :data:`GRID_BLOCK` numbers: non-negative least squares by active sets for mean squares,
    :data:`GRID_IRLS` iteratively reweighted passes of it for Huber and LAD, on linear residuals
    (relative residuals ``(y - f) / y`` under log residuals). None when the law's expression
    does not broadcast over a batch of parameter values.
    """
    law, y, k = problem.law, problem._y, len(block.linear)
    x = law.variables(np, problem.inputs)
    s = 1.0 / np.abs(y) if problem.residuals == "log" else np.ones_like(y)
    w = np.ones_like(y) if problem.weights is None else problem.weights
    rho, _, weight = robust_rho(np, problem.loss, problem.delta)
    zero, nonneg = dict.fromkeys(block.linear, 0.0), np.asarray(block.nonneg)
    iu = np.triu_indices(k)
    step = max(GRID_BLOCK // (len(y) * k), 1)
    f_all, c_all = np.empty(len(theta)), np.empty((len(theta), k))
    for start in range(0, len(theta), step):
        part = slice(start, start + step)
        p = {n: theta[part, i, None] for i, n in enumerate(block.nonlinear)}
        shape = (len(theta[part]), len(y))
        try:
            with np.errstate(all="ignore"):
                phi0 = np.broadcast_to(law.expr(np, {**p, **zero}, x), shape)
                phi = [
                    np.broadcast_to(law.expr(np, {**p, **zero, nm: 1.0}, x), shape) - phi0
                    for nm in block.linear
                ]
        except ValueError:  # an expression that does not broadcast over a batch of parameters
            return None
        t = s * y - s * phi0
        # the basis (G, k, n) and products of its columns, fixed across the reweighted passes
        phit = np.ascontiguousarray(np.stack(phi, axis=1) * s)
        pairs = phit[:, iu[0]] * phit[:, iu[1]]
        pt = phit * t[:, None, :]
        u = np.broadcast_to(w, t.shape)
        for _ in range(1 if problem.loss == "mse" else GRID_IRLS):
            g = np.empty((len(t), k, k))
            g[:, iu[0], iu[1]] = g[:, iu[1], iu[0]] = np.matmul(pairs, u[:, :, None])[..., 0]
            c = _nnls_batch(g, np.matmul(pt, u[:, :, None])[..., 0], nonneg)
            r = t - np.matmul(c[:, None, :], phit)[:, 0]
            u = w * weight(r)
        f = np.sum(w * rho(r), axis=1)
        ok = np.isfinite(f) & np.all(np.isfinite(c), axis=1)
        f_all[part], c_all[part] = np.where(ok, f, np.inf), c
    return f_all, c_all


def _full(problem: Problem, block: LinearBlock, theta: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Internal coordinates of the nonlinear values ``theta`` with the linear coefficients ``c``.

    A coefficient of a log-space kind that sits at zero is floored at a tiny positive value
    (``1e-12`` of the largest coefficient), so the point is finite.
    """
    law = problem.law
    out = np.empty((len(theta), len(law.params)))
    for i in range(len(theta)):
        vals = dict(zip(block.nonlinear, theta[i], strict=True))
        floor = 1e-12 * max(float(np.max(np.abs(c[i]))), 1e-300)
        for j, name in enumerate(block.linear):
            vals[name] = max(c[i, j], floor) if law.param(name).kind in COEF_KINDS else c[i, j]
        with np.errstate(all="ignore"):
            out[i] = law.to_internal(vals, problem.refs)
    return out


def project(
    problem: Problem, z0: np.ndarray, block: LinearBlock | None = None
) -> dict[str, np.ndarray]:
    """Every start with its linear block solved exactly at its nonlinear parameters.

    The variable projection of the starts: the nonlinear entries of each row of ``z0`` are kept
    and the linear coefficients replaced by the exact (weighted, robust) least-squares ones
    (:func:`_inner`).

    Parameters
    ----------
    problem : Problem
        The engine problem (law, inputs, response, loss, row weights).
    z0 : ndarray, shape (m, P)
        Starts in internal coordinates.
    block : LinearBlock, optional
        Default :func:`linear_block` of the problem's law on its rows.

    Returns
    -------
    dict or None
        ``z`` (m, P) the projected starts in internal coordinates, ``objective`` (m,) of the
        linear solves (``inf`` where not finite); None when the law's expression does not
        broadcast over a batch of parameter values.
    """
    law = problem.law
    block = block or linear_block(law, problem.inputs)
    pub = law.to_public(np.atleast_2d(np.asarray(z0, dtype=float)), problem.refs)
    theta = np.stack([np.asarray(pub[n], dtype=float) for n in block.nonlinear], axis=1)
    inner = _inner(problem, block, theta)
    return (
        None
        if inner is None
        else {"z": _full(problem, block, theta, inner[1]), "objective": inner[0]}
    )


def grid_starts(
    problem: Problem, block: LinearBlock | None = None, keep: int = GRID_KEEP
) -> np.ndarray | None:
    """The best cells of a grid over the nonlinear parameters, as full-parameter starts.

    Every cell fixes the nonlinear parameters (points per axis ``GRID_CELLS ** (1/q)`` over each
    parameter's start range) and solves the linear block exactly (:func:`_inner`). The ``keep``
    best cells, at most one per cell neighbourhood, are returned in internal coordinates. None
    when a nonlinear parameter has no finite range to grid, when there are too many of them
    (more than ``4 * GRID_CELLS`` cells at three points per axis), or when the law's expression
    does not broadcast over a batch of parameter values.
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
    inner = _inner(problem, block, theta)
    if inner is None:
        return None
    f, c = inner
    # the best cells, skipping any next to one already kept (one start per basin of the grid)
    idx = np.stack(np.unravel_index(np.arange(len(theta)), (points,) * q), axis=1)
    chosen: list[int] = []
    for i in np.argsort(f):
        if not np.isfinite(f[i]) or len(chosen) >= keep:
            break
        if all(np.max(np.abs(idx[i] - idx[j])) > 1 for j in chosen):
            chosen.append(int(i))
    return _full(problem, block, theta[chosen], c[chosen]) if chosen else None


@dataclass(frozen=True)
class VarproBackend:
    """Least squares from variably projected starts, certified by the full-parameter solver.

    For a law with a linear block (:func:`linear_block`), every start's linear coefficients are
    replaced by the exact (weighted, robust) least-squares ones at its nonlinear parameters
    (:func:`project`; on relative residuals under log residuals), and the projected starts are
    solved on all parameters by :class:`~scalefit.fit.lsq.JaxBackend`, whose polish and
    convergence test certify the result as for ``method="jax"``. A law without a linear block
    (or with more than :data:`MAX_ENUMERATED` sign-constrained coefficients), and a table large
    enough to be screened on a row subsample, are fitted from the given starts as they are.
    ``diagnostics["varpro_stage"]`` says which path ran.
    """

    name: str = "varpro"
    progress: bool | None = None

    def minimize(self, problem: Problem, z0: np.ndarray) -> Optimum:
        """Minimise the objective from the projected starts ``z0`` (n_starts, n_params)."""
        block = linear_block(problem.law, problem.inputs)
        z0 = np.asarray(z0, dtype=float)
        proj = project(problem, z0, block) if block.usable and problem.n <= SCREEN_ABOVE else None
        stage = "full solve (no linear block to project)"
        if proj is not None:
            ok = np.isfinite(proj["objective"]) & np.all(np.isfinite(proj["z"]), axis=1)
            z0 = np.where(ok[:, None], proj["z"], z0)
            stage = "projected starts, solved on all parameters"
        opt = JaxBackend(progress=self.progress).minimize(problem, z0)
        diag = {**opt.diagnostics, "varpro_linear": list(block.linear), "varpro_stage": stage}
        return replace(opt, method="varpro", diagnostics=diag)


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
    go to :class:`~scalefit.fit.lsq.JaxBackend` with the given starts only.
    ``diagnostics["grid_stage"]`` says which path ran.
    """

    name: str = "jax"
    progress: bool | None = None

    def minimize(self, problem: Problem, z0: np.ndarray) -> Optimum:
        """Minimise the problem's objective from the grid's cells and the starts ``z0``."""
        full = JaxBackend(progress=self.progress)
        z0 = np.asarray(z0, dtype=float)
        block = linear_block(problem.law, problem.inputs)
        gridded = len(z0) > GRID_KEEP and block.usable and problem.n <= SCREEN_ABOVE
        cells = grid_starts(problem, block) if gridded else None
        if cells is None:
            opt, stage = full.minimize(problem, z0), "given starts only (no grid)"
        else:
            head = z0[: max(ENGINE_CHUNK - len(cells), 1)]
            opt = full.minimize(problem, np.concatenate([cells, head]))
            stage = f"grid cells and the first {len(head)} starts"
            if len(head) < len(z0) and 2 * _agreeing(problem, opt, len(cells)) < len(head):
                opt = full.minimize(problem, np.concatenate([cells, z0]))
                stage = "grid cells and every start"
        return replace(opt, diagnostics={**opt.diagnostics, "grid_stage": stage})


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
    obj, z = opt.extras["obj_all"][skip:], opt.extras["z_all"][skip:]
    fbest = opt.objective * (1 + BEST_RTOL) + BEST_ATOL_FLOORS * problem.atol
    z = np.concatenate([np.asarray(opt.z)[None, :], z[obj <= fbest]])
    with np.errstate(all="ignore"):
        pub = problem.law.to_public(z, problem.refs)
        pub = np.stack([np.asarray(pub[n], dtype=float) for n in problem.law.param_names], axis=1)
        close = np.abs(pub[1:] - pub[0]) <= AGREE_RTOL * np.abs(pub[0]) + 1e-12
    return int(np.sum(np.all(close, axis=1)))
