import warnings

import numpy as np
import pandas as pd
import pytest

from scalefit.allocate import (
    Accounting,
    Space,
    allocate,
    chinchilla_optimum,
    decomposed_exponents,
    decomposed_optimum,
    solve,
)
from scalefit.core.accounting import param_count, param_count_array, width_for_params
from scalefit.core.errors import NoRecommendationWarning, ScaleFitError
from scalefit.laws import get_law

HOFFMANN = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
# Hoffmann et al.'s exponents before rounding (as quoted by Besiroglu et al. 2024).
HOFFMANN_UNROUNDED = {**HOFFMANN, "alpha": 0.3392, "beta": 0.2849}
DECOMPOSED = {
    "c_width": 274.7,
    "a_width": 0.945,
    "c_depth": 6.72,
    "a_depth": 1.325,
    "c_tokens": 529.3,
    "a_tokens": 0.299,
    "L0": 1.7536,
}
CRITICAL = {
    "A": 352.0,
    "alpha": 0.31,
    "B": 8.0,
    "delta": 0.054,
    "gamma": 0.18,
    "mu": 0.35,
    "kappa": 2.43,
}


def _one(p):
    return {k: np.array([v]) for k, v in p.items()}


# ----------------------------------------------------------------------------- accounting
@pytest.mark.parametrize("block", ["standard", "swiglu"])
@pytest.mark.parametrize("embeddings", ["tied", "untied", "excluded"])
@pytest.mark.parametrize("norms", [True, False])
def test_vectorised_accounting_matches_exact_count(block, embeddings, norms):
    shapes = [(1, 32), (7, 100), (12, 768), (3, 1000)]
    kw = {"vocab": 321, "block": block, "embeddings": embeddings, "norms": norms}
    exact = [param_count(d, w, **kw) for d, w in shapes]
    vec = param_count_array([d for d, _ in shapes], [w for _, w in shapes], **kw)
    np.testing.assert_array_equal(vec, exact)
    cont = param_count_array(5.5, 123.4, continuous=True, **kw)
    assert width_for_params(5.5, cont, **kw) == pytest.approx(123.4, rel=1e-12)


# ----------------------------------------------------------------------------- chinchilla
@pytest.mark.parametrize("p", [HOFFMANN, HOFFMANN_UNROUNDED])
def test_chinchilla_numeric_matches_closed_form_1e18_to_1e26(p):
    budgets = np.logspace(18, 26, 17)
    got = solve(Space.of(get_law("chinchilla")), _one(p), budgets)
    n, t = chinchilla_optimum(**p, budget=budgets)
    np.testing.assert_allclose(got["params"], n, rtol=1e-3)
    np.testing.assert_allclose(got["tokens"], t, rtol=1e-3)
    assert got["converged"].all() and not got["unbounded"].any()
    # much tighter than the acceptance criterion in practice
    np.testing.assert_allclose(got["params"], n, rtol=1e-6)


def test_chinchilla_closed_form_over_draws_and_random_parameters():
    rng = np.random.default_rng(0)
    k = 50
    draws = {
        "E": rng.uniform(1.5, 2.0, k),
        "A": np.exp(rng.uniform(4, 8, k)),
        "B": np.exp(rng.uniform(4, 8, k)),
        "alpha": rng.uniform(0.2, 0.5, k),
        "beta": rng.uniform(0.2, 0.5, k),
    }
    budgets = np.array([1e18, 1e21, 1e24])
    got = solve(Space.of(get_law("chinchilla")), draws, budgets)
    n, _ = chinchilla_optimum(**{k_: v[:, None] for k_, v in draws.items()}, budget=budgets)
    ok = ~got["unbounded"].to_numpy()
    np.testing.assert_allclose(got["params"].to_numpy()[ok], n.reshape(-1)[ok], rtol=1e-3)
    # draws whose optimum leaves the tokens/params range are flagged, not reported
    assert np.isnan(got["params"].to_numpy()[~ok]).all()


def test_parameters_are_never_rounded():
    # Gopher's budget: Hoffmann's unrounded exponents give N* ~ 40B, the rounded ones ~ 32B.
    a = allocate("chinchilla", [5.76e23], params=HOFFMANN_UNROUNDED)
    n = float(a.summary["params"].iloc[0])
    assert n == pytest.approx(chinchilla_optimum(**HOFFMANN_UNROUNDED, budget=5.76e23)[0], 1e-4)
    assert 39e9 < n < 41e9
    rounded = allocate("chinchilla", [5.76e23], params=HOFFMANN)
    assert 31e9 < float(rounded.summary["params"].iloc[0]) < 33e9


