"""Certifying minima that sit on a kink of a hinge law (``max(0, ...)``).

Levenberg–Marquardt stalls on such a minimum and the gradient test cannot pass there:
:func:`polish_on_kink` re-solves it with the kink held and checks the objective rises across
it; :func:`hinge_normals` finds the hinge a point sits on (from the law's ``kink``), which the
local checks (:func:`scalefit.fit.checks.check_point`) also use to test the curvature along it.
"""

from __future__ import annotations

import numpy as np

from .engine import Problem

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
    u, hinge, _ = hinge_normals(problem, z, w, g, h)
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


def hinge_normals(problem: Problem, z: np.ndarray, w: np.ndarray, g=None, h=None):
    """Unit directions ``(m, P)`` that cross each point's kink, and the pull back onto hinges.

    A point with a weighted row on the law's hinge (``|kink| <= KINK_GAP``) gets the normal of
    that hinge (central differences of ``law.kink`` in internal coordinates); any other point
    the coordinate of largest scaled gradient ``|g_k| / sqrt(h_kk)`` (zeros without ``g``).

    Parameters
    ----------
    problem : Problem
        The problem (its row weights multiply ``w``).
    z : ndarray
        Points ``(m, P)``, internal coordinates.
    w : ndarray
        Row weights ``(m, rows)``.
    g, h : ndarray, optional
        Gradients ``(m, P)`` and Gauss–Newton matrices ``(m, P, P)`` at ``z``.

    Returns
    -------
    tuple
        ``(u, onto_hinge, on)``: the directions, a function moving trial points ``(m, P)``
        back onto the held hinges (one Newton step along the normal; a no-op for a hinge linear
        in the internal coordinates) and whether each point sits on a hinge.
    """
    m, p = z.shape
    u, on = np.zeros((m, p)), np.zeros(m, dtype=bool)
    if g is not None:
        scale = np.maximum(np.abs(np.diagonal(h, axis1=1, axis2=2)), 1e-300)
        u[np.arange(m), np.argmax(np.abs(g) / np.sqrt(scale), axis=1)] = 1.0
    law = problem.law
    if law.kink is None:
        return u, lambda zz: zz, on
    x = law.variables(np, problem.inputs)
    rw = w if problem.weights is None else w * problem.weights[None]

    def kink(zz, xs):  # law.kink at points zz (m, ...) and inputs xs broadcasting against them
        with np.errstate(all="ignore"):
            return np.asarray(law.kink(np, law.to_public(zz, problem.refs), xs), dtype=float)

    gap = np.abs(kink(z[:, None, :], x))  # (m, rows)
    gap = np.where((rw > 0) & np.isfinite(gap), gap, np.inf)
    row = np.argmin(gap, axis=1)
    on = gap[np.arange(m), row] <= KINK_GAP
    xr = {k: (np.asarray(v)[row][:, None] if np.ndim(v) else v) for k, v in x.items()}
    step = 1e-6 * np.eye(p)
    normal = (kink(z[:, None] + step, xr) - kink(z[:, None] - step, xr)) / 2e-6  # (m, P)
    on &= np.all(np.isfinite(normal), axis=1) & (np.abs(normal).max(axis=1) > 0)
    normal[~on] = 0.0
    norm2 = np.where(on, np.einsum("mi,mi->m", normal, normal), 1.0)
    u[on] = normal[on] / np.sqrt(norm2[on, None])
    x1 = {k: (v[:, 0] if np.ndim(v) else v) for k, v in xr.items()}

    def onto_hinge(zz):
        k = np.where(on, kink(zz, x1), 0.0)
        return zz - normal * np.where(np.isfinite(k), k / norm2, 0.0)[:, None]

    return u, onto_hinge, on
