"""Curve intervals that survive correlated checkpoints.

The run bootstrap is the default interval of a curve fit (never the row-level sandwich); the
Bayesian curve fit has AR(1) errors within each run; fits that treat the checkpoints of a run as
independent rows (the row bootstrap, ``fit_bayes`` without a group, ``scalefit bayes``) warn.
"""

import time
import warnings

import numpy as np
import pytest
from scipy import stats

import scalefit
from scalefit.cli import main
from scalefit.core.errors import ConvergenceWarning, ScaleFitError
from scalefit.curves import fit_curves, prepare, synthetic_curves
from scalefit.curves.api import RUN_BOOTSTRAP, curve_table
from scalefit.fit.bayes_model import ar1_terms
from scalefit.fit.curve_marks import CurvesWarning, is_curve_table
from scalefit.laws import get_law

TRUTH = {"L0": 2.0, "A": 1.5, "alpha": 0.5, "C": 0.3}
#: Twelve runs: six cosine (1,000-6,000 steps) and six WSD (1,500-6,500 steps).
SCHEDULES = [
    f"cosine:lr=0.003,steps={n},warmup={n // 50},final_lr=0.0003" for n in range(1000, 7000, 1000)
] + [f"wsd:lr=0.003,steps={n},warmup={n // 50},decay=0.2" for n in range(1500, 7500, 1000)]


def _curves(seed, schedules=SCHEDULES, **kw):
    """AR(1) noise within each run (rho 0.9, marginal 0.5 %) and a 0.3 % offset per run."""
    opts = {"every": 20, "noise": 0.005, "run_noise": 0.003, "ar": 0.9, **kw}
    return synthetic_curves(TRUTH, schedules, seed=seed, **opts)


