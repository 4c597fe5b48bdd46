"""LAD fits are certified by the subgradient condition, and only at a minimum of sum |r|."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import needs_reference_data

import scalefit
from scalefit.fit.checks import check_point
from scalefit.fit.report import format_report
from scalefit.laws import Law

#: Besiroglu et al.'s LAD replication of Chinchilla's Approach 3 (E, A, B, alpha, beta).
EPOCH_LAD = {"E": 1.8169, "A": 482.0, "B": 2085.4, "alpha": 0.34781, "beta": 0.36585}


@pytest.fixture(scope="module")
def lad_fit():
    table = scalefit.datasets.load("chinchilla_epoch", drop_highest=5)
    res = scalefit.fit(table, "chinchilla", loss="lad", seed=0, progress=False)
    scale = float(np.log(table["loss"].min()))
    return res, res.extras["problem"], np.asarray(res.internal), scale


@needs_reference_data
def test_epoch_lad_fit_is_certified_at_the_published_values(lad_fit):
    res, problem, z, scale = lad_fit
    assert res.converged, res.warnings
    for name, value in EPOCH_LAD.items():
        assert res.params[name] == pytest.approx(value, rel=2e-4), name
    # no asymptotic stderr for LAD: not available, and the result says to bootstrap
    assert all(np.isnan(v) for v in res.stderr.values())
    assert "use the bootstrap" in format_report(res)
    assert check_point(problem, z, solver_converged=True, scale=scale).ok


@needs_reference_data
@pytest.mark.parametrize("shift", [1e-3, -1e-4])
def test_a_perturbed_lad_optimum_is_not_certified(lad_fit, shift):
    _, problem, z, scale = lad_fit
    for j in range(len(z)):
        moved = z.copy()
        moved[j] += shift
        check = check_point(problem, moved, solver_converged=True, scale=scale)
        assert not check.ok, j
        assert any("subgradient" in r for r in check.reasons), check.reasons


@needs_reference_data
def test_a_lad_fit_stopped_early_is_not_certified(lad_fit):
    _, problem, z, scale = lad_fit
    start = z + np.linspace(0.05, 0.25, len(z))
    for iters in (2, 10):
        early = problem.solve_raw(start[None, :], max_iter=iters)["z"][0]
        # even when the caller claims the solver converged, the subgradient test refuses it
        check = check_point(problem, early, solver_converged=True, scale=scale)
        assert not check.ok, iters
        assert any("subgradient" in r for r in check.reasons), check.reasons


@needs_reference_data
def test_cli_lad_fit_exits_0_with_stderr_not_available():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scalefit",
            "fit",
            "chinchilla_epoch",
            "--drop-highest",
            "5",
            "--law",
            "chinchilla",
            "--loss",
            "lad",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr + out.stdout
    assert "converged  yes" in out.stdout
    assert "n/a: bootstrap" in out.stdout
    assert "use the bootstrap" in out.stdout


def test_lad_minimum_with_no_row_at_the_kink_is_certified_only_inside_the_median_interval():
    # four rows: every E between the 2nd and 3rd loss minimises sum |log y - log E|, and the
    # solver may stop where no residual sits at the kink (the second-order test then runs on
    # every direction)
    tab = pd.DataFrame({"params": [1e6, 2e6, 3e6, 4e6], "loss": [2.0, 2.5, 3.1, 3.9]})
    res = scalefit.fit(
        tab, formula="E + 0*params", loss="lad", starts=16, x0={"E": 2.8}, progress=False
    )
    assert res.converged, res.warnings
    assert 2.5 <= res.params["E"] <= 3.1
    problem = res.extras["problem"]
    scale = float(np.log(2.0))
    inside = problem.law.to_internal({"E": 2.8}, problem.refs)
    outside = problem.law.to_internal({"E": 2.2}, problem.refs)
    assert check_point(problem, inside, solver_converged=True, scale=scale).ok
    check = check_point(problem, outside, solver_converged=True, scale=scale)
    assert not check.ok
    assert any("subgradient" in r for r in check.reasons), check.reasons


#: Issue 39's example: F(a) = |a| + |1 + a - a^2| on linear residuals. At a = 0 the kink row's
#: multiplier sits at +1 (the smooth row exactly balances it), so 0 is a subgradient, yet
#: F(-h) = 1 - h^2: a stationary point, not a minimum. The minimum is F = 0.618 at a = -0.618.
BALANCED = Law.from_formula("a*(3 - 2*x) + a**2*(x - 1)", inputs=["x"], starts={"a": 0.0})
BALANCED_ROWS = pd.DataFrame({"x": [1.0, 2.0], "loss": [0.0, 1.0]})


@pytest.mark.filterwarnings("ignore::scalefit.core.errors.ConvergenceWarning")
@pytest.mark.parametrize("method", ["jax", "varpro"])
def test_a_kink_balanced_by_the_smooth_rows_is_stationary_not_converged(method):
    kw = {"loss": "lad", "residuals": "linear", "method": method, "progress": False}
    res = scalefit.fit(BALANCED_ROWS, BALANCED, starts=1, **kw)
    assert abs(res.params["a"]) < 1e-5 and res.objective == pytest.approx(1.0, abs=1e-6)
    assert not res.converged
    assert res.diagnostics["stationary"] is True
    assert res.warnings[0].startswith("stationary, not converged: the LAD objective decreases")
    assert "converged  NO (stationary" in format_report(res)
    # from more starts the minimum is found, and certified
    best = scalefit.fit(BALANCED_ROWS, BALANCED, starts=16, seed=0, **kw)
    assert best.converged, best.warnings
    assert best.params["a"] == pytest.approx(-(np.sqrt(5) - 1) / 2, abs=1e-6)
    assert best.objective == pytest.approx((np.sqrt(5) - 1) / 2, abs=1e-6)


@pytest.mark.filterwarnings("ignore::scalefit.core.errors.ConvergenceWarning")
def test_a_parameter_at_zero_where_the_objective_falls_off_zero_is_not_certified():
    # y = 1 + 2x: with A = 0 the best E is the median of y (any E in [7.2, 8.8]); raising the
    # positive A from 0 lowers sum |r| at once, so A = 0 is no minimum, though every internal
    # (log-coordinate) gradient vanishes there
    x = np.arange(1.0, 7.0)
    y = 1 + 2 * x + np.array([0.1, -0.1, 0.2, -0.2, 0.05, 0.0])
    tab = pd.DataFrame({"params": x, "loss": y})
    law = Law.from_formula("E + A*params", kinds={"A": "positive"})
    res = scalefit.fit(tab, law, loss="lad", residuals="linear", starts=4, progress=False)
    assert res.converged, res.warnings  # the fit itself finds A = 1.98
    problem = res.extras["problem"]
    parked = law.to_internal({"A": 1e-30, "E": 8.0}, problem.refs)
    check = check_point(problem, parked, solver_converged=True, scale=float(np.log(y.min())))
    assert check.at_zero == ("A",)
    assert not check.ok
    assert any(
        "A ran to its lower bound 0, but the LAD objective decreases" in r for r in check.reasons
    )
    # where the data do want A = 0 (y falls with x), the boundary is certified
    down = tab.assign(loss=20 - y)
    res0 = scalefit.fit(down, law, loss="lad", residuals="linear", starts=4, progress=False)
    problem0 = res0.extras["problem"]
    parked0 = law.to_internal({"A": 1e-30, "E": float(np.median(down["loss"]))}, problem0.refs)
    check0 = check_point(
        problem0, parked0, solver_converged=True, scale=float(np.log(down["loss"].min()))
    )
    assert check0.at_zero == ("A",) and check0.ok, check0.reasons
