"""The linearised (ensemble) update and the subset searches built on it.

The draws of a fit (bootstrap resamples or posterior samples) are treated as a Gaussian ensemble
over the quantity of interest ``q`` (e.g. ``log N*`` at the target budget) and the log-losses
``h_j`` that each candidate run would show. A run is a noisy observation ``y_j = h_j + ε``,
``ε ~ N(0, σ²)``; conditioning the joint Gaussian on a set ``S`` of runs gives

    Var(q | y_S) = Var(q) - Cov(q, h_S) (Cov(h_S) + σ² I)⁻¹ Cov(h_S, q),

which depends only on which runs are chosen, not on what they will show (a linear-Gaussian
property). Covariances are the sample covariances of the draws, so no derivative of the law or
of the optimiser is needed and any law works. Adding one run is a rank-one update of the joint
covariance, so a greedy search over J candidates costs O(k·J²).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

#: Largest number of subsets the exhaustive search will enumerate.
MAX_SUBSETS = 500_000
#: Scores (or final variances) within this relative distance of the best count as tied; a tie
#: goes to the lowest candidate index (or to the gain ordering), so rounding-level changes of the
#: draws cannot flip a choice between runs that are equally good.
TIE = 1e-9


@dataclass
class Ensemble:
    """Joint covariance of ``[q, h_1 … h_J]`` from the draws, and the noise variance."""

    cov: np.ndarray  # (1 + J, 1 + J)
    noise: float

    @classmethod
    def from_draws(cls, q: np.ndarray, h: np.ndarray, noise_sd: float) -> Ensemble:
        """``q`` (S,) and ``h`` (S, J) evaluated at every draw."""
        z = np.column_stack([q, h])
        z = z - z.mean(axis=0)
        return cls(z.T @ z / (len(z) - 1), float(noise_sd) ** 2)

    def variance(self, chosen) -> float:
        """``Var(q | y_chosen)`` (runs may repeat)."""
        idx = np.asarray(list(chosen), dtype=int) + 1
        if idx.size == 0:
            return float(self.cov[0, 0])
        c_qs = self.cov[0, idx]
        c_ss = self.cov[np.ix_(idx, idx)] + self.noise * np.eye(idx.size)
        return float(self.cov[0, 0] - c_qs @ np.linalg.solve(c_ss, c_qs))


def greedy(
    ens: Ensemble, cost: np.ndarray, budget: float, k: int, *, per_cost: bool, replace: bool
):
    """Add runs one at a time by largest variance reduction (or reduction per FLOP).

    Returns the chosen indices and the variance after each addition.
    """
    cov = ens.cov.copy()
    left = float(budget)
    chosen, path = [], []
    used = np.zeros(len(cost), dtype=bool)
    for _ in range(k):
        diag = np.diag(cov)[1:]
        gain = cov[0, 1:] ** 2 / (diag + ens.noise)
        ok = (cost <= left * (1 + 1e-12)) & (replace | ~used)
        if not ok.any():
            break
        score = np.where(ok, gain / cost if per_cost else gain, -np.inf)
        j = _first_best(score)
        col = cov[:, j + 1].copy()
        cov -= np.outer(col, col) / (col[j + 1] + ens.noise)
        chosen.append(j)
        path.append(float(cov[0, 0]))
        used[j] = True
        left -= float(cost[j])
    return chosen, path


def best_greedy(ens: Ensemble, cost, budget, k, *, replace: bool):
    """The better of gain-greedy and gain-per-FLOP-greedy (the usual budgeted-greedy guard)."""
    runs = [greedy(ens, cost, budget, k, per_cost=pc, replace=replace) for pc in (False, True)]
    runs = [r for r in runs if r[0]]
    if not runs:
        return [], []
    best = runs[0]
    for r in runs[1:]:
        if r[1][-1] < best[1][-1] - TIE * abs(best[1][-1]):
            best = r
    return best


def _first_best(score: np.ndarray) -> int:
    """Lowest index whose score is within :data:`TIE` (relative) of the largest."""
    top = float(np.max(score))
    return int(np.flatnonzero(score >= top - TIE * abs(top))[0])


def exhaustive(ens: Ensemble, cost, budget, k: int):
    """Best subset of at most ``k`` distinct candidates within the budget (small cases only)."""
    n = len(cost)
    k = min(k, n)  # subsets of distinct runs: a k of 10**20 is n, not 10**20 loop turns
    total = sum(_comb(n, m) for m in range(1, k + 1))
    if total > MAX_SUBSETS:
        from ..core.errors import ScaleFitError

        raise ScaleFitError(
            f"search='exhaustive' (--search): {total} subsets of {n} candidates exceed the "
            f"exhaustive limit {MAX_SUBSETS}; use the greedy search or a smaller k (--k)."
        )
    best, best_var = [], ens.variance([])
    for m in range(1, k + 1):
        for sub in itertools.combinations(range(n), m):
            if cost[list(sub)].sum() > budget * (1 + 1e-12):
                continue
            v = ens.variance(sub)
            if v < best_var - 1e-18:
                best, best_var = list(sub), v
    return best, best_var


def _comb(n: int, m: int) -> int:
    from math import comb

    return comb(n, m)
