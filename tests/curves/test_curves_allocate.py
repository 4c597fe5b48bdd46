"""Compute-optimal allocation from a curve-fitted law (scalefit.curves.allocation)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scalefit.cli import main
from scalefit.core.accounting import tokens_for_budget
from scalefit.core.errors import ScaleFitError
from scalefit.curves import (
    allocation,
    final_areas,
    final_loss_law,
    fit_curves,
    parse_schedule,
    prepare,
    read_curves,
    synthetic_curves,
)
from scalefit.curves.prepare import schedule_frame
from scalefit.laws import get_law

ROOT = Path(__file__).resolve().parents[2]
WSD_CURVES = ROOT / "data" / "lm_wsd_curves.csv"

TRUTH = {"L0": 1.8, "A": 1.0, "alpha": 0.5, "C": 0.3, "B": 100.0, "beta": 0.3}
FAMILY = "wsd:lr=0.003,warmup=50,decay=0.2"
TPS = 2.0**15
SIZES = (5e5, 1e6, 2e6, 5e6, 1e7)
STEPS = (1000, 2000, 4000)
BUDGET = 1e15


@pytest.mark.parametrize(
    "spec",
    [
        "constant:lr=1e-3,warmup=10",
        "constant:lr=1e-3",
        "linear:lr=2e-3,warmup=7,final_lr=1e-4",
        "cosine:lr=3e-3,warmup=20,final_lr=3e-4",
        "cosine:lr=3e-3",
        "wsd:lr=2e-3,warmup=12,decay=0.2",
        "wsd:lr=2e-3,decay=0.25,final_lr=1e-4",
    ],
)
@pytest.mark.parametrize("momentum", [0.999, 0.9, 0.0])
def test_final_areas_equal_the_summed_areas_at_whole_steps(spec, momentum):
    for steps in (40, 100, 1000, 5000):
        sched = parse_schedule(spec, steps=steps)
        last = schedule_frame(sched, steps=[steps], momentum=momentum).iloc[0]
        s1, s2 = final_areas(sched, [float(steps)], momentum=momentum)
        assert s1[0] == pytest.approx(last["S1"], rel=1e-10)
        assert s2[0] == pytest.approx(last["S2"], rel=1e-10, abs=1e-15)


def test_final_areas_are_nan_where_the_schedule_does_not_fit():
    sched = parse_schedule("wsd:lr=1e-3,warmup=50,decay=0.5", steps=1000)
    s1, s2 = final_areas(sched, [40.0, 90.0, 120.0])
    assert np.isnan(s1[:2]).all() and np.isnan(s2[:2]).all()  # decay would reach warm-up
    assert np.isfinite(s1[2]) and np.isfinite(s2[2])


def _truth_optimum(budget: float) -> tuple[float, float]:
    """Brute force over params: whole steps, the areas summed by the schedule code."""
    law = get_law("lr_annealing_params")
    best = (np.inf, np.nan, np.nan)
    for n in np.geomspace(1e5, 1e8, 600):
        steps = int(round(float(tokens_for_budget(budget, n)) / TPS))
        if steps < 200:
            continue
        frame = schedule_frame(parse_schedule(FAMILY, steps=steps), steps=[steps], params=n)
        loss = float(law.evaluate(TRUTH, frame)[0])
        if loss < best[0]:
            best = (loss, n, steps * TPS)
    return best[1], best[2]


def _fit(seed: int, bootstrap: int = 30):
    """Fifteen WSD runs (five sizes x three lengths) from TRUTH, fitted with a run bootstrap."""
    schedules = [f"{FAMILY},steps={s}" for _ in SIZES for s in STEPS]
    params = [n for n in SIZES for _ in STEPS]
    curves = synthetic_curves(
        TRUTH,
        schedules,
        law="lr_annealing_params",
        params=params,
        every=40,
        noise=0.005,
        run_noise=0.003,
        seed=seed,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_curves(
            prepare(curves),
            "lr_annealing_params",
            bootstrap=bootstrap,
            seed=seed,
            starts=16,
            progress=False,
        )
    return curves, res


@pytest.fixture(scope="module")
def fitted():
    # Seed 1: over seeds 0-9 the 95% interval held both true optima in 8 fits (seeds 0 and 4
    # missed, by 0.05% and 3%); test_interval_coverage_over_seeds checks the rate.
    return _fit(1)


def test_recommendation_holds_the_true_optimum(fitted):
    curves, res = fitted
    out = allocation(res, BUDGET, schedule=FAMILY, tokens_per_step=TPS, curves=curves)
    row = out.summary.iloc[0]
    n_true, t_true = _truth_optimum(BUDGET)
    assert row["params_lo"] <= n_true <= row["params_hi"]
    assert row["tokens_lo"] <= t_true <= row["tokens_hi"]
    assert row["params_hi"] / row["params_lo"] < 3  # an interval that says something
    assert row["params"] == pytest.approx(n_true, rel=0.3)
    assert row["steps"] * TPS == pytest.approx(row["tokens"])
    assert row["params"] * row["tokens"] * 6 == pytest.approx(BUDGET)
    assert row["n_draws"] == 30 and "resampling unit is the run" in out.resample
    assert (
        row["schedule"]
        == f"wsd:lr=0.003,steps={round(row['steps'])},warmup=50,decay=0.2,final_lr=0.0"
    )
    assert not out.warnings  # the optimum lies inside the fitted sizes and lengths


def test_a_budget_whose_run_is_longer_than_scalefit_evaluates_still_gets_its_schedule(fitted):
    """Closed-form areas: the run's length is not bounded by MAX_STEPS; its text says it."""
    from scalefit.core.schedule import MAX_STEPS

    curves, res = fitted
    out = allocation(res, 1e28, schedule=FAMILY, tokens_per_step=TPS, curves=curves)
    row = out.summary.iloc[0]
    assert row["steps"] > MAX_STEPS and f"steps={round(row['steps'])}," in row["schedule"]