def test_result_json_round_trip_keeps_full_precision(tmp_path):
    from scalefit.fit import FitResult

    res = FitResult(
        law="chinchilla",
        params=dict(HOFFMANN_UNROUNDED, alpha=0.339212345678),
        method="jax",
        objective=0.0,
        converged=True,
        n_rows=1,
        metrics={},
    )
    res.save(tmp_path / "r.json")
    back = FitResult.load(tmp_path / "r.json")
    a, b = allocate(res, [1e22]), allocate(back, [1e22])
    assert a.summary["params"].iloc[0] == b.summary["params"].iloc[0]


# ----------------------------------------------------------------------------- decomposed
def test_decomposed_matches_semi_closed_form_without_embeddings():
    budgets = np.logspace(18, 25, 8)
    space = Space.of(get_law("decomposed"), Accounting(embeddings="excluded"))
    got = solve(space, _one(DECOMPOSED), budgets)
    d, w, t = decomposed_optimum(DECOMPOSED, budgets)
    np.testing.assert_allclose(got["depth"], d, rtol=1e-4)
    np.testing.assert_allclose(got["width"], w, rtol=1e-4)
    np.testing.assert_allclose(got["tokens"], t, rtol=1e-4)
    assert not got["flat"].any()
    # local exponents approach the asymptotic ones
    e = decomposed_exponents(DECOMPOSED["a_width"], DECOMPOSED["a_depth"], DECOMPOSED["a_tokens"])
    slope = np.polyfit(np.log(budgets), np.log(got["depth"]), 1)[0]
    assert slope == pytest.approx(float(e["depth"]), abs=1e-6)


def test_decomposed_optimum_beats_a_brute_force_grid():
    budget = 1e21
    law = get_law("decomposed")
    acc = Accounting(vocab=32_000, embeddings="tied")
    got = solve(Space.of(law, acc), _one(DECOMPOSED), [budget]).iloc[0]
    depth, width = np.meshgrid(np.geomspace(4, 200, 700), np.geomspace(300, 20_000, 700))
    params = acc.params(depth, width)
    loss = law.evaluate(DECOMPOSED, {"depth": depth, "width": width, "tokens": budget / 6 / params})
    k = np.unravel_index(np.argmin(loss), loss.shape)
    assert got["loss"] <= loss.min() + 1e-12
    assert got["loss"] == pytest.approx(loss.min(), abs=1e-5)
    assert got["depth"] == pytest.approx(depth[k], rel=0.02)
    assert got["width"] == pytest.approx(width[k], rel=0.02)
    assert got["depth_lo"] < got["depth"] < got["depth_hi"]


# ----------------------------------------------------------------------------- flat optimum
def test_critical_depth_flat_optimum_is_reported_as_a_set():
    law = get_law("critical_depth")
    space = Space.of(law)
    budgets = np.array([1e20, 1e22])
    got = solve(space, _one(CRITICAL), budgets)
    assert got["flat"].all()
    assert got["depth"].isna().all() and got["width"].isna().all()
    # the plateau runs from the depth bound up to the depth where depth = kappa ln width(depth, N*)
    assert np.allclose(got["flat_depth_lo"], 1.0)
    acc = space.accounting
    for _, row in got.iterrows():
        top = row["flat_depth_hi"]
        lc = CRITICAL["kappa"] * np.log(acc.width(top, row["params"]))
        assert top == pytest.approx(lc, rel=1e-3)
        # N* is that of the Chinchilla-like part alone: A/N^alpha + B/T^delta
        n, _ = chinchilla_optimum(
            0, CRITICAL["A"], CRITICAL["B"], CRITICAL["alpha"], CRITICAL["delta"], row["budget"]
        )
        assert row["params"] == pytest.approx(float(n), rel=1e-4)
    with pytest.warns(NoRecommendationWarning, match="no shape at any budget: the optimum is flat"):
        a = allocate("critical_depth", budgets, params=CRITICAL)
    s = a.summary
    assert s["flat"].all() and s["depth"].isna().all()
    assert (s["set_depth_lo"] == 1).all() and (s["set_depth_hi"] >= got["flat_depth_hi"] - 1).all()
    assert any("flat" in w for w in a.warnings)


