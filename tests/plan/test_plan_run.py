"""``scalefit plan run`` on the tiny CPU trainer: two rounds, a SIGKILL mid-round, a resume."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")

from train_support import _one_torch_thread, token_folder  # noqa: E402, F401 - autouse fixture

import scalefit  # noqa: E402
from scalefit.cli import main  # noqa: E402
from scalefit.core.accounting import param_count  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def tiny_plan(tmp_path) -> Path:
    """A plan over 9 tiny byte-level runs (seconds each), started from the command line."""
    tokens = token_folder(tmp_path, vocab=["all", "the", "world", "is", "a", "stage"], seed=4)
    shapes = [(1, 16), (2, 16), (2, 32)]
    cand = pd.DataFrame(
        [
            {"depth": d, "width": w, "tokens": t, "params": param_count(d, w, vocab=256)}
            for d, w in shapes
            for t in (384, 768, 1536)
        ]
    )
    cand.to_csv(tmp_path / "candidates.csv", index=False)
    trainer = tmp_path / "trainer.toml"
    trainer.write_text(
        f'data = "{tokens}"\nseq_len = 16\nbatch_size = 4\neval_tokens = 256\n'
        'diagnose = false\nwarmup_frac = 0.0\nlr = 0.003\ndevice = "cpu"\n'
    )
    folder = tmp_path / "plan"
    argv = ["plan", "init", str(folder), str(tmp_path / "candidates.csv"), "--budget", "1e9"]
    assert main([*argv, "--n-boot", "20", "--trainer", str(trainer)]) == 0
    return folder


@pytest.mark.slow
def test_plan_run_survives_a_sigkill_and_resumes_without_repeating_runs(tmp_path, capsys):
    folder = tiny_plan(tmp_path)
    cmd = [
        sys.executable,
        "-m",
        "scalefit",
        "plan",
        "run",
        str(folder),
        "--k",
        "6",
        "--rounds",
        "2",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True)
    deadline = time.monotonic() + 300
    while not list(folder.glob("runs/*/result.json")):
        assert proc.poll() is None, "plan run ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # mid-round: at least one run finished, the round not told
    proc.wait()
    before = {p.parent.name: p.stat().st_mtime_ns for p in folder.glob("runs/*/result.json")}
    killed = scalefit.plan.load(folder)
    assert 1 <= len(before) < 6 and len(killed.pending) == 6 and not killed.results

    assert main(["plan", "run", str(folder), "--k", "6", "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    p = scalefit.plan.load(folder)
    status = p.status()
    assert status["rounds"] == 2 and status["runs_pending"] == 0 and len(p.decisions) == 2
    assert status["runs_told"] == len(p.asked) > 6
    # every asked run was trained once: one folder each, the killed round's results untouched
    runs = {d.name for d in (folder / "runs").iterdir()}
    assert runs == {a["run_id"] for a in p.asked}
    after = {p.parent.name: p.stat().st_mtime_ns for p in folder.glob("runs/*/result.json")}
    assert all(after[k] == v for k, v in before.items())
    table = p.table()
    assert np.isfinite(table["loss"]).all() and table["run_id"].is_unique
    assert "round 2" in out and "stop:" in out


def test_run_plan_tells_a_killed_rounds_finished_runs_without_training_them(tmp_path):
    """The resume logic alone: the round's runs all have result files (written by the killed
    process, here in the sweep runner's own format), so ``run_plan`` trains nothing and tells them.
    """
    import json

    from scalefit.plan import run_plan

    cand = pd.DataFrame(
        [
            {"depth": d, "width": w, "tokens": t, "params": param_count(d, w, vocab=256)}
            for d, w in [(1, 16), (2, 16), (2, 32), (3, 32)]
            for t in (384, 768, 1536)
        ]
    )
    trainer = {"data": "shakespeare", "seq_len": 16, "batch_size": 4, "device": "cpu"}
    p = scalefit.plan(1e9, tmp_path / "p", candidates=cand, trainer=trainer, n_boot=20)
    asked = p.ask(8)
    truth = {"E": 1.5, "A": 40.0, "B": 60.0, "alpha": 0.3, "beta": 0.35}
    for _, run in asked.iterrows():  # the killed process finished every run of the round
        n, t = run["params"], run["tokens"]
        loss = truth["E"] + truth["A"] / n ** truth["alpha"] + truth["B"] / t ** truth["beta"]
        folder = tmp_path / "p" / "runs" / run["run_id"]
        folder.mkdir(parents=True)
        row = {"params": n, "tokens": t, "depth": run["depth"], "width": run["width"], "loss": loss}
        payload = {"run_id": run["run_id"], "config": run["config"], "result": row}
        (folder / "result.json").write_text(json.dumps(payload))
    before = {f.parent.name: f.stat().st_mtime_ns for f in (tmp_path / "p").glob("runs/*/*")}
    p = run_plan(tmp_path / "p", k=4, rounds=1)
    after = {f.parent.name: f.stat().st_mtime_ns for f in (tmp_path / "p").glob("runs/*/*")}
    assert after == before  # nothing trained, nothing rewritten: only the results were read
    assert p.status()["runs_told"] == 8 and p.status()["rounds"] == 1
    assert p.decisions[-1]["runs"] == 8
    assert list(p.table()["run_id"]) == list(asked["run_id"])
