"""Smoke test of the IsoFLOP extrapolation benchmark's core on one small experiment."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from scalefit.datasets import DATASETS

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_isoflop_extrapolation.py"
_DIR = os.environ.get("SCALEFIT_DATA_DIR")
pytestmark = pytest.mark.skipif(
    not (_DIR and (Path(_DIR) / DATASETS["isoflops"].filename).exists()),
    reason="the IsoFLOP collection is not in SCALEFIT_DATA_DIR",
)
EXP = "marin_202603__comma__llama_2"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_isoflop_extrapolation", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def table():
    from scalefit.datasets import load

    return load("isoflops", experiment=EXP)


def test_split_holds_out_the_highest_budgets(bench, table):
    train, test, held = bench.split(table, 2)
    assert len(train) + len(test) == len(table)
    np.testing.assert_array_equal(held, [1.8e20, 3e20])
    assert train["budget"].max() < held.min() == test["budget"].min()
    ref = bench.reference_optima(test, held)
    assert ref.shape == (2,) and np.all(np.isfinite(ref))
    for c, n in zip(held, ref, strict=True):
        sizes = test.loc[test["budget"] == c, "params"]
        assert sizes.min() <= n <= sizes.max()


def test_jacobian_of_the_peers_law_matches_finite_differences(bench, table):
    n, d = table["params"].to_numpy(), table["tokens"].to_numpy()
    theta = np.array([0.3, 6.0, 7.0, 0.35, 0.3])
    jac = bench.law_log_jac(theta, n, d)
    for k in range(5):
        step = np.zeros(5)
        step[k] = 1e-6
        fd = (bench.law_log(theta + step, n, d) - bench.law_log(theta - step, n, d)) / 2e-6
        np.testing.assert_allclose(jac[:, k], fd, rtol=1e-5, atol=1e-8)


def test_core_scores_scipy_scalefit_and_approach2(bench, table):
    rows = bench.run_experiment(
        table,
        EXP,
        methods={"scipy least_squares", "scalefit lsq log huber", "approach2 parabola"},
        n_boot=0,
        log=lambda *_: None,
    )
    by = {r["method"]: r for r in rows}
    assert set(by) == {"scipy least_squares", "scalefit lsq log huber", "approach2 parabola"}
    sf, sp = by["scalefit lsq log huber"], by["scipy least_squares"]
    assert sf["n_train"] == 55 and sf["n_test"] == 30 and sf["n_ref"] == 2
    # the same objective (Huber 1e-3 on log loss): scalefit reaches the reference's minimum
    assert sf["obj_huber"] <= sp["obj_huber"] * (1 + 1e-6)
    for r in (sf, sp):
        assert 0 < r["mae_log"] < 0.1 and r["max_abs_log"] >= r["mae_log"]
        assert np.isfinite(r["nstar_log_err"]) and r["time_s"] > 0
    assert np.isnan(by["approach2 parabola"].get("mae_log", np.nan))  # no loss prediction
    assert 0.5 < by["approach2 parabola"]["nstar_ratio"] < 2
