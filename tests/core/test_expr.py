"""scalefit.core.expr as such: what the two grammars accept and the values they compute.

The refusals of hostile text (huge powers, attribute access, deep nesting, ...) are in
tests/security/test_hostile_grammar.py; here each construct the grammar accepts is evaluated
and compared with the number Python's own arithmetic gives.
"""

import math

import numpy as np
import pandas as pd
import pytest

from scalefit.core.errors import ScaleFitError
from scalefit.core.expr import FUNCTIONS, Node, filter_rows, parse


@pytest.mark.parametrize(
    ("text", "env", "value"),
    [
        ("E + A / params**alpha", {"E": 1.0, "A": 4.0, "alpha": 0.5, "params": 16.0}, 2.0),
        ("-x**2", {"x": 3.0}, -9.0),  # ** binds tighter than unary minus, as in Python
        ("2**3**2", {}, 512.0),  # ** is right-associative
        ("(1 + x) * 2 - 6 / 3", {"x": 1.0}, 2.0),
        ("x / y / 2", {"x": 8.0, "y": 2.0}, 2.0),  # / is left-associative
        ("+x", {"x": 1.5}, 1.5),
        ("log(e) + cos(pi)", {}, 0.0),
        ("sqrt(16) + abs(-2) + exp(0) + log10(100) + log2(8)", {}, 12.0),
        ("max(x, 1) + min(x, 1) + maximum(x, 0) + minimum(x, 0)", {"x": 3.0}, 7.0),
        ("atan(1) - arctan(1) + tanh(0) + sin(0)", {}, 0.0),
        ("1e-3 * 2.5e3", {}, 2.5),
    ],
)
def test_formula_values_are_pythons(text, env, value):
    assert float(parse(text).evaluate(env, np)) == pytest.approx(value, rel=1e-12, abs=1e-15)


def test_names_are_every_variable_read_and_no_function_or_constant():
    assert parse("E + A/params**alpha + log(tokens) * pi").names == {
        "E",
        "A",
        "params",
        "alpha",
        "tokens",
    }
    assert parse("1 + 2").names == frozenset()


def test_constant_parts_are_folded_when_parsed():
    tree = parse("2*3 + x").tree
    assert tree.op == "bin"
    assert tree.args[1] == Node("const", (6.0,))  # 2*3 computed once, at parse time
    assert parse("sqrt(4) * pi").tree == Node("const", (2.0 * math.pi,))


def test_evaluation_broadcasts_over_arrays():
    f = parse("c / steps**a + L0")
    steps = np.array([1.0, 4.0, 100.0])
    out = f.evaluate({"c": 3.0, "a": 0.5, "L0": 1.5, "steps": steps}, np)
    np.testing.assert_allclose(out, 3.0 / np.sqrt(steps) + 1.5, rtol=1e-15)


def test_jax_numpy_gives_the_same_values():
    jnp = pytest.importorskip("jax.numpy")
    f = parse("E + A / n**alpha")
    env = {"E": 1.0, "A": 10.0, "alpha": 0.3, "n": np.array([1.0, 10.0, 1000.0])}
    np.testing.assert_allclose(np.asarray(f.evaluate(env, jnp)), f.evaluate(env, np), rtol=1e-6)


def test_text_is_kept_stripped_and_the_kind_recorded():
    f = parse("  x + 1  ")
    assert (f.text, f.kind) == ("x + 1", "formula")
    assert parse("x > 1", kind="filter").kind == "filter"


def test_missing_names_are_named():
    with pytest.raises(ScaleFitError, match=r"'a\+b' needs 'b'"):
        parse("a+b").evaluate({"a": 1.0})


def test_unchecked_faults_are_non_finite_and_checked_ones_count_the_rows():
    f = parse("1/x")
    with np.errstate(divide="ignore"):
        out = f.evaluate({"x": np.array([1.0, 0.0])}, np)
    assert out[0] == 1.0 and np.isinf(out[1])
    with pytest.raises(ScaleFitError, match="infinite .* on 1 of 2 rows"):
        f.evaluate({"x": np.array([1.0, 0.0])}, np, checked=True)


def test_a_formula_has_no_comparisons_and_calls_take_their_arity():
    with pytest.raises(ScaleFitError, match="uses comparisons"):
        parse("x < 1")
    for name, (arity, _) in FUNCTIONS.items():
        args = ", ".join(["x"] * arity)
        assert parse(f"{name}({args})").names == {"x"}
        with pytest.raises(ScaleFitError, match=f"calls {name}\\(\\) with {arity + 1} argument"):
            parse(f"{name}({args}, x)")


@pytest.fixture
def runs():
    return pd.DataFrame(
        {"variant": ["pre_ln", "lns", "post", "lns"], "depth": [2, 4, 8, 16]},
        index=[10, 11, 12, 13],
    )


@pytest.mark.parametrize(
    ("where", "kept"),
    [
        ("depth >= 4", [11, 12, 13]),
        ("1 < depth <= 8", [10, 11, 12]),  # chained, as in Python
        ("variant == 'lns'", [11, 13]),
        ("variant != 'lns'", [10, 12]),
        ("variant in ['pre_ln', 'lns'] and depth >= 4", [11, 13]),
        ("variant not in ('lns',)", [10, 12]),
        ("not (variant == 'post') and depth > 2", [11, 13]),
        ("depth < 4 or depth > 8", [10, 13]),
        ("log2(depth) == 3", [12]),
        ("depth * 2 > 10", [12, 13]),
    ],
)
def test_filters_keep_the_rows_python_would(runs, where, kept):
    out = filter_rows(runs, where)
    assert out.index.tolist() == kept
    assert out.columns.tolist() == ["variant", "depth"]


def test_a_filter_returns_a_copy(runs):
    out = filter_rows(runs, "depth > 4")
    out.loc[12, "depth"] = -1
    assert runs.loc[12, "depth"] == 8


def test_a_filter_must_be_a_test_over_known_columns(runs):
    with pytest.raises(ScaleFitError, match="unknown column 'dpth'.*depth"):
        filter_rows(runs, "dpth > 2")
    with pytest.raises(ScaleFitError, match="not a true/false test"):
        filter_rows(runs, "depth + 1")
