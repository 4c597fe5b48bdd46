"""Decision intervals that include the law's misfit (scalefit.allocate.misfit)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from conftest import needs_reference_data

import scalefit
from scalefit.allocate import allocate
from scalefit.allocate.misfit import POOLED, Calibration, pooled, widen
from scalefit.allocate.report import header_text
from scalefit.core.errors import ScaleFitError

TRUTH = dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)


def _runs(seed: int = 0) -> pd.DataFrame:
    """Chinchilla-law IsoFLOP runs, 1e18-1e20 FLOP, 1 % log noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in np.geomspace(1e18, 1e20, 5):
        for n in np.geomspace(2e7, 2e9, 9):
            t = c / (6 * n)
            y = TRUTH["E"] + TRUTH["A"] / n ** TRUTH["alpha"] + TRUTH["B"] / t ** TRUTH["beta"]
            rows.append((n, t, c, y * np.exp(0.01 * rng.normal())))
    return pd.DataFrame(rows, columns=["params", "tokens", "flops", "loss"])


@pytest.fixture(scope="module")
def fitted():
    return scalefit.fit(_runs(), "chinchilla", loss="huber", bootstrap=20, seed=0)


def test_calibrated_contains_draws_and_grows_past_the_data(fitted):
    budgets = [1e19, 1e20, 1e22, 1e24]
    cal = allocate(fitted, budgets)
    draws = allocate(fitted, budgets, interval="draws")
    s, d = cal.summary, draws.summary
    for q in ("params", "tokens"):
        assert np.all(s[f"{q}_star_lo"] <= d[f"{q}_star_lo"] * (1 + 1e-12))
        assert np.all(s[f"{q}_star_hi"] >= d[f"{q}_star_hi"] * (1 - 1e-12))
        assert np.all((s[f"{q}_star_lo"] <= s[f"{q}_star"]) & (s[f"{q}_star"] <= s[f"{q}_star_hi"]))
    width = np.log(s["params_star_hi"] / s["params_star_lo"]).to_numpy()
    assert np.all(np.diff(width[1:]) > 0)  # wider the further past 1e20 FLOP
    np.testing.assert_allclose(s["distance"], [0, 0, np.log(100), np.log(1e4)], atol=1e-9)
    huber = pooled("law_huber")
    np.testing.assert_allclose(s["misfit_sd"], huber.s_misfit(s["distance"]))
    assert cal.calibration == huber
    assert cal.interval.startswith("95% calibrated") and "law_huber" in cal.interval
    assert "not the law's misfit" in draws.interval and draws.calibration is None
    assert "calibrated" in header_text(cal)


def test_mse_fit_takes_its_own_term():
    res = scalefit.fit(_runs(), "chinchilla", seed=0)
    alloc = allocate(res, [1e21])
    assert alloc.calibration.method == "law_mse"
    # no draws: the interval is the misfit term alone, centred on the point estimate (in logs)
    s = alloc.summary.iloc[0]
    z = 1.959963984540054
    half = z * alloc.calibration.s_misfit(np.log(1e21 / 1e20))
    np.testing.assert_allclose(np.log(s["params_star_hi"] / s["params_star"]), half, rtol=1e-9)
    np.testing.assert_allclose(np.log(s["params_star"] / s["params_star_lo"]), half, rtol=1e-9)


def test_law_with_given_parameters_says_why_it_is_not_calibrated():
    alloc = allocate("chinchilla", [1e21], params=TRUTH)
    assert alloc.calibration is None
    assert "not calibrated: a law with given parameters" in alloc.interval
    with pytest.raises(ScaleFitError, match="'interval' parameter of allocate"):
        allocate("chinchilla", [1e21], params=TRUTH, interval="wide")


def test_widen_by_hand():
    frame = pd.DataFrame(
        {
            "budget": [1e20],
            "params_star": [1e9],
            "params_star_lo": [0.9e9],
            "params_star_hi": [1.2e9],
        }
    )
    cal = Calibration(0.1, 0.2, 1, 2, "test", "law_huber")
    out = widen(frame, cal, 1e19, 0.95, {"params": np.ones(1)})
    z, s = 1.959963984540054, np.hypot(0.1, 0.2 * np.log(10))
    assert out["distance"].iloc[0] == pytest.approx(np.log(10))
    assert np.log(1e9 / out["params_star_lo"].iloc[0]) == pytest.approx(
        np.hypot(np.log(1 / 0.9), z * s)
    )
    assert np.log(out["params_star_hi"].iloc[0] / 1e9) == pytest.approx(
        np.hypot(np.log(1.2), z * s)
    )
    assert out["params_star_lo_draws"].iloc[0] == 0.9e9
    assert set(POOLED) >= {"law_huber", "law_mse"}


