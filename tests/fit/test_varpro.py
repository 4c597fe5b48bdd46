"""Variable projection: linear-block detection, exact linear solves, and the same optima as the
full solve."""

import numpy as np
import pandas as pd
import pytest
from conftest import needs_reference_data
from scipy.optimize import nnls

import scalefit
from scalefit.fit.build import FitSettings
from scalefit.fit.lsq import make_problem, starts_for
from scalefit.fit.varpro import linear_block, project
from scalefit.laws import Law, get_law
from scalefit.laws.base import law_from_formula_spec


# ------------------------------------------------------------------------------ detection
def test_catalogue_laws_linear_blocks():
    chin = linear_block(get_law("chinchilla"))
    assert chin.linear == ("E", "A", "B")
    assert chin.nonlinear == ("alpha", "beta")
    assert chin.nonneg == (True, True, True)
    dec = linear_block(get_law("decomposed"))
    assert dec.linear == ("c_width", "c_depth", "c_tokens", "L0")
    assert dec.nonlinear == ("a_width", "a_depth", "a_tokens")


def test_formula_laws_linear_blocks():
    law = Law.from_formula("E + A/params**alpha + B/tokens**beta", kinds={"A": "positive"})
    block = linear_block(law)
    assert block.linear == ("A", "B", "E")  # formula parameters are sorted by name
    # only the positive kind is sign-constrained; free parameters are solved unconstrained
    assert block.nonneg == (True, False, False)
    assert linear_block(Law.from_formula("(params/a)**(-b) + exp(c*tokens)")).linear == ()
    assert not linear_block(Law.from_formula("(params/a)**(-b)")).usable
    # a product of two parameters: one of them is linear, not both (the set is maximal)
    prod = linear_block(Law.from_formula("A*B/params**alpha"))
    assert prod.linear == ("A",) and prod.nonlinear == ("B", "alpha")


# ------------------------------------------------------------------------------ exact linear solve
def _synthetic(seed=0, n=60, e=1.7, a=400.0, b=300.0, alpha=0.34, beta=0.28, noise=0.01):
    rng = np.random.default_rng(seed)
    params = np.exp(rng.uniform(np.log(1e7), np.log(1e10), n))
    tokens = np.exp(rng.uniform(np.log(1e9), np.log(1e12), n))
    loss = e + a / params**alpha + b / tokens**beta
    return pd.DataFrame(
        {"params": params, "tokens": tokens, "loss": loss + noise * rng.standard_normal(n)}
    )


def test_linear_block_is_scipy_nnls_at_fixed_exponents():
    """A projected start's coefficients are scipy's NNLS at the start's exponents."""
    tab = _synthetic(noise=0.05)
    law = Law.from_formula(
        "E + A/params**alpha + B/tokens**beta",
        kinds={"E": "positive", "A": "positive", "B": "positive"},
    )
    settings = FitSettings(loss="mse", residuals="linear")
    prob = make_problem(tab, law, settings)
    z0 = starts_for(law, tab["loss"].to_numpy(), prob.refs, 8, seed=3)
    out = project(prob, z0)
    n, d, y = (tab[c].to_numpy() for c in ("params", "tokens", "loss"))
    for zi, zp, f in zip(z0, out["z"], out["objective"], strict=True):
        pub, got = law.to_public(zi, prob.refs), law.to_public(zp, prob.refs)
        for k in ("alpha", "beta"):  # the exponents are kept
            assert got[k] == pytest.approx(pub[k], rel=1e-12)
        x = np.column_stack([np.ones_like(n), n ** -pub["alpha"], d ** -pub["beta"]])
        c, rnorm = nnls(x, y)
        assert f == pytest.approx(rnorm**2, rel=1e-9)
        got = [got[k] for k in ("E", "A", "B")]
        scale = np.abs(c).max()
        np.testing.assert_allclose(got, c, rtol=1e-7, atol=1e-9 * scale)