def _fit(curves, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # L0-A ridge warnings are expected
        return fit_curves(prepare(curves), "lr_annealing", starts=16, progress=False, **kw)


def test_the_default_interval_is_the_run_bootstrap_and_its_stderr_its_spread():
    res = _fit(_curves(0))
    assert res.n_boot == RUN_BOOTSTRAP
    assert res.conventions["cluster"] == "run" and res.conventions["curves"]["resample"] == "runs"
    draws = np.asarray(res.draws)
    for i, name in enumerate(res.params):
        assert res.stderr[name] == pytest.approx(np.std(draws[:, i], ddof=1))
        lo, hi = res.ci[name]
        assert lo <= TRUTH[name] <= hi
    text = res.report()
    assert "standard deviation of the run-bootstrap refits" in text
    assert f"{RUN_BOOTSTRAP} resamples (clusters of 'run')" in text
    # the row-level sandwich of the same fit is several times smaller: it counts checkpoints
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        rows = scalefit.fit(curve_table(prepare(_curves(0))), "lr_annealing", starts=16)
    assert all(res.stderr[n] > 2 * rows.stderr[n] for n in TRUTH)


def test_no_bootstrap_prints_na_never_the_sandwich():
    res = _fit(_curves(0), bootstrap=0)
    assert res.draws is None and not res.ci
    assert all(np.isnan(v) for v in res.stderr.values())
    text = res.report()
    assert "n/a: run boot." in text and "n/a: intervals need a run bootstrap, bootstrap=B" in text
    one = _fit(_curves(0, schedules=SCHEDULES[:1]))  # one run: nothing to resample
    assert one.draws is None and "n/a: one run; a run bootstrap needs two" in one.report()
    with pytest.raises(ScaleFitError, match="'bootstrap' parameter of fit_curves"):
        _fit(_curves(0), bootstrap=-1)


def test_row_bootstrap_on_curves_warns_with_the_fix():
    tab = curve_table(prepare(_curves(0, schedules=SCHEDULES[:4])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.warns(CurvesWarning, match=r"loss curves .*Pass cluster='run'"):
            scalefit.fit(tab, "lr_annealing", starts=8, bootstrap=10)
        res = scalefit.fit(tab, "lr_annealing", starts=8)
        with pytest.warns(CurvesWarning, match="the row bootstrap: this table holds loss curves"):
            scalefit.bootstrap(res, tab, 10)
        with warnings.catch_warnings():
            warnings.simplefilter("error", CurvesWarning)
            scalefit.bootstrap(res, tab, 10, cluster="run")  # grouped: no warning


def test_a_curve_table_is_recognised_with_or_without_its_marks(tmp_path):
    tab = curve_table(prepare(_curves(0, schedules=SCHEDULES[:2])))
    assert is_curve_table(tab) and "scalefit_curves" in tab.attrs
    tab.to_csv(tmp_path / "c.csv", index=False)
    back = scalefit.read_table(tmp_path / "c.csv")
    assert "scalefit_curves" not in back.attrs and is_curve_table(back)
    assert not is_curve_table(back.drop_duplicates("run"))  # one row per run: a loss table
    assert not is_curve_table(scalefit.read_table(back.drop(columns=["run"])))


def test_fit_bayes_and_the_bayes_command_warn_on_curves_without_a_group(tmp_path, capsys):
    from scalefit.fit.bayes import fit_bayes

    pytest.importorskip("numpyro")
    curves = _curves(0, schedules=SCHEDULES[:3], every=100)
    tab = curve_table(prepare(curves))
    kw = {"chains": 1, "draws": 10, "warmup": 10, "progress": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 10 draws do not converge
        with pytest.warns(CurvesWarning, match=r"fit_bayes without a group: .*Pass group='run'"):
            fit_bayes(tab, "lr_annealing", **kw)
    path = tmp_path / "c.csv"
    tab.to_csv(path, index=False)
    with warnings.catch_warnings():  # the command prints warnings as lines on stderr
        warnings.simplefilter("always", CurvesWarning)
        main(["bayes", str(path), "--law", "lr_annealing", "--chains", "1", "--draws", "10",
              "--warmup", "10", "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert "warning: fit_bayes without a group: this table holds loss curves" in err
    with pytest.raises(ScaleFitError, match="'ar1' parameter of fit_bayes must name columns"):
        fit_bayes(tab, "lr_annealing", group="run", ar1=("run", "epoch"), **kw)
    with pytest.raises(ScaleFitError, match="'ar1' parameter of fit_bayes must be a pair"):
        fit_bayes(tab, "lr_annealing", group="run", ar1="run", **kw)
    with pytest.raises(ScaleFitError, match="'errors' parameter of fit_curves"):
        fit_curves(prepare(curves), bayes=True, errors="ar2", **kw)


def test_ar1_likelihood_is_the_exact_gaussian_one():
    """The product of the conditional densities equals the AR(1) multivariate normal density."""
    rng = np.random.default_rng(0)
    steps = np.array([10.0, 20.0, 30.0, 50.0, 60.0, 10.0, 30.0, 40.0])  # two series, gaps 1-2
    series = np.array([0, 0, 0, 0, 0, 1, 1, 1])
    prev = np.array([-1, 0, 1, 2, 3, -1, 5, 6])
    gap = np.array([1.0, 1, 1, 2, 1, 1, 2, 1])
    mu, sigma, rho = rng.normal(size=8), 0.3, 0.8
    y = mu + rng.normal(size=8) * sigma
    centre, scale = ar1_terms(np, mu, sigma, rho, (prev, gap), y)
    ll = stats.norm.logpdf(y, centre, scale).sum()
    lag = np.abs(steps[:, None] - steps[None, :]) / 10.0
    cov = sigma**2 * rho**lag * (series[:, None] == series[None, :])
    assert ll == pytest.approx(stats.multivariate_normal(mu, cov).logpdf(y), rel=1e-10)


def test_synthetic_ar1_noise_has_its_lag1_correlation_and_zero_keeps_the_stream():
    plain = synthetic_curves(TRUTH, SCHEDULES[:2], every=10, noise=0.005, seed=3)
    assert plain.equals(synthetic_curves(TRUTH, SCHEDULES[:2], every=10, noise=0.005, seed=3, ar=0))
    curves = synthetic_curves(TRUTH, SCHEDULES[5:6], every=5, noise=0.005, ar=0.9, seed=1)
    law = get_law("lr_annealing")
    every_step = prepare(curves, drop_warmup=False, early=0, max_points=None)
    r = np.log(curves["loss"] / law.evaluate(TRUTH, every_step))
    e = r.to_numpy()
    assert np.corrcoef(e[:-1], e[1:])[0, 1] == pytest.approx(0.9, abs=0.05)
    assert np.std(e) == pytest.approx(0.005, rel=0.3)
    with pytest.raises(ScaleFitError, match="'ar' parameter of synthetic_curves"):
        synthetic_curves(TRUTH, SCHEDULES[:1], ar=1.0, seed=0)


def test_cli_default_intervals_and_bootstrap_zero(tmp_path, capsys):
    path = tmp_path / "c.csv"
    _curves(0, schedules=SCHEDULES[::2]).to_csv(path, index=False)
    assert main(["curves", "fit", str(path), "--starts", "8"]) == 0
    out = capsys.readouterr().out
    assert "200 resamples (clusters of 'run')" in out and "intervals resample whole runs" in out
    assert main(["curves", "fit", str(path), "--starts", "8", "--bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    assert "--bootstrap B on the command line" in out and "(--bootstrap 0)." in out
    assert main(["curves", "fit", str(path), "--errors", "independent"]) == 2
    assert "--errors is the error model of --bayes" in capsys.readouterr().err


@pytest.mark.slow
def test_default_intervals_cover_under_ar1_errors_and_the_sandwich_does_not():
    """40 seeds of twelve runs with AR(1) errors (rho 0.9) within each run.

    The default interval (200 run-bootstrap resamples, percentile) covers every true parameter
    in >= 34 of 40 fits (85 %) at 95 %; the row-level sandwich (value +- 1.96 stderr, the old
    default's standard errors) covers far less. About 2 minutes on 2 cores.
    """
    t0 = time.perf_counter()
    boot, rows = dict.fromkeys(TRUTH, 0), dict.fromkeys(TRUTH, 0)
    for seed in range(40):
        curves = _curves(seed)
        res = _fit(curves, seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            old = scalefit.fit(curve_table(prepare(curves)), "lr_annealing", starts=16, seed=seed)
        for name, value in TRUTH.items():
            lo, hi = res.ci[name]
            boot[name] += lo <= value <= hi
            rows[name] += abs(old.params[name] - value) <= 1.96 * old.stderr[name]
    print(f"run bootstrap {boot}; sandwich {rows}; of 40; {time.perf_counter() - t0:.0f} s")
    assert min(boot.values()) >= 34, boot
    assert max(rows.values()) <= 28, rows


@pytest.mark.slow
def test_bayes_ar1_recovers_rho_and_covers_the_truth():
    """Six cosine runs with AR(1) errors (rho 0.9): rho and every parameter inside their 95 %."""
    pytest.importorskip("numpyro")
    curves = _curves(0, schedules=SCHEDULES[:6])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = fit_curves(prepare(curves, max_points=None), "lr_annealing", bayes=True,
                         chains=2, draws=300, warmup=300, seed=0, progress=False)  # fmt: skip
    a = res.diagnostics["ar1"]
    assert a["spacing"] == 20.0 and a["rho_ci"][0] <= 0.9 <= a["rho_ci"][1]
    assert res.conventions["ar1"]["series"] == "run"
    for name, value in TRUTH.items():
        lo, hi = res.ci[name]
        assert lo <= value <= hi, name
    assert "AR(1) in 'step': rho" in res.report()
    assert "C is per unit of S2 at momentum λ = 0.999" in res.report()  # as least squares says