# ----------------------------------------------------------------------------- practical
@pytest.mark.parametrize(
    ("kw", "check"),
    [
        ({"head_dim": 128}, lambda f: (f["width"] % 128 == 0).all()),
        ({"max_depth": 20}, lambda f: (f["depth"] <= 20).all()),
        ({"min_depth": 30}, lambda f: (f["depth"] >= 30).all()),
        ({"aspect_max": 40}, lambda f: (f["width"] <= 40 * f["depth"]).all()),
    ],
)
def test_practical_shapes_respect_constraints(kw, check):
    with warnings.catch_warnings():  # max_depth 20 is a boundary solution: nothing recommended
        warnings.simplefilter("ignore", NoRecommendationWarning)
        a = allocate("decomposed", [1e21], params=DECOMPOSED, **kw)
    frame = a.shapes[1e21]
    assert check(frame)
    assert (frame["depth"] == frame["depth"].round()).all()
    assert pd.api.types.is_integer_dtype(frame["depth"])
    best = a.summary.iloc[0]
    assert best["loss"] == frame["loss"].min()
    acc = a.accounting
    assert best["params"] == param_count(
        int(best["depth"]),
        int(best["width"]),
        vocab=acc.vocab,
        embeddings=acc.embeddings,
        norms=False,
    )
    assert best["tokens"] * 6 * best["params"] == pytest.approx(1e21, rel=1e-12)


def test_practical_is_close_to_continuous():
    a = allocate("decomposed", [1e21], params=DECOMPOSED)
    s = a.summary.iloc[0]
    assert s["loss"] >= s["loss_star"] - 1e-12
    assert s["loss"] - s["loss_star"] < 1e-3
    assert abs(s["depth"] - s["depth_star"]) <= 2


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("args", "kw", "match"),
    [
        (("depth_power", [1e20]), {"params": {"c": 1, "alpha": 1, "L0": 1}}, "tokens"),
        (("chinchilla", [-1.0]), {"params": HOFFMANN}, "budgets"),
        (("chinchilla", [1e20]), {"params": {"E": 1}}, "missing"),
        (("chinchilla", [1e20]), {}, "parameter values"),
        (("decomposed", [1e20]), {"params": DECOMPOSED, "head_dim": 0}, "head_dim"),
        (("decomposed", [1e20]), {"params": DECOMPOSED, "max_depth": 0}, "max_depth"),
        (("nolaw", [1e20]), {"params": {}}, "Unknown law"),
    ],
)
def test_bad_input_raises(args, kw, match):
    with pytest.raises(ScaleFitError, match=match):
        allocate(*args, **kw)


# ----------------------------------------------------------------------------- draws
def _fake_result(tmp_path=None, law="decomposed", point=DECOMPOSED, n=60, scale=0.02, seed=0):
    """A FitResult with synthetic lognormal draws around ``point`` (no fitter needed)."""
    from scalefit.fit import FitResult

    rng = np.random.default_rng(seed)
    names = list(point)
    base = np.array([point[k] for k in names])
    draws = base * np.exp(rng.normal(0, scale, (n, len(names))))
    res = FitResult(
        law=law,
        params=dict(point),
        method="jax",
        objective=0.0,
        converged=True,
        n_rows=10,
        metrics={},
        draws=draws,
        ci_prob=0.9,
    )
    if tmp_path is not None:
        res.save(tmp_path / "r.json")
    return res


def test_draws_give_intervals_that_contain_the_point_estimate():
    res = _fake_result()
    a = allocate(res, [1e20, 1e22])
    s = a.summary
    for q in ("depth", "width", "tokens", "params", "loss"):
        assert (s[f"{q}_star_lo"] < s[f"{q}_star"]).all(), q
        assert (s[f"{q}_star"] < s[f"{q}_star_hi"]).all(), q
    assert (s["loss_lo"] < s["loss"]).all() and (s["loss"] < s["loss_hi"]).all()
    assert (s["n_draws"] == 60).all()
    assert a.draws is not None and len(a.draws) == 120
    # decision rule: rank 1 minimises the expected loss; regrets are non-negative and the
    # recommended shape has the smallest mean regret (same ordering as the expected loss)
    for frame in a.shapes.values():
        assert frame["expected_loss"].is_monotonic_increasing
        assert (frame["regret_mean"] >= 0).all() and (frame["regret_p95"] >= 0).all()
        assert frame["regret_mean"].iloc[0] == pytest.approx(frame["regret_mean"].min())
    # wider draws give wider intervals
    wide = allocate(_fake_result(scale=0.06), [1e22]).summary.iloc[0]
    narrow = s.iloc[1]
    assert (wide["depth_star_hi"] - wide["depth_star_lo"]) > (
        narrow["depth_star_hi"] - narrow["depth_star_lo"]
    )