def test_nnls_sign_respected():
    """A negative best intercept: NNLS puts a positive E at zero; a free E goes negative
    (the linear block projected at the true exponent)."""
    rng = np.random.default_rng(1)
    params = np.exp(rng.uniform(np.log(10.0), np.log(1e4), 80))
    y = -0.5 + 10.0 / params**0.3 + 0.001 * rng.standard_normal(80)
    tab = pd.DataFrame({"params": params, "loss": y})
    settings = FitSettings(loss="mse", residuals="linear")
    for kind, sign in (("positive", 1.0), ("free", -1.0)):
        law = Law.from_formula("E + A/params**alpha", kinds={"E": kind, "A": "positive"})
        prob = make_problem(tab, law, settings)
        z0 = law.to_internal({"E": 1.0, "A": 1.0, "alpha": 0.3}, prob.refs)
        pub = law.to_public(project(prob, z0[None, :])["z"][0], prob.refs)
        e, a = float(pub["E"]), float(pub["A"])
        assert a >= 0.0
        if sign > 0:
            assert 0.0 <= e <= 1e-10 * a
        else:
            assert e == pytest.approx(-0.5, abs=0.02)


# ------------------------------------------------------------------------------ same optimum
@pytest.mark.parametrize("loss", ["mse", "huber"])
def test_varpro_matches_full_solve_synthetic(loss):
    tab = _synthetic(seed=2)
    kw = dict(loss=loss, delta=1e-2, residuals="linear", starts=32, seed=0)
    full = scalefit.fit(tab, "chinchilla", method="jax", **kw)
    vp = scalefit.fit(tab, "chinchilla", method="varpro", **kw)
    assert vp.converged and full.converged
    assert vp.diagnostics["varpro_linear"] == ["E", "A", "B"]
    assert vp.objective <= full.objective * (1 + 1e-9)
    assert vp.objective == pytest.approx(full.objective, rel=1e-9)
    for k in ("alpha", "beta", "E"):
        assert vp.params[k] == pytest.approx(full.params[k], rel=1e-5)


@pytest.mark.filterwarnings("ignore::scalefit.core.errors.ConvergenceWarning")
def test_varpro_recovers_noise_free_parameters():
    """Noise-free data (the starts' objectives differ below any relative tolerance near zero,
    hence the n_best warning): the truth to 6 digits."""
    tab = _synthetic(seed=4, noise=0.0)
    res = scalefit.fit(tab, "chinchilla", residuals="linear", method="varpro", starts=16)
    truth = {"E": 1.7, "A": 400.0, "B": 300.0, "alpha": 0.34, "beta": 0.28}
    for k, v in truth.items():
        assert res.params[k] == pytest.approx(v, rel=1e-6)


def test_law_without_linear_block_falls_back_to_full_solve():
    rng = np.random.default_rng(0)
    params = np.exp(rng.uniform(np.log(10.0), np.log(1e4), 40))
    tab = pd.DataFrame({"params": params, "loss": (params / 3.0) ** -0.4})
    law = Law.from_formula("(params/a)**(-b)", kinds={"a": "positive"}, starts={"a": 1.0, "b": 0.1})
    res = scalefit.fit(tab, law, method="varpro", residuals="linear", starts=8)
    assert res.diagnostics["varpro_linear"] == []
    assert res.params["b"] == pytest.approx(0.4, rel=1e-6)


@pytest.mark.slow
@needs_reference_data
def test_varpro_on_chinchilla_matches_full_solve(chinchilla203):
    """Decomposed law on the 203-row table: log residuals (varpro makes the starts) and Huber on
    linear residuals (varpro searches): the same optimum as the full solve."""
    full = scalefit.fit(chinchilla203, "decomposed", starts=64, seed=0)
    vp = scalefit.fit(chinchilla203, "decomposed", starts=64, seed=0, method="varpro")
    assert vp.converged
    assert vp.objective == pytest.approx(full.objective, rel=1e-9)
    assert vp.params["a_tokens"] == pytest.approx(full.params["a_tokens"], rel=1e-5)
    kw = dict(loss="huber", delta=1e-3, residuals="linear", starts=64, seed=0)
    full = scalefit.fit(chinchilla203, "decomposed", **kw)
    vp = scalefit.fit(chinchilla203, "decomposed", method="varpro", **kw)
    assert vp.converged
    assert vp.objective <= full.objective * (1 + 1e-9)


