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


def _misspecified(seed=0, bend=0.0015):
    """A Chinchilla-form table whose truth bends away from the law at high compute."""
    from scalefit.isoflop import synthetic_isoflops

    runs = synthetic_isoflops(
        budgets=np.geomspace(1e18, 1e22, 9), n_per_budget=7, sigma=0.004, seed=seed
    ).drop(columns="budget")
    lc = np.clip(np.log(runs["flops"].to_numpy() / 1e18), 0, None)
    runs["loss"] = runs["loss"] * np.exp(bend * lc**1.5)  # misfit growing with compute
    return runs


def test_calibrated_intervals_cover_better_on_misspecified_data():
    # Three small tables (13 held-out rows each): one table's coverage moves by whole rows, so
    # the comparison is pooled over the three; each has a misfit that grows with compute.
    frames = [
        extrapolation_check(
            _misspecified(seed, bend=0.003),
            "chinchilla",
            cuts=(0.2,),
            probs=(0.95,),
            n_boot=40,
            starts=32,
        )
        for seed in (0, 1, 2)
    ]
    frame = pd.concat(frames)
    today = frame[frame["predictive"] == "today"]
    cal = frame[frame["predictive"] == "calibrated"]
    assert (cal["kappa"] > 0).all()
    assert cal["coverage"].sum() > today["coverage"].sum()
    assert cal["lpd"].sum() > today["lpd"].sum()
    assert (cal["width_log"].to_numpy() < 2 * today["width_log"].to_numpy()).all()


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


def test_kappa_and_nu_recover_known_tails():
    from scalefit.fit.discrepancy import _kappa_nu

    rng = np.random.default_rng(1)
    d = rng.uniform(0, 3, 5000)
    s0 = np.full(d.shape, 0.004)
    r = np.hypot(s0, 0.01 * d) * rng.standard_t(4.0, d.shape)
    kappa, nu = _kappa_nu(r, d, s0)
    assert kappa == pytest.approx(0.01, rel=0.15) and nu == pytest.approx(4.0, rel=0.3)
    kappa, nu = _kappa_nu(rng.normal(0, np.hypot(s0, 0.01 * d)), d, s0)
    assert nu > 30  # normal residuals: the predictive stays normal in effect


@pytest.mark.slow
def test_calibrated_holdout_covers_better_and_cli_reports_both(tmp_path, capsys):
    """One real Bayesian hold-out (short chains) through the CLI: keys, flag, coverage."""
    from scalefit.cli import main
    from scalefit.fit.result import FitResult

    csv = tmp_path / "t.csv"
    _misspecified().to_csv(csv, index=False)
    out = tmp_path / "r.json"
    argv = ["bayes", str(csv), "--law", "chinchilla", "--holdout", "0.2", "--no-progress"]
    argv += ["--chains", "2", "--draws", "300", "--warmup", "300", "--predictive", "calibrated"]
    code = main([*argv, "--out", str(out)])
    text = capsys.readouterr().out
    assert code in (0, 3)
    assert "predictive calibrated:" in text and "without calibration (law:" in text
    h = FitResult.load(out).holdout
    u = h["uncalibrated"]
    assert h["predictive"].startswith("calibrated") and u["predictive"].startswith("law")
    assert set(h["calibration"]) == {"sigma", "gamma", "tau", "kappa", "nu"}
    assert h["calibration"]["kappa"] > 0  # the misfit grows with compute
    assert h["coverage"] > u["coverage"] and h["lpd"] > u["lpd"]
    assert h["width_log"] < 2 * u["width_log"]


def test_predictive_flag_and_option_errors(tmp_path, capsys):
    from scalefit.cli import main
    from scalefit.fit.bayes import holdout_bayes
    from scalefit.fit.discrepancy import fit_discrepancy
    from scalefit.laws import get_law

    with pytest.raises(SystemExit) as exc:
        main(["bayes", "chinchilla", "--law", "chinchilla", "--predictive", "bootstrap"])
    assert exc.value.code == 2 and "--predictive" in capsys.readouterr().err
    with pytest.raises(ScaleFitError, match="'predictive' parameter of holdout_bayes"):
        holdout_bayes(_misspecified(), get_law("chinchilla"), 0.2, predictive="joint")
    with pytest.raises(ScaleFitError, match="'tails' parameter of fit_discrepancy"):
        fit_discrepancy(_misspecified(), "chinchilla", tails="cauchy")


def test_least_squares_holdout_check_reports_calibrated_beside_law():
    from scalefit.fit.build import FitSettings
    from scalefit.fit.validate import holdout_check
    from scalefit.laws import get_law

    law = get_law("chinchilla")
    settings = FitSettings(starts=32)
    h = holdout_check(
        _misspecified(2, bend=0.003), law, 0.2, settings, bootstrap=40, predictive="calibrated"
    )
    assert h["predictive"].startswith("calibrated") and h["calibration"]["kappa"] > 0
    assert h["uncalibrated"]["predictive"].startswith("law")
    assert {"coverage", "coverage_50", "width_log", "lpd"} <= set(h)
    assert h["coverage"] > h["uncalibrated"]["coverage"]
    with pytest.raises(ScaleFitError, match="'predictive' parameter of holdout_check"):
        holdout_check(_misspecified(), law, 0.2, settings, predictive="joint")


def test_fit_and_cli_take_the_calibrated_predictive_for_the_holdout(tmp_path, capsys):
    """`fit(..., predictive=)` and `scalefit fit --predictive` reach the calibrated hold-out."""
    from scalefit.cli import main
    from scalefit.fit import fit
    from scalefit.fit.result import FitResult

    table = _misspecified(2, bend=0.003)
    res = fit(table, "chinchilla", starts=32, holdout=0.2, predictive="calibrated")
    assert res.holdout["predictive"].startswith("calibrated")
    assert res.holdout["uncalibrated"]["predictive"].startswith("law")
    with pytest.raises(ScaleFitError, match="'predictive' parameter of fit"):
        fit(table, "chinchilla", holdout=0.2, predictive="joint")
    csv, out = tmp_path / "t.csv", tmp_path / "r.json"
    table.to_csv(csv, index=False)
    argv = ["fit", str(csv), "--law", "chinchilla", "--starts", "32", "--holdout", "0.2"]
    code = main([*argv, "--predictive", "calibrated", "--no-progress", "--out", str(out)])
    text = capsys.readouterr().out
    assert code in (0, 3)
    assert "predictive calibrated:" in text and "without calibration (law:" in text
    h = FitResult.load(out).holdout
    assert h["coverage"] == res.holdout["coverage"]  # same seed, same table: same hold-out
