"""The decision benchmark on the eight public IsoFLOP sweeps (slow: the full protocol)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pandas as pd
import pytest

from scalefit.datasets import DATASETS

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_decision.py"
_DIR = os.environ.get("SCALEFIT_DATA_DIR")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (_DIR and (Path(_DIR) / DATASETS["isoflops"].filename).exists()),
        reason="the IsoFLOP collection is not in SCALEFIT_DATA_DIR",
    ),
]


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    sys.path.insert(0, str(BENCH.parent))
    try:
        spec = importlib.util.spec_from_file_location("bench_decision", BENCH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out = tmp_path_factory.mktemp("decision")
        assert module.main(["--boot", "20", "--out", str(out / "d.csv"),
                            "--figure", str(out / "d.png")]) == 0  # fmt: skip
    finally:
        sys.path.remove(str(BENCH.parent))
    summary = pd.read_csv(out / "d_summary.csv").set_index(["phase", "method"])
    summary.attrs["calibration"] = pd.read_csv(out / "d_calibration.csv").set_index("method")
    summary.attrs["stack"] = pd.read_csv(out / "d_stack_weights.csv").set_index("fold")
    gem = out / "d_gemstones_summary.csv"
    summary.attrs["gemstones"] = (
        pd.read_csv(gem).set_index(["phase", "method"]) if gem.exists() else None
    )
    return summary


def test_acceptance_numbers(summary):
    from scalefit.isoflop._estimators import METHODS
    from scalefit.isoflop.decision import DEFAULT_METHOD

    roll = summary.loc["rolling"].sort_values(["abs_err", "regret"])
    # the library's default is the rolling-origin choice among the library's methods
    assert roll.index[roll.index.isin(METHODS)][0] == DEFAULT_METHOD
    fin = summary.loc["final"]
    ours = fin.loc[DEFAULT_METHOD]
    # reached (bench_decision.py --boot 20): pooled-calibrated 95 % intervals contain the
    # reference within its own uncertainty at 16/16 final budgets, 80 % at 14/16
    assert ours["cov95_pooled"] >= 0.90
    assert 0.72 <= ours["cov80_pooled"] <= 0.90
    # the parameter-only interval does not reach 90 % at 95 %: the misfit term is needed
    assert ours["cov95_param"] < 0.90
    # NOT reached: the issue's 0.131 (Approach 2's parabola); the chosen method scores 0.170
    assert ours["abs_err"] < fin.loc["law_huber", "abs_err"]
    assert fin.loc["parabola", "abs_err"] == pytest.approx(0.131, abs=0.002)  # peers.md's number
    assert fin["regret"].notna().all()


def test_pooled_constants_are_the_benchmarks(summary):
    # the library's shipped calibration is what this protocol fits (rolling origins only)
    from scalefit.isoflop.decision import POOLED

    cal = summary.attrs["calibration"]
    assert set(POOLED) == set(cal.index) - set(_candidates().NAMES)
    for m, (s0, kappa, n_origins, n_scored) in POOLED.items():
        assert cal.loc[m, "s0"] == pytest.approx(s0, abs=2e-4)
        assert cal.loc[m, "kappa"] == pytest.approx(kappa, abs=2e-4)
        assert (cal.loc[m, "n_origins"], cal.loc[m, "n_scored"]) == (n_origins, n_scored)


def test_new_candidates_scored_and_not_chosen(summary):
    # issue 36 item 2: three new estimators, chosen only on rolling origins; average still wins
    roll = summary.loc["rolling"]
    for m in ("parabola_shared", "parabola_sharedc", "slope_prior", "law_near"):
        assert m in roll.index and m in summary.loc["final"].index
        assert roll.loc[m, "abs_err"] > roll.loc["average", "abs_err"]


def _candidates():
    sys.path.insert(0, str(BENCH.parent))
    try:
        import decision_candidates
    finally:
        sys.path.remove(str(BENCH.parent))
    return decision_candidates


def test_vertex_candidates_win_the_rolling_origins_but_not_the_parabolas_final_score(summary):
    # issue 36 item 2, the 15 candidates of decision_candidates.py: the rolling origins choose
    # vertex_eb (the vertex line's slope shrunk towards the other sources' slopes), 0.059
    # against 0.147 for mean_vertex4, the best of the fourteen earlier candidates; on the final
    # budgets they score 0.155 and 0.142 against the parabola's 0.131: the target is NOT met
    roll = summary.loc["rolling"].sort_values(["abs_err", "regret"])
    assert set(_candidates().NAMES) <= set(roll.index)
    assert list(roll.index[:2]) == ["vertex_eb", "mean_vertex4"]
    assert roll.loc["vertex_eb", "abs_err"] == pytest.approx(0.059, abs=0.001)
    assert roll.loc["mean_vertex4", "abs_err"] == pytest.approx(0.147, abs=0.001)
    assert roll.loc["mean_vertex4", "abs_err"] < roll.loc["average", "abs_err"] - 0.015
    fin = summary.loc["final"]
    eb, ours = fin.loc["vertex_eb"], fin.loc["mean_vertex4"]
    assert eb["abs_err"] == pytest.approx(0.155, abs=0.001)
    assert ours["abs_err"] == pytest.approx(0.142, abs=0.001)
    assert fin.loc["parabola", "abs_err"] < ours["abs_err"] < eb["abs_err"]
    assert eb["abs_err"] < fin.loc["average", "abs_err"]
    assert ours["regret"] < fin.loc["average", "regret"]
    # mean_vertex4's pooled misfit term, fitted on its own rolling errors, covers the final
    # budgets; vertex_eb's, fitted on its small rolling errors, does not (10 and 12 of 16)
    assert ours["cov95_pooled"] >= 0.90
    assert 0.72 <= ours["cov80_pooled"] <= 0.90
    assert eb["cov80_pooled"] == pytest.approx(10 / 16) and eb["cov95_pooled"] == pytest.approx(
        12 / 16
    )


def test_gemstones_beside_the_sweeps(summary):
    gem = summary.attrs["gemstones"]
    if gem is None:
        pytest.skip("gemstones/ not in SCALEFIT_DATA_DIR")
    final = gem.loc["final"]
    assert (final["n_ref"] == 2).all()  # two held-out levels with an interior minimum
    assert final.loc["average", "cov95_pooled"] == 1.0  # the sweeps' pooled calibration covers


def test_stack_weights_are_the_benchmarks_and_the_stack_is_not_chosen(summary):
    # the shipped STACK_WEIGHTS are the all-sweep rolling-origin weights; every fold's weights
    # are a convex combination
    from scalefit.allocate.misfit import STACK_WEIGHTS

    weights = summary.attrs["stack"]
    assert len(weights) == 9  # all sweeps, and one fold without each of the eight
    assert ((weights >= 0).all(axis=None)) and (weights.sum(axis=1) - 1).abs().max() < 1e-6
    for part, w in STACK_WEIGHTS.items():
        assert weights.loc["all sweeps", part] == pytest.approx(w, abs=2e-4)
    # scored leave-one-sweep-out on the rolling origins, the stack loses to average (0.186
    # against 0.166 with --boot 20), so the default stays; its final score is reported
    roll = summary.loc["rolling"]
    assert roll.loc["stack", "abs_err"] > roll.loc["average", "abs_err"]
    assert summary.loc[("final", "stack"), "n_ref"] == 16