@pytest.mark.slow
def test_interval_coverage_over_seeds():
    """Percentile intervals from 15 runs are somewhat narrow: most, not all.

    docs/studies/curves_checks.md quotes the count.
    """
    n_true, t_true = _truth_optimum(BUDGET)
    hits = 0
    for seed in range(10):
        curves, res = _fit(seed)
        row = allocation(res, BUDGET, schedule=FAMILY, tokens_per_step=TPS).summary.iloc[0]
        hits += bool(
            row["params_lo"] <= n_true <= row["params_hi"]
            and row["tokens_lo"] <= t_true <= row["tokens_hi"]
        )
    assert hits >= 7


def test_report_names_the_run_to_train_and_the_resampling_unit(fitted):
    curves, res = fitted
    text = allocation(res, [BUDGET, 1e17], schedule=FAMILY, tokens_per_step=TPS, curves=curves)
    report = text.report()
    assert "the resampling unit is the run" in report
    assert "train: " in report and "wsd:lr=0.003,steps=" in report
    assert "warning: at 1e+17 FLOP the allocation extrapolates" in report  # past the fitted lengths
    assert "1e+15 FLOP the allocation" not in report


def test_defaults_come_from_the_curves(fitted):
    curves, res = fitted
    a = allocation(res, BUDGET, curves=curves.assign(tokens_per_step=TPS))
    b = allocation(res, BUDGET, schedule=FAMILY, tokens_per_step=TPS)
    assert a.summary["params"].iloc[0] == pytest.approx(b.summary["params"].iloc[0])
    assert str(a.schedule).startswith("wsd:lr=0.003")


def test_without_draws_there_is_no_interval(fitted):
    _, res = fitted
    out = allocation(res.replace(draws=None), BUDGET, schedule=FAMILY, tokens_per_step=TPS)
    assert np.isnan(out.summary["params_lo"].iloc[0])
    assert "no bootstrap draws" in out.resample and "[" not in out.report().split("\n")[3]


def test_final_loss_law_is_the_curve_law_at_the_last_step():
    law = final_loss_law(get_law("lr_annealing_params"), FAMILY, tokens_per_step=TPS)
    steps = 3000
    frame = schedule_frame(parse_schedule(FAMILY, steps=steps), steps=[steps], params=2e6)
    want = get_law("lr_annealing_params").evaluate(TRUTH, frame)[0]
    got = law.evaluate(TRUTH, {"params": [2e6], "tokens": [steps * TPS]})[0]
    assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"schedule": "wsd:lr=3e-3,steps=100", "tokens_per_step": TPS}, "leave 'steps' out"),
        ({"schedule": "wsdx:lr=3e-3", "tokens_per_step": TPS}, "kind one of"),
        ({"schedule": "cosine:lr=3e-3,final_lr=0.1", "tokens_per_step": TPS}, "final_lr"),
        ({"schedule": FAMILY}, "tokens_per_step"),
        ({"tokens_per_step": TPS}, "schedule of the run to train"),
        ({"schedule": FAMILY, "tokens_per_step": -1.0}, "tokens_per_step must be"),
    ],
)
def test_bad_inputs_are_one_line_errors(fitted, kwargs, match):
    _, res = fitted
    with pytest.raises(ScaleFitError, match=match) as err:
        allocation(res, BUDGET, **kwargs)
    assert "\n" not in str(err.value)


