"""Calibrated extrapolation (scalefit.experimental) and the validation protocol."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scalefit.core.errors import ScaleFitError
from scalefit.experimental.extrapolation import extrapolation_check
from scalefit.fit.discrepancy import Discrepancy, _kappa, _scatter


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
    """One real Bayesian hold-out (short chains) through the CLI: the calibrated predictive is
    the default, the law's own is reported beside it; keys, coverage, PIT line."""
    from scalefit.cli import main
    from scalefit.fit.result import FitResult

    csv = tmp_path / "t.csv"
    _misspecified().to_csv(csv, index=False)
    out = tmp_path / "r.json"
    argv = ["bayes", str(csv), "--law", "chinchilla", "--holdout", "0.2", "--no-progress"]
    argv += ["--chains", "2", "--draws", "300", "--warmup", "300"]
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
    assert len(h["pit"]) == h["n_test"] and len(u["pit"]) == h["n_test"]
    inside = np.mean([0.025 <= v <= 0.975 for v in h["pit"]])
    assert h["coverage"] == pytest.approx(inside)
    assert f"of {h['n_test']} (exact predictive CDF)" in text


def test_predictive_flag_and_option_errors(tmp_path, capsys):
    from scalefit.cli import main
    from scalefit.fit.bayes import fit_bayes, holdout_bayes
    from scalefit.fit.discrepancy import fit_discrepancy
    from scalefit.laws import get_law

    with pytest.raises(SystemExit) as exc:
        main(["bayes", "chinchilla", "--law", "chinchilla", "--predictive", "bootstrap"])
    assert exc.value.code == 2 and "--predictive" in capsys.readouterr().err
    with pytest.raises(ScaleFitError, match="'predictive' parameter of holdout_bayes"):
        holdout_bayes(_misspecified(), get_law("chinchilla"), 0.2, predictive="joint")
    with pytest.raises(ScaleFitError, match="'predictive' parameter of fit_bayes"):
        fit_bayes(_misspecified(), "chinchilla", holdout=0.2, predictive="joint")
    with pytest.raises(ScaleFitError, match="'tails' parameter of fit_discrepancy"):
        fit_discrepancy(_misspecified(), "chinchilla", tails="cauchy")


def test_least_squares_holdout_check_reports_calibrated_beside_law():
    from scalefit.fit.build import FitSettings
    from scalefit.fit.holdout import holdout_check
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


@pytest.mark.parametrize("nu", [None, 3.0, "per_draw"])
def test_mixture_quantiles_and_coverage_are_exact(nu):
    from scipy import stats

    from scalefit.fit.observation import Mixture, score_holdout

    rng = np.random.default_rng(3)
    m = rng.normal(0.0, 0.02, (400, 6)) + np.linspace(-1, 1, 6)
    s = rng.uniform(0.005, 0.02, (400, 1))
    df = rng.uniform(2.5, 30.0, (400, 1)) if nu == "per_draw" else nu
    mix = Mixture(m, s, df)
    for q in (0.025, 0.25, 0.5, 0.975):
        x = mix.ppf(q)
        assert np.max(np.abs(mix.cdf(x) - q)) < 1e-9
    # one component: the mixture is that location-scale distribution
    one = Mixture(m[:1], s[:1], None if df is None else np.atleast_2d(df)[:1])
    dist = stats.norm if df is None else stats.t(np.atleast_2d(df)[0, 0])
    ref = m[0] + s[0, 0] * dist.ppf(0.975)
    assert np.allclose(one.ppf(0.975), ref, atol=1e-9)
    # against simulation: quantiles of many predictive draws
    reps = 200
    eps = (
        rng.standard_normal((reps, *m.shape))
        if df is None
        else rng.standard_t(np.broadcast_to(df, m.shape), (reps, *m.shape))
    )
    sims = (m + s * eps).reshape(-1, m.shape[1])
    assert np.allclose(np.quantile(sims, 0.9, axis=0), mix.ppf(0.9), atol=2e-3 * 0.02 + 5e-4)
    # coverage from the PIT equals coverage against the exact interval's ends
    y = np.exp(mix.ppf(0.5) + np.array([-0.2, -0.05, -0.01, 0.01, 0.05, 0.2]))
    sc = score_holdout(y, m, s, df, probs=(0.5, 0.95))
    lo, hi = mix.ppf(0.025), mix.ppf(0.975)
    inside = (np.log(y) >= lo) & (np.log(y) <= hi)
    assert sc["coverage_95"] == pytest.approx(inside.mean())
    assert sc["width_log_95"] == pytest.approx(np.mean(hi - lo))
    assert len(sc["pit"]) == 6 and sc["pit"][0] < 0.025 and sc["pit"][-1] > 0.975
