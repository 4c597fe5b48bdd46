"""FitResult v2: results carry their law; every kind of law goes fit → ... → allocate."""

from __future__ import annotations

import dataclasses
import json
import warnings

import numpy as np
import pytest

import scalefit
from scalefit import FitResult, Law, Param, ScaleFitError
from scalefit.core.errors import ConvergenceWarning
from scalefit.fit.synthetic import simulate_table
from scalefit.laws import register_law
from scalefit.plot.fit import plot_fit


def _custom_law(name: str = "my_chinchilla") -> Law:
    def expr(xp, p, x):
        return p["E"] + p["A"] / x["params"] ** p["alpha"] + p["B"] / x["tokens"] ** p["beta"]

    return Law(
        name=name,
        inputs=("params", "tokens"),
        params=(
            Param("E", "floor"),
            Param("A", "coef", pivot=("alpha", "params")),
            Param("B", "coef", pivot=("beta", "tokens")),
            Param("alpha", "exponent", start=(0.1, 0.8)),
            Param("beta", "exponent", start=(0.1, 0.8)),
        ),
        expr=expr,
        formula="L = E + A/params^alpha + B/tokens^beta (user code)",
    )


FORMULA = "E + A/params**alpha + B/tokens**beta"
FORMULA_KW = {
    "kinds": {"E": "positive", "A": "positive", "B": "positive", "alpha": "exponent"},
    "starts": {"alpha": (0.1, 0.8), "beta": (0.1, 0.8), "E": (0.5, 3.0)},
}


@pytest.fixture(scope="module")
def table():
    return simulate_table("chinchilla", n=80, noise=0.01, seed=4)


def _laws():
    return {
        "registered": "chinchilla",
        "object": _custom_law(),
        "formula": Law.from_formula(FORMULA, name="chin_formula", **FORMULA_KW),
    }


@pytest.mark.parametrize("kind", ["registered", "object", "formula"])
def test_every_kind_of_law_goes_all_the_way(kind, table, tmp_path):
    law = _laws()[kind]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = scalefit.fit(table, law, starts=12, seed=1, progress=False)
        boot = scalefit.bootstrap(res, table, 16, boot_starts=0, seed=2)
    assert isinstance(res.law, Law) and res.converged
    truth = table.attrs["truth"]
    assert res.params["alpha"] == pytest.approx(truth["alpha"], rel=0.15)
    assert res.draws is None and boot.draws is not None and boot is not res
    assert set(boot.ci) == set(res.params)
    text = boot.report()
    assert res.law_name in text and "bootstrap  16 resamples" in text
    band = boot.predict(table.head(5), bands=True)
    assert (band["lo"] <= band["loss"]).all() and (band["loss"] <= band["hi"]).all()
    fig = plot_fit(boot, table)
    assert len(fig.axes) >= 2
    if kind == "object":
        with pytest.raises(ScaleFitError, match="not registered"):
            boot.save(tmp_path / "r.json")
        assert not (tmp_path / "r.json").exists()
        register_law(law, overwrite=True)
    boot.save(tmp_path / "r.json")
    back = FitResult.load(tmp_path / "r.json")
    assert back.law_name == res.law_name and back.params == boot.params
    np.testing.assert_array_equal(back.draws, boot.draws)
    np.testing.assert_allclose(back.predict(table), boot.predict(table), rtol=1e-12)
    a = scalefit.allocate(boot, [1e21, 1e22])
    b = scalefit.allocate(back, [1e21, 1e22])
    np.testing.assert_allclose(a.summary["params"], b.summary["params"], rtol=1e-10)


