"""Bootstrap of large tables: random starts screened on a row subsample of each resample.

Above ``engine.SCREEN_ABOVE`` rows the bootstrap solves the warm start on every row and the random
starts on a subsample, polishing a screened start on every row only when it lies in another basin
and is not clearly worse. These tests compare it with the unscreened bootstrap (every start on
every row, ``screen=False``) on the same resample counts and random starts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import scalefit
from scalefit.core.errors import ScaleFitError
from scalefit.fit import engine
from scalefit.fit.bootstrap import _jackknife, _jackknife_linear, resample_groups
from scalefit.fit.synthetic import simulate_table


def _two_bumps(n: int, seed: int = 0) -> pd.DataFrame:
    """Two bumps of equal height: a one-bump law has two basins that resamples swap."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 10.0, n)
    mu = 1.0 + 0.5 * np.exp(-((x - 3.0) ** 2)) + 0.5 * np.exp(-((x - 7.0) ** 2))
    return pd.DataFrame({"x": x, "loss": mu * np.exp(0.01 * rng.standard_normal(n))})


BUMP = scalefit.Law.from_formula(
    "L0 + h*exp(-(x - m)**2)",
    inputs=["x"],
    kinds={"L0": "positive", "h": "positive"},
    starts={"m": (1.0, 9.0), "L0": (0.5, 2.0), "h": (0.1, 1.0)},
)


def _objective(res, draw, counts) -> float:
    """The fit's objective at a draw (public parameters) with a resample's row counts."""
    problem = res.extras["problem"]
    z = res.law.to_internal(dict(zip(res.law.param_names, draw, strict=True)), problem.refs)
    return problem.objective(np.asarray(z, dtype=float), counts)


def test_screened_bootstrap_catches_basin_jumps():
    table = _two_bumps(engine.SCREEN_ABOVE + 808)
    res = scalefit.fit(table, BUMP, seed=0, starts=32, progress=False)
    m0 = res.params["m"]
    assert min(abs(m0 - 3.0), abs(m0 - 7.0)) < 0.05
    kw = dict(seed=0, boot_starts=5, progress=False)
    screened = scalefit.bootstrap(res, table, 16, **kw)
    full = scalefit.bootstrap(res, table, 16, screen=False, **kw)
    assert screened.diagnostics["boot_screened_on_rows"] == engine.SCREEN_ROWS
    assert full.diagnostics["boot_screened_on_rows"] is None
    assert screened.diagnostics["boot_failed"] == full.diagnostics["boot_failed"] == 0
    m = BUMP.param_names.index("m")
    jumped = np.abs(full.draws[:, m] - m0) > 2.0
    jumped_screened = np.abs(screened.draws[:, m] - m0) > 2.0
    # some resamples' best basin is the other bump, and the screened bootstrap finds it too
    assert jumped.any() and not jumped.all()
    assert np.all(jumped_screened[jumped])
    assert screened.diagnostics["boot_polished"] >= jumped_screened.sum()
    assert screened.diagnostics["boot_warm_start_best"] == pytest.approx(1 - jumped_screened.mean())
    # Every draw equals the full multi-start's, except where a random start reached another
    # basin only from its screened solution: there the screened draw has the lower objective on
    # that resample's rows (same counts: the bootstrap's stream of resamples).
    same = np.all(np.isclose(screened.draws, full.draws, rtol=1e-6, atol=0), axis=1)
    assert same.sum() >= len(same) - 2
    rng = np.random.default_rng([0, 1])
    (_, counts), *_ = resample_groups(table, 16, cluster=None, rng=rng, group=16)
    for i in np.flatnonzero(~same):
        f_screened, f_full = (_objective(res, d[i], counts[i]) for d in (screened, full))
        assert f_screened < f_full * (1 - 1e-9)
        assert jumped_screened[i] and not jumped[i]
    # BCa on a large table: the same draws, jackknife values from one Newton step per row
    bca = scalefit.bootstrap(res, table, 16, ci_method="bca", **kw)
    assert bca.diagnostics["bca_jackknife"] == "one-step"
    np.testing.assert_array_equal(bca.draws, screened.draws)
    assert all(np.isfinite(lo) and lo <= hi for lo, hi in bca.ci.values())


def test_screen_is_validated_and_inert_on_small_tables():
    table = _two_bumps(500)
    res = scalefit.fit(table, BUMP, seed=0, starts=16, progress=False)
    with pytest.raises(ScaleFitError, match="'screen' parameter of bootstrap"):
        scalefit.bootstrap(res, table, 4, screen="yes")
    a = scalefit.bootstrap(res, table, 6, seed=1, boot_starts=2, progress=False)
    b = scalefit.bootstrap(res, table, 6, seed=1, boot_starts=2, screen=False, progress=False)
    assert a.diagnostics["boot_screened_on_rows"] is None
    assert a.diagnostics["boot_polished"] == 0
    np.testing.assert_array_equal(a.draws, b.draws)


@pytest.mark.slow
def test_screened_bootstrap_equals_full_multistart_decomposed():
    table = simulate_table("decomposed", n=30_000, seed=1)
    res = scalefit.fit(table, "decomposed", seed=0, progress=False)
    screened = scalefit.bootstrap(res, table, 32, seed=0, progress=False)
    full = scalefit.bootstrap(res, table, 32, seed=0, screen=False, progress=False)
    assert screened.diagnostics["boot_failed"] == full.diagnostics["boot_failed"] == 0
    np.testing.assert_allclose(screened.draws, full.draws, rtol=1e-6)
    for name in res.params:
        assert screened.ci[name] == pytest.approx(full.ci[name], rel=1e-6)


def _acceleration(jack: np.ndarray) -> np.ndarray:
    dev = jack.mean(axis=0) - jack
    return np.sum(dev**3, axis=0) / (6.0 * np.sum(dev**2, axis=0) ** 1.5)


@pytest.mark.parametrize("cluster", [None, "group"])
def test_one_step_jackknife_matches_refits(cluster):
    table = simulate_table("decomposed", n=600, seed=4)
    table["group"] = np.arange(len(table)) % 300  # clusters of two rows
    res = scalefit.fit(table, "decomposed", seed=0, starts=32, progress=False)
    problem = res.extras["problem"]
    refit = _jackknife(problem, res, table, cluster)
    one_step = _jackknife_linear(problem, res, table, cluster)
    theta = np.array([res.params[name] for name in res.law.param_names])
    # the leave-one-out moves agree to first order; the BCa acceleration to a few per cent
    for j in range(len(theta)):
        move, approx = refit[:, j] - theta[j], one_step[:, j] - theta[j]
        assert np.corrcoef(move, approx)[0, 1] > 0.999
        np.testing.assert_allclose(approx, move, rtol=0, atol=0.05 * np.abs(move).max())
    a_refit = _acceleration(refit)
    np.testing.assert_allclose(
        _acceleration(one_step), a_refit, rtol=0.05, atol=0.05 * np.abs(a_refit).max()
    )