def test_decision_rule_with_draws_equal_to_the_point_estimate():
    """Every draw equal to the point: expected loss is the point loss, regret its excess over
    the continuous optimum (the discretisation gap), identical in every draw."""
    res = _fake_result(n=4, scale=0.0)
    a = allocate(res, [1e21])
    frame = a.shapes[1e21]
    np.testing.assert_allclose(frame["expected_loss"], frame["loss"], rtol=1e-12)
    gap = frame["loss"] - a.continuous["loss"].iloc[0]
    np.testing.assert_allclose(frame["regret_mean"], gap.clip(lower=0), atol=1e-12)
    np.testing.assert_allclose(frame["regret_p95"], frame["regret_mean"], atol=1e-12)
    s = a.summary.iloc[0]
    assert (s["depth"], s["width"]) == (frame["depth"].iloc[0], frame["width"].iloc[0])
    assert s["regret_mean"] == pytest.approx(frame["regret_mean"].min())


def test_draw_solutions_match_solving_each_draw_alone():
    res = _fake_result(n=5)
    a = allocate(res, [1e21])
    law = get_law("decomposed")
    for i in range(5):
        p = {k: np.array([res.draws[i, j]]) for j, k in enumerate(res.params)}
        alone = solve(Space.of(law), p, [1e21]).iloc[0]
        assert a.draws["depth"].iloc[i] == pytest.approx(alone["depth"], rel=1e-6)
        assert a.draws["loss"].iloc[i] == pytest.approx(alone["loss"], rel=1e-12)


# ----------------------------------------------------------------------------- analysis
def test_scaling_exponents_of_chinchilla_and_decomposed():
    from scalefit.allocate.analysis import scaling_exponents

    e = scaling_exponents("chinchilla", params=HOFFMANN).set_index("quantity")
    a, b = HOFFMANN["alpha"], HOFFMANN["beta"]
    assert e.loc["params", "exponent"] == pytest.approx(b / (a + b), abs=1e-6)
    assert e.loc["tokens", "exponent"] == pytest.approx(a / (a + b), abs=1e-6)
    res = _fake_result(scale=0.03)
    e = scaling_exponents(res, np.logspace(20, 24, 5)).set_index("quantity")
    assert set(e.index) >= {"depth", "width", "tokens", "params", "width_per_depth"}
    assert (e["lo"] < e["exponent"]).all() and (e["exponent"] < e["hi"]).all()
    assert (e["n_draws"] == 60).all()


def test_flat_law_exponents_report_the_plateau_end():
    from scalefit.allocate.analysis import scaling_exponents

    e = scaling_exponents("critical_depth", params=CRITICAL).set_index("quantity")
    assert "depth" not in e.index and "depth_max_opt" in e.index
    # lc = kappa ln W grows only logarithmically: the deepest optimal depth barely moves
    assert 0 < e.loc["depth_max_opt", "exponent"] < 0.05


def test_critical_depth_table_and_audit():
    from scalefit.allocate.analysis import audit, critical_depth_table

    res = _fake_result(law="critical_depth", point=CRITICAL, scale=0.05)
    tab = critical_depth_table(res, [512, 4096])
    assert tab["lc"].to_numpy() == pytest.approx(CRITICAL["kappa"] * np.log([512, 4096]))
    assert (tab["lc_lo"] < tab["lc"]).all() and (tab["lc"] < tab["lc_hi"]).all()
    out = audit(res, [("ok", 8, 512), ("deep", 64, 512)]).set_index("name")
    assert out.loc["ok", "penalty"] == 0.0
    lc = CRITICAL["kappa"] * np.log(512)
    want = CRITICAL["gamma"] * 512 ** -CRITICAL["mu"] * (64 - lc) / lc
    assert out.loc["deep", "penalty"] == pytest.approx(want, rel=1e-9)
    assert out.loc["deep", "depth_over_lc"] == pytest.approx(64 / lc)
    with pytest.raises(ScaleFitError, match="critical depth"):
        critical_depth_table("decomposed", [512], params=DECOMPOSED)


