"""Iso-FLOP depth profiles and the set of near-optimal depths.

At a fixed budget ``C`` the *profile* of a shape law is ``P(depth) = min over params of
L(depth, width(depth, params), C / (6 params))``: the best loss reachable at each depth. Its
minimum is the compute-optimal loss; the depths with ``P(depth) <= L* + eps`` form the
near-optimal set, and a *plateau* (several depths reaching ``L*`` to rounding,
``|P - L*| <= 1e-9 L*``) marks a flat optimum, which is reported as a range, never as a point.
"""

from __future__ import annotations

import numpy as np

from ._newton import minimise
from .space import Space

FLAT_RTOL = 1e-9
_BISECT = 11


def _take(params: dict[str, np.ndarray], index: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[index] for k, v in params.items()}


def inner(
    space: Space,
    params: dict[str, np.ndarray],
    budget: np.ndarray,
    logd: np.ndarray,
    y0: np.ndarray,
    ylo: np.ndarray,
    yhi: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Best ``log params`` at fixed ``log depth`` for Q problems at once (all arrays (Q,)).

    Returns
    -------
    loss, y : ndarray, shape (Q,)
    """
    f2 = space.objective(params, budget)

    def f(index, z):
        x = np.broadcast_to(logd[index][:, None, None], z.shape[:2] + (1,))
        return f2(index, np.concatenate([x, z], axis=-1))

    res = minimise(f, ylo[:, None], yhi[:, None], y0[:, None])
    return res.f, res.z[:, 0]


def depth_profile(
    space: Space,
    params: dict[str, np.ndarray],
    budget: np.ndarray,
    logd: np.ndarray,
    y0: np.ndarray,
    ylo: np.ndarray,
    yhi: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Profile ``P(depth)`` on a grid of log depths for P problems.

    Parameters
    ----------
    space : Space
        A ``"shape"`` space.
    params : dict of ndarray (P,)
        Law parameters per problem.
    budget : ndarray (P,)
        Budget per problem.
    logd : ndarray (K,) or (P, K)
        Log depths.
    y0, ylo, yhi : ndarray (P,)
        Start and bounds of ``log params``.

    Returns
    -------
    loss, y : ndarray, shape (P, K)
    """
    n_prob = len(budget)
    logd = np.broadcast_to(np.asarray(logd, dtype=float), (n_prob, np.shape(logd)[-1]))
    k = logd.shape[1]
    rep = np.repeat(np.arange(n_prob), k)
    loss, y = inner(
        space, _take(params, rep), budget[rep], logd.reshape(-1), y0[rep], ylo[rep], yhi[rep]
    )
    return loss.reshape(n_prob, k), y.reshape(n_prob, k)


def _bisect(space, params, budget, ylo, yhi, x_in, x_out, y_in, level):
    """Boundary between ``x_in`` (profile <= level) and ``x_out`` (above), per problem."""
    for _ in range(_BISECT):
        mid = 0.5 * (x_in + x_out)
        loss, y = inner(space, params, budget, mid, y_in, ylo, yhi)
        inside = loss <= level
        x_in = np.where(inside, mid, x_in)
        y_in = np.where(inside, y, y_in)
        x_out = np.where(inside, x_out, mid)
    return x_in, y_in


def level_set(
    space: Space,
    params: dict[str, np.ndarray],
    budget: np.ndarray,
    logd: np.ndarray,
    loss: np.ndarray,
    y: np.ndarray,
    level: np.ndarray,
    ylo: np.ndarray,
    yhi: np.ndarray,
) -> dict[str, np.ndarray]:
    """Hull of the depths whose profile is at most ``level`` (per problem), endpoints refined.

    Returns
    -------
    dict
        ``logd_lo``, ``logd_hi``, ``y_lo``, ``y_hi`` (log params at the two ends), ``lo_at_bound``,
        ``hi_at_bound`` (the set reaches the end of the depth grid), ``gaps`` (the set is not one
        interval on the grid).
    """
    n_prob, k = loss.shape
    rows = np.arange(n_prob)
    inside = loss <= level[:, None]
    inside[rows, np.argmin(loss, axis=1)] = True
    first = np.argmax(inside, axis=1)
    last = k - 1 - np.argmax(inside[:, ::-1], axis=1)
    gaps = inside.sum(axis=1) != (last - first + 1)
    x_lo, x_hi = logd[rows, first], logd[rows, last]
    y_lo_, y_hi_ = y[rows, first], y[rows, last]
    for end in ("lo", "hi"):
        idx = first if end == "lo" else last
        nb = idx - 1 if end == "lo" else idx + 1
        todo = np.flatnonzero((nb >= 0) & (nb < k))
        if todo.size == 0:
            continue
        p = _take(params, todo)
        xi, yi = _bisect(
            space,
            p,
            budget[todo],
            ylo[todo],
            yhi[todo],
            logd[todo, idx[todo]],
            logd[todo, nb[todo]],
            y[todo, idx[todo]],
            level[todo],
        )
        if end == "lo":
            x_lo[todo], y_lo_[todo] = xi, yi
        else:
            x_hi[todo], y_hi_[todo] = xi, yi
    return {
        "logd_lo": x_lo,
        "logd_hi": x_hi,
        "y_lo": y_lo_,
        "y_hi": y_hi_,
        "lo_at_bound": first == 0,
        "hi_at_bound": last == k - 1,
        "gaps": gaps,
    }


def plateau_level(best: np.ndarray) -> np.ndarray:
    """Loss level that counts as "equal to the optimum" when detecting a flat optimum."""
    return best + FLAT_RTOL * np.maximum(np.abs(best), 1.0)
