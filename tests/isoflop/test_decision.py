"""scalefit.isoflop.decision: N* at new budgets with parameter-only and calibrated intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scalefit.allocate import chinchilla_optimum
from scalefit.core.errors import ScaleFitError
from scalefit.isoflop import (
    HOFFMANN,
    Calibration,
    fit_calibration,
    fit_stack_weights,
    recommend,
    rolling_origins,
    synthetic_isoflops,
)
from scalefit.isoflop.decision import DEFAULT_METHOD

TARGET = 1e23


def _truth(c):
    p = HOFFMANN
    n, _ = chinchilla_optimum(p["E"], p["A"], p["B"], p["alpha"], p["beta"], c)
    return float(np.log(n))


@pytest.mark.parametrize(
    "method",
    ["parabola", "parabola_wls", DEFAULT_METHOD, "law_huber", "parabola_shared",
     "parabola_sharedc", "slope_prior", "stack"],
)  # fmt: skip
def test_recovers_the_true_optimum(method):
    runs = synthetic_isoflops(sigma=0.003, seed=0)
    d = recommend(runs, [1e21, TARGET], method=method, n_boot=10, seed=0)
    row = d.frame.iloc[1]
    assert abs(np.log(row["params"]) - _truth(TARGET)) < 0.1
    assert row["tokens"] == pytest.approx(TARGET / (6 * row["params"]))
    assert row["params_lo95"] < row["params"] < row["params_hi95"]
    assert row["tokens_lo95"] < row["tokens"] < row["tokens_hi95"]


def test_calibrated_interval_is_wider_and_grows_with_distance():
    runs = synthetic_isoflops(sigma=0.003, seed=1)
    cal = Calibration(0.05, 0.1, 10, 20, "test", "parabola")
    d = recommend(runs, [1e22, 1e24], method="parabola", calibration=cal, n_boot=10)
    f = d.frame
    assert list(f["interval"]) == ["calibrated", "calibrated"]
    assert np.all(f["params_hi95"] > f["params_hi95_param"])
    assert np.all(f["params_lo95"] < f["params_lo95_param"])
    assert np.all(f["params_hi80"] < f["params_hi95"])
    width = np.log(f["params_hi95"] / f["params_lo95"]).to_numpy()
    assert width[1] > width[0]  # farther from the data: wider
    assert f["se_misfit"].iloc[1] == pytest.approx(np.hypot(0.05, 0.1 * f["distance"].iloc[1]))
    assert d.calibration is cal and d.to_dict()["calibration"]["kappa"] == 0.1


def test_own_calibration_from_rolling_origins():
    runs = synthetic_isoflops(sigma=0.005, seed=2)
    errs = rolling_origins(runs, "parabola", n_boot=10)
    # nine budgets, origins from the third: k = 3..7, two scored budgets each
    assert len(errs) == 10 and set(errs["method"]) == {"parabola"}
    assert np.all(errs["distance"] > 0) and np.all(np.isfinite(errs["s_ref"]))
    d = recommend(runs, TARGET, method="parabola", calibration="own", n_boot=10)
    assert d.frame["interval"].iloc[0] == "calibrated"
    assert d.calibration.source.startswith("own: 5 rolling origins")


def test_too_few_budgets_for_own_calibration_gives_parameters_only():
    runs = synthetic_isoflops(budgets=[1e19, 1e20, 1e21, 1e22], sigma=0.005, seed=3)
    d = recommend(runs, TARGET, method="parabola", calibration="own", n_boot=10)
    assert d.calibration is None
    assert list(d.frame["interval"]) == ["parameters only"]
    assert "parameters only" in d.notes[0] and "scored budgets" in d.notes[0]
    assert d.frame["params_hi95"].iloc[0] == d.frame["params_hi95_param"].iloc[0]


def test_refuses_too_few_budgets():
    runs = synthetic_isoflops(budgets=[1e19, 1e20], seed=0)
    with pytest.raises(ScaleFitError, match="at least 3 budgets with 4 or more runs"):
        recommend(runs, TARGET)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"method": "nope"}, "'method' parameter of recommend"),
        ({"calibration": "both"}, "'calibration' parameter of recommend"),
        ({"ci_probs": (0.8, 1.5)}, "'ci_probs' parameter of recommend"),
    ],
)
def test_bad_options_are_one_line(kw, match):
    runs = synthetic_isoflops(seed=0)
    with pytest.raises(ScaleFitError, match=match) as info:
        recommend(runs, TARGET, **kw)
    assert "\n" not in str(info.value)


def test_bad_budgets_and_table():
    runs = synthetic_isoflops(seed=0)
    with pytest.raises(ScaleFitError, match="'budgets' parameter of recommend"):
        recommend(runs, [-1.0])
    with pytest.raises(ScaleFitError, match="needs columns"):
        recommend(runs.drop(columns="budget"), TARGET)


def test_fit_calibration_recovers_a_known_misfit():
    rng = np.random.default_rng(0)
    d = rng.uniform(0.2, 2.5, 600)
    err = rng.normal(0.0, np.hypot(0.05, 0.2 * d))
    frame = pd.DataFrame(
        {"method": "m", "err": err, "distance": d, "s_param": 0.0, "s_ref": 0.0, "origin": 1.0}
    )
    cal = fit_calibration(frame, method="m", source="test")
    assert cal.kappa == pytest.approx(0.2, rel=0.15)
    assert cal.s0 == pytest.approx(0.05, abs=0.03)
    one = fit_calibration(frame, method="m", source="test", floor=False)
    assert one.s0 == 0.0 and one.kappa > 0.2  # no floor: the slope takes it


def _errors(parts, errs, experiment="a"):
    rows = []
    for j, e in enumerate(errs):
        for p, v in zip(parts, e, strict=True):
            rows.append({"origin": 1.0, "budget": float(j), "experiment": experiment,
                         "method": p, "err": v})  # fmt: skip
    return pd.DataFrame(rows)


def test_fit_stack_weights_finds_the_cancelling_combination():
    rng = np.random.default_rng(0)
    bias = rng.uniform(0.1, 0.3, 12)
    # part a errs by +bias, part b by -bias/3: 1/4 a + 3/4 b cancels; c is noise only
    errs = np.stack([bias, -bias / 3, rng.normal(0, 0.2, 12)], 1)
    w = fit_stack_weights(_errors(("a", "b", "c"), errs), parts=("a", "b", "c"))
    assert w["a"] == pytest.approx(0.25, abs=1e-6) and w["b"] == pytest.approx(0.75, abs=1e-6)
    assert w["c"] == pytest.approx(0.0, abs=1e-9) and sum(w.values()) == pytest.approx(1.0)


def test_fit_stack_weights_weighs_groups_equally():
    # group x (10 rows) favours part a, group y (2 rows) part b by more per row: equal weights
    # per group let y win; equal weights per row let x win
    x = _errors(("a", "b"), [[0.0, 0.1]] * 10, "x")
    y = _errors(("a", "b"), [[0.8, 0.0]] * 2, "y")
    both = pd.concat([x, y], ignore_index=True)
    assert fit_stack_weights(both, parts=("a", "b"))["a"] == pytest.approx(1.0)
    assert fit_stack_weights(both, parts=("a", "b"), group="experiment")["b"] == pytest.approx(1.0)
    with pytest.raises(ScaleFitError, match="fit_stack_weights: needs at least 3"):
        fit_stack_weights(x.head(4), parts=("a", "b", "c"))


def test_stack_is_the_weighted_mean_of_its_parts():
    from scalefit.allocate.misfit import STACK_WEIGHTS
    from scalefit.isoflop._estimators import STACK_PARTS, estimate, groups_of

    assert set(STACK_WEIGHTS) == set(STACK_PARTS)
    assert all(w >= 0 for w in STACK_WEIGHTS.values())
    assert sum(STACK_WEIGHTS.values()) == pytest.approx(1.0, abs=1e-3)
    groups = groups_of(synthetic_isoflops(sigma=0.003, seed=4))
    logc = np.log([1e22, 1e23])
    parts, _ = estimate(groups, logc, list(STACK_PARTS), seed=0)
    w = {"parabola": 0.3, "anchored": 0.7, "law_huber": 0.0}
    got, _ = estimate(groups, logc, ["stack"], seed=0, stack_weights=w)
    want = 0.3 * parts["parabola"] + 0.7 * parts["anchored"]
    assert np.allclose(got["stack"], want)
    shipped, _ = estimate(groups, logc, ["stack"], seed=0)
    assert np.allclose(shipped["stack"], sum(STACK_WEIGHTS[p] * parts[p] for p in STACK_PARTS))


def test_law_near_fits_the_runs_near_each_minimum():
    from scalefit.isoflop._estimators import NEAR_WIDTH, Budget, _centre, _near

    x = np.linspace(18.0, 24.0, 13)  # ln N, 0.5 apart, minimum at 21
    g = Budget(50.0, np.exp(x), np.exp(50.0 - x) / 6, 2.0 + 0.05 * (x - 21.0) ** 2)
    assert _centre(g) == pytest.approx(21.0)
    near = _near(g)
    assert np.allclose(np.log(near.n), [20.0, 20.5, 21.0, 21.5, 22.0])  # |x - 21| <= NEAR_WIDTH
    assert NEAR_WIDTH == 1.0
    few = Budget(50.0, np.exp(x[::3]), np.exp(50.0 - x[::3]) / 6, g.y[::3])  # 1.5 apart: 3 nearest
    assert len(_near(few).y) == 3
    d = recommend(synthetic_isoflops(sigma=0.003, seed=0), TARGET, method="law_near", n_boot=10)
    assert np.isfinite(d.frame["params"].iloc[0]) and d.frame["interval"].iloc[0] == "calibrated"
