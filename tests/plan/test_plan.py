"""The ask/tell plan: a Gemstones grid as the oracle, bad plans, saved state and resume."""

import json

import numpy as np
import pandas as pd
import pytest

import scalefit
from scalefit.cli import main
from scalefit.core.errors import ScaleFitError


@pytest.fixture(scope="module")
def oracle():
    """Every fifth checkpoint of the bundled Gemstones grid: the runs a plan may 'train'."""
    g = scalefit.datasets.load("gemstones")
    return g.iloc[::5][["params", "depth", "width", "tokens", "loss"]].reset_index(drop=True)


def losses(runs, oracle):
    """The oracle's real losses of the asked runs (what training them would have given)."""
    out = runs[["params", "tokens"]].merge(oracle, on=["params", "tokens"], how="left")
    assert out["loss"].notna().all() and len(out) == len(runs)
    return out[["params", "tokens", "loss"]]


def start(oracle, folder, **kw):
    kw = {"n_boot": 20, "total_flops": 1.5e21, **kw}
    return scalefit.plan(1e22, folder, candidates=oracle.drop(columns="loss"), **kw)


def test_ask_tell_on_gemstones_refits_decides_and_saves(oracle, tmp_path):
    p = start(oracle, tmp_path / "p")
    first = p.ask(10)
    assert len(first) == 10 and (first["round"] == 1).all()
    assert set(first["run_id"]) <= set(p.candidates["run_id"])
    decision = p.tell(losses(first, oracle))
    second = scalefit.plan.load(tmp_path / "p").ask(6)  # the choice of next_runs on the saved fit
    assert not set(second["run_id"]) & set(first["run_id"])
    assert (second["round"] == 2).all() and len(second) >= 1
    p = scalefit.plan.load(tmp_path / "p")
    decision = p.tell(losses(second, oracle))
    assert decision is not None and len(p.decisions) == 2
    # the decision: N* at the target budget with its interval; outside it is said, not hidden
    assert 0 < decision["params_lo"] < decision["params_hi"]
    assert decision["ratio"] > 1 and first.attrs["choice"].startswith("spread")
    # ten runs and 20 resamples: how the second batch was chosen is said (and saved) either way
    assert second.attrs["choice"].startswith(("next_runs on the last fit", "spread over"))
    assert {a["choice"] for a in p.asked} == {first.attrs["choice"], second.attrs["choice"]}
    if not decision["inside"]:
        assert "outside its own interval" in " ".join(decision["notes"])
    status = p.status()
    assert status["runs_told"] == len(first) + len(second) and status["runs_pending"] == 0
    assert status["flops_spent"] == pytest.approx(6 * (p.table().params * p.table().tokens).sum())
    assert status["flops_spent"] <= 1.5e21
    saved = json.loads((tmp_path / "p" / "plan.json").read_text())
    assert saved["results"] == p.results and (tmp_path / "p" / "fit.json").is_file()
    assert "decision: N*" in p.report()


def test_the_plan_stops_when_no_run_fits_the_compute_left(oracle, tmp_path):
    cheap = oracle.loc[(oracle.params * oracle.tokens).nsmallest(8).index]
    total = float(6 * (cheap.params * cheap.tokens).sum())
    p = scalefit.plan(1e22, tmp_path / "p", candidates=cheap.drop(columns="loss"),
                      total_flops=total, n_boot=20)  # fmt: skip
    runs = p.ask(8)
    assert len(runs) == 8 and p.stop_reason() is None  # asked, not yet told
    p.tell(losses(runs, oracle).iloc[:3])
    assert p.stop_reason() is None and len(p.pending) == 5
    assert p.ask(4).empty  # nothing left to ask while five runs are out
    p.tell(losses(runs, oracle).iloc[3:])
    assert p.stop_reason() == "compute" and p.ask(2).empty
    assert "no run fits the compute left" in p.report()


def test_a_killed_plan_resumes_from_its_saved_state(oracle, tmp_path):
    p = start(oracle, tmp_path / "p")
    runs = p.ask(5)
    p.tell(losses(runs, oracle).iloc[:2])  # too few to fit: no decision yet, state saved
    del p  # the process dies here: what survives is the folder
    again = scalefit.plan.load(tmp_path / "p")
    assert list(again.pending["run_id"]) == list(runs["run_id"].iloc[2:])
    assert again.decisions[-1]["params"] is None
    assert again.ask(3)["round"].eq(2).all()  # new runs join; the pending ones stay pending
    assert len(again.pending) == 6
    assert not list((tmp_path / "p").glob("*.tmp*"))  # atomic writes leave no temporary file


