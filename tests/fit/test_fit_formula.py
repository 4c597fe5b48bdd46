"""Formula laws, residual scale, per-row weights, unidentifiable data and honest convergence."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import scalefit
from scalefit import Law, ScaleFitError
from scalefit.core.errors import ConvergenceWarning


def _table(frame: pd.DataFrame) -> pd.DataFrame:
    frame.attrs["scalefit"] = {"source": "<test>", "n_read": len(frame)}
    return frame


def _fit(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return scalefit.fit(*args, progress=False, **kw)


def test_formula_with_any_numeric_column_and_linear_residuals():
    rng = np.random.default_rng(0)
    steps = np.repeat([100.0, 300.0, 1000.0, 3000.0, 10000.0], 4)
    lr = np.tile([-1.0, 0.0, 0.5, 1.0], 5)  # an input may be zero or negative
    y = 2.0 / steps**0.5 - 0.3 + 0.05 * lr + rng.normal(0, 1e-4, len(steps))  # negative response
    tab = _table(pd.DataFrame({"steps": steps, "lr": lr, "loss": y}))
    res = _fit(tab, formula="c/steps**a + L0 + k*lr", residuals="linear", starts=32)
    assert res.converged and res.law.inputs == ("lr", "steps")
    np.testing.assert_allclose(
        [res.params[k] for k in ("c", "a", "L0", "k")], [2.0, 0.5, -0.3, 0.05], rtol=0.05
    )
    assert res.conventions["residuals"] == "linear" and "y - f" in res.conventions["objective"]
    with pytest.raises(ScaleFitError, match="log residuals need positive losses"):
        _fit(tab, formula="c/steps**a + L0 + k*lr", starts=4)


def test_zero_weight_row_is_ignored_exactly():
    from scalefit.fit.synthetic import simulate_table

    tab = simulate_table("depth_power", n=30, noise=0.01, seed=2)
    bad = tab.copy()
    bad.loc[0, "loss"] = 50.0  # a wild row
    w = np.ones(len(bad))
    w[0] = 0.0
    weighted = _fit(bad, "depth_power", weights=w, starts=16)
    dropped = _fit(tab.iloc[1:].reset_index(drop=True), "depth_power", starts=16)
    for k in dropped.params:
        assert weighted.params[k] == pytest.approx(dropped.params[k], rel=1e-6)
    assert weighted.conventions["weights"] == "array"
    boot = scalefit.bootstrap(weighted, bad.assign(__weight__=w), 8, boot_starts=1)
    assert boot.n_boot == 8
    with pytest.raises(ScaleFitError, match="'weights' parameter of fit must be finite"):
        _fit(bad, "depth_power", weights=-w, starts=4)
    with pytest.raises(ScaleFitError, match="names column 'nope'"):
        _fit(bad, "depth_power", weights="nope", starts=4)


@pytest.mark.parametrize(
    ("loss", "match"),
    [
        ([2.0] * 12, "constant response"),
        ([1e300] * 6 + [1e299] * 6, None),
    ],
)
def test_data_that_identify_nothing_are_refused(loss, match):
    depth = np.repeat([2.0, 4.0, 8.0, 16.0], 3)
    tab = _table(pd.DataFrame({"depth": depth, "loss": loss}))
    if match is None:  # absurd values: a message about the value, not a converged fit
        for residuals in ("linear", "log"):
            with pytest.raises(ScaleFitError, match="is 1e\\+300, too large"):
                _fit(tab, formula="c/depth**a + L0", residuals=residuals, starts=4)
        return
    with pytest.raises(ScaleFitError, match=match):
        _fit(tab, "depth_power", starts=4)


def test_too_few_distinct_points_is_an_error():
    tab = _table(
        pd.DataFrame({"depth": [2.0, 2.0, 2.0, 4.0, 4.0, 4.0], "loss": [3, 3.1, 3.2, 2, 2.1, 2.2]})
    )
    with pytest.raises(ScaleFitError, match="only 2 distinct input point"):
        _fit(tab, "depth_power", starts=4)


def test_plateau_start_is_not_called_converged():
    # y = b1 (1 - exp(-b2 x)) from a start where b2 is so large that exp(-b2 x) is 0 at every x:
    # b2 then has no effect on the model (a plateau), which must not pass as a minimum.
    x = np.array([77.6, 114.9, 141.1, 190.8, 239.9, 289.0, 332.8, 378.4, 434.8, 477.3])
    y = 240.0 * (1 - np.exp(-5.5e-4 * x))
    tab = _table(pd.DataFrame({"x": x, "loss": y}))
    law = Law.from_formula("b1*(1-exp(-b2*x))", inputs=["x"], starts={"b1": 100.0, "b2": 50.0})
    res = _fit(tab, law, residuals="linear", starts=1)
    assert not res.converged
    assert "b2" in res.warnings[0] and "plateau" in res.warnings[0]
    assert "b2" in res.not_identified
    ranged = Law.from_formula(
        "b1*(1-exp(-b2*x))", inputs=["x"], starts={"b1": (100.0, 500.0), "b2": (1e-5, 1e-2)}
    )
    good = _fit(tab, ranged, residuals="linear", starts=64)
    assert good.converged and good.params["b2"] == pytest.approx(5.5e-4, rel=1e-8)


def test_correlations_lie_in_unit_interval(chinchilla203):
    res = _fit(chinchilla203, "decomposed", starts=16)
    corr = np.asarray(res.corr, dtype=float)
    assert np.nanmax(np.abs(corr)) <= 1.0


def test_bad_formula_and_arguments_are_one_clear_error():
    tab = _table(
        pd.DataFrame({"depth": [2.0, 4.0, 8.0, 16.0, 32.0], "loss": [3, 2.5, 2.2, 2.1, 2]})
    )
    with pytest.raises(ScaleFitError, match="not allowed"):
        _fit(tab, formula="__import__('os').system('true') + depth")
    with pytest.raises(ScaleFitError, match="'residuals' parameter of fit must be one of"):
        _fit(tab, "depth_power", residuals="squared")
    with pytest.raises(ScaleFitError, match="either a law or a formula"):
        _fit(tab, "depth_power", formula="c/depth**a + L0")
    with pytest.raises(ScaleFitError, match="reads no input"):
        Law.from_formula("a + b")


def test_cli_formula_with_linear_residuals_reads_a_negative_response(tmp_path, capsys):
    from scalefit.cli import main

    x = np.arange(1.0, 13.0)
    y = 1.5 - 0.25 * x + 0.01 * np.sin(x)  # crosses zero
    csv = tmp_path / "t.csv"
    pd.DataFrame({"x": x, "loss": y}).to_csv(csv, index=False)
    out = tmp_path / "r.json"
    code = main(
        ["fit", str(csv), "--formula", "a + b*x", "--residuals", "linear", "--starts", "4"]
        + ["--out", str(out), "--no-progress"]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "on linear residuals" in text
    back = scalefit.FitResult.load(out)
    assert back.params["b"] == pytest.approx(-0.25, abs=0.01)
    assert back.law.spec["formula"] == "a + b*x"
    assert main(["fit", str(csv), "--formula", "a + b*x", "--starts", "4"]) == 2
