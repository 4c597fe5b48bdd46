"""lr_optimum: a peak-rate optimum eta*(params, tokens) fitted from curves at several rates."""

import warnings

import numpy as np
import pandas as pd
import pytest

from scalefit.core.errors import ScaleFitError
from scalefit.curves import (
    allocation,
    final_loss_law,
    fit_curves,
    forecast,
    optimal_lr,
    parse_schedule,
    prepare,
    schedule_frame,
    validate_curves,
)
from scalefit.curves.optimum import optimal_lr_text
from scalefit.laws import get_law

TRUTH = dict(L0=1.5, A=3.0, alpha=0.5, C=0.002, B=20.0, beta=0.3, k=0.05, e0=7.6e-4, a=-0.5, b=0.2)
RATES = (5e-4, 1.5e-3, 4.5e-3)


def _curves(sizes=(1e6, 3e6, 1e7), rates=RATES, seed=0, noise=0.003):
    """WSD runs of lr_optimum at TRUTH, one per size and peak rate, 8,192 tokens per step."""
    law, rng, parts = get_law("lr_optimum"), np.random.default_rng(seed), []
    for n in sizes:
        for lr in rates:
            s = parse_schedule(f"wsd:lr={lr},steps=400,warmup=20,decay=0.2")
            f = schedule_frame(s, steps=np.arange(10, 401, 10), params=n, peak_lr=lr)
            f["tokens"] = f["step"] * 8192.0
            f["loss"] = law.evaluate(TRUTH, f) * np.exp(rng.normal(0, noise, len(f)))
            f["run"], f["schedule"] = f"n{n:g}_lr{lr:g}", str(s)
            parts.append(f.drop(columns=["S1", "S2", "peak_lr"]))
    return validate_curves(pd.concat(parts, ignore_index=True), source="<synthetic>")


@pytest.fixture(scope="module")
def fitted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # correlation notes of B and beta
        return fit_curves(prepare(_curves()), "lr_optimum", bootstrap=20, starts=16, seed=0)


@pytest.mark.slow  # a fit of a new law: 9 s with its compilation
def test_eta_star_and_its_exponents_are_recovered_from_curves_at_three_rates(fitted):
    assert fitted.converged
    for name in ("k", "e0", "a", "b"):
        assert fitted.params[name] == pytest.approx(TRUTH[name], rel=0.05, abs=0.01), name
    # eta* is the minimum of the law over the peak rate: the loss rises on either side
    law, x = fitted.law, {"params": 3e6, "tokens": 3e6, "S1": 0.0, "S2": 0.0}
    star = float(optimal_lr(fitted, 3e6, 3e6)["peak_lr"].iloc[0])
    steps = 300.0

    def loss(eta):
        return float(law.evaluate(fitted.params, {**x, "S1": steps * eta, "peak_lr": eta}))

    assert loss(star) < loss(star * 1.5) and loss(star) < loss(star / 1.5)


@pytest.mark.slow  # a fit of a new law: 9 s with its compilation
def test_optimal_lr_interval_from_the_run_bootstrap_holds_the_truth(fitted):
    out = optimal_lr(fitted, [1e6, 1e7], 3e6)
    truth = TRUTH["e0"] * (np.array([1e6, 1e7]) / 1e8) ** TRUTH["a"] * (3e6 / 1e10) ** TRUTH["b"]
    assert list(out.columns) == [
        "params",
        "tokens",
        "peak_lr",
        "peak_lr_lo",
        "peak_lr_hi",
        "n_draws",
    ]
    assert (out["peak_lr_lo"] <= truth).all() and (truth <= out["peak_lr_hi"]).all()
    assert (out["peak_lr_lo"] < out["peak_lr"]).all() and (out["peak_lr"] < out["peak_lr_hi"]).all()
    text = optimal_lr_text(fitted, 1e7, 3e6)
    assert text.startswith("optimal peak lr eta* at 1e+07 params, 3e+06 tokens: ")
    assert "(95%, run bootstrap)" in text and "(N/1e8)^-0.5" in text
    with pytest.raises(ValueError, match="'tokens' parameter of optimal_lr"):
        optimal_lr(fitted, 1e7, -1.0)


@pytest.mark.slow  # a fit of a new law: 9 s with its compilation
def test_forecast_reads_the_schedule_rate_and_warns_outside_the_fitted_rates(fitted):
    sched = "wsd:lr=1.5e-3,steps=400,warmup=20,decay=0.2"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inside = forecast(fitted, sched, steps=[400], params=3e6, tokens_per_step=8192)
    assert inside["peak_lr"].iloc[0] == 1.5e-3
    with pytest.warns(UserWarning, match=r"peak learning rate 0.02, outside .*5e-04|0.0005"):
        forecast(fitted, sched.replace("1.5e-3", "2e-2"), params=3e6, tokens_per_step=8192)


