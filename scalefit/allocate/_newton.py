"""Vectorised box-constrained minimisation of many small (1-D or 2-D) smooth-ish problems.

Every problem ``p`` has its own objective ``f(p, z)`` (here: a law's loss for one parameter draw at
one budget) over ``z`` in a box ``[lo_p, hi_p]``. The solver evaluates a coarse grid to start, then
runs a damped (Levenberg-regularised) Newton method with finite-difference derivatives, projected
onto the box with an active set. All problems advance together as numpy arrays; each evaluation of
the objective is one vectorised call of shape ``(P, M)`` (``M`` trial points per problem).

Steps are accepted only when they lower the objective, so the method is monotone even on kinked or
flat objectives (the ``critical_depth`` penalty); there it returns *a* minimiser and the caller
must describe the set of minimisers (see :mod:`scalefit.allocate.profile`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Objective = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``f(index, z) -> loss``: ``index`` (P,) problem indices, ``z`` (P, M, n) points → (P, M)."""

_H = 1e-4  # finite-difference step in log units


@dataclass
class Minimum:
    """Result of :func:`minimise`: arguments, values and flags, one row per problem."""

    z: np.ndarray  # (P, n)
    f: np.ndarray  # (P,)
    at_lo: np.ndarray  # (P, n) bool: coordinate sits on its lower bound
    at_hi: np.ndarray  # (P, n) bool
    converged: np.ndarray  # (P,) bool
    iterations: int