def test_tell_refuses_runs_the_plan_did_not_ask_for(oracle, tmp_path):
    p = start(oracle, tmp_path / "p")
    runs = p.ask(3)
    other = oracle[~oracle.params.isin(runs.params) | ~oracle.tokens.isin(runs.tokens)].iloc[:1]
    with pytest.raises(ScaleFitError, match="was not asked for"):
        p.tell(other[["params", "tokens", "loss"]])
    with pytest.raises(ScaleFitError, match="was not asked for"):
        p.tell(pd.DataFrame({"run_id": ["nope"], "loss": [3.0]}))
    p.tell(losses(runs, oracle).iloc[:1])
    with pytest.raises(ScaleFitError, match="already told"):
        p.tell(losses(runs, oracle).iloc[:1])
    with pytest.raises(ScaleFitError, match="'loss' column"):
        p.tell(runs[["params", "tokens"]])
    assert len(scalefit.plan.load(tmp_path / "p").results) == 1  # refused tells change nothing


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"target_budget": 1e15}, "at least the smallest candidate run"),
        ({"max_run_flops": 1e10}, "leaves no candidate run"),
        ({"total_flops": 1e10}, "at least the smallest candidate run"),
        ({"stop_width": 1.0}, "stop_width"),
        ({"candidates": pd.DataFrame({"params": [1e8]})}, "Missing"),
    ],
)
def test_bad_plans_are_refused(oracle, tmp_path, kw, match):
    args = {"target_budget": 1e22, "candidates": oracle.drop(columns="loss"), **kw}
    with pytest.raises(ScaleFitError, match=match):
        scalefit.plan(folder=tmp_path / "p", **args)
    assert not (tmp_path / "p" / "plan.json").exists()


def test_cli_bad_plans_are_one_line_and_exit_2(oracle, tmp_path, capsys):
    folder = str(tmp_path / "p")
    for extra in (["--budget", "1e15"], ["--budget", "1e22", "--max-run-flops", "1e10"]):
        assert main(["plan", "init", folder, "gemstones", *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("scalefit: error:") and err.count("\n") == 1
    assert main(["plan", "init", folder, "gemstones", "--budget", "1e22", "--n-boot", "20"]) == 0
    assert main(["plan", "ask", folder, "--k", "2", "--out", str(tmp_path / "a.csv")]) == 0
    capsys.readouterr()
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"params": [1.234e9], "tokens": [1e10], "loss": [3.0]}).to_csv(bad, index=False)
    assert main(["plan", "tell", folder, str(bad)]) == 2
    err = capsys.readouterr().err
    assert "was not asked for" in err and err.count("\n") == 1
    asked = pd.read_csv(tmp_path / "a.csv")
    good = tmp_path / "good.csv"
    losses(asked, oracle).assign(run_id=asked["run_id"]).to_csv(good, index=False)
    assert main(["plan", "tell", folder, str(good)]) == 0
    assert main(["plan", "status", folder]) == 0
    out = capsys.readouterr().out
    assert "2 runs told, 0 pending" in out and "stop: not yet" in out
    assert main(["plan", "run", folder]) == 2  # no trainer settings: one line
    assert "no trainer settings" in capsys.readouterr().err


def test_the_choice_is_next_runs_on_the_saved_fit(oracle, tmp_path):
    from scalefit.design import next_runs

    p = start(oracle, tmp_path / "p", total_flops=None)
    p.tell(losses(p.ask(12), oracle))
    fit, free = p.last_fit(), p.free()
    want = next_runs(
        fit,
        1e22,
        p.flops_spent,  # at most the compute spent so far
        candidates=free[["depth", "width", "params", "tokens"]],
        k=3,
    )
    got = p.ask(3)
    assert got.attrs["choice"].startswith("next_runs on the last fit")
    np.testing.assert_array_equal(got["params"], want.runs["params"])
    np.testing.assert_array_equal(got["tokens"], want.runs["tokens"])


def test_known_law_the_decision_covers_the_truth_and_a_narrow_interval_stops(tmp_path):
    truth = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
    n, t = np.meshgrid(np.geomspace(1e7, 1e9, 8), np.geomspace(1e9, 1e11, 6))
    cand = pd.DataFrame({"params": n.ravel(), "tokens": t.ravel()})
    rng = np.random.default_rng(0)
    clean = (
        truth["E"]
        + truth["A"] / cand.params ** truth["alpha"]
        + truth["B"] / cand.tokens ** truth["beta"]
    )
    cand["loss"] = clean * np.exp(rng.normal(0, 0.003, len(cand)))
    p = scalefit.plan(1e22, tmp_path / "p", candidates=cand[["params", "tokens"]], n_boot=30)
    runs = p.ask(16)
    d = p.tell(runs.merge(cand, on=["params", "tokens"])[["params", "tokens", "loss"]])
    want = scalefit.allocate("chinchilla", [1e22], params=truth).summary["params"].iloc[0]
    assert d["converged"] and d["params_lo"] <= want <= d["params_hi"]
    assert d["ratio"] <= 1.5 and p.stop_reason() == "interval" and p.ask(4).empty
    assert "the interval is narrow enough" in p.report()
