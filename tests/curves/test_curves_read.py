"""Curve readers and schedules: long CSV/JSONL, TensorBoard, W&B exports, trainer run folders."""

import json

import numpy as np
import pandas as pd
import pytest

from scalefit.core.errors import ScaleFitError
from scalefit.curves import (
    Schedule,
    areas,
    parse_schedule,
    prepare,
    read_curves,
    read_tensorboard,
    read_wandb,
)


# ------------------------------------------------------------------------------ schedules
def test_schedule_shapes():
    cos = Schedule("cosine", 1.0, 100, warmup=10, final_lr=0.1)
    assert cos.lr_at(5) == pytest.approx(0.5)  # warm-up: linear
    assert cos.lr_at(10) == cos.lr_at(11) == pytest.approx(1.0)  # update W + 1 at the peak
    assert cos.lr_at(100) == pytest.approx(0.1 + 0.45 * (1 + np.cos(np.pi * 89 / 90)))
    assert cos.lr_at(56) == pytest.approx(0.55)  # cosine midpoint, progress (s - 1 - W) / 90
    lin = Schedule("linear", 2.0, 10, final_lr=0.0)
    assert lin.sequence().tolist() == pytest.approx(
        [1.8, 1.6, 1.4, 1.2, 1.0, 0.8, 0.6, 0.4, 0.2, 0.0]
    )
    wsd = Schedule("wsd", 1.0, 100, warmup=5, decay=0.2, final_lr=0.0)
    seq = wsd.sequence()
    assert np.all(seq[5:80] == 1.0) and seq[-1] == 0.0 and seq[89] == pytest.approx(0.5)
    assert Schedule("constant", 3e-3, 50).sequence().tolist() == [3e-3] * 50


def test_parse_schedule_round_trips_and_names_problems():
    s = parse_schedule("wsd:lr=3e-3,steps=1000,warmup=20,decay=0.25,final_lr=3e-5")
    assert s == Schedule("wsd", 3e-3, 1000, warmup=20, decay=0.25, final_lr=3e-5)
    assert parse_schedule(str(s)) == s
    assert parse_schedule("cosine:lr=0.01", steps=40).steps == 40
    with pytest.raises(ScaleFitError, match="kind one of constant, cosine, linear, wsd"):
        parse_schedule("exp:lr=1")
    with pytest.raises(ScaleFitError, match="key one of"):
        parse_schedule("cosine:lr=1,gamma=2,steps=3")
    with pytest.raises(ScaleFitError, match="needs its length"):
        parse_schedule("cosine:lr=1")
    with pytest.raises(
        ScaleFitError,
        match=r"'final_lr' setting of the schedule must be a finite float in the range \[0, 1\]",
    ):
        parse_schedule("cosine:lr=1,steps=10,final_lr=2")


def test_areas_follow_the_momentum_definition():
    rng = np.random.default_rng(0)
    eta = np.concatenate([np.full(30, 1.0), np.sort(rng.uniform(0, 1, 70))[::-1]])
    lam = 0.9
    s1, s2 = areas(eta, momentum=lam)
    m, total, expect = 0.0, 0.0, []
    for i in range(len(eta)):  # m_i = lam m_{i-1} + (eta_{i-1} - eta_i), S2 = sum m_i
        m = lam * m + ((eta[i - 1] - eta[i]) if i else 0.0)
        total += m
        expect.append(total)
    assert np.allclose(s2, expect) and np.allclose(s1, np.cumsum(eta))
    # warm-up increases do not feed the momentum
    warm = np.concatenate([np.linspace(0.1, 1.0, 10), np.full(10, 1.0)])
    assert np.all(areas(warm, momentum=lam)[1] == 0.0)
    with pytest.raises(ScaleFitError, match="'momentum'"):
        areas(eta, momentum=1.0)


# ------------------------------------------------------------------------------ long format
def _long(tmp_path):
    rows = []
    for run, n in (("a", 1e7), ("b", 3e7)):
        for step in range(10, 210, 10):
            rows.append({"run": run, "step": step, "loss": 4 - step / 100, "params": n})
    return pd.DataFrame(rows)


