"""Closed forms, used to check the generic solver (and as documentation of what it should find).

* :func:`chinchilla_optimum` — Hoffmann et al.: ``G = (alpha A / (beta B))^(1/(alpha+beta))``,
  ``N* = G (C/6)^(beta/(alpha+beta))``, ``T* = (C/6) / N*``.
* :func:`decomposed_optimum` — Liu et al.'s decomposed law under ``C = 6 · k·depth·width² · T``
  (no embeddings): the first-order conditions give
  ``a_W c_W W^-a_W = 2 a_T c_T T^-a_T`` and ``a_l c_l l^-a_l = a_T c_T T^-a_T``, i.e. width and
  depth as explicit functions of tokens, and the budget fixes tokens (one monotone equation, solved
  by bisection in log space). Asymptotically ``T* ∝ C^(1/(1 + a_T/a_l + 2 a_T/a_W))``,
  ``l* ∝ T*^(a_T/a_l)``, ``W* ∝ T*^(a_T/a_W)`` (:func:`decomposed_exponents`).
"""

from __future__ import annotations

import numpy as np

from ..core.accounting import tokens_for_budget, training_flops


def chinchilla_optimum(E, A, B, alpha, beta, budget) -> tuple[np.ndarray, np.ndarray]:
    """Compute-optimal ``(params, tokens)`` of ``E + A/N^alpha + B/T^beta`` under ``C = 6NT``.

    Examples
    --------
    >>> n, t = chinchilla_optimum(1.69, 406.4, 410.7, 0.34, 0.28, 5.76e23)
    >>> round(float(n) / 1e9, 1)
    32.2
    """
    alpha, beta = np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)
    g = (alpha * np.asarray(A, dtype=float) / (beta * np.asarray(B, dtype=float))) ** (
        1.0 / (alpha + beta)
    )
    nt = tokens_for_budget(budget, 1.0)  # N·T = C / 6
    n = g * nt ** (beta / (alpha + beta))
    return n, nt / n


def decomposed_optimum(
    p: dict, budget, *, per_block: float = 12.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Compute-optimal ``(depth, width, tokens)`` of the decomposed law, ``N = per_block·l·W²``.

    Parameters
    ----------
    p : dict
        ``c_width, a_width, c_depth, a_depth, c_tokens, a_tokens`` (``L0`` is irrelevant).
    budget : array-like
        FLOP budgets.
    per_block : float
        Parameters per block per width² (12 for a standard block).

    Returns
    -------
    depth, width, tokens : ndarray
    """
    c = np.asarray(budget, dtype=float)
    aw, al, at = (float(p[k]) for k in ("a_width", "a_depth", "a_tokens"))
    cw, cl, ct = (float(p[k]) for k in ("c_width", "c_depth", "c_tokens"))

    def shape(logt):
        term_t = at * ct * np.exp(-at * logt)
        logw = np.log(aw * cw / (2.0 * term_t)) / aw
        logl = np.log(al * cl / term_t) / al
        return logl, logw

    def excess(logt):  # log of used compute minus log budget; increasing in logt
        logl, logw = shape(logt)
        # log C = log(6·N·T) with N = per_block·depth·width², written in logs (no overflow)
        return np.log(training_flops(per_block, 1.0)) + logl + 2.0 * logw + logt - np.log(c)

    lo, hi = np.full_like(c, -50.0), np.full_like(c, 120.0)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        pos = excess(mid) > 0
        hi, lo = np.where(pos, mid, hi), np.where(pos, lo, mid)
    logt = 0.5 * (lo + hi)
    logl, logw = shape(logt)
    return np.exp(logl), np.exp(logw), np.exp(logt)


def decomposed_exponents(a_width, a_depth, a_tokens) -> dict[str, np.ndarray]:
    """Large-budget exponents of depth*, width*, tokens*, params* against C (no embeddings)."""
    aw, al, at = (np.asarray(v, dtype=float) for v in (a_width, a_depth, a_tokens))
    e_t = 1.0 / (1.0 + at / al + 2.0 * at / aw)
    e_l, e_w = e_t * at / al, e_t * at / aw
    return {"depth": e_l, "width": e_w, "tokens": e_t, "params": e_l + 2.0 * e_w}
