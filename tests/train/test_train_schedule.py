"""Trainer schedules (cosine, constant, linear, WSD) and WSD cooldown branches."""

import dataclasses
import json
import math

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from train_support import _one_torch_thread, tiny_settings, token_folder  # noqa: E402, F401

from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.core.schedule import Schedule, parse_schedule  # noqa: E402
from scalefit.train.branches import branch_config, plan, train_cooldowns  # noqa: E402
from scalefit.train.config import run_metadata  # noqa: E402
from scalefit.train.loop import config_from_dict, train  # noqa: E402

STEP = 8 * 32  # tokens per step of tiny_settings


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("sched")
    return token_folder(root, vocab=["to", "be", "or", "not", "that", "is", "the"], seed=2)


def cfg_of(token_dir=".", **kw):
    return config_from_dict(tiny_settings(token_dir, **kw))


def _lr(step, cfg):
    """The rate the trainer gives its 0-based step ``step`` (update ``step + 1``)."""
    return cfg.lr_schedule().lr_at(step + 1)


def _legacy_lr(step, cfg):
    """The trainer's warm-up + cosine as it was written before schedules were settings."""
    warm = max(1, round(cfg.warmup_frac * cfg.steps))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    progress = (step - warm) / max(1, cfg.steps - warm)
    floor = cfg.min_lr_ratio * cfg.lr
    return floor + 0.5 * (cfg.lr - floor) * (1 + math.cos(math.pi * min(1.0, progress)))


@pytest.mark.parametrize("steps", [1, 2, 7, 100, 1001])
@pytest.mark.parametrize("warmup_frac,min_lr_ratio", [(0.0, 0.0), (0.1, 0.1), (0.37, 0.5)])
def test_cosine_default_is_the_previous_schedule_bit_for_bit(steps, warmup_frac, min_lr_ratio):
    kw = dict(tokens=STEP * steps, warmup_frac=warmup_frac, min_lr_ratio=min_lr_ratio, lr=3.7e-3)
    default, explicit = cfg_of(**kw), cfg_of(schedule="cosine", **kw)
    assert default.schedule == "cosine"
    for k in range(steps):
        assert _lr(k, default) == _legacy_lr(k, default) == _lr(k, explicit)


def test_constant_linear_and_wsd_curves():
    kw = dict(tokens=STEP * 50, lr=1e-3, warmup_frac=0.1, min_lr_ratio=0.1)
    curves = {
        name: [_lr(k, cfg_of(**kw, **extra)) for k in range(50)]
        for name, extra in {
            "constant": {"schedule": "constant"},
            "linear": {"schedule": "linear"},
            "wsd": {"schedule": "wsd", "decay_frac": 0.2},
            "wsd_sqrt": {"schedule": "wsd", "decay_frac": 0.2, "decay_shape": "sqrt"},
            "wsd_cos": {"schedule": "wsd", "decay_frac": 0.2, "decay_shape": "cosine"},
        }.items()
    }
    for lrs in curves.values():  # the same 5-step warm-up everywhere
        assert lrs[:5] == pytest.approx([2e-4, 4e-4, 6e-4, 8e-4, 1e-3], rel=1e-12)
        assert all(a >= b for a, b in zip(lrs[5:], lrs[6:], strict=False))
    assert curves["constant"][5:] == [1e-3] * 45
    lin = curves["linear"]
    assert lin[-1] == pytest.approx(1e-4, rel=1e-12)  # the floor, reached at the last step
    steps = [lin[k] - lin[k + 1] for k in range(5, 49)]
    assert max(steps) == pytest.approx(min(steps), rel=1e-9)  # a straight line
    for name in ("wsd", "wsd_sqrt", "wsd_cos"):
        lrs = curves[name]
        assert lrs[5:40] == [1e-3] * 35  # stable until the last 20 % (10 steps)
        assert lrs[40] < 1e-3 and lrs[-1] == pytest.approx(1e-4, rel=1e-12)
    mid = 42  # u = 0.3 into the decay: 1 - sqrt(u) lies below 1 - u, cosine above
    assert curves["wsd_sqrt"][mid] < curves["wsd"][mid] < curves["wsd_cos"][mid]
    assert curves["wsd"][mid] == pytest.approx(1e-4 + 9e-4 * (1 - 3 / 10), rel=1e-12)


