"""Synthetic IsoFLOP sweeps with a known optimum (for tests and the bias/coverage study)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..allocate.closed_form import chinchilla_optimum
from ..core._validation import Interval, validate
from ..core.accounting import tokens_for_budget, training_flops
from ..laws import get_law
from ..laws.catalogue import HOFFMANN_2022

#: Hoffmann et al.'s Approach-3 values (:data:`scalefit.laws.catalogue.HOFFMANN_2022`), the
#: default truth.
HOFFMANN = HOFFMANN_2022
#: Chinchilla's nine IsoFLOP budgets (FLOPs).
CHINCHILLA_BUDGETS = (6e18, 1e19, 3e19, 6e19, 1e20, 3e20, 6e20, 1e21, 3e21)


def true_exponents(params: dict | None = None) -> tuple[float, float]:
    """``(a, b)`` of ``N* ∝ C^a``, ``T* ∝ C^b`` for the Chinchilla law: ``β/(α+β), α/(α+β)``."""
    p = HOFFMANN if params is None else params
    s = p["alpha"] + p["beta"]
    return p["beta"] / s, p["alpha"] / s


def synthetic_isoflops(
    params: dict | None = None,
    *,
    budgets=CHINCHILLA_BUDGETS,
    n_per_budget: int = 9,
    span: float = 1.5,
    offset: float = 0.0,
    drift: float = 0.0,
    sigma: float = 0.01,
    seed: int = 0,
) -> pd.DataFrame:
    """IsoFLOP runs of the Chinchilla law ``E + A/N^α + B/T^β`` with log-normal noise.

    At every budget ``n_per_budget`` model sizes are spaced evenly in ``log N`` over ``span``
    decades, centred ``offset + drift·(log10 C - mean log10 C)`` decades away from the true
    optimum ``N*(C)`` (``offset``: a constant miss; ``drift``: a window that moves relative to the
    optimum as compute grows, as with a grid of sizes chosen once). ``tokens = C / (6 N)``; the
    observed loss is ``L·exp(ε)``, ``ε ~ N(0, sigma²)``.

    Parameters
    ----------
    params : dict, optional
        ``E, A, B, alpha, beta`` (default: Hoffmann et al.'s values).
    budgets : array-like
        Budgets in FLOPs (default: Chinchilla's nine).
    n_per_budget : int, default 9
        Runs per budget.
    span : float, default 1.5
        Width of the sampled size range in decades.
    offset, drift : float, default 0
        Off-centre sampling (decades; decades per decade of compute).
    sigma : float, default 0.01
        Noise standard deviation on log loss.
    seed : int, default 0
        Random seed.

    Returns
    -------
    DataFrame
        ``params, tokens, flops, loss, budget``, with ``attrs["truth"]`` holding the true ``a, b``
        and optima.
    """
    validate(
        "synthetic_isoflops",
        locals(),
        {
            "n_per_budget": [Interval(int, 4, None)],
            "span": [Interval(float, 0, None, closed="neither")],
            "sigma": [Interval(float, 0, None)],
            "seed": [Interval(int, 0, None)],
        },
    )
    p = dict(HOFFMANN if params is None else params)
    rng = np.random.default_rng(seed)
    budgets = np.asarray(budgets, dtype=float)
    n_star, _ = chinchilla_optimum(p["E"], p["A"], p["B"], p["alpha"], p["beta"], budgets)
    lc = np.log10(budgets)
    centre = np.log10(n_star) + offset + drift * (lc - lc.mean())
    steps = np.linspace(-span / 2, span / 2, n_per_budget)
    logn = centre[:, None] + steps[None, :]
    n = 10.0 ** logn.ravel()
    c = np.repeat(budgets, n_per_budget)
    t = tokens_for_budget(c, n)
    loss = get_law("chinchilla").evaluate(p, {"params": n, "tokens": t})
    loss = loss * np.exp(rng.normal(0.0, sigma, loss.shape))
    frame = pd.DataFrame(
        {"params": n, "tokens": t, "flops": training_flops(n, t), "loss": loss, "budget": c}
    )
    a, b = true_exponents(p)
    frame.attrs["truth"] = {"a": a, "b": b, "params_opt": n_star.tolist()}
    return frame
