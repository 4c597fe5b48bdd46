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