def grid_start(
    f: Objective,
    lo: np.ndarray,
    hi: np.ndarray,
    counts: tuple[int, ...],
    chunk: int = 4096,
    extra: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Best point of a regular grid in each problem's box.

    Parameters
    ----------
    f : callable
        Objective (see :data:`Objective`).
    lo, hi : ndarray, shape (P, n)
        Box of each problem.
    counts : tuple of int
        Grid points per dimension.
    chunk : int
        Problems evaluated per call (bounds memory).
    extra : ndarray, shape (P, E, n), optional
        Further candidate points per problem (e.g. the optimum of the point estimate).

    Returns
    -------
    z : ndarray, shape (P, n)
    fz : ndarray, shape (P,)
    """
    n = lo.shape[1]
    unit = np.stack(
        np.meshgrid(*[np.linspace(0.0, 1.0, c) for c in counts], indexing="ij"), axis=-1
    ).reshape(-1, n)  # (G, n)
    z_best = np.empty_like(lo)
    f_best = np.empty(len(lo))
    for start in range(0, len(lo), chunk):
        sl = slice(start, start + chunk)
        pts = lo[sl, None, :] + unit[None] * (hi[sl] - lo[sl])[:, None, :]  # (p, G, n)
        if extra is not None:
            pts = np.concatenate([np.clip(extra[sl], lo[sl, None], hi[sl, None]), pts], axis=1)
        vals = f(np.arange(len(lo))[sl], pts)
        vals = np.where(np.isfinite(vals), vals, np.inf)
        k = np.argmin(vals, axis=1)
        z_best[sl] = pts[np.arange(len(k)), k]
        f_best[sl] = vals[np.arange(len(k)), k]
    return z_best, f_best


def _stencil(n: int) -> np.ndarray:
    """Offsets (M, n): centre, ±h along each axis, then (+h, +h) and (-h, -h) for 2-D."""
    pts = [np.zeros(n)]
    for i in range(n):
        for s in (1.0, -1.0):
            e = np.zeros(n)
            e[i] = s * _H
            pts.append(e)
    if n == 2:
        pts += [np.array([_H, _H]), np.array([-_H, -_H])]
    elif n > 2:
        raise ValueError("the allocation solver handles one or two free coordinates")
    return np.array(pts)


def _derivatives(vals: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gradient (P, n) and Hessian (P, n, n) from stencil values (P, M)."""
    f0 = vals[:, 0]
    g = np.empty((len(vals), n))
    hess = np.empty((len(vals), n, n))
    for i in range(n):
        fp, fm = vals[:, 1 + 2 * i], vals[:, 2 + 2 * i]
        g[:, i] = (fp - fm) / (2 * _H)
        hess[:, i, i] = (fp - 2 * f0 + fm) / _H**2
    if n == 2:
        cross = vals[:, 5] + vals[:, 6] - vals[:, 1:5].sum(axis=1) + 2 * f0
        hess[:, 0, 1] = hess[:, 1, 0] = cross / (2 * _H**2)
    return g, hess


def _solve_sym(hess: np.ndarray, g: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """``-(H + mu I)^-1 g`` for symmetric 1x1/2x2 ``H``, ``mu`` making it positive definite."""
    n = g.shape[1]
    scale = np.maximum(np.abs(hess).max(axis=(1, 2)), 1e-12)
    if n == 1:
        a = hess[:, 0, 0]
        mu = np.maximum(0.0, -a) + (lam + 1e-12) * scale
        return -g / (a + mu)[:, None]
    a, b, d = hess[:, 0, 0], hess[:, 0, 1], hess[:, 1, 1]
    eig_min = 0.5 * (a + d) - np.sqrt(0.25 * (a - d) ** 2 + b * b)
    mu = np.maximum(0.0, -eig_min) + (lam + 1e-12) * scale
    a, d = a + mu, d + mu
    det = a * d - b * b
    return -np.stack([d * g[:, 0] - b * g[:, 1], a * g[:, 1] - b * g[:, 0]], axis=1) / det[:, None]


def _newton_step(g, hess, lam, active):
    """Regularised Newton step with active coordinates frozen."""
    g = np.where(active, 0.0, g)
    mask = active[:, :, None] | active[:, None, :]
    hess = np.where(mask, 0.0, hess) + active[:, :, None] * np.eye(g.shape[1])
    step = _solve_sym(hess, g, lam)
    norm = np.sqrt((step**2).sum(axis=1))
    step *= np.minimum(1.0, 2.0 / np.maximum(norm, 1e-300))[:, None]  # trust radius 2 (log units)
    return np.where(active, 0.0, step), g


def minimise(
    f: Objective,
    lo: np.ndarray,
    hi: np.ndarray,
    z0: np.ndarray,
    *,
    max_iter: int = 100,
    xtol: float = 1e-10,
) -> Minimum:
    """Projected, regularised Newton from ``z0`` for every problem at once.

    Parameters
    ----------
    f : callable
        Objective (see :data:`Objective`).
    lo, hi : ndarray, shape (P, n)
        Box.
    z0 : ndarray, shape (P, n)
        Starting points (e.g. from :func:`grid_start`).
    max_iter : int
        Iteration cap.
    xtol : float
        Stop a problem when its accepted step is shorter than this (log units) or when no step
        lowers the objective at the largest regularisation.

    Returns
    -------
    Minimum
    """
    n_prob, n = z0.shape
    stencil = _stencil(n)
    z = np.clip(z0.astype(float), lo, hi)
    fz = np.full(n_prob, np.inf)
    lam = np.full(n_prob, 1e-3)
    live = np.ones(n_prob, dtype=bool)
    done = np.zeros(n_prob, dtype=bool)
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - reported
        idx = np.flatnonzero(live)
        if idx.size == 0:
            break
        zi, loi, hii = z[idx], lo[idx], hi[idx]
        vals = f(idx, zi[:, None, :] + stencil[None])
        fz[idx] = vals[:, 0]
        g, hess = _derivatives(vals, n)
        tiny = 1e-12 * np.maximum(1.0, hii - loi)
        active = ((zi <= loi + tiny) & (g > 0)) | ((zi >= hii - tiny) & (g < 0))
        step, gp = _newton_step(g, hess, lam[idx], active)
        trial = np.clip(zi + step, loi, hii)
        ft = f(idx, trial[:, None, :])[:, 0]
        ok = np.isfinite(ft) & (ft < vals[:, 0])
        moved = np.sqrt(((trial - zi) ** 2).sum(axis=1))
        z[idx] = np.where(ok[:, None], trial, zi)
        fz[idx] = np.where(ok, ft, vals[:, 0])
        lam[idx] = np.where(ok, lam[idx] / 4.0, lam[idx] * 8.0)
        small_grad = np.sqrt((gp**2).sum(axis=1)) < 1e-13 * np.maximum(1.0, np.abs(vals[:, 0]))
        fin = (moved < xtol) | small_grad | (~ok & (lam[idx] > 1e12))
        done[idx] |= fin
        live[idx] = ~fin
    tol = 1e-9 * np.maximum(1.0, hi - lo)
    return Minimum(
        z=z, f=fz, at_lo=z <= lo + tol, at_hi=z >= hi - tol, converged=done, iterations=it
    )