def test_csv_and_jsonl_give_the_same_table(tmp_path):
    frame = _long(tmp_path)
    frame.to_csv(tmp_path / "c.csv", index=False)
    with open(tmp_path / "c.jsonl", "w") as fh:
        for rec in frame.to_dict("records"):
            fh.write(json.dumps(rec) + "\n")
    a = read_curves(tmp_path / "c.csv")
    b = read_curves(tmp_path / "c.jsonl")
    pd.testing.assert_frame_equal(
        a[["run", "step", "loss", "params"]], b[["run", "step", "loss", "params"]]
    )
    assert a["run"].tolist()[:2] == ["a", "a"] and len(a) == 40


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: f.drop(columns="run"), "no 'run' column"),
        (
            lambda f: f.assign(loss=f["loss"].where(f.index != 3, "x")),
            r"run 'a', row 4, column 'loss': expected a number",
        ),
        (
            lambda f: f.assign(step=f["step"].where(f.index != 25, -5)),
            r"run 'b', row 26, column 'step'",
        ),
        (
            lambda f: f.assign(params=f["params"].where(f.index != 7, 2e7)),
            r"run 'a', row 8, column 'params'.*one value per run",
        ),
        (lambda f: pd.concat([f, f.iloc[[0]]]), r"run 'a', row 41: a second checkpoint at step 10"),
        (lambda f: f.assign(lr=-1.0), r"column 'lr': expected a number >= 0"),
        (lambda f: f.drop(columns="step"), "needs a 'step' or a 'tokens' column"),
    ],
)
def test_bad_long_files_are_named_in_one_line(tmp_path, edit, message):
    path = tmp_path / "bad.csv"
    edit(_long(tmp_path)).to_csv(path, index=False)
    with pytest.raises(ScaleFitError, match=message) as info:
        read_curves(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_json_columns_tokens_only_and_ambiguous_aliases(tmp_path):
    cols = {"run": ["a"] * 3, "tokens": [640, 1280, 1920], "loss": [3.0, 2.9, 2.8]}
    (tmp_path / "c.json").write_text(json.dumps({**cols, "tokens_per_step": [64] * 3}))
    curves = read_curves(tmp_path / "c.json")
    prepared = prepare(curves, schedule="constant:lr=0.1", early=0.0)
    assert prepared["step"].tolist() == [10, 20, 30]  # steps from tokens / tokens_per_step
    (tmp_path / "n.json").write_text(json.dumps(cols))
    with pytest.raises(ScaleFitError, match="tokens but no steps"):
        prepare(read_curves(tmp_path / "n.json"), schedule="constant:lr=0.1")
    both = pd.DataFrame(
        {"run": "a", "step": [1, 2], "train_loss": [3.0, 2.9], "val_loss": [3.1, 3.0]}
    )
    with pytest.raises(ScaleFitError, match="'train_loss' and 'val_loss' both mean 'loss'"):
        read_curves(both)
    picked = read_curves(both, columns={"val_loss": "loss"})
    assert picked["loss"].tolist() == [3.1, 3.0] and "train_loss" in picked


def test_lr_column_or_declared_schedule_is_required(tmp_path):
    curves = read_curves(_long(tmp_path))
    with pytest.raises(ScaleFitError, match="no learning rates"):
        prepare(curves)
    prepared = prepare(curves, schedule="constant:lr=0.01")
    last = prepared[prepared["run"] == "a"].iloc[-1]
    assert last["S1"] == pytest.approx(2.0) and last["S2"] == 0.0  # 200 steps x 0.01


def test_checkpoint_discipline_defaults(tmp_path):
    rows = [{"run": "r", "step": s, "loss": 5.0 / (s + 1) ** 0.1} for s in range(0, 1001)]
    curves = read_curves(pd.DataFrame(rows))
    prepared = prepare(curves, schedule="cosine:lr=1e-3,steps=1000,warmup=50")
    assert prepared["step"].min() > 100  # warm-up and the first 10 % dropped
    assert len(prepared) == 100 and prepared["step"].max() == 1000  # thinned, last kept
    all_rows = prepare(
        curves,
        schedule="cosine:lr=1e-3,steps=1000,warmup=50",
        drop_warmup=False,
        early=0.0,
        max_points=None,
    )
    assert all_rows["step"].min() == 1 and len(all_rows) == 1000


def test_sparse_lr_column_is_interpolated_and_a_full_one_is_exact():
    full = pd.DataFrame(
        {"run": "r", "step": np.arange(1, 101), "loss": 3.0, "lr": np.linspace(1, 0.01, 100)}
    )
    p = prepare(read_curves(full), early=0.0, max_points=None, drop_warmup=False)
    assert p["S1"].iloc[-1] == pytest.approx(full["lr"].sum())
    assert p.attrs["scalefit_curves"]["lr_source"]["r"] == "lr column"
    sparse = full.iloc[9::10]
    q = prepare(read_curves(sparse), early=0.0, max_points=None, drop_warmup=False)
    assert q.attrs["scalefit_curves"]["lr_source"]["r"] == "lr column (interpolated)"
    assert q["S1"].iloc[-1] == pytest.approx(full["lr"].sum(), rel=0.02)


# ------------------------------------------------------------------------------ TensorBoard
def test_tensorboard_event_files_written_by_torch(tmp_path):
    pytest.importorskip("tensorboard")
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    for run, scale in (("small", 1.0), ("large", 0.8)):
        with SummaryWriter(log_dir=str(tmp_path / run)) as writer:
            for step in range(5, 105, 5):
                writer.add_scalar("train/loss", scale * (3 + 10 / step), step)
                writer.add_scalar("lr", 1e-3, step)
    curves = read_tensorboard(tmp_path, runs={"small": {"params": 1e6}, "large": {"params": 4e6}})
    assert sorted(curves["run"].unique()) == ["large", "small"]
    small = curves[curves["run"] == "small"]
    assert small["step"].tolist() == list(range(5, 105, 5))
    assert small["loss"].iloc[0] == pytest.approx(5.0, rel=1e-6)  # float32 in the event file
    assert np.allclose(small["lr"], 1e-3) and (small["params"] == 1e6).all()
    with pytest.raises(ScaleFitError, match="val/accuracy' not found"):
        read_tensorboard(tmp_path, tag="val/accuracy")
    assert torch is not None


def test_tensorboard_folder_without_events_is_refused(tmp_path):
    pytest.importorskip("tensorboard")
    with pytest.raises(ScaleFitError, match="no TensorBoard event files"):
        read_tensorboard(tmp_path)


# ------------------------------------------------------------------------------ W&B
def test_wandb_chart_export_csv(tmp_path):
    steps = np.arange(0, 100, 10)
    frame = pd.DataFrame({"Step": steps})
    for run in ("clean-sun-1", "wise-sea-2"):
        frame[f"{run} - train/loss"] = 3 + 1 / (steps + 1)
        frame[f"{run} - train/loss__MIN"] = 0.0
        frame[f"{run} - train/loss__MAX"] = 9.0
    frame.loc[3, "wise-sea-2 - train/loss"] = np.nan  # that run logged nothing at step 30
    frame.to_csv(tmp_path / "wandb_export.csv", index=False)
    curves = read_wandb(tmp_path / "wandb_export.csv", metric="train/loss")
    assert sorted(curves["run"].unique()) == ["clean-sun-1", "wise-sea-2"]
    assert len(curves) == 19 and curves["loss"].max() == pytest.approx(4.0)


def test_wandb_history_jsonl_and_json(tmp_path):
    lines = []
    for step in range(1, 51):
        lines.append({"_step": step, "_runtime": step * 0.1, "loss": 3 + 1 / step, "lr": 1e-3})
        if step % 10 == 0:
            lines.append({"_step": step, "_runtime": step * 0.1, "eval/acc": 0.5})
    # one history row per log call: the eval rows repeat a step without the loss
    with open(tmp_path / "wandb-history.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in lines)
    acc = read_wandb(tmp_path / "wandb-history.jsonl", metric="eval/acc")
    assert acc["step"].tolist() == [10, 20, 30, 40, 50] and "lr" not in acc  # lr logged elsewhere
    a = read_wandb(tmp_path / "wandb-history.jsonl", run="r1")
    assert len(a) == 50 and a["run"].unique().tolist() == ["r1"] and np.allclose(a["lr"], 1e-3)
    (tmp_path / "history.json").write_text(json.dumps([r for r in lines if "loss" in r]))
    b = read_wandb(tmp_path / "history.json")
    assert b["run"].iloc[0] == "history" and np.allclose(a["loss"], b["loss"])
    with pytest.raises(ScaleFitError, match="no metric 'val_loss'"):
        read_wandb(tmp_path / "history.json", metric="val_loss")


# ------------------------------------------------------------------------------ trainer
def test_trainer_run_folder(tmp_path):
    pytest.importorskip("torch")
    from train_support import make_corpus

    from scalefit.curves import read_trainer_run
    from scalefit.train.data import build_tokens
    from scalefit.train.loop import config_from_dict, train

    corpus = make_corpus(
        tmp_path / "c", vocab=["x", "yy", "zzz", "w"], n_docs=3, words=2000, seed=4
    )
    tokens = build_tokens(corpus, tmp_path / "tokens", val_fraction=0.34)
    cfg = config_from_dict(
        dict(
            data=str(tokens),
            depth=1,
            width=32,
            seq_len=16,
            batch_size=4,
            tokens=4 * 16 * 40,
            eval_tokens=256,
            device="cpu",
            threads=1,
        )
    )
    result = train(cfg, tmp_path / "run")
    curves = read_trainer_run(tmp_path / "run")
    assert curves["step"].tolist() == list(range(1, 40))
    assert curves["params"].iloc[0] == result.row["params"]
    assert curves["tokens"].iloc[-1] == 39 * 64
    history = pd.read_csv(tmp_path / "run" / "history.csv")
    assert np.allclose(curves["loss"], history["loss"].iloc[1:])
    assert np.allclose(curves["lr"], history["lr"].iloc[:-1])  # lr of the last update applied
    prepared = prepare(curves, early=0.0, max_points=None)
    assert prepared.attrs["scalefit_curves"]["lr_source"]["run"] == "lr column"


# ------------------------------------------------------------------------------ bundled tables
def test_bundled_gpu_grid_curves_match_their_finals():
    """data/lm_wsd_gpu*.csv: 120 runs, one curve per final, thinned, schedules that end there."""
    from pathlib import Path

    data = Path(__file__).resolve().parents[2] / "data"
    finals = pd.read_csv(data / "lm_wsd_gpu.csv")
    curves = read_curves(data / "lm_wsd_gpu_curves.csv")
    assert len(finals) == 120 and set(finals["run"]) == set(curves["run"])
    assert (finals["branch"] == "main").sum() == 30
    last = curves.groupby("run")["step"].max()
    for run, text in curves.groupby("run")["schedule"].first().items():
        # the loss before the last update is the last checkpoint: the schedule has one step more
        assert parse_schedule(text).steps == last[run] + 1
    assert set(curves["step"] % 8) <= {0} | set(last % 8)  # every 8th step and the last
    ends = finals.set_index("run")
    assert np.allclose(ends.loc[last.index, "tokens"], (last + 1) * 8192)
    assert (ends["loss"] > 0).all() and ends["train_end"].notna().all()
    # learning rates come from the declared schedules (lr is no longer logged at every step)
    prepared = prepare(curves[curves["run"] == ends.index[0]])
    assert set(prepared.attrs["scalefit_curves"]["lr_source"].values()) != {"lr column"}