def test_result_is_frozen_and_refinements_return_new_results(table):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = scalefit.fit(table, "chinchilla", starts=8, progress=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.converged = False  # type: ignore[misc]
    new = res.replace(holdout={"x": 1})
    assert res.holdout is None and new.holdout == {"x": 1}
    with pytest.raises(ScaleFitError, match="'ci_method' parameter of bootstrap"):
        scalefit.bootstrap(res, table, 8, ci_method="bogus", ci_prob=0.9)
    with pytest.raises(ScaleFitError, match="'ci_prob' parameter of bootstrap"):
        scalefit.bootstrap(res, table, 8, ci_prob=1.7)
    boot = scalefit.bootstrap(res, table, 8, boot_starts=0, ci_prob=0.9)
    assert boot.ci_prob == 0.9 and "90%" in boot.report()


def test_formula_law_spec_round_trips_through_json():
    law = Law.from_formula("loss = c/steps**a + L0", inputs=["steps"], starts={"a": (0.1, 1.0)})
    assert law.inputs == ("steps",) and law.param_names == ("L0", "a", "c")
    from scalefit.laws import law_from_spec, law_to_spec

    spec = json.loads(json.dumps(law_to_spec(law)))
    again = law_from_spec(spec)
    x = {"steps": np.array([10.0, 100.0])}
    p = {"c": 2.0, "a": 0.5, "L0": 1.0}
    np.testing.assert_allclose(again.evaluate(p, x), law.evaluate(p, x))


@pytest.fixture(scope="module")
def saved(table, tmp_path_factory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = scalefit.fit(table, "chinchilla", starts=8, progress=False)
    res = scalefit.bootstrap(res, table, 6, boot_starts=0)
    path = tmp_path_factory.mktemp("saved") / "r.json"
    res.save(path)
    return path.read_text()


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda d: d["params"].pop("alpha"), "field 'params' must name exactly the parameters"),
        (lambda d: d["params"].update(alpha=None), r"field 'params.alpha' must be a float.*null"),
        (lambda d: d["params"].update(alpha="0.3"), r"field 'params.alpha' must be a float"),
        (lambda d: d["params"].update(alpha=float("inf")), "Infinity is not JSON"),
        (lambda d: d["params"].update(alpha=float("nan")), "NaN is not JSON"),
        (lambda d: d["params"].update(c_width=1.0), "field 'params' must name exactly"),
        (lambda d: d.update(draws=[[1.0, 2.0]]), r"field 'draws\[0\]' must be a list of 5"),
        (
            lambda d: d.update(draws=[[1.0, 2.0, 3.0, "x", 5.0]]),
            r"field 'draws\[0\]\[3\]' must be",
        ),
        (lambda d: d.update(law_spec={"type": "pickle"}), "field 'law_spec.type' must be one of"),
        (lambda d: d.update(schema_version=3), "field 'schema_version' must be one of 2"),
        (lambda d: d.update(n_rows="abc"), "field 'n_rows' must be an int >= 1. Got 'abc'"),
        (lambda d: d.update(surprise=1), "unknown field"),
    ],
)
def test_bad_result_json_is_one_clear_error(tmp_path, saved, change, match):
    path, data = tmp_path / "r.json", json.loads(saved)
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ScaleFitError, match=match) as info:
        FitResult.load(path)
    assert "\n" not in str(info.value) and "np.float64" not in str(info.value)


def test_not_identified_floor_is_reported_not_printed_as_a_number():
    # A floor far below the data's reach: the term E cannot be told apart from zero.
    table = simulate_table(
        "chinchilla",
        truth={"E": 1e-9, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28},
        n=60,
        noise=0.01,
        seed=3,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = scalefit.fit(table, "chinchilla", starts=12, progress=False)
    assert "E" in res.not_identified
    row = [ln for ln in res.report().splitlines() if ln.startswith("E ")][0]
    # no number in the stderr column: "not identified", or "at bound" where the solver held E
    # on its lower bound 0 (the leg with other numpy/JAX releases lands there)
    assert "not identified" in row or "at bound" in row
    assert np.isnan(res.summary().loc["E", "stderr"]) and not res.summary().loc["E", "identified"]


def test_report_says_why_an_estimate_lies_outside_its_interval(table):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = scalefit.fit(table, "chinchilla", starts=8, progress=False)
    boot = scalefit.bootstrap(res, table, 8, boot_starts=0)
    assert "outside    the estimate" not in boot.report()
    ci = dict(boot.ci)
    ci["alpha"] = (boot.params["alpha"] * 1.1, boot.params["alpha"] * 1.2)  # all to one side
    text = boot.replace(ci=ci).report()
    assert "outside    the estimate of alpha lies outside its own percentile interval" in text


def test_save_refuses_a_result_that_load_would_refuse_and_writes_nothing(tmp_path):
    """An unconverged fit can run a coefficient past what a result file may hold (a plan's first
    round on Gemstones gave B = 4.9e258): saving says so in one line instead of writing a file
    that cannot be read back."""
    res = scalefit.fit(
        simulate_table("chinchilla", n=80, noise=0.01, seed=4), "chinchilla", starts=8
    )
    bad = dataclasses.replace(res, params={**res.params, "B": 1e258})
    with pytest.raises(ScaleFitError, match=r"not written.*params\.B"):
        bad.save(tmp_path / "fit.json")
    assert not (tmp_path / "fit.json").exists()
    res.save(tmp_path / "ok.json")
    assert scalefit.FitResult.load(tmp_path / "ok.json").params == pytest.approx(dict(res.params))
