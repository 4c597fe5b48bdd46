"""End-to-end workflows as a new user runs them: a fresh folder, the CLI only, bundled data."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
from conftest import assert_png


def scalefit(cwd, *args, ok=(0,)):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [sys.executable, "-m", "scalefit", *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert proc.returncode in ok, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def test_fit_allocate_plots(tmp_path):
    scalefit(
        tmp_path,
        "fit",
        "depth_delusion",
        "--law",
        "decomposed",
        "--bootstrap",
        "50",
        "--starts",
        "64",
        "--out",
        "fit.json",
        "--plots",
        "plots",
        "--no-progress",
    )
    assert json.loads((tmp_path / "fit.json").read_text())["n_boot"] == 50
    out = scalefit(
        tmp_path,
        "allocate",
        "fit.json",
        "--budget",
        "1e20",
        "--budget",
        "1e21",
        "--vocab",
        "50257",
        "--embeddings",
        "untied",
        "--out",
        "alloc.csv",
        "--plots",
        "plots",
    )
    assert "budget 1e20" in out.stdout
    table = pd.read_csv(tmp_path / "alloc.csv")
    assert {"budget", "depth", "width", "tokens", "params", "loss"} <= set(table.columns)
    assert len(table) == 2
    pngs = {p.name for p in (tmp_path / "plots").glob("*.png")}
    assert {"fit_decomposed.png", "isoflop_decomposed.png", "frontier_decomposed.png"} <= pngs
    for name in pngs:
        assert_png(tmp_path / "plots" / name)


def _docs_interval(name: str) -> tuple[float, float]:
    """The 1e21-FLOP interval of ``name`` stated in docs/allocation.md."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "allocation.md").read_text()
    section = text[text.index("**What it says on Chinchilla**") :]
    match = re.search(rf"{name} \*\*\[([0-9.e]+),\s*([0-9.e]+)\]\*\*", section)
    assert match, f"docs/allocation.md states no 1e21 interval for {name}"
    return float(match.group(1)), float(match.group(2))


def test_demo_on_chinchilla_matches_the_documented_intervals(tmp_path):
    data = os.environ.get("SCALEFIT_DATA_DIR", "")
    if not (data and os.path.exists(os.path.join(data, "chinchilla_depth_width.csv"))):
        pytest.skip("the public Chinchilla table is not here (CI sets SCALEFIT_DATA_DIR)")
    out = scalefit(tmp_path, "demo", "--out", "demo", "--bootstrap", "30").stdout
    assert out.startswith("data     chinchilla:") and "SCALEFIT_DATA_DIR" in out
    assert "$ scalefit fit chinchilla --drop-highest 40 --law decomposed" in out
    assert "$ scalefit allocate" in out and "decision rule:" in out
    assert "In plain words" in out and "? [" not in out.split("== what to train")[1]
    rec = pd.read_csv(tmp_path / "demo" / "recommendation.csv")
    assert list(rec["budget"]) == [1e19, 1e20, 1e21]
    assert rec[[c for c in rec.columns if c.endswith("_determined")]].all().all()
    last = rec.iloc[-1]
    wording = {"depth": "depth", "width": "width", "params": "params", "tokens": "tokens"}
    for column, name in {**wording, "tokens_per_param": "tokens per parameter"}.items():
        lo, hi = _docs_interval(name)
        assert lo <= last[column] <= hi, (column, last[column], lo, hi)
    # text and CSV print the same numbers
    table = out.split("== what to train")[1]
    for q, label in (
        ("depth", "depth"),
        ("tokens", "tokens"),
        ("tokens_per_param", "tokens/param"),
    ):
        line = next(ln for ln in table.splitlines() if ln.strip().startswith(label + " "))
        for _, row in rec.iterrows():
            assert f"{row[q]:.3g}" in line or f"{int(row[q])}" in line, (q, line)
    demo = tmp_path / "demo"
    fit = json.loads((demo / "fit.json").read_text())
    assert fit["law"] == "decomposed" and fit["n_rows"] == 203
    alloc = pd.read_csv(demo / "allocation.csv")
    assert sorted(set(alloc["budget"])) == [1e19, 1e20, 1e21]
    assert_png(demo / "isoflop_decomposed.png")


@pytest.mark.slow  # in `make test-slow`: the default run stays under 10 minutes on 2 cores
def test_bayes_then_compare(tmp_path):
    pytest.importorskip("numpyro")
    scalefit(
        tmp_path,
        "bayes",
        "depth_delusion",
        "--law",
        "decomposed",
        "--chains",
        "2",
        "--draws",
        "100",
        "--warmup",
        "100",
        "--out",
        "post.json",
        "--netcdf",
        "post.nc",
        "--no-progress",
        ok=(0, 3),
    )
    data = json.loads((tmp_path / "post.json").read_text())
    assert data["method"] == "bayes" and "r_hat_max" in data["diagnostics"]
    from scalefit.fit import _arviz

    posterior = _arviz.read_netcdf(tmp_path / "post.nc")
    for name in data["params"]:
        draws = _arviz.values(posterior, name)
        assert draws.shape == (2, 100) and np.isfinite(draws).all(), name
    scalefit(
        tmp_path,
        "compare",
        "depth_delusion",
        "--laws",
        "critical_depth,decomposed",
        "--chains",
        "2",
        "--draws",
        "100",
        "--warmup",
        "100",
        "--out",
        "loo.csv",
        "--no-progress",
        ok=(0, 3),
    )
    loo = pd.read_csv(tmp_path / "loo.csv")
    assert set(loo.iloc[:, 0]) >= {"critical_depth", "decomposed"} or len(loo) == 2


def test_toy_run_then_fit(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "tiny.toml").write_text(
        textwrap.dedent("""
        [sweep]
        name = "tiny"
        task = "toy"

        [fixed]
        preset = "cpu"
        teacher_depth = 16
        depths = [2, 3, 4, 6]
        batch = 64
        steps = 40
        eval_steps = [20, 40]
        test_size = 256
        checkpoint_every = 0

        [grid]
        teacher_mode = ["independent", "tied"]
    """)
    )
    scalefit(tmp_path, "toy", "run", "tiny.toml", "--out", "runs", "--quiet")
    results = pd.read_csv(tmp_path / "runs" / "results.csv")
    assert len(results) == 2 * 4 * 2  # teacher modes × depths × evaluation steps
    assert set(results["teacher_mode"]) == {"independent", "tied"}
    assert sorted(set(results["steps"])) == [20, 40] and sorted(set(results["depth"])) == [
        2,
        3,
        4,
        6,
    ]
    scalefit(tmp_path, "toy", "fit", "runs", "--no-plots")
    alpha = pd.read_csv(tmp_path / "runs" / "alpha.csv")
    assert {"teacher_mode", "alpha"} <= set(alpha.columns)