def test_schedule_text_speaks_the_curve_readers_grammar():
    cfg = cfg_of(schedule="wsd", tokens=STEP * 50, lr=1e-3, warmup_frac=0.1, min_lr_ratio=0.0)
    assert str(cfg.lr_schedule()) == "wsd:lr=0.001,steps=50,warmup=5,decay=0.2,final_lr=0.0"
    constant = cfg_of(schedule="constant", warmup_frac=0.0).lr_schedule()
    assert str(constant).startswith("constant:")


@pytest.mark.parametrize(
    "extra",
    [
        {"schedule": "cosine"},
        {"schedule": "cosine", "warmup_frac": 0.0, "min_lr_ratio": 0.0},
        {"schedule": "linear"},
        {"schedule": "constant"},
        {"schedule": "wsd", "decay_shape": "linear"},
        {"schedule": "wsd", "decay_shape": "sqrt"},
        {"schedule": "wsd", "decay_shape": "cosine"},
        {"schedule": "linear", "warmup_steps": 60},  # all warm-up
    ],
)
def test_the_curves_read_the_trainers_exact_rates(extra):
    """run.json's schedule_text, parsed by the curve readers, gives the trainer's every rate.

    Before the one schedule module the cosine was one step ahead there and a sqrt or cosine WSD
    decay had no name.
    """
    cfg = cfg_of(**{"tokens": STEP * 50, "lr": 1e-3, "warmup_frac": 0.1, **extra})
    text = run_metadata(cfg, params=1, params_nonembedding=1, branch=None)["schedule_text"]
    declared = parse_schedule(text).sequence()
    trainer = [_lr(k, cfg) for k in range(cfg.steps)]
    assert declared.tolist() == pytest.approx(trainer, rel=1e-14, abs=0)
    assert trainer == [cfg.lr_schedule().lr_at(k + 1) for k in range(cfg.steps)]


@pytest.mark.parametrize(
    "settings,match",
    [
        ({"schedule": "step"}, "'schedule'.*one of"),
        ({"schedule": "wsd", "decay_frac": 1.0}, "'decay_frac'.*range \\(0, 1\\)"),
        ({"schedule": "wsd", "decay_shape": "exp"}, "'decay_shape'"),
        ({"warmup_steps": -1}, "'warmup_steps'"),
        ({"cooldowns": 1024}, "'cooldowns'.*list"),
        ({"cooldowns": [1024.5]}, "'cooldowns'.*list"),
        ({"cooldowns": [STEP * 4]}, "'cooldowns' need schedule = 'wsd'.*'cosine'"),
        ({"schedule": "wsd", "cooldowns": [STEP * 40]}, "at most 'tokens' \\(3072\\); got 10240"),
        ({"schedule": "wsd", "cooldowns": [STEP * 6, STEP * 6 - 1]}, "both round to 6 steps"),
        ({"schedule": "wsd", "warmup_frac": 0.5, "cooldowns": [STEP * 4]}, "inside the 6-step"),
        ({"schedule": "wsd", "warmup_frac": 0.9}, "WSD decay .* must start after the warm-up"),
    ],
)
def test_bad_schedule_settings_are_refused_in_one_line(settings, match):
    with pytest.raises(ScaleFitError, match=match) as err:
        cfg_of(**settings)
    assert "\n" not in str(err.value)


def test_history_has_tokens_and_lr_and_run_json_has_the_metadata(token_dir, tmp_path):
    cfg = cfg_of(token_dir, schedule="linear", tokens=STEP * 6)
    res = train(cfg, tmp_path / "run")
    hist = pd.read_csv(tmp_path / "run" / "history.csv")
    assert list(hist.columns[:4]) == ["step", "tokens", "lr", "loss"]
    assert hist["tokens"].tolist() == [STEP * (k + 1) for k in range(6)]
    assert hist["lr"].tolist() == [_lr(k, cfg) for k in range(6)]
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["finished"] and meta["result"]["loss"] == res.row["loss"]
    expect = {"params": res.row["params"], "width": 32, "depth": 2, "schedule": "linear"}
    assert {k: meta[k] for k in expect} == expect
    assert meta["tokens"] == STEP * 6 and meta["branch"] is None


def _set(token_dir, **kw):
    # main run 24 steps, cooldowns of 10 and 16 steps (forks at steps 8 and 13)
    return cfg_of(
        token_dir,
        schedule="wsd",
        tokens=STEP * 24,
        warmup_frac=0.1,
        decay_frac=0.2,
        cooldowns=[STEP * 10, STEP * 16],
        **kw,
    )


def _losses(res):
    return [h["loss"] for h in res.history]