def test_varpro_bootstrap_runs():
    tab = _synthetic(seed=5)
    res = scalefit.fit(
        tab, "chinchilla", residuals="linear", method="varpro", starts=16, bootstrap=20
    )
    assert res.diagnostics["varpro_linear"] == ["E", "A", "B"]
    lo, hi = res.ci["alpha"]
    assert lo <= res.params["alpha"] <= hi


def test_varpro_result_round_trips(tmp_path):
    tab = _synthetic(seed=6)
    res = scalefit.fit(tab, "chinchilla", residuals="linear", method="varpro", starts=8)
    back = type(res).load(res.save(tmp_path / "fit.json"))
    assert back.method == "varpro"
    assert back.params == pytest.approx(res.params)


# ------------------------------------------------------------------------------ kinks (issue 39)
#: A hinge ``L0 + c*max(0, x - x0)`` with the location before the slope (a spec keeps the order):
#: ``x0`` has zero second derivative away from the kink, so a curvature test alone takes it for a
#: linear coefficient (and, bounded below by 0, a non-negative one), leaving ``c`` nonlinear.
HINGE = {
    "formula": "L0 + c*max(0, x - x0)",
    "inputs": ["x"],
    "params": [
        {"name": "L0", "kind": "free", "start": [0, 2], "bounds": [None, None]},
        {"name": "x0", "kind": "free", "start": [0, 10], "bounds": [0, 10]},
        {"name": "c", "kind": "free", "start": [-1, 1], "bounds": [None, None]},
    ],
}


def test_a_kink_location_is_not_a_linear_parameter():
    law = law_from_formula_spec(HINGE)
    x = np.arange(0.0, 11.0)
    block = linear_block(law, {"x": x})
    assert block.linear == ("L0", "c") and block.nonlinear == ("x0",)
    assert block.nonneg == (False, False)
    assert linear_block(law).linear == ("L0", "c")  # on the random screening inputs too
    # a kink far from the start range of its location is still seen (finite steps up to 1e4)
    far = Law.from_formula("L0 + c*abs(x - x0)", inputs=["x"])
    assert linear_block(far, {"x": np.linspace(1e3, 2e3, 11)}).linear == ("L0", "c")
    # a bound >= 0 on a free linear parameter is judged after the fit, not imposed by NNLS;
    # only coefficient kinds are sign-constrained
    bounded = Law.from_formula(
        "E + A/params**alpha", kinds={"A": "positive"}, bounds={"E": (0.0, 10.0)}
    )
    assert linear_block(bounded).nonneg == (True, False)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::scalefit.core.errors.ConvergenceWarning")
def test_varpro_recovers_a_hinge_as_the_full_solve_does():
    law = law_from_formula_spec(HINGE)
    x = np.arange(0.0, 11.0)
    tab = pd.DataFrame({"x": x, "loss": 1.0 + 0.5 * np.maximum(0.0, x - 5.0)})
    kw = {"residuals": "linear", "starts": 1, "seed": 0, "progress": False}
    for method in ("jax", "varpro"):
        res = scalefit.fit(tab, law, method=method, **kw)
        assert res.converged, (method, res.warnings)
        for k, v in {"L0": 1.0, "x0": 5.0, "c": 0.5}.items():
            assert res.params[k] == pytest.approx(v, abs=1e-6), (method, k)
    assert res.diagnostics["varpro_linear"] == ["L0", "c"]


