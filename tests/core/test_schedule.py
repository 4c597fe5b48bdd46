"""The one learning-rate schedule module: conventions shared by the trainer and the curves."""

import numpy as np
import pandas as pd
import pytest

from scalefit.core.errors import ScaleFitError
from scalefit.core.schedule import (
    KINDS,
    SHAPES,
    Schedule,
    areas,
    decay_drops,
    parse_schedule,
    trainer_schedule,
    warmup_of,
)
from scalefit.curves import prepare, schedule_frame
from scalefit.curves.optimum import final_areas

SPECS = [
    "linear:lr=1e-3,steps=400,warmup=20",
    "linear:lr=1e-3,steps=400,warmup=20,final_lr=1e-4",
    "cosine:lr=1e-3,steps=400,warmup=20,final_lr=1e-4",
    "cosine:lr=1e-3,steps=400",
    "wsd:lr=1e-3,steps=400,warmup=20,decay=0.2",
    "wsd:lr=1e-3,steps=400,warmup=20,decay=0.25,shape=sqrt,final_lr=1e-5",
    "wsd:lr=1e-3,steps=400,warmup=20,decay=0.2,shape=cosine",
    "constant:lr=1e-3,steps=400,warmup=20",
]


def _curves(sched: Schedule, *, lr_column: bool) -> pd.DataFrame:
    steps = np.arange(1, sched.steps + 1)
    frame = pd.DataFrame({"run": "a", "step": steps, "loss": 3.0 - 1e-3 * steps})
    if lr_column:
        frame["lr"] = sched.sequence()
    else:
        frame["schedule"] = str(sched)
    return frame


@pytest.mark.parametrize("spec", SPECS)
def test_fit_and_forecast_see_the_same_S2(spec):
    """A declared warm-up W zeroes W drops, as the warm-up read from logged rates does.

    Before the one module, a declared warm-up zeroed W + 1 drops (S2 of a linear schedule
    differed by about 8e-4 between a fit on logged rates and a forecast from its schedule).
    """
    sched = parse_schedule(spec)
    assert warmup_of(sched.sequence()) in (sched.warmup, 0 if sched.warmup <= 1 else -1)
    rules = {"early": 0.0, "max_points": None, "drop_warmup": False}
    fit = prepare(_curves(sched, lr_column=True), **rules)  # the rates a trainer logs
    declared = prepare(_curves(sched, lr_column=False), **rules)  # no lr column
    forecast = schedule_frame(sched)  # the path of forecast()
    assert fit["S2"].tolist() == declared["S2"].tolist() == forecast["S2"].tolist()
    assert fit["S1"].tolist() == forecast["S1"].tolist()
    if sched.kind != "constant":
        assert fit["S2"].iloc[-1] > 0
    if sched.shape != "sqrt":  # the allocation's closed form agrees at whole steps
        s1, s2 = final_areas(sched, [float(sched.steps)])
        assert s1[0] == pytest.approx(fit["S1"].iloc[-1], rel=1e-12)
        assert s2[0] == pytest.approx(fit["S2"].iloc[-1], rel=1e-12)


def test_the_drop_from_the_peak_counts():
    sched = parse_schedule("linear:lr=1.0,steps=10,warmup=2")
    eta = sched.sequence()
    d = decay_drops(eta, 2)
    assert d.tolist()[:3] == [0.0, 0.0, pytest.approx(0.125)]  # peak at update 2, drop into 3
    _, s2 = areas(eta, momentum=0.0, warmup=2)
    assert s2[-1] == pytest.approx(1.0)  # every drop from the peak to 0, none of the warm-up


def test_cosine_holds_the_peak_one_update_after_warmup():
    """The trainer's (and nanoGPT's) cosine: progress (s - 1 - W) / (T - W)."""
    s = Schedule("cosine", lr=1.0, steps=12, warmup=2, final_lr=0.0)
    eta = s.sequence()
    assert eta[1] == eta[2] == 1.0
    assert eta[-1] == pytest.approx(0.5 * (1 + np.cos(np.pi * 9 / 10)))
    assert [s.lr_at(k) for k in range(1, 13)] == pytest.approx(eta.tolist(), rel=1e-15)


@pytest.mark.parametrize("shape", SHAPES)
def test_wsd_shapes_are_named_in_the_grammar(shape):
    s = parse_schedule(f"wsd:lr=1e-3,steps=100,warmup=5,decay=0.2,shape={shape}")
    assert s.shape == shape and parse_schedule(str(s)) == s
    u = 0.15  # three updates into the 20-update decay
    f = {"linear": 1 - u, "sqrt": 1 - np.sqrt(u), "cosine": 0.5 * (1 + np.cos(np.pi * u))}
    assert s.lr_at(83) == pytest.approx(1e-3 * f[shape], rel=1e-12)
    assert s.lr_at(80) == 1e-3 and s.lr_at(100) == 0.0


def test_bad_shape_and_settings_are_one_line():
    with pytest.raises(ScaleFitError, match="shape must be one of linear, sqrt, cosine"):
        parse_schedule("wsd:lr=1e-3,steps=10,shape=exp")
    with pytest.raises(ScaleFitError, match="'shape'"):
        Schedule("wsd", 1e-3, 10, shape="exp")
    with pytest.raises(ScaleFitError, match="key one of lr, steps, warmup, .*shape"):
        parse_schedule("wsd:lr=1e-3,steps=10,cooldown=2")


def test_trainer_settings_give_the_schedule_the_curves_read():
    settings = {"lr": 2e-3, "min_lr_ratio": 0.1, "tokens": 4096 * 31, "batch_size": 32}
    settings |= {"seq_len": 128, "warmup_frac": 0.4, "decay_frac": 0.2}
    for kind in KINDS:
        for shape in SHAPES:
            s = trainer_schedule({**settings, "schedule": kind, "decay_shape": shape})
            assert (s.steps, s.warmup, s.final_lr) == (31, 12, pytest.approx(2e-4))
            assert parse_schedule(str(s)).sequence().tolist() == s.sequence().tolist()
    legacy = trainer_schedule({**settings, "warmup_frac": 0.0})  # written before schedules
    assert legacy.kind == "cosine" and legacy.warmup == 1


def test_a_trainer_configuration_longer_than_max_steps_is_one_line():
    """1e14 tokens at 128 per step are 7.8e11 updates: refused before the run, naming both."""
    cfg = {"lr": 1e-3, "min_lr_ratio": 0.1, "tokens": 10**14, "batch_size": 1, "seq_len": 128}
    with pytest.raises(ScaleFitError, match=r"100000000000000 tokens, 128 per step.*7\.8125e\+11"):
        trainer_schedule(cfg)
    assert trainer_schedule({**cfg, "tokens": 128 * 2**24}).steps == 2**24