def test_one_peak_rate_is_refused_for_lr_optimum():
    one = prepare(_curves(rates=(1.5e-3,)))
    assert one["peak_lr"].unique().tolist() == [1.5e-3]
    with pytest.raises(ScaleFitError, match="one peak rate \\(0.0015\\): the optimum is not "):
        fit_curves(one, "lr_optimum", bootstrap=0)
    with pytest.raises(ScaleFitError, match="one peak rate"):
        fit_curves(one, "lr_optimum", bayes=True)


@pytest.mark.slow  # a fit: 6 s with its compilation
def test_area_law_fitted_on_one_rate_warns_when_asked_for_another():
    one = prepare(_curves(rates=(1.5e-3,)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_curves(one, "lr_annealing_params", bootstrap=0, starts=8)
    assert res.conventions["curves"]["peak_lr"] == [0.0015]
    msg = "outside the fitted curves' peak rates \\(0.0015\\).*fit curves at several peak rates"
    with pytest.warns(UserWarning, match=msg):
        forecast(res, "wsd:lr=3e-3,steps=400,warmup=20,decay=0.2", params=3e6)
    with pytest.raises(ScaleFitError, match="no optimal peak rate"):
        optimal_lr(res, 1e7, 1e7)


@pytest.mark.slow  # uses the module's fit (9 s with its compilation)
def test_allocation_recommends_size_tokens_and_the_peak_rate_with_intervals(fitted):
    sched = "wsd:lr=1e-2,warmup=20,decay=0.2"  # the rate is replaced by eta*
    alloc = allocation(fitted, [3e13], schedule=sched, tokens_per_step=8192)
    row = alloc.summary.iloc[0]
    star = optimal_lr(fitted, row["params"], row["tokens"])["peak_lr"].iloc[0]
    assert row["peak_lr"] == pytest.approx(star, rel=1e-12)
    assert row["peak_lr_lo"] < row["peak_lr"] < row["peak_lr_hi"]
    assert row["schedule"].startswith(f"wsd:lr={star:.3g},steps=")
    assert f"  peak lr eta* {star:.3g} [" in alloc.report()
    # at the recommended size and tokens, another rate gives a higher final loss
    law = final_loss_law(fitted.law, parse_schedule(row["schedule"]), tokens_per_step=8192)
    x = {"params": row["params"], "tokens": row["tokens"]}
    at = float(law.evaluate(fitted.params, x))
    assert at == pytest.approx(row["loss"], rel=1e-6)  # the schedule text rounds eta*
    for factor in (0.5, 2.0):
        other = parse_schedule(row["schedule"].replace(f"lr={star:.3g}", f"lr={star * factor:.3g}"))
        worse = final_loss_law(fitted.law, other, tokens_per_step=8192)
        assert float(worse.evaluate(fitted.params, x)) > at


def test_cli_refuses_lr_optimum_on_the_one_rate_cpu_grid_in_one_line(capsys):
    from scalefit.cli import main
    from scalefit.datasets import BUNDLED_DIR

    code = main(["curves", "fit", str(BUNDLED_DIR / "lm_wsd_curves.csv"), "--law", "lr_optimum"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "one peak rate (0.002): the optimum is not identified" in err


@pytest.mark.slow  # uses the module's fit (9 s with its compilation)
def test_result_with_its_peak_rates_saves_and_loads(fitted, tmp_path):
    from scalefit import FitResult

    fitted.save(tmp_path / "lr.json")
    back = FitResult.load(tmp_path / "lr.json")
    assert back.conventions["curves"]["peak_lr"] == [0.0005, 0.0015, 0.0045]
    pd.testing.assert_frame_equal(optimal_lr(back, 1e7, 3e6), optimal_lr(fitted, 1e7, 3e6))


@pytest.mark.slow  # uses the module's fit (9 s with its compilation)
def test_allocation_says_when_the_recommended_run_has_no_positive_loss(fitted):
    # far past the fitted runs, the linear annealing term takes the final loss below 0
    alloc = allocation(
        fitted, [1e16], schedule="wsd:lr=1e-3,warmup=20,decay=0.2", tokens_per_step=8192
    )
    assert alloc.summary["loss"].iloc[0] < 0
    assert any("final loss is not a positive number" in w for w in alloc.warnings)
    assert "the resampling unit is the run (whole curves" in alloc.report()