# ------------------------------------------------------------------------------ default grid path
def _exact_huber(law, tab, theta):
    """The summed Huber loss (delta 1e-3, linear residuals) at exponents ``theta``, (E, A, B)
    by IRLS over scipy's NNLS run to convergence: the reference for one grid cell."""
    x = np.column_stack([np.ones(len(tab)), tab["params"] ** -theta[0], tab["tokens"] ** -theta[1]])
    y = tab["loss"].to_numpy()
    c = nnls(x, y)[0]
    for _ in range(200):
        r = y - x @ c
        u = np.sqrt(np.where(np.abs(r) <= 1e-3, 1.0, 1e-3 / np.abs(r)))
        c = nnls(x * u[:, None], y * u)[0]
    r = np.abs(y - x @ c)
    return float(np.sum(np.where(r <= 1e-3, 0.5 * r**2, 1e-3 * (r - 5e-4))))


def test_grid_cells_are_exact_inner_solves_and_the_best_is_first():
    from scalefit.fit.varpro import grid_starts

    tab = _synthetic(seed=3, noise=0.02)
    tab = tab.assign(params=tab["params"] / 1e6, tokens=tab["tokens"] / 1e9)
    law = get_law("chinchilla")
    settings = FitSettings(loss="huber", delta=1e-3, residuals="linear")
    prob = make_problem(tab, law, settings)
    z = grid_starts(prob)
    assert z is not None and 2 <= len(z) <= 8
    pub = [law.to_public(zi, prob.refs) for zi in z]
    objs = [prob.objective(zi) for zi in z]
    assert objs[0] == pytest.approx(min(objs), rel=1e-9)
    # each cell's linear block is the exact Huber fit at its exponents (a few passes of IRLS are
    # the ranking, so the reference converged one is at most as large)
    ref = _exact_huber(law, tab, (float(pub[0]["alpha"]), float(pub[0]["beta"])))
    assert ref <= objs[0] * (1 + 1e-9)
    assert objs[0] == pytest.approx(ref, rel=0.05)
    assert abs(float(pub[0]["alpha"]) - 0.34) < 0.1 and abs(float(pub[0]["beta"]) - 0.28) < 0.1


@pytest.mark.parametrize(("loss", "residuals"), [("huber", "linear"), ("mse", "log")])
def test_default_fit_equals_256_random_starts(loss, residuals):
    """The grid's cells and 24 starts reach the optimum of the 256-start random multi-start."""
    from scalefit.fit.lsq import JaxBackend, least_squares

    tab = _synthetic(seed=5, noise=0.03)
    tab = tab.assign(params=tab["params"] / 1e6, tokens=tab["tokens"] / 1e9)
    kw = {"loss": loss, "delta": 1e-3, "residuals": residuals}
    res = scalefit.fit(tab, "chinchilla", **kw)
    assert res.diagnostics["grid_stage"].startswith("grid cells and the first")
    assert res.diagnostics["n_starts"] == 32 and res.converged
    ref = least_squares(tab, get_law("chinchilla"), FitSettings(**kw), backend=JaxBackend())
    assert ref.diagnostics["n_starts"] == 256
    assert res.objective <= ref.objective * (1 + 1e-9)


def test_a_law_without_a_linear_block_goes_to_the_given_starts():
    tab = _synthetic(seed=1, noise=0.0)
    tab = tab.assign(loss=(tab["params"] / 1e6) ** -0.2)
    res = scalefit.fit(tab, Law.from_formula("(params/a)**(-b)"), starts=16, residuals="linear")
    assert res.diagnostics["grid_stage"] == "given starts only (no grid)"
    assert res.diagnostics["n_starts"] == 16


def test_a_single_start_is_a_single_start():
    tab = _synthetic(seed=2).assign(params=lambda t: t["params"] / 1e6)
    res = scalefit.fit(tab.assign(tokens=tab["tokens"] / 1e9), "chinchilla", starts=1)
    assert res.diagnostics["grid_stage"] == "given starts only (no grid)"
    assert res.diagnostics["n_starts"] == 1
