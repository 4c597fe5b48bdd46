import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scalefit
from scalefit import Law, Param, ScaleFitError, get_law, list_laws, register_law
from scalefit.fit.synthetic import TRUTHS, design

LAWS = list_laws()


def test_builtin_laws_registered():
    for name in ("chinchilla", "decomposed", "critical_depth", "depth_power"):
        assert name in LAWS
    assert get_law("decomposed").param_names == (
        "c_width",
        "a_width",
        "c_depth",
        "a_depth",
        "c_tokens",
        "a_tokens",
        "L0",
    )
    assert get_law("critical_depth", form="power").param_names[-2:] == ("c_crit", "a_crit")
    with pytest.raises(ScaleFitError, match="Unknown law"):
        get_law("nope")
    with pytest.raises(ScaleFitError, match="bad options"):
        get_law("critical_depth", form="cubic")


@pytest.mark.parametrize("name", [n for n in LAWS if n in TRUTHS])
def test_numpy_and_jax_agree_and_coordinates_round_trip(name):
    import jax.numpy as jnp

    from scalefit.fit.engine import float64

    with float64():
        _numpy_and_jax_agree(name, jnp)


def _numpy_and_jax_agree(name, jnp):
    law = get_law(name)
    x = design(law, 50, np.random.default_rng(0))
    truth = TRUTHS[name]
    a = law.evaluate(truth, x)
    b = np.asarray(
        law.evaluate(
            {k: jnp.asarray(v) for k, v in truth.items()},
            {k: jnp.asarray(x[k].to_numpy()) for k in law.inputs},
            xp=jnp,
        )
    )
    np.testing.assert_allclose(a, b, rtol=1e-12)
    refs = law.references(x)
    z = law.to_internal(truth, refs)
    back = law.to_public(z, refs)
    for k, v in truth.items():
        assert back[k] == pytest.approx(v, rel=1e-12)


@pytest.mark.parametrize("name", ["chinchilla", "decomposed", "depth_power"])
@settings(max_examples=40, deadline=None)
@given(scale=st.floats(1.01, 100.0), which=st.integers(0, 2), seed=st.integers(0, 1000))
def test_loss_decreases_in_each_resource(name, scale, which, seed):
    law = get_law(name)
    x = design(law, 5, np.random.default_rng(seed))
    col = law.inputs[which % len(law.inputs)]
    bigger = x.copy()
    bigger[col] = bigger[col] * scale
    assert np.all(law.evaluate(TRUTHS[name], bigger) < law.evaluate(TRUTHS[name], x))


def test_critical_depth_flat_below_critical_depth():
    law = get_law("critical_depth")
    p = TRUTHS["critical_depth"]
    width = np.full(3, 1024.0)
    lc = p["kappa"] * np.log(1024.0)
    below = law.evaluate(p, {"depth": [2, 8, 16], "width": width, "tokens": np.full(3, 1e10)})
    no_pen = dict(p, gamma=1e-300)
    ref = law.evaluate(no_pen, {"depth": [2, 8, 16], "width": width, "tokens": np.full(3, 1e10)})
    assert 16 < lc
    np.testing.assert_allclose(below, ref)


@pytest.mark.parametrize("name", ["critical_depth", "critical_depth_power"])
def test_declared_kink_is_where_the_law_bends(name):
    # without the params term the loss is flat in depth below the critical depth and linear
    # above: its second difference in depth is zero away from the declared hinge only
    law = get_law(name)
    p = dict(TRUTHS[name], A=1e-300)
    x = {"width": np.full(1, 1024.0), "tokens": np.full(1, 1e10)}
    depth = np.linspace(2.0, 60.0, 2001)
    xs = {k: np.full(depth.size, v[0]) for k, v in x.items()} | {"depth": depth}
    kink = law.kink(np, p, law.variables(np, xs))
    root = np.flatnonzero(np.diff(np.sign(kink)))
    assert len(root) == 1
    loss = law.evaluate(p, xs)
    second = np.abs(np.diff(loss, 2))
    assert np.argmax(second) in (root[0] - 1, root[0])
    assert np.all(np.delete(second, [root[0] - 1, root[0]]) < 1e-9 * second.max())
    # a law with a parameter held keeps its kink
    held = law.fixing({"mu": p["mu"]})
    free = {k: v for k, v in p.items() if k != "mu"}
    np.testing.assert_allclose(held.kink(np, free, law.variables(np, xs)), kink)
    assert get_law("chinchilla").kink is None


