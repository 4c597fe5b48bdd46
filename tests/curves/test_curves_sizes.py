"""Sizes never taken on trust (issue 42): schedules and steps are bounded before anything is
allocated, and a schedule is evaluated at the steps asked for, not over its whole length."""

import json
import tracemalloc

import numpy as np
import pandas as pd
import pytest

import scalefit.core.schedule as schedule_module
from scalefit.cli import main
from scalefit.core.errors import ScaleFitError
from scalefit.core.schedule import MAX_STEPS, Schedule, areas, areas_at, parse_schedule
from scalefit.curves import prepare, read_curves, read_trainer_runs, schedule_frame

HUGE = "steps=1000000000000"


def _curves(tmp_path, **extra) -> pd.DataFrame:
    steps = np.arange(1, 201)
    frame = pd.DataFrame({"run": "a", "step": steps, "loss": 3.0 + 1.0 / np.sqrt(steps), **extra})
    path = tmp_path / "curves.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    "spec",
    ["constant:lr=3e-3," + HUGE, "cosine:lr=3e-3,steps=1e12", f"wsd:lr=1,steps={MAX_STEPS + 1}"],
)
def test_a_schedule_longer_than_the_bound_is_one_line(spec):
    with pytest.raises(ScaleFitError, match=r"^--forecast: The 'steps' setting .* \[1, 16777216\]"):
        parse_schedule(spec, where="--forecast")


def test_a_schedule_column_with_1e12_steps_is_refused_on_reading(tmp_path):
    path = _curves(tmp_path, schedule="cosine:lr=1e-3,warmup=10," + HUGE)
    with pytest.raises(ScaleFitError, match=r"run 'a'.*'steps' setting.*16777216"):
        read_curves(path)  # before any fit, forecast or allocation


def test_a_checkpoint_at_step_1e12_is_one_line(tmp_path):
    frame = pd.DataFrame({"run": "a", "step": [10.0, 1e12], "loss": [3.0, 2.9], "lr": 1e-3})
    with pytest.raises(ScaleFitError, match=r"run 'a': last step: .* 1 \.\. 16777216 updates"):
        prepare(frame)
    by_tokens = pd.DataFrame(  # steps counted from tokens: 1e9 updates
        {"run": "a", "tokens": [1e3, 1e12], "loss": [3.0, 2.9], "tokens_per_step": 1e3}
    )
    with pytest.raises(ScaleFitError, match=r"last step: .* 1e\+09 asked for"):
        prepare(by_tokens, schedule="constant:lr=1e-3")


def test_a_declared_schedule_is_evaluated_up_to_the_last_checkpoint(tmp_path):
    """A schedule of 16.7M updates with checkpoints up to 200: 200 rates, not 16.7M."""
    short = read_curves(_curves(tmp_path, schedule="constant:lr=1e-3,warmup=10,steps=200"))
    short = prepare(short, early=0.0)  # (imports done before memory is traced)
    curves = read_curves(_curves(tmp_path, schedule=f"wsd:lr=1e-3,warmup=10,steps={MAX_STEPS}"))
    tracemalloc.start()
    try:
        out = prepare(curves, early=0.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5e6  # the whole schedule would be 134 MB per array
    assert out["S1"].tolist() == short["S1"].tolist()  # the stable phase: a constant's areas


def test_a_trainer_run_json_with_1e12_steps_is_one_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    cfg = {"batch_size": 4, "seq_len": 16, "depth": 1, "width": 32, "vocab": 64, "tokens": 4096}
    cfg.update(lr=1e-3, min_lr_ratio=0.1, warmup_frac=0.1)
    (run / "train_config.json").write_text(json.dumps(cfg))
    (run / "run.json").write_text(json.dumps({"schedule_text": "cosine:lr=1e-3," + HUGE}))
    steps = np.arange(0, 64)
    pd.DataFrame({"step": steps, "lr": 1e-3, "loss": 4.0 - steps / 100}).to_csv(
        run / "history.csv", index=False
    )
    with pytest.raises(ScaleFitError, match=r"run 'run'.*'steps' setting.*16777216"):
        read_trainer_runs(run)


def test_areas_at_gives_the_floats_of_one_pass(monkeypatch):
    """Walking a schedule in blocks (here of 7 updates) gives exactly the areas of one pass."""
    monkeypatch.setattr(schedule_module, "_CHUNK", 7)
    for spec in ("wsd:lr=1e-3,steps=100,warmup=10,decay=0.3,shape=sqrt", "cosine:lr=1,steps=50"):
        sched = parse_schedule(spec)
        s1, s2 = areas(sched.sequence(), momentum=0.99, warmup=sched.warmup)
        steps = np.array([1, 6, 7, 8, 15, 49, sched.steps])
        lr, a1, a2 = areas_at(sched, steps, momentum=0.99)
        assert lr.tolist() == sched.sequence()[steps - 1].tolist()
        assert a1.tolist() == s1[steps - 1].tolist() and a2.tolist() == s2[steps - 1].tolist()


def test_a_forecast_of_a_long_schedule_at_a_few_steps_holds_only_blocks():
    sched = Schedule("wsd", lr=1e-3, steps=MAX_STEPS, warmup=100, shape="sqrt")
    schedule_frame(Schedule("constant", lr=1e-3, steps=10), steps=[5])  # imports
    tracemalloc.start()
    try:
        frame = schedule_frame(sched, steps=[100, 3_000_000])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert frame["S1"].tolist() == pytest.approx([0.0505, 2999.9505], rel=1e-9)
    assert peak < 10e6  # blocks of 2**16 updates; 3M updates in one piece are 24 MB per array


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--forecast", "constant:lr=3e-3,steps=1000000000"], "--forecast: The 'steps' setting"),
        (["--forecast", "constant:lr=3e-3,steps=500", "--params", "nan"], "'--params' option"),
    ],
)
def test_cli_refuses_sizes_and_nan_before_fitting(tmp_path, capsys, extra, message):
    code = main(["curves", "fit", str(_curves(tmp_path)), "--bootstrap", "0", *extra])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert message in captured.err and len(captured.err.strip().splitlines()) == 1
