"""scalefit.isoflop.decision: N* at new budgets with parameter-only and calibrated intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scalefit.allocate import chinchilla_optimum
from scalefit.errors import ScaleFitError
from scalefit.isoflop import (
    HOFFMANN,
    Calibration,
    fit_calibration,
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
    ["parabola", "parabola_wls", DEFAULT_METHOD, "law_huber", "parabola_shared", "parabola_sharedc",
     "slope_prior"],
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
