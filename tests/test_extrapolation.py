"""Calibrated extrapolation (scalefit.fit.discrepancy) and the validation protocol."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scalefit.errors import ScaleFitError
from scalefit.fit.discrepancy import Discrepancy, _kappa, _scatter
from scalefit.validate import extrapolation_check


def test_scatter_and_kappa_recover_known_values():
    rng = np.random.default_rng(0)
    lc = rng.uniform(-2, 2, 20_000)
    r = rng.normal(0, 0.004 * np.exp(0.3 * lc))
    sigma, gamma = _scatter(r, lc)
    assert sigma == pytest.approx(0.004, rel=0.02) and gamma == pytest.approx(0.3, abs=0.02)
    d = rng.uniform(0, 3, 20_000)
    s0 = np.full(d.shape, 0.004)
    r = rng.normal(0, np.hypot(s0, 0.01 * d))
    assert _kappa(r, d, s0) == pytest.approx(0.01, rel=0.05)
    assert _kappa(rng.normal(0, 0.004, 5000), d[:5000], s0[:5000]) < 1e-3


def test_predictive_sd_is_flat_inside_and_grows_beyond_the_data():
    disc = Discrepancy(0.004, 0.0, 0.001, 0.01, 40.0, 45.0, ("params",))
    sd = disc.sd([40.0, 45.0, 46.0, 48.0])
    assert sd[0] == pytest.approx(0.004) and sd[1] == pytest.approx(0.004)
    assert sd[2] == pytest.approx(np.hypot(0.004, 0.01)) and sd[3] > sd[2]
    assert disc.to_dict()["group"] == ["params"]


def _misspecified(seed=0):
    """A Chinchilla-form table whose truth bends away from the law at high compute."""
    from scalefit.isoflop import synthetic_isoflops

    runs = synthetic_isoflops(
        budgets=np.geomspace(1e18, 1e22, 9), n_per_budget=7, sigma=0.004, seed=seed
    ).drop(columns="budget")
    lc = np.clip(np.log(runs["flops"].to_numpy() / 1e18), 0, None)
    runs["loss"] = runs["loss"] * np.exp(0.0015 * lc**1.5)  # misfit growing with compute
    return runs


@pytest.mark.slow
def test_calibrated_intervals_cover_better_on_misspecified_data():
    frame = extrapolation_check(
        _misspecified(), "chinchilla", cuts=(0.2,), probs=(0.95,), n_boot=40, starts=32
    )
    today = frame[frame["predictive"] == "today"].iloc[0]
    cal = frame[frame["predictive"] == "calibrated"].iloc[0]
    assert cal["kappa"] > 0
    assert cal["coverage"] >= today["coverage"]
    assert cal["lpd"] > today["lpd"]


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"method": "mcmc"}, "'method' parameter of extrapolation_check"),
        ({"cuts": (0.2, 1.5)}, "'cuts' parameter of extrapolation_check"),
        ({"probs": ()}, "'probs' parameter of extrapolation_check"),
        ({"n_boot": 5}, "'n_boot' parameter of extrapolation_check"),
    ],
)
def test_bad_protocol_arguments(kw, match):
    with pytest.raises(ScaleFitError, match=match):
        extrapolation_check(pd.DataFrame(), "chinchilla", **kw)
