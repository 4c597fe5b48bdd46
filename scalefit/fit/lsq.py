"""Least-squares backends behind one small protocol, and the multi-start minimiser.

A *backend* takes a :class:`~scalefit.fit.engine.Problem` and starting points (internal
coordinates) and returns an :class:`Optimum`; :func:`least_squares` then hands the optimum to the
one shared step that builds a result (:func:`scalefit.fit.build.build_result`). The JAX
Levenberg–Marquardt engine (:class:`JaxBackend`) solves every start; the default backend
(:class:`scalefit.fit.varpro.GridBackend`) chooses its starts from a grid; lmfit lives in
:mod:`scalefit.fit.lmfit_method`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from ..core._progress import progress_bar
from ..core.errors import ScaleFitError
from ..laws import Law, sample_starts
from .build import FitSettings, Optimum, build_result
from .data import check_design, inputs_of, weights_of
from .engine import Problem
from .observation import response
from .result import FitResult

#: Relative objective tolerance within which a start counts as having reached the best optimum.
BEST_RTOL = 1e-9
#: ... plus this many times the problem's rounding floor (``Problem.atol``), for noise-free data.
BEST_ATOL_FLOORS = 10.0
MAX_ITER = 1000
#: The best start is polished to this relative Newton decrement (the batch stops at 1e-12), so
#: parameters with large standard errors are still resolved to many digits.
POLISH_TOL = 1e-18


class Backend(Protocol):
    """A least-squares backend: ``minimize(problem, z0) -> Optimum``."""

    name: str

    def minimize(self, problem: Problem, z0: np.ndarray) -> Optimum:
        """Minimise the problem's objective from the starts ``z0`` (n_starts, n_params)."""
        ...


def solve_many(
    problem: Problem,
    z0: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    progress: bool | None = False,
    desc: str = "fitting",
    tol: float = 1e-12,
    weight_index: np.ndarray | None = None,
):
    """Solve many problems in chunks of :data:`~scalefit.fit.engine.CHUNK` (one compilation).

    Each problem runs until it passes the convergence test or reaches ``MAX_ITER`` iterations;
    finished problems leave their chunk and the next ones take their slots
    (:meth:`~scalefit.fit.engine.Problem.solve_stream`). ``weight_index`` lets many problems
    share rows of ``weights``.

    Returns
    -------
    tuple of ndarray
        ``(z, objective, converged, iterations)``.
    """
    z0 = np.asarray(z0, dtype=float)
    with progress_bar(progress, total=len(z0), desc=desc, unit="fit", leave=False) as bar:
        out = problem.solve_stream(
            z0, weights, weight_index=weight_index, max_iter=MAX_ITER, tol=tol, on_done=bar.update
        )
    return out["z"], out["objective"], out["converged"], out["iterations"]


#: Iterations of :func:`polish_on_kink` (each one batched objective-and-gradient evaluation).
KINK_ITER = 200
#: A row sits on its hinge when the law's ``kink`` value (relative units) is within this of zero.
KINK_GAP = 1e-8


