"""The decision benchmark's candidate estimators (benchmarks/decision_candidates.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from scalefit.isoflop._estimators import Budget, estimate

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def cand():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(
            "decision_candidates", BENCH / "decision_candidates.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


def _sweep(a=0.5, p=-2.0, noise=0.0, seed=0, n_budgets=6):
    """Parabolic IsoFLOP profiles, vertices on ``x* = p + a ln C``, log-curvature linear in ln C."""
    rng = np.random.default_rng(seed)
    groups = []
    for k in range(n_budgets):
        lc = 40.0 + 0.8 * k
        x = p + a * lc + np.linspace(-1.3, 0.9, 9) + 0.1 * k % 0.3  # windows off-centre
        y = 3.0 - 0.05 * k + 0.03 * np.exp(-0.1 * k) * (x - p - a * lc) ** 2
        y = y + noise * rng.standard_normal(len(x))
        n = np.exp(x)
        groups.append(Budget(lc, n, np.exp(lc) / (6 * n), y))
    return groups


def test_every_candidate_recovers_an_exact_vertex_line(cand):
    groups = _sweep()
    logc = np.array([46.0, 47.5])
    est = cand.estimate(groups, logc, prior=(0.5, 0.01))
    assert set(est) == set(cand.NAMES)
    want = -2.0 + 0.5 * logc
    for m, v in est.items():
        np.testing.assert_allclose(v, want, atol=1e-3, err_msg=m)


def test_robust_lines_ignore_one_displaced_vertex(cand):
    groups = _sweep(n_budgets=7)
    g = groups[3]  # move one budget's profile 0.8 in ln N
    groups[3] = Budget(g.logc, g.n * np.exp(0.8), g.t / np.exp(0.8), g.y)
    logc = np.array([47.0])
    est = cand.estimate(groups, logc)
    want = -2.0 + 0.5 * 47.0
    assert abs(est["vertex_theil"][0] - want) < 1e-6
    assert abs(est["vertex_huber"][0] - want) < 0.05
    plain, _ = estimate(groups, logc, ["parabola"])
    assert abs(plain["parabola"][0] - want) > 0.1  # Approach 2's line is moved (0.8 / 7)


def test_too_few_vertices_give_nan_and_scores_have_the_library_columns(cand):
    est = cand.estimate(_sweep(n_budgets=2), np.array([46.0]))
    assert all(np.isnan(v).all() for v in est.values())
    groups = _sweep(noise=0.002, n_budgets=6)
    rows = cand.score_origin(
        groups[:4], groups[4:], sigma_ref=0.002, n_boot=3, seed=1, prior=(0.5, 0.01)
    )
    assert len(rows) == 2 * len(cand.NAMES)
    assert {"origin", "budget", "distance", "method", "pred", "s_param", "ref", "s_ref", "err",
            "regret", "regret_rel"} <= set(rows.columns)  # fmt: skip
    assert np.isfinite(rows["err"]).all() and (rows["err"].abs() < 0.3).all()


def test_vertex_eb_leans_on_the_prior_with_few_vertices_and_on_its_own_with_many(cand):
    # vertices on a line of slope 0.5 with noise; a prior at slope 0.3: the shrunk slope sits
    # between, nearer the prior with 3 budgets than with 10
    def slope(n_budgets):
        groups = _sweep(noise=0.003, seed=4, n_budgets=n_budgets)
        est = cand.estimate(groups, np.array([60.0, 61.0]), prior=(0.3, 0.02**2))
        return float(np.diff(est["vertex_eb"])[0])

    few, many = slope(3), slope(10)
    assert 0.3 < few < many < 0.5 + 0.02
    own, var = cand.sweep_slope(_sweep(noise=0.003, seed=4, n_budgets=10))
    assert own == pytest.approx(0.5, abs=0.02) and var > 0
    # the prior: DerSimonian-Laird mean of the slopes, variance above the between-sweep spread
    mu, v = cand.slope_prior([(0.45, 1e-4), (0.55, 1e-4), (0.50, 1e-4)])
    assert mu == pytest.approx(0.5) and v > np.var([0.45, 0.55, 0.50])
