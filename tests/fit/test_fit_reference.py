"""Fits on the public reference tables against the papers' published numbers."""

import numpy as np
import pytest
from conftest import flat_directions_only, needs_reference_data

import scalefit
from scalefit.fit.engine import Problem
from scalefit.laws import get_law, sample_starts

pytestmark = needs_reference_data


@pytest.fixture(scope="module")
def liu_fit(chinchilla203):
    return scalefit.fit(chinchilla203, "decomposed", seed=0)


def test_liu_preprocessing_keeps_203_rows(chinchilla203):
    assert len(chinchilla203) == 203
    assert "strictly below" in chinchilla203.attrs["scalefit"]["outlier_rule"]


def test_decomposed_matches_liu(liu_fit):
    res = liu_fit
    assert res.converged
    assert res.metrics["mean_rel_err"] <= 0.0041
    assert abs(res.params["a_width"] - 0.98) <= 0.08
    assert abs(res.params["a_depth"] - 1.2) <= 0.3
    assert abs(res.params["a_tokens"] - 0.30) <= 0.01
    assert res.diagnostics["n_best"] >= 10
    assert res.diagnostics["grid_stage"].startswith("grid cells and the first")


def test_decomposed_is_global_optimum_over_500_random_starts(liu_fit, chinchilla203):
    """A seeded 500-start random multi-start finds no lower objective (relative 1e-9)."""
    law = get_law("decomposed")
    y = chinchilla203["loss"].to_numpy()
    prob = Problem(law, chinchilla203, y, loss="mse", delta=1e-3)
    z0 = sample_starts(law, 500, y, seed=12345)
    from scalefit.fit.lsq import solve_many

    _, obj, conv, _ = solve_many(prob, z0)
    assert np.nanmin(obj) >= liu_fit.objective * (1 - 1e-9)
    assert conv.mean() > 0.9


def test_objective_invariant_to_row_order_and_units(liu_fit, chinchilla203):
    perm = chinchilla203.sample(frac=1.0, random_state=1).reset_index(drop=True)
    perm.attrs = dict(chinchilla203.attrs)
    res = scalefit.fit(perm, "decomposed", starts=64, seed=5)
    assert res.objective == pytest.approx(liu_fit.objective, rel=1e-9)
    # Tokens in thousands: exponents unchanged, coefficient rescaled by 1000**a_tokens.
    scaled = chinchilla203.copy()
    scaled["tokens"] = scaled["tokens"] / 1e3
    res2 = scalefit.fit(scaled, "decomposed", starts=64, seed=5)
    assert res2.objective == pytest.approx(liu_fit.objective, rel=1e-9)
    assert res2.params["a_tokens"] == pytest.approx(liu_fit.params["a_tokens"], rel=1e-6)
    expected = liu_fit.params["c_tokens"] / 1e3 ** liu_fit.params["a_tokens"]
    assert res2.params["c_tokens"] == pytest.approx(expected, rel=1e-5)


def test_epoch_single_start_from_hoffmann_does_not_stop_early():
    table = scalefit.datasets.load("chinchilla_epoch", drop_highest=5)
    assert len(table) == 240
    hoff = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
    multi = scalefit.fit(table, "chinchilla", loss="huber", delta=1e-3, seed=0)
    single = scalefit.fit(table, "chinchilla", loss="huber", delta=1e-3, starts=1, x0=hoff)
    assert single.converged and multi.converged
    assert single.objective == pytest.approx(multi.objective, rel=1e-8)
    # Epoch AI's replication reports E≈1.82, A≈482, B≈2085, alpha≈0.35, beta≈0.37.
    assert multi.params["alpha"] == pytest.approx(0.35, abs=0.02)
    assert multi.params["beta"] == pytest.approx(0.37, abs=0.02)


def test_gradient_matches_finite_differences(liu_fit, chinchilla203):
    law = get_law("decomposed")
    prob = Problem(law, chinchilla203, chinchilla203["loss"].to_numpy(), loss="huber", delta=1e-3)
    z = np.asarray(liu_fit.internal) + 0.01
    g = prob.local(z)["grad"]
    fd = np.empty_like(z)
    for i in range(len(z)):
        e = np.zeros_like(z)
        e[i] = 1e-6
        fd[i] = (prob.objective(z + e) - prob.objective(z - e)) / 2e-6
    np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-9)


def test_lmfit_method_agrees(liu_fit, chinchilla203):
    res = scalefit.fit(chinchilla203, "decomposed", method="lmfit", seed=0)
    assert res.method == "lmfit"
    assert "lmfit_report" in res.extras
    assert res.objective == pytest.approx(liu_fit.objective, rel=1e-6)
    assert res.params["a_depth"] == pytest.approx(liu_fit.params["a_depth"], rel=1e-3)


def test_bootstrap_keeps_draws_and_brackets_estimate(chinchilla203):
    with flat_directions_only():  # c_tokens and a_tokens: draws correlate at about -0.99
        res = scalefit.fit(
            chinchilla203, "decomposed", seed=0, starts=64, bootstrap=64, boot_starts=3
        )
    assert res.draws.shape == (64, 7)
    assert res.diagnostics["boot_failed"] == 0
    for k, (lo, hi) in res.ci.items():
        assert lo <= res.params[k] <= hi
    with flat_directions_only():
        bca = scalefit.fit(
            chinchilla203,
            "decomposed",
            seed=0,
            starts=64,
            bootstrap=64,
            boot_starts=1,
            ci_method="bca",
        )
    assert set(bca.ci) == set(res.ci)


def test_cluster_bootstrap_and_holdout(chinchilla203):
    with flat_directions_only():
        res = scalefit.fit(
            chinchilla203,
            "decomposed",
            seed=0,
            starts=64,
            bootstrap=32,
            boot_starts=1,
            cluster="params",
            holdout=0.2,
        )
    assert "clusters" in res.diagnostics["resample"]
    h = res.holdout
    assert h["n_test"] == 41 and h["n_train"] == 162
    assert 0 <= h["coverage"] <= 1 and h["mae_log"] < 0.05


def test_json_round_trip(tmp_path, chinchilla203):
    with flat_directions_only():
        res = scalefit.fit(
            chinchilla203, "decomposed", seed=0, starts=32, bootstrap=16, boot_starts=1
        )
    path = res.save(tmp_path / "r.json")
    back = scalefit.FitResult.load(path)
    assert back.params == res.params
    assert back.ci == res.ci
    np.testing.assert_array_equal(back.draws, res.draws)
    np.testing.assert_allclose(back.predict(chinchilla203), res.predict(chinchilla203))
    assert back.report() == res.report()