def test_register_user_law_and_fit_it():
    law = Law(
        name="kaplan_test",
        inputs=("params",),
        params=(
            Param("c", "coef", pivot=("alpha", "params")),
            Param("alpha", "exponent", start=(0.0, 1.0)),
            Param("L0", "floor"),
        ),
        expr=lambda xp, p, x: p["c"] * x["params"] ** (-p["alpha"]) + p["L0"],
        formula="L = c / params^alpha + L0",
    )
    register_law(law, overwrite=True)
    assert "kaplan_test" in list_laws()
    with pytest.raises(ScaleFitError, match="already registered"):
        register_law(law)
    rng = np.random.default_rng(0)
    n = np.exp(rng.uniform(np.log(1e6), np.log(1e10), 60))
    loss = (300 * n**-0.3 + 1.5) * np.exp(rng.normal(0, 0.005, 60))
    import pandas as pd

    res = scalefit.fit(pd.DataFrame({"params": n, "loss": loss}), "kaplan_test", starts=32)
    assert res.params["alpha"] == pytest.approx(0.3, abs=0.05)


def test_bad_law_definitions_rejected():
    with pytest.raises(ScaleFitError, match="needs pivot"):
        register_law(
            Law(
                name="bad1",
                inputs=("params",),
                params=(Param("c", "coef"),),
                expr=lambda xp, p, x: p["c"],
                formula="",
            )
        )
    with pytest.raises(ScaleFitError, match="start range"):
        register_law(
            Law(
                name="bad2",
                inputs=("params",),
                params=(Param("a", "exponent"),),
                expr=lambda xp, p, x: p["a"],
                formula="",
            )
        )


def test_every_law_rebuilds_from_its_recorded_options():
    for name in list_laws():
        law = get_law(name)
        again = get_law(name, **law.options)
        assert again.param_names == law.param_names


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"form": "cubic"}, "The 'form' parameter of critical_depth must be one of 'log', 'power'"),
        ({"embeddings": "shared"}, "The 'embeddings' parameter of critical_depth must be one of"),
        ({"params_from": "table"}, "The 'params_from' parameter of critical_depth must be one of"),
    ],
)
def test_law_options_are_refused_in_the_house_shape(options, message):
    from scalefit.laws.catalogue import critical_depth

    with pytest.raises(ScaleFitError, match=message) as info:
        critical_depth(**options)
    assert str(info.value).count("\n") == 0 and "Got" in str(info.value)
    with pytest.raises(ScaleFitError, match=message):
        get_law("critical_depth", **options)
    with pytest.raises(ScaleFitError, match="'form' parameter of critical_depth_power"):
        get_law("critical_depth_power", form="log")
    assert isinstance(info.value, ValueError)  # callers that catch ValueError still do


def test_law_without_options_refuses_one():
    law = Law.from_formula("E + A/params**a", name="no_options_law")
    register_law(law, overwrite=True)
    with pytest.raises(ScaleFitError, match="takes no options. Got \\['x'\\] instead"):
        get_law("no_options_law", x=1)


def test_scalefit_laws_shows_numbered_inputs_as_one_entry(capsys):
    """The multi-power laws read 48 quadrature columns: listed as three numbered families."""
    from scalefit.cli import main

    assert main(["laws"]) == 0
    out = capsys.readouterr().out
    assert "inputs: S1, mpl_w{1..16}, mpl_loglr{1..16}, mpl_logs{1..16}\n" in out
    assert "mpl_w2" not in out and "inputs: S1, S2\n" in out
    assert get_law("multi_power", segments=2).describe().splitlines()[1] == (
        "  inputs: S1, mpl_w1, mpl_w2, mpl_loglr1, mpl_loglr2, mpl_logs1, mpl_logs2"
    )