def test_isoflop_curve_minimum_is_the_optimum():
    from scalefit.allocate.analysis import isoflop_curve

    curve = isoflop_curve("decomposed", 1e21, np.geomspace(5, 200, 200), params=DECOMPOSED)
    best = solve(Space.of(get_law("decomposed")), _one(DECOMPOSED), [1e21]).iloc[0]
    k = curve["loss"].idxmin()
    assert best["loss"] - 1e-12 <= curve["loss"].min() <= best["loss"] + 2e-5
    assert curve["depth"][k] == pytest.approx(best["depth"], rel=0.03)
    np.testing.assert_allclose(curve["tokens"] * 6 * curve["params"], 1e21, rtol=1e-12)


# ----------------------------------------------------------------------------- CLI
def _cli(args, capsys):
    from scalefit.cli import main

    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_writes_csv_with_the_agreed_columns(tmp_path, capsys):
    _fake_result(tmp_path)
    csv = tmp_path / "a.csv"
    code, out, _ = _cli(
        [
            "allocate",
            str(tmp_path / "r.json"),
            "--budget",
            "1e20",
            "--budget",
            "1e22",
            "--out",
            str(csv),
            "--head-dim",
            "128",
            "--shapes-out",
            str(tmp_path / "s.csv"),
        ],
        capsys,
    )
    assert code == 0
    assert "recommended" in out and "runner-ups" in out
    frame = pd.read_csv(csv)
    assert list(frame.columns[:2]) == ["budget", "law"]
    assert {"budget", "depth", "width", "tokens", "params", "loss"} <= set(frame.columns)
    assert len(frame) == 2 and (frame["width"] % 128 == 0).all()
    shapes = pd.read_csv(tmp_path / "s.csv")
    assert {"budget", "depth", "width", "loss", "loss_lo", "loss_hi", "regret_mean"} <= set(shapes)
    assert set(shapes["budget"]) == {1e20, 1e22}


def test_cli_law_params_and_chinchilla_has_empty_shape_columns(tmp_path, capsys):
    csv = tmp_path / "c.csv"
    params = ",".join(f"{k}={v}" for k, v in HOFFMANN_UNROUNDED.items())
    code, out, _ = _cli(
        [
            "allocate",
            "--law",
            "chinchilla",
            "--params",
            params,
            "--budget",
            "5.76e23",
            "--out",
            str(csv),
        ],
        capsys,
    )
    assert code == 0
    frame = pd.read_csv(csv)
    assert frame["depth"].isna().all() and frame["width"].isna().all()
    assert frame["params"].iloc[0] == pytest.approx(
        float(chinchilla_optimum(**HOFFMANN_UNROUNDED, budget=5.76e23)[0]), rel=1e-6
    )


def test_cli_flat_optimum_prints_a_range(capsys):
    params = ",".join(f"{k}={v}" for k, v in CRITICAL.items())
    code, out, _ = _cli(
        [
            "allocate",
            "--law",
            "critical_depth",
            "--params",
            params,
            "--budget",
            "1e21",
            "--audit",
            "a=32x4096,b=64x2816",
        ],
        capsys,
    )
    assert code == 0
    assert "FLAT in depth" in out and "does not choose a depth" in out
    assert "critical-depth audit" in out


@pytest.mark.parametrize(
    "args",
    [
        ["allocate", "--law", "chinchilla", "--params", "E=1", "--budget", "1e20"],
        ["allocate", "--law", "chinchilla", "--params", "E=x", "--budget", "1e20"],
        ["allocate", "--budget", "1e20"],
        ["allocate", "missing.json", "--budget", "1e20"],
        ["allocate", "--law", "depth_power", "--params", "c=1,alpha=1,L0=1", "--budget", "1e20"],
    ],
)
def test_cli_bad_input_exits_2_with_one_line(args, capsys):
    code, _, err = _cli(args, capsys)
    assert code == 2
    assert err.startswith("scalefit: error:") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("law", "extra"),
    [("chinchilla", ["--budget", "-5"]), ("decomposed", ["--budget", "1e20", "--head-dim", "0"])],
)
def test_cli_value_outside_its_declared_range_is_a_usage_error(law, extra, capsys):
    params = ",".join(f"{k}={v}" for k, v in DECOMPOSED.items())
    with pytest.raises(SystemExit) as exc:
        _cli(["allocate", "--law", law, "--params", params, *extra], capsys)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert f"argument {extra[-2]}: must be" in err


