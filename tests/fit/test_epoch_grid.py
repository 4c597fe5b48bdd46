"""Opt-in: our default Chinchilla fit against a reimplementation of Epoch AI's 4,500-start grid."""

import itertools

import numpy as np
import pytest
from conftest import needs_reference_data
from scipy.optimize import minimize
from scipy.special import huber, logsumexp

import scalefit


def epoch_grid_best(table, delta=1e-3):
    """Epoch AI's procedure: L-BFGS-B on the summed Huber loss of log-loss residuals in the LSE
    form, from every point of their grid (alpha, beta in 0..2 step 0.5; e in -1..1 step 0.5;
    a, b in 0..25 step 5). We pass the exact gradient, which only makes the reference stronger."""
    logn = np.log(table["params"].to_numpy())
    logt = np.log(table["tokens"].to_numpy())
    logy = np.log(table["loss"].to_numpy())

    def obj(theta):
        a, b, e, alpha, beta = theta
        terms = np.stack([a - alpha * logn, b - beta * logt, np.full_like(logn, e)])
        pred = logsumexp(terms, axis=0)
        r = pred - logy
        w = np.exp(terms - pred)  # softmax weights: d pred / d (a, b, e)
        psi = np.clip(r, -delta, delta)  # derivative of scipy.special.huber(delta, r)
        grad = np.array(
            [psi @ w[0], psi @ w[1], psi @ w[2], -psi @ (w[0] * logn), -psi @ (w[1] * logt)]
        )
        return np.sum(huber(delta, r)), grad

    best = (np.inf, None)
    grid = itertools.product(
        np.arange(0, 30, 5),
        np.arange(0, 30, 5),
        np.arange(-1, 1.5, 0.5),
        np.arange(0, 2.5, 0.5),
        np.arange(0, 2.5, 0.5),
    )
    for start in grid:
        out = minimize(obj, np.array(start, float), jac=True, method="L-BFGS-B")
        if out.fun < best[0]:
            best = (out.fun, out.x)
    return best


@pytest.mark.slow
@needs_reference_data
def test_default_fit_at_least_as_good_as_epoch_grid():
    table = scalefit.datasets.load("chinchilla_epoch", drop_highest=5)
    res = scalefit.fit(table, "chinchilla", loss="huber", delta=1e-3, seed=0)
    grid_obj, theta = epoch_grid_best(table)
    # Our objective is the same sum of scipy.special.huber over the same residuals.
    print(
        f"scalefit objective {res.objective:.12g}; Epoch grid best {grid_obj:.12g} at "
        f"a, b, e, alpha, beta = {np.round(theta, 5)}"
    )
    assert res.objective <= grid_obj * (1 + 1e-9), (res.objective, grid_obj, theta)
