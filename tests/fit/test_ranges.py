"""Declared ranges: validity conditions fail a fit, hard constraints hold it on the bound."""

import dataclasses
import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import scalefit
from scalefit import ConvergenceWarning
from scalefit.cli import main
from scalefit.laws import Law, Param, get_law, list_laws


def _quiet_fit(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return scalefit.fit(*args, **kwargs)


def _power_table(b: float) -> pd.DataFrame:
    """``loss = 2 * params**b`` times a fixed small wiggle (no randomness)."""
    params = np.geomspace(1e6, 1e9, 12)
    wiggle = 1.0 + 0.01 * np.sin(np.arange(12))
    return pd.DataFrame({"params": params, "loss": 2.0 * params**b * wiggle})


def _power_law(range_kind: str) -> Law:
    return Law(
        name="power_test",
        inputs=("params",),
        params=(
            Param("a", "positive", start=(0.1, 10.0)),
            Param("b", "exponent", start=(0.1, 0.9), bounds=(0.0, 1.0), range_kind=range_kind),
        ),
        expr=lambda xp, p, x: p["a"] * x["params"] ** p["b"],
        formula="L = a params^b",
    )


#: The catalogue as shipped, read when pytest collects this file (before any test registers a law).
BUILT_IN = tuple(list_laws())


def test_every_catalogue_parameter_declares_what_its_range_means():
    for name in BUILT_IN:
        for p in get_law(name).params:
            assert p.range_kind in ("constraint", "validity"), (name, p.name)
            if p.kind == "exponent":
                assert p.range_kind == "validity" and p.bounds == (0.0, 5.0), (name, p.name)
            if p.kind == "coef":
                assert p.range_kind == "constraint" and p.bounds[0] == 0, (name, p.name)


def test_critical_depth_on_depth_delusion_is_not_converged_with_mu_named(capsys):
    res = _quiet_fit("depth_delusion", "critical_depth", seed=0)
    assert res.params["mu"] < 0
    assert not res.converged
    reason = res.warnings[0]
    assert reason.startswith("not converged: mu = -0.01")
    assert "outside its physical range [0, 5]" in reason
    assert any("mu = " in r for r in res.diagnostics["checks_failed"])


def test_critical_depth_cli_exits_not_converged_and_allocate_names_the_fit(tmp_path, capsys):
    out = tmp_path / "cd.json"
    code = main(["fit", "depth_delusion", "--law", "critical_depth", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 3
    assert "converged  NO" in text and "mu = -0.01159 is outside its physical range" in text
    code = main(["allocate", str(out), "--budget", "1e20"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "fit did not converge (mu = -0.01159 is outside its physical range" in err


def test_validity_range_of_a_formula_law_fails_the_fit():
    law = Law.from_formula("a*params**b", kinds={"a": "positive"}, bounds={"b": (0.0, 1.0)})
    res = _quiet_fit(_power_table(1.5), law, residuals="log", starts=16)
    assert res.params["b"] == pytest.approx(1.5, abs=0.01)
    assert not res.converged
    assert "b = 1.499 is outside its physical range [0, 1]" in res.warnings[0]
    # the same formula without a range: converged
    free = Law.from_formula("a*params**b", kinds={"a": "positive"})
    assert _quiet_fit(_power_table(1.5), free, starts=16).converged


def test_constraint_range_holds_the_parameter_on_its_bound():
    tab = _power_table(1.5)
    res = _quiet_fit(tab, _power_law("constraint"), starts=16)
    assert res.converged
    assert res.params["b"] == 1.0
    assert res.diagnostics["at_bound"] == ["b"]
    assert math.isnan(res.stderr["b"]) and np.isfinite(res.stderr["a"])
    # the held fit is the best a can do with b = 1: log a = mean(log y - log params)
    expect = np.exp(np.mean(np.log(tab["loss"]) - np.log(tab["params"])))
    assert res.params["a"] == pytest.approx(expect, rel=1e-8)
    report = res.report()
    assert "\nat bound   b" in report
    assert [ln for ln in report.splitlines() if ln.startswith("b ")][0].split()[2:4] == [
        "at",
        "bound",
    ]
    assert any("hard constraint" in w for w in res.warnings)


def test_constraint_inside_its_range_changes_nothing():
    tab = _power_table(0.4)
    held = _quiet_fit(tab, _power_law("constraint"), starts=16)
    free = _quiet_fit(tab, _power_law("validity"), starts=16)
    assert held.converged and free.converged
    assert held.params == free.params and held.diagnostics["at_bound"] == []


def test_at_bound_is_saved_in_the_result_json(tmp_path):
    law = get_law("critical_depth")
    mu_held = tuple(
        dataclasses.replace(p, range_kind="constraint") if p.name == "mu" else p for p in law.params
    )
    law = dataclasses.replace(law, params=mu_held)
    res = _quiet_fit("depth_delusion", law, seed=0)
    assert res.converged and res.params["mu"] == 0.0
    assert res.diagnostics["at_bound"] == ["mu"]
    assert 0 < res.params["kappa"] < 50
    path = tmp_path / "cd.json"
    res.save(path)
    assert json.loads(path.read_text())["diagnostics"]["at_bound"] == ["mu"]
    assert scalefit.FitResult.load(path).diagnostics["at_bound"] == ["mu"]


def test_toy_law_exponent_outside_its_range_is_not_converged():
    # a loss that drops in one step after the shallowest depth: alpha runs far above 5
    depth = np.array([2, 3, 4, 6, 8, 12], dtype=float)
    loss = np.array([2.0, 1.0 + 3e-7, 1.0 + 2e-8, 1.0, 1.0, 1.0])
    res = _quiet_fit(pd.DataFrame({"depth": depth, "loss": loss}), "depth_power", starts=32)
    if res.params["alpha"] <= 5:  # pragma: no cover - a design that no longer shows the case
        pytest.fail(f"test design gave alpha {res.params['alpha']}")
    assert not res.converged
    assert "alpha = " in res.warnings[0] and "physical range [0, 5]" in res.warnings[0]


def test_bootstrap_holds_constrained_resamples_on_the_bound():
    tab = _power_table(1.5)
    res = _quiet_fit(tab, _power_law("constraint"), starts=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        boot = scalefit.bootstrap(res, tab, 30, seed=0)
    assert boot.diagnostics["boot_converged_share"] == 1.0
    assert boot.ci["b"] == (1.0, 1.0)  # pinned on its bound in every resample: not n/a
    lo, hi = boot.ci["a"]
    assert lo < res.params["a"] < hi


def test_an_interval_over_in_range_resamples_says_so_beside_it():
    """Resamples that converged outside a validity range are dropped from the interval: the
    interval lines carry a mark and the line under the table says how many were dropped."""
    law = Law(
        name="narrow_exponent",
        inputs=("params",),
        params=(
            Param("E", "floor"),
            Param("A", "coef", pivot=("a", "params")),
            Param("a", "exponent", start=(0.2, 0.3), bounds=(0.2, 0.3)),
        ),
        expr=lambda xp, p, x: p["E"] + p["A"] * x["params"] ** (-p["a"]),
        formula="L = E + A / params^a",
    )
    x = np.geomspace(1e6, 1e9, 12)
    noise = np.exp(np.random.default_rng(0).normal(0, 0.002, x.size))
    tab = pd.DataFrame({"params": x, "loss": (2.0 + 5.0 * x**-0.3) * noise})
    res = _quiet_fit(tab, law, bootstrap=20, boot_starts=0, seed=0, starts=4, progress=False)
    dropped = res.diagnostics["boot_out_of_range"]
    assert dropped > 0
    lines = res.report().splitlines()
    assert all(line.endswith(" *") for line in lines if line.split()[:1] in (["E"], ["A"]))
    assert (
        f"* interval over the {20 - dropped} of 20 resamples inside every declared range; "
        f"{dropped} converged outside one and were dropped" in lines
    )
    plain = _quiet_fit(tab, law, starts=4, progress=False)
    assert "* interval" not in plain.report()  # no bootstrap, no mark