def test_cli_plots(tmp_path, capsys):
    _fake_result(tmp_path, n=20)
    code, out, _ = _cli(
        [
            "allocate",
            str(tmp_path / "r.json"),
            "--budget",
            "1e20",
            "--budget",
            "1e21",
            "--plots",
            str(tmp_path / "figs"),
            "--exponents",
        ],
        capsys,
    )
    assert code == 0 and "scaling exponents" in out
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == [
        "frontier_decomposed.png",
        "isoflop_decomposed.png",
    ]


def test_user_law_is_solved_by_the_same_generic_machinery():
    from scalefit.laws import Law, Param

    # Kaplan et al.'s joint form L = ((Nc/N)^(aN/aD) + Dc/T)^aD, with no closed-form allocation here
    law = Law(
        name="kaplan_joint_test",
        inputs=("params", "tokens"),
        params=(
            Param("Nc", "positive", start=(1e12, 1e14)),
            Param("Dc", "positive", start=(1e12, 1e14)),
            Param("aN", "exponent", start=(0.05, 0.1)),
            Param("aD", "exponent", start=(0.05, 0.1)),
        ),
        expr=lambda xp, p, x: (
            ((p["Nc"] / x["params"]) ** (p["aN"] / p["aD"]) + p["Dc"] / x["tokens"]) ** p["aD"]
        ),
        formula="L = ((Nc/N)^(aN/aD) + Dc/T)^aD",
    )
    p = {"Nc": 8.8e13, "Dc": 5.4e13, "aN": 0.076, "aD": 0.095}
    budget = 1e21
    got = solve(Space.of(law), _one(p), [budget]).iloc[0]
    n = np.geomspace(1e6, 1e14, 200_001)
    loss = law.evaluate(p, {"params": n, "tokens": budget / 6 / n})
    assert got["loss"] <= loss.min() + 1e-12
    assert got["params"] == pytest.approx(n[np.argmin(loss)], rel=1e-3)


def test_critical_depth_with_params_column_uses_the_accounted_count():
    with pytest.warns(NoRecommendationWarning):  # a flat optimum, twice
        column = {"params_from": "column"}
        a = allocate("critical_depth", [1e21], params=CRITICAL, law_options=column)
        b = allocate("critical_depth", [1e21], params=CRITICAL)
    assert a.summary["params_star"].iloc[0] == pytest.approx(b.summary["params_star"].iloc[0])
    assert a.summary["depth_max_opt"].iloc[0] == pytest.approx(
        b.summary["depth_max_opt"].iloc[0], rel=1e-6
    )


@pytest.mark.parametrize("seed", range(4))
def test_no_random_shape_beats_the_solver(seed):
    rng = np.random.default_rng(seed)
    p = {
        "c_width": float(np.exp(rng.uniform(3, 7))),
        "a_width": float(rng.uniform(0.5, 1.5)),
        "c_depth": float(np.exp(rng.uniform(0, 4))),
        "a_depth": float(rng.uniform(0.5, 1.8)),
        "c_tokens": float(np.exp(rng.uniform(4, 8))),
        "a_tokens": float(rng.uniform(0.2, 0.4)),
        "L0": float(rng.uniform(1.5, 2.0)),
    }
    budgets = 10 ** rng.uniform(18, 25, 3)
    law = get_law("decomposed")
    space = Space.of(law)
    got = solve(space, _one(p), budgets)
    assert got["converged"].all() and not got["unbounded"].any()
    for (_, row), c in zip(got.iterrows(), budgets, strict=True):
        depth = np.exp(rng.uniform(0, np.log(1e4), 4000))
        box = np.log([space.accounting.params(depth, 8.0).max(), np.sqrt(c / 6 / 1e-3)])
        params = np.exp(rng.uniform(*box, 4000))
        width = space.accounting.width(depth, params)
        loss = law.evaluate(p, {"depth": depth, "width": width, "tokens": c / 6 / params})
        assert row["loss"] <= loss.min() + 1e-12