def test_runs_with_different_schedules_need_one_named(fitted):
    curves, res = fitted
    mixed = curves.copy()
    mixed.loc[mixed["run"] == "run0", "schedule"] = "cosine:lr=0.003,steps=1000,warmup=50"
    with pytest.raises(ScaleFitError, match="different schedules"):
        allocation(res, BUDGET, curves=mixed, tokens_per_step=TPS)


def test_a_law_without_params_cannot_allocate():
    curves = synthetic_curves(
        {"L0": 2.0, "A": 1.5, "alpha": 0.5, "C": 0.3},
        [f"cosine:lr=0.003,steps={n},warmup=20" for n in (500, 1000)],
        every=50,
        seed=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_curves(prepare(curves), "lr_annealing", starts=4, progress=False)
    with pytest.raises(ScaleFitError, match="no params term") as err:
        allocation(res, BUDGET, schedule=FAMILY, tokens_per_step=TPS)
    assert "\n" not in str(err.value)
    with pytest.raises(ScaleFitError, match="reads no schedule quantity"):
        final_loss_law(get_law("chinchilla"), FAMILY, tokens_per_step=TPS)


# ---------------------------------------------------------------------------------- CLI
def test_cli_prints_an_allocation_from_the_bundled_curves(capsys):
    code = main(
        [
            "curves",
            "fit",
            str(WSD_CURVES),
            "--law",
            "lr_annealing_params",
            "--bootstrap",
            "8",
            "--starts",
            "8",
            "--budget",
            "1e12",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "compute-optimal allocation from curves: law lr_annealing_params" in out
    assert "wsd:lr=0.002,warmup=12,decay=0.2,final_lr=0.0 (4096 tokens per step)" in out
    assert "the resampling unit is the run" in out
    line = next(x for x in out.splitlines() if x.startswith("budget 1e+12 FLOP: params "))
    assert "tokens" in line and "steps" in line
    assert "  train: " in out and "wsd:lr=0.002,steps=" in out


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--budget", "1e12"], "no params term"),  # the default law is lr_annealing
        (["--law", "lr_annealing_params", "--train-schedule", "wsd:lr=1e-3"], "goes with"),
        (
            ["--law", "lr_annealing_params", "--budget", "1e12", "--train-schedule", "wsd:steps=9"],
            "leave 'steps' out",
        ),
        (
            ["--law", "lr_annealing_params", "--budget", "1e12", "--tokens-per-step", "0"],
            "--tokens-per-step: must be a finite float > 0",
        ),
        (
            ["--law", "lr_annealing_params", "--budget", "-5"],
            "--budget: must be a finite float > 0",
        ),
    ],
)
def test_cli_bad_inputs_are_one_stderr_line_and_exit_2(capsys, extra, match):
    try:
        code = main(["curves", "fit", str(WSD_CURVES), *extra])
    except SystemExit as exc:  # argparse's own checks (--budget's type) exit here
        code = exc.code
    cap = capsys.readouterr()
    assert code == 2 and cap.out == ""
    assert match in cap.err and len(cap.err.strip().splitlines()) == 1


def test_cli_tokens_per_step_is_needed_when_the_curves_lack_it(tmp_path, capsys):
    frame = pd.read_csv(WSD_CURVES).drop(columns=["tokens_per_step", "tokens"])
    path = tmp_path / "curves.csv"
    frame.to_csv(path, index=False)
    code = main(["curves", "fit", str(path), "--law", "lr_annealing_params", "--budget", "1e12"])
    cap = capsys.readouterr()
    assert code == 2 and cap.out == "" and "give tokens_per_step" in cap.err


def test_the_bundled_curves_read_as_documented():
    curves = read_curves(WSD_CURVES)
    assert set(curves["tokens_per_step"]) == {4096.0}