@pytest.mark.slow
@needs_reference_data
@pytest.mark.filterwarnings("ignore::scalefit.core.errors.ConvergenceWarning")  # ridge warnings
def test_allocate_intervals_cover_on_the_public_sweeps():
    """Out of sample: fit each public sweep below its two highest budgets, allocate at them.

    The pooled misfit term never saw these budgets (bench_decision.py's final budgets). The
    reference optimum is the held-out budget's parabola vertex; it counts as covered when
    ``|ln N*_pred - ref|`` is within the interval's half-width widened by the vertex's own spread
    (``sqrt(h² + (z·s_ref)²)``, the benchmark's rule), and plainly when inside the interval.
    """
    from scalefit.datasets.isoflop import EXPERIMENTS
    from scalefit.isoflop._estimators import groups_of, pooled_sigma, reference

    z = 1.959963984540054
    hits, plain, n = 0, 0, 0
    for exp in EXPERIMENTS:
        tab = scalefit.datasets.load("isoflops", experiment=exp)
        groups = groups_of(tab)
        sigma = pooled_sigma(groups[:-2])
        train = tab[tab["budget"] < np.exp(groups[-2].logc) * (1 - 1e-9)]
        res = scalefit.fit(train, "chinchilla", loss="huber", bootstrap=20, seed=0)
        s = allocate(res, np.exp([g.logc for g in groups[-2:]])).summary
        for g, row in zip(groups[-2:], s.itertuples(), strict=True):
            ref = reference(g, sigma)
            if not np.isfinite(ref.x):
                continue
            n += 1
            x = np.log(row.params_star)
            lo, hi = np.log(row.params_star_lo), np.log(row.params_star_hi)
            plain += lo <= ref.x <= hi
            half = (x - lo) if ref.x < x else (hi - x)
            hits += abs(ref.x - x) <= np.hypot(half, z * ref.se)
    print(f"covered {hits}/{n} (plain {plain}/{n})")
    assert n >= 14
    assert hits / n >= 0.9, (hits, plain, n)


def test_report_says_why_an_optimum_lies_outside_its_interval(fitted):
    from scalefit.allocate.report import budget_text

    alloc = allocate(fitted, [1e21], interval="draws")
    assert "estimate outside" not in budget_text(alloc, 0, 1e21)
    s = alloc.summary.copy()
    s.loc[0, "params_star_lo"] = s.loc[0, "params_star"] * 1.1
    s.loc[0, "params_star_hi"] = s.loc[0, "params_star"] * 1.2
    text = budget_text(alloc.__class__(**{**alloc.__dict__, "summary": s}), 0, 1e21)
    outside = r"\(estimate outside: the draws sit to one side of it\)"
    assert re.search(rf"params \S+ \[\S+, \S+\] {outside}", text)  # on the params line
    s = alloc.summary.copy()  # the best shape's loss beside its interval over the draws
    s.loc[0, "loss_lo"], s.loc[0, "loss_hi"] = s.loc[0, "loss"] + 0.01, s.loc[0, "loss"] + 0.02
    text = budget_text(alloc.__class__(**{**alloc.__dict__, "summary": s}), 0, 1e21)
    line = next(t for t in text.splitlines() if t.startswith("  loss "))  # a params-law split
    assert "(estimate outside: the draws sit to one side of it)" in line


def test_cli_interval_option_is_the_apis(tmp_path, capsys):
    from scalefit.cli import main

    params = ",".join(f"{k}={v}" for k, v in TRUTH.items())
    argv = ["allocate", "--law", "chinchilla", "--params", params, "--budget", "1e21"]
    assert main([*argv, "--interval", "draws"]) == 0
    assert "intervals of the optimum: none (no draws)" in capsys.readouterr().out
    assert main(argv) == 0
    assert "not calibrated: a law with given parameters" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--interval", "wide"])
    assert exc.value.code == 2
