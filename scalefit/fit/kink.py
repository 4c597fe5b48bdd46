"""Certifying minima that sit on a kink of a hinge law (``max(0, ...)``).

Levenberg–Marquardt stalls on such a minimum and the gradient test cannot pass there:
:func:`polish_on_kink` re-solves it with the kink held and checks the objective rises across
it; :func:`hinge_normals` finds the hinge a point sits on (from the law's ``kink``), which the
local checks (:func:`scalefit.fit.checks.check_point`) also use to test the curvature along it.
"""

from __future__ import annotations

import numpy as np

from .engine import Problem

#: Iterations of each reduced solve of :func:`polish_on_kink` (each one batched objective,
#: gradient and Gauss–Newton evaluation).
KINK_ITER = 200
#: A row sits on its hinge when the law's ``kink`` value (relative units) is within this of zero.
KINK_GAP = 1e-8
#: At most this many hinges are held at once (a point where more cross stays uncertified).
KINK_MAX = 3


def polish_on_kink(
    problem: Problem, z: np.ndarray, weights: np.ndarray, *, tol: float = 1e-12
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Re-solve stalled solutions of a piecewise-smooth law with the kinks they sit on held.

    A law with a hinge (``max(0, ...)``, e.g. :func:`~scalefit.laws.catalogue.critical_depth`)
    has an objective with kinks; its minimum often sits *on* one (a row exactly at the critical
    depth), where the one-sided gradient never vanishes and Levenberg–Marquardt stalls with its
    damping exploding: a minimum that the gradient test cannot certify. Each solution is
    re-solved with the kinks it sits on held: the normal ``n_j`` of each hinge a weighted row
    sits on (the law's ``kink`` within :data:`KINK_GAP` of zero, :func:`hinge_normals`; for a
    law without one, the coordinate of largest scaled gradient) gives a linear constraint
    ``n_j . step = 0``, and damped Gauss–Newton steps solve the problem in the rest (trial
    points pulled back onto curved hinges). A reduced fit that stalls on a further hinge (it
    slid along one until another row reached its critical depth) is solved again with both
    held, up to :data:`KINK_MAX`. A solution is certified when the reduced problem passes the
    solver's convergence test and the objective rises on both sides of each held hinge along
    the others (one-sided probes of ``1e-3`` of the natural scale): the first-order condition of
    a minimum where the hinges cross, whose directional derivative is linear on each side.

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
    m = len(z)
    f, ok = np.full(m, np.inf), np.zeros(m, dtype=bool)
    todo = np.ones(m, dtype=bool)
    for _ in range(KINK_MAX):
        i = np.flatnonzero(todo)
        if not len(i):
            break
        z[i], f[i], conv, rises, held = _held_solve(problem, z[i], w[i], tol)
        ok[i] = conv & rises
        # stalled on a further hinge: again, with every hinge it now sits on held
        todo[i] = ~conv & (hinge_normals(problem, z[i], w[i])[3] > held)
    return z, f, ok


def _held_solve(problem: Problem, z: np.ndarray, w: np.ndarray, tol: float):
    """One reduced solve of :func:`polish_on_kink`: ``(z, f, converged, rises, n_held)``."""

    def evaluate(zz):
        out = problem.solve_chunks(zz, w, keys=("objective", "grad", "gn"), max_iter=0)
        return out["objective"], out["grad"], out["gn"]

    m = len(z)
    f, g, h = evaluate(z)
    u, active, onto_hinge, held = hinge_normals(problem, z, w, g, h)
    lam, dec = np.full(m, 1e-3), np.full(m, np.inf)
    done = ~np.isfinite(f)
    for _ in range(KINK_ITER):
        dec = -0.5 * np.einsum("mi,mi->m", g, _held_step(h, g, u, active, 1e-12))
        done |= dec <= tol * np.maximum(f, 1e-300) + problem.atol
        if done.all():
            break
        zt = onto_hinge(z + np.where(done[:, None], 0.0, _held_step(h, g, u, active, lam)))
        ft, gt, ht = evaluate(zt)
        ok = ~done & np.isfinite(ft) & (ft <= f)
        z[ok], f[ok], g[ok], h[ok] = zt[ok], ft[ok], gt[ok], ht[ok]
        lam = np.where(ok, np.maximum(lam / 3.0, 1e-15), lam * 4.0)
        done |= lam > 1e16
    conv = np.isfinite(f) & (dec <= tol * np.maximum(f, 1e-300) + problem.atol)
    # edge directions: across hinge j, along the others (n_i . d_j = delta_ij)
    gram = np.einsum("mpi,mpj->mij", u, u) + np.eye(u.shape[2])[None] * ~active[:, None, :]
    edges = np.einsum("mpk,mkj->mpj", u, np.linalg.inv(gram))
    rises = np.ones(m, dtype=bool)
    for j in np.flatnonzero(active.any(axis=0)):
        d = edges[:, :, j]
        curv = np.maximum(np.einsum("mi,mij,mj->m", d, h, d), 1e-300)
        shift = d * (1e-3 * np.sqrt(np.maximum(f, problem.atol) / curv))[:, None]
        for side in (shift, -shift):
            rises &= ~active[:, j] | (evaluate(z + side)[0] >= f - problem.atol)
    return z, f, conv, rises, held


def _held_step(h: np.ndarray, g: np.ndarray, u: np.ndarray, active: np.ndarray, lam):
    """Damped Gauss–Newton steps ``(m, P)`` with ``u_j . step = 0`` for each active ``j``.

    The KKT system, batched: ``[[H + lam D, U], [U', I_inactive]] [s; nu] = [-g; 0]``.
    """
    m, p = g.shape
    k = u.shape[2]
    d = np.maximum(np.abs(np.diagonal(h, axis1=1, axis2=2)), 1e-300)
    kkt = np.zeros((m, p + k, p + k))
    kkt[:, :p, :p] = h + np.eye(p)[None] * (np.broadcast_to(lam, (m,))[:, None] * d)[:, None]
    kkt[:, :p, p:] = u
    kkt[:, p:, :p] = np.swapaxes(u, 1, 2)
    kkt[:, p:, p:] = np.eye(k)[None] * ~active[:, None, :]
    rhs = np.concatenate([-g, np.zeros((m, k))], axis=1)
    return np.linalg.solve(kkt, rhs[..., None])[:, :p, 0]


def hinge_normals(problem: Problem, z: np.ndarray, w: np.ndarray, g=None, h=None):
    """The hinges each point sits on: their unit normals, and the pull back onto them.

    A weighted row sits on its hinge when the law's ``kink`` is within :data:`KINK_GAP` of
    zero; its normal is the central difference of ``kink`` in internal coordinates, and rows
    whose normals are parallel (the same hinge) count once. A point on no hinge, or a law
    without ``kink``, holds the coordinate of largest scaled gradient ``|g_k| / sqrt(h_kk)``
    instead (nothing without ``g``).

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
        ``(u, active, onto_hinge, n_on)``: directions ``(m, P, KINK_MAX)`` to hold, which of
        them are used ``(m, KINK_MAX)``, a function moving trial points ``(m, P)`` back onto the
        held hinges (one Newton step; a no-op for a hinge linear in the internal coordinates)
        and the number of hinges each point sits on.
    """
    m, p = z.shape
    u, active = np.zeros((m, p, KINK_MAX)), np.zeros((m, KINK_MAX), dtype=bool)
    n_on = np.zeros(m, dtype=int)
    if g is not None:
        scale = np.maximum(np.abs(np.diagonal(h, axis1=1, axis2=2)), 1e-300)
        u[np.arange(m), np.argmax(np.abs(g) / np.sqrt(scale), axis=1), 0] = 1.0
        active[:, 0] = True
    law = problem.law
    if law.kink is None:
        return u, active, lambda zz: zz, n_on
    x = law.variables(np, problem.inputs)
    rw = w if problem.weights is None else w * problem.weights[None]

    def kink(zz, xs):  # law.kink at points zz (m, ...) and inputs xs broadcasting against them
        with np.errstate(all="ignore"):
            return np.asarray(law.kink(np, law.to_public(zz, problem.refs), xs), dtype=float)

    gap = np.abs(kink(z[:, None, :], x))  # (m, rows)
    pt, row = np.nonzero((rw > 0) & (gap <= KINK_GAP))
    step = 1e-6 * np.eye(p)
    xq = {k: (np.asarray(v)[row][:, None] if np.ndim(v) else v) for k, v in x.items()}
    normal = (kink(z[pt][:, None] + step, xq) - kink(z[pt][:, None] - step, xq)) / 2e-6
    raw, rows = np.zeros((m, p, KINK_MAX)), np.zeros((m, KINK_MAX), dtype=int)
    for q in np.flatnonzero(np.all(np.isfinite(normal), axis=1) & (np.abs(normal).max(1) > 0)):
        a, k = pt[q], n_on[pt[q]]
        basis = u[a, :, :k]
        off = normal[q] - basis @ np.linalg.lstsq(basis, normal[q])[0] if k else normal[q]
        if k == KINK_MAX or np.linalg.norm(off) <= 1e-6 * np.linalg.norm(normal[q]):
            continue  # the same hinge as one held (or too many)
        if not k:
            u[a], active[a] = 0.0, False
        u[a, :, k], active[a, k] = normal[q] / np.linalg.norm(normal[q]), True
        raw[a, :, k], rows[a, k], n_on[a] = normal[q], row[q], k + 1
    hinge = np.arange(KINK_MAX)[None, :] < n_on[:, None]
    xh = {k: (np.asarray(v)[rows] if np.ndim(v) else v) for k, v in x.items()}
    gram = np.einsum("mpi,mpj->mij", raw, raw) + np.eye(KINK_MAX)[None] * ~hinge[:, None, :]

    def onto_hinge(zz):
        kv = np.where(hinge, kink(zz[:, None, :], xh), 0.0)
        kv = np.where(np.isfinite(kv), kv, 0.0)
        return zz - np.einsum("mpk,mk->mp", raw, np.linalg.solve(gram, kv[..., None])[..., 0])

    return u, active, onto_hinge, n_on