def test_a_cooldown_branch_is_the_standalone_run_of_its_budget(token_dir, tmp_path):
    """Bit-identical on CPU: same batches, same lrs before the fork, exact checkpoint round trip."""
    cfg = _set(token_dir)
    assert [(b.budget // STEP, b.fork_step) for b in plan(cfg, tmp_path)] == [(10, 8), (16, 13)]
    out = train_cooldowns(cfg, tmp_path / "set")
    assert out.finished and sorted(out.branches) == [STEP * 10, STEP * 16]
    with pytest.raises(dataclasses.FrozenInstanceError):  # results are built once
        out.finished = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.main.steps_run = 0  # type: ignore[misc]
    for budget in (STEP * 10, STEP * 16):
        alone = train(branch_config(cfg, budget), tmp_path / f"alone{budget}")
        folder = tmp_path / "set" / "cooldowns" / f"tokens_{budget}"
        hist = pd.read_csv(folder / "history.csv")
        assert hist["loss"].tolist() == _losses(alone)  # every step, to the bit
        assert hist["lr"].tolist() == [h["lr"] for h in alone.history]
        assert out.branches[budget]["loss"] == alone.row["loss"]
        assert out.branches[budget]["tokens"] == budget
        meta = json.loads((folder / "run.json").read_text())
        fork = Schedule("wsd", 1e-3, budget // STEP, decay=0.2).decay_start
        assert meta["branch"] == {"main": "../..", "fork_step": fork, "budget": budget}
        # the stable phase is shared with the main run
        assert hist["loss"].tolist()[:fork] == _losses(out.main)[:fork]
    rows = out.rows()
    assert [r["budget"] for r in rows] == [STEP * 24, STEP * 10, STEP * 16]
    assert [r["branch"] for r in rows] == ["main", "cooldown", "cooldown"]


def test_a_branch_set_stopped_anywhere_resumes_without_repeating_or_losing_work(
    token_dir, tmp_path
):
    cfg = _set(token_dir)
    whole = train_cooldowns(cfg, tmp_path / "whole")
    total = 24 + (10 - 8) + (16 - 13)  # steps of the main run and of the two decays
    calls, ran = 0, 0
    while True:
        part = train_cooldowns(cfg, tmp_path / "parts", stop_after=4)
        assert part.steps_run <= 4
        ran += part.steps_run
        calls += 1
        if part.finished:
            break
        assert calls < 20
    assert ran == total and calls == math.ceil(total / 4)  # no step run twice, none skipped
    assert [r["loss"] for r in part.rows()] == [r["loss"] for r in whole.rows()]
    for b in plan(cfg, tmp_path / "parts"):
        hist = pd.read_csv(b.folder / "history.csv")
        assert hist["step"].tolist() == list(range(b.cfg.steps))
    # a finished set: nothing is trained again and the branches are not even re-evaluated
    ckpt = plan(cfg, tmp_path / "parts")[0].folder / "checkpoint.pt"
    before = ckpt.stat().st_mtime_ns
    again = train_cooldowns(cfg, tmp_path / "parts", stop_after=0)
    assert again.finished and again.main.steps_run == 0 and ckpt.stat().st_mtime_ns == before
    assert [r["loss"] for r in again.rows()] == [r["loss"] for r in whole.rows()]


def test_stops_inside_the_main_run_and_inside_a_branch(token_dir, tmp_path):
    cfg = _set(token_dir)
    whole = train_cooldowns(cfg, tmp_path / "whole")
    first = train_cooldowns(cfg, tmp_path / "s", stop_after=20)  # forks written, main not done
    assert not first.finished and len(first.main.history) == 20 and not first.branches
    for b in plan(cfg, tmp_path / "s"):
        assert (b.folder / "checkpoint.pt").exists()
    second = train_cooldowns(cfg, tmp_path / "s", stop_after=5)  # main done, first branch half
    assert not second.finished and second.main.steps_run == 4 and list(second.branches) == []
    third = train_cooldowns(cfg, tmp_path / "s")
    assert third.finished and third.main.steps_run == 0
    assert [r["loss"] for r in third.rows()] == [r["loss"] for r in whole.rows()]


def test_a_lost_fork_is_named_not_silently_rerun(token_dir, tmp_path):
    import shutil

    cfg = _set(token_dir)
    train_cooldowns(cfg, tmp_path / "s")
    shutil.rmtree(tmp_path / "s" / "cooldowns" / f"tokens_{STEP * 10}")
    with pytest.raises(ScaleFitError, match="forks at step 8.*has no checkpoint.*--overwrite"):
        train_cooldowns(cfg, tmp_path / "s")
    assert train_cooldowns(cfg, tmp_path / "s", overwrite=True).finished


def test_grid_point_with_cooldowns_gives_one_row_per_budget(token_dir, tmp_path):
    from scalefit.sweep import run_sweep, spec_from_dict

    fixed = {k: v for k, v in tiny_settings(token_dir).items() if k != "width"}
    fixed.update(
        schedule="wsd",
        tokens=STEP * 12,
        cooldowns=[STEP * 6, STEP * 9],
        diagnose=False,
    )
    spec = spec_from_dict(
        {"sweep": {"name": "w", "task": "train"}, "fixed": fixed, "grid": {"width": [16, 32]}}
    )
    table = run_sweep(spec, tmp_path / "g", workers=0, progress=False)
    assert len(table) == 6 and table["run_id"].nunique() == 2
    assert sorted(table["tokens"].tolist()) == sorted([STEP * t for t in (6, 9, 12)] * 2)
    assert set(table["branch"]) == {"main", "cooldown"} and table["loss"].notna().all()


def test_cli_train_run_with_cooldowns_and_a_refused_setting(token_dir, tmp_path, capsys):
    from scalefit.cli import main

    conf = tmp_path / "wsd.toml"
    conf.write_text(
        f'data = "{token_dir}"\ndepth = 1\nwidth = 16\nseq_len = 32\nbatch_size = 8\n'
        f'tokens = {STEP * 10}\neval_tokens = 512\ndevice = "cpu"\nschedule = "wsd"\n'
        f"cooldowns = [{STEP * 5}]\ndiagnose = false\n"
    )
    assert main(["train", "run", str(conf), "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    lines = [line for line in out if not line.startswith("wrote ")]
    assert len(lines) == 2 and "tokens 2,560" in lines[0] and "tokens_1280" in lines[1]
    assert out[-1] == f"wrote {tmp_path / 'r' / 'result.json'}"
    result = json.loads((tmp_path / "r" / "result.json").read_text())
    assert [r["budget"] for r in result["result"]["rows"]] == [STEP * 10, STEP * 5]
    bad = ["train", "run", str(conf), "--set", "schedule='cosine'", "--out", str(tmp_path / "b")]
    assert main(bad) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'cooldowns' need schedule = 'wsd'" in err
    assert not (tmp_path / "b").exists()


def test_forks_read_the_device_back_first_when_reads_are_batched(token_dir, tmp_path):
    """With ``sync_every`` > 1 a fork step forces the read-back: same branches to the bit."""
    every = train_cooldowns(_set(token_dir), tmp_path / "every")
    batched = train_cooldowns(_set(token_dir, sync_every=5), tmp_path / "batched")
    assert [r["loss"] for r in batched.rows()] == [r["loss"] for r in every.rows()]
    for b in plan(_set(token_dir), tmp_path / "batched"):
        hist = pd.read_csv(b.folder / "history.csv")
        assert hist["step"].tolist() == list(range(b.cfg.steps))


def test_the_curve_reader_reads_a_run_and_its_branches_once_each(token_dir, tmp_path):
    from scalefit.curves import read_curves, read_trainer_runs

    cfg = _set(token_dir)
    train_cooldowns(cfg, tmp_path / "set")
    curves = read_trainer_runs(tmp_path / "set")
    names = sorted(curves["run"].unique())
    assert names == ["set", f"set/tokens_{STEP * 10}", f"set/tokens_{STEP * 16}"]
    for budget, fork in ((STEP * 10, 8), (STEP * 16, 13)):
        branch = curves[curves["run"] == f"set/tokens_{budget}"]
        assert branch["step"].min() == fork + 1  # the shared stable phase is the main run's
        assert branch["step"].max() == budget // STEP - 1
        meta = json.loads(
            (tmp_path / "set" / "cooldowns" / f"tokens_{budget}" / "run.json").read_text()
        )
        assert set(branch["schedule"]) == {meta["schedule_text"]}
        assert meta["schedule_text"].startswith("wsd:")
    main = curves[curves["run"] == "set"]
    assert len(main) == 23  # steps 1..23: the reader drops step 0 (no update done yet)
    assert set(curves["main_run"]) == {"set"}  # a branch is resampled with its main run
    assert read_curves(tmp_path / "set").equals(curves)  # a folder given to read_curves