def polish_on_kink(
    problem: Problem, z: np.ndarray, weights: np.ndarray, *, tol: float = 1e-12
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Re-solve stalled solutions of a piecewise-smooth law with the kink they sit on held.

    A law with a hinge (``max(0, ...)``, e.g. :func:`~scalefit.laws.catalogue.critical_depth`)
    has an objective with kinks; its minimum often sits *on* one (a row exactly at the critical
    depth), where the one-sided gradient never vanishes and Levenberg–Marquardt stalls with its
    damping exploding: a minimum that the gradient test cannot certify. Each solution is
    re-solved on its kink: the direction ``u`` that crosses it is held (one linear constraint
    ``u . step = 0``) and damped Gauss–Newton steps solve the problem in the rest. ``u`` is the
    normal of the hinge of the row that sits on it (the law's ``kink`` within
    :data:`KINK_GAP` of zero; steps are pulled back onto a curved hinge), else the coordinate
    of largest scaled gradient ``|g_k| / sqrt(H_kk)``. A solution is certified when the reduced
    problem passes the solver's convergence test and the objective rises on both sides along
    ``u`` (one-sided probes of ``1e-3`` of its natural scale): the first-order condition of a
    minimum on one kink. A point where two hinges cross stays uncertified.

    Parameters
    ----------
    problem : Problem
        The problem (its row weights multiply ``weights``).
    z : ndarray
        Stalled solutions ``(m, P)``, internal coordinates.
    weights : ndarray
        Row weights ``(m, rows)`` of each solution's problem (e.g. bootstrap counts).
    tol : float, default 1e-12
        Relative Newton-decrement tolerance of the reduced problems.

    Returns
    -------
    tuple of ndarray
        ``(z, objective, certified)``: the re-solved points, their objectives and whether each
        is certified a minimum.
    """
    z = np.array(z, dtype=float)
    w = np.asarray(weights, dtype=float)
    m, p = z.shape
    if m == 0:
        return z, np.zeros(0), np.zeros(0, dtype=bool)

    def evaluate(zz):
        out = problem.solve_chunks(zz, w, keys=("objective", "grad", "gn"), max_iter=0)
        return out["objective"], out["grad"], out["gn"]

    f, g, h = evaluate(z)
    u, hinge = _kink_normals(problem, z, w, g, h)
    lam, dec = np.full(m, 1e-3), np.full(m, np.inf)
    done = ~np.isfinite(f)
    for _ in range(KINK_ITER):
        dec = -0.5 * np.einsum("mi,mi->m", g, _held_step(h, g, u, 1e-12))
        done |= dec <= tol * np.maximum(f, 1e-300) + problem.atol
        if done.all():
            break
        zt = hinge(z + np.where(done[:, None], 0.0, _held_step(h, g, u, lam)))
        ft, gt, ht = evaluate(zt)
        ok = ~done & np.isfinite(ft) & (ft <= f)
        z[ok], f[ok], g[ok], h[ok] = zt[ok], ft[ok], gt[ok], ht[ok]
        lam = np.where(ok, np.maximum(lam / 3.0, 1e-15), lam * 4.0)
        done |= lam > 1e16
    conv = np.isfinite(f) & (dec <= tol * np.maximum(f, 1e-300) + problem.atol)
    curv = np.maximum(np.einsum("mi,mij,mj->m", u, h, u), 1e-300)
    shift = u * (1e-3 * np.sqrt(np.maximum(f, problem.atol) / curv))[:, None]
    f_up = evaluate(z + shift)[0]
    f_down = evaluate(z - shift)[0]
    rises = (f_up >= f - problem.atol) & (f_down >= f - problem.atol)
    return z, f, conv & rises


def _held_step(h: np.ndarray, g: np.ndarray, u: np.ndarray, lam) -> np.ndarray:
    """Damped Gauss–Newton steps ``(m, P)`` with ``u . step = 0``: the KKT system, batched."""
    m, p = g.shape
    d = np.maximum(np.abs(np.diagonal(h, axis1=1, axis2=2)), 1e-300)
    kkt = np.zeros((m, p + 1, p + 1))
    kkt[:, :p, :p] = h + np.eye(p)[None] * (np.broadcast_to(lam, (m,))[:, None] * d)[:, None]
    kkt[:, :p, p] = kkt[:, p, :p] = u
    rhs = np.concatenate([-g, np.zeros((m, 1))], axis=1)
    return np.linalg.solve(kkt, rhs[..., None])[:, :p, 0]


def _kink_normals(problem: Problem, z: np.ndarray, w: np.ndarray, g, h):
    """Unit directions ``(m, P)`` crossing each point's kink, and the pull back onto hinges.

    A point with a weighted row on the law's hinge (``|kink| <= KINK_GAP``) gets the normal of
    that hinge (central differences of ``law.kink`` in internal coordinates); any other point
    the coordinate of largest scaled gradient. The returned function moves trial points back
    onto the held hinges (one Newton step along the normal; a no-op for a hinge linear in the
    internal coordinates).
    """
    m, p = z.shape
    scale = np.maximum(np.abs(np.diagonal(h, axis1=1, axis2=2)), 1e-300)
    u = np.zeros((m, p))
    u[np.arange(m), np.argmax(np.abs(g) / np.sqrt(scale), axis=1)] = 1.0
    law = problem.law
    if law.kink is None:
        return u, lambda zz: zz
    x = law.variables(np, problem.inputs)
    rw = w if problem.weights is None else w * problem.weights[None]

    def kink(zz, xs):  # law.kink at points zz (m, ...) and inputs xs broadcasting against them
        return np.asarray(law.kink(np, law.to_public(zz, problem.refs), xs), dtype=float)

    gap = np.abs(kink(z[:, None, :], x))  # (m, rows)
    gap = np.where((rw > 0) & np.isfinite(gap), gap, np.inf)
    row = np.argmin(gap, axis=1)
    on = gap[np.arange(m), row] <= KINK_GAP
    if not on.any():
        return u, lambda zz: zz
    xr = {k: (np.asarray(v)[row][:, None] if np.ndim(v) else v) for k, v in x.items()}
    step = 1e-6 * np.eye(p)
    normal = (kink(z[:, None] + step, xr) - kink(z[:, None] - step, xr)) / 2e-6  # (m, P)
    on &= np.all(np.isfinite(normal), axis=1) & (np.abs(normal).max(axis=1) > 0)
    normal[~on] = 0.0
    norm2 = np.where(on, np.einsum("mi,mi->m", normal, normal), 1.0)
    u[on] = normal[on] / np.sqrt(norm2[on, None])
    x1 = {k: (v[:, 0] if np.ndim(v) else v) for k, v in xr.items()}

    def onto_hinge(zz):
        with np.errstate(all="ignore"):
            k = np.where(on, kink(zz, x1), 0.0)
        return zz - normal * np.where(np.isfinite(k), k / norm2, 0.0)[:, None]

    return u, onto_hinge


@dataclass(frozen=True)
class JaxBackend:
    """The vectorised JAX Levenberg–Marquardt engine: every start solved in one batch."""

    name: str = "jax"
    progress: bool | None = None

    def minimize(self, problem: Problem, z0: np.ndarray) -> Optimum:
        """Solve every start; the best finite objective wins."""
        law = problem.law
        # Large tables: every start on a row subsample, then the best polished on every row.
        screen = problem.screening()
        z, obj, conv, iters = solve_many(
            screen or problem, z0, progress=self.progress, desc=f"{law.name} starts"
        )
        finite = np.isfinite(obj)
        if not finite.any():
            raise ScaleFitError(
                f"law {law.name!r}: no start gave a finite objective on this table."
            )
        best = int(np.nanargmin(np.where(finite, obj, np.inf)))
        fbest = float(obj[best])
        at_best = obj <= fbest * (1 + BEST_RTOL) + BEST_ATOL_FLOORS * (screen or problem).atol
        n_best = int(np.sum(at_best))
        if not conv[best] and (at_best & conv).any():
            # another start reached the same objective and passed the test: report that one
            best = int(np.flatnonzero(at_best & conv)[np.argmin(obj[at_best & conv])])
            fbest = float(obj[best])
        # a screened start is solved on every row to the batch tolerance (the extra digits of
        # POLISH_TOL are below the rounding of a sum over so many rows)
        tol = POLISH_TOL if screen is None else 1e-12
        zp, fp, cp, ip = solve_many(problem, z[best][None, :], tol=tol)
        if screen is not None:  # screening objectives are on other rows: the polish decides
            conv[best], fbest = False, np.inf
        polished = bool(np.isfinite(fp[0]) and fp[0] <= fbest)
        if polished:
            z[best], obj[best], conv[best] = zp[0], fp[0], conv[best] or cp[0]
            fbest = float(fp[0])
        on_kink = False
        if not conv[best] and np.isfinite(fbest):  # stalled: on a kink of a hinge law?
            zk, fk, ok = polish_on_kink(problem, z[best][None, :], np.ones((1, problem.n)))
            on_kink = bool(ok[0] and fk[0] <= fbest)
            if on_kink:
                z[best], obj[best], conv[best], fbest = zk[0], fk[0], True, float(fk[0])
                n_best = _starts_on_kink(problem, z, obj, conv, fbest)
        few = (
            f"only {n_best} of {len(z0)} starts reached the best objective: the optimum may "
            "not be global; try more starts."
        )
        return Optimum(
            z=z[best],
            objective=fbest,
            solver_converged=bool(conv[best]),
            method="jax",
            diagnostics={
                "n_starts": int(len(z0)),
                "n_best": n_best,
                "n_converged": int(conv.sum()),
                "max_iterations": int(iters.max()),
                "polish_iterations": int(ip[0]),
                "screened_on_rows": None if screen is None else int(screen.n),
                "on_kink": on_kink,
            },
            warnings=(few,) if n_best < 2 and len(z0) > 1 else (),
            extras={"z_all": z, "obj_all": obj},
        )


#: Stalled starts within this relative distance of the best objective are certified on their
#: kink too (:func:`_starts_on_kink`) before the starts that reached the best are counted.
KINK_NEAR = 1e-3


def _starts_on_kink(problem: Problem, z, obj, conv, fbest: float) -> int:
    """How many starts reach ``fbest`` once the stalled ones near it are certified (in place).

    Starts that stall on the same kink as the best stop at objectives a few 1e-6 apart, so
    without this the count says one start reached the best (a false "try more starts").
    """
    near = np.flatnonzero(~conv & np.isfinite(obj) & (obj <= fbest * (1 + KINK_NEAR)))
    zk, fk, ok = polish_on_kink(problem, z[near], np.ones((len(near), problem.n)))
    z[near[ok]], obj[near[ok]], conv[near[ok]] = zk[ok], fk[ok], True
    return int(np.sum(conv & (obj <= fbest * (1 + BEST_RTOL) + BEST_ATOL_FLOORS * problem.atol)))


def starts_for(
    law: Law, y: np.ndarray, refs: Mapping[str, float], n: int, seed: int, x0=None
) -> np.ndarray:
    """Starting points in internal coordinates: ``x0``, the law's start points, then random.

    Raises
    ------
    ScaleFitError
        When ``x0`` misses a parameter or names one the law does not have.
    """
    include = [law.to_internal(sp, refs) for sp in law.start_points]
    if x0 is not None:
        missing = set(law.param_names) - set(x0)
        extra = set(x0) - set(law.param_names)
        if missing or extra:
            raise ScaleFitError(
                f"The 'x0' parameter of fit must give every parameter of {law.name!r} "
                f"({', '.join(law.param_names)}); missing {sorted(missing)}, unknown "
                f"{sorted(extra)}."
            )
        include.insert(0, law.to_internal(x0, refs))
    scale = np.abs(y) if np.all(y > 0) else np.abs(y) + 1.0
    return sample_starts(law, max(n, len(include)), scale, seed=seed, include=include)


def make_problem(tab: pd.DataFrame, law: Law, settings: FitSettings) -> Problem:
    """The engine problem for a table under the settings (inputs, response and weights checked)."""
    x = inputs_of(tab, law)
    where = tab.attrs.get("scalefit", {}).get("source", "<table>")
    y = tab["loss"].to_numpy(dtype=float)
    response(y, settings.residuals, where=where)
    w = weights_of(tab, settings.weight_column)
    check_design(tab, law, y, w)
    return Problem(
        law, x, y, loss=settings.loss, delta=settings.delta, residuals=settings.residuals, weights=w
    )


def least_squares(
    tab: pd.DataFrame,
    law: Law,
    settings: FitSettings,
    *,
    backend: Backend | None = None,
    problem: Problem | None = None,
) -> FitResult:
    """Fit ``law`` to ``tab`` with a backend and build the result (no bootstrap, no hold-out).

    Parameters
    ----------
    tab : DataFrame
        A validated table.
    law : Law
        The law.
    settings : FitSettings
        Loss, residual scale, weights, starts, seed and the rest.
    backend : Backend, optional
        Default: :class:`JaxBackend`.
    problem : Problem, optional
        A ready problem for this table and settings (skips rebuilding it).

    Returns
    -------
    FitResult
    """
    backend = backend or JaxBackend()
    problem = problem or make_problem(tab, law, settings)
    y = tab["loss"].to_numpy(dtype=float)
    z0 = starts_for(law, y, problem.refs, settings.starts, settings.seed, settings.x0)
    optimum = backend.minimize(problem, z0)
    return build_result(problem, tab, optimum, settings)