def test_demo_recommends_only_what_the_draws_pin_down():
    from scalefit.workflows.demo import GEMSTONES, recommendation_table, recommendation_text

    narrow = allocate(_fake_result(n=40, scale=0.01), [1e20, 1e21])
    table = recommendation_table(narrow)
    assert table.filter(like="_determined").all().all()
    text = recommendation_text(table, narrow, GEMSTONES)
    assert "build a transformer" in text and "? [" not in text
    # the numbers printed are the CSV's numbers
    row = table.iloc[-1]
    assert f"{int(row['depth'])} [" in text and f"{row['tokens']:.3g} [" in text
    # a parameter the fit does not identify: nothing is recommended outright
    text = recommendation_text(table, narrow, GEMSTONES, ("c_depth", "a_depth"))
    assert "do not pin down c_depth, a_depth" in text and "build a transformer" not in text
    # draws that scatter the optimum over more than a factor of 3: '?' with the interval
    wide = allocate(_fake_result(n=40, scale=0.5), [1e21])
    table = recommendation_table(wide)
    undetermined = [
        q for q in ("depth", "width", "params", "tokens") if not table[f"{q}_determined"][0]
    ]
    assert undetermined and table[undetermined].isna().all().all()
    assert "? [" in recommendation_text(table, wide, GEMSTONES)


def test_demo_names_its_interval_and_explains_a_value_outside_it():
    from scalefit.workflows.demo import (
        GEMSTONES,
        _outside,
        recommendation_table,
        recommendation_text,
    )

    alloc = allocate(_fake_result(n=40, scale=0.01), [1e21])
    text = recommendation_text(recommendation_table(alloc), alloc, GEMSTONES)
    what = "the law's misfit in N*" if alloc.calibration is not None else "parameters' uncertainty"
    assert what in text.splitlines()[1]
    table = recommendation_table(alloc)
    assert _outside(table) == []
    table.loc[0, "width"] = table.loc[0, "width_hi"] * 2  # a practical value off its interval
    (line,) = _outside(table)
    assert "width" in line and "outside the interval" in line and "head-size grid" in line


def test_a_shape_outside_the_fitted_depths_and_widths_is_not_recommended():
    """The best shape at a budget past the data lies outside the trained depths: it is named in
    ``beyond_data``, not recommended, and a warning says how to search inside the data."""
    import dataclasses

    from scalefit import NoRecommendationWarning

    res = _fake_result(n=4, scale=0.0)
    inside = allocate(res, [1e21]).summary.iloc[0]
    assert inside["recommended"] and inside["beyond_data"] == ""  # no range recorded: no check
    depth, width = int(inside["depth"]), int(inside["width"])
    fitted = {"depth": [2.0, depth - 1.0], "width": [64.0, 8.0 * width]}
    narrow = dataclasses.replace(res, conventions={"data_range": fitted})
    with pytest.warns(NoRecommendationWarning, match="outside the fitted table"):
        a = allocate(narrow, [1e21])
    s = a.summary.iloc[0]
    assert not s["recommended"] and s["beyond_data"].startswith(f"depth {depth} outside")
    assert any("max_depth" in w for w in a.warnings)
    from scalefit.allocate.report import budget_text

    assert "outside the data" in budget_text(a, 0, 1e21)
    with pytest.warns(NoRecommendationWarning, match="boundary solution"):  # on the data's edge
        kept = allocate(narrow, [1e21], max_depth=depth - 1).summary.iloc[0]
    assert kept["beyond_data"] == "" and kept["depth"] == depth - 1 and kept["boundary"]


def test_tokens_per_parameter_outside_the_fitted_rows_is_said():
    """An optimum that trains fewer tokens per parameter than any fitted row gets a warning; the
    fitted range is recorded by the fit (``data_range["tokens_per_param"]``)."""
    import dataclasses

    import pandas as pd

    from scalefit.fit.build import data_range

    res = _fake_result(n=4, scale=0.0)
    s = allocate(res, [1e21]).summary.iloc[0]
    ratio = s["tokens"] / s["params"]
    fitted = {"tokens_per_param": [2 * ratio, 100 * ratio]}
    a = allocate(dataclasses.replace(res, conventions={"data_range": fitted}), [1e21])
    assert any("tokens per parameter, outside the fitted rows'" in w for w in a.warnings)
    assert bool(a.summary["recommended"].iloc[0])  # said, not refused
    table = pd.DataFrame({"params": [1e6, 2e6, 4e6], "tokens": [1e7, 1e8, 4e7], "loss": 3.0})
    assert data_range(table)["tokens_per_param"] == [10.0, 50.0]
