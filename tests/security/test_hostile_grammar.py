"""Hostile-input corpus, grammar: ``--formula`` and ``--where`` text that must be refused cleanly.

One row per case. A refused case must exit 2 with one ``scalefit: error:`` line naming the option
(``formula`` / ``--where``), no traceback, and write nothing; the fit never starts, so every case
runs in-process and fast. The "ok" rows show where the grammar's edges still accept good input.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hostile import assert_refused, cli

from scalefit.core.errors import ScaleFitError
from scalefit.core.expr import MAX_LENGTH, filter_rows, parse

FORMULA_REFUSED = [
    # division by zero
    "E + A/params**alpha + 1/0",
    "E + A*params + 1/0.0",
    "E + A*params + 0**-1",
    "E + A*params + 0.0**-1",
    "E + A*params + 0**-0.5",
    "E + A/(params*0 + 1/0)",
    # overflow, huge exponents (never computed exactly)
    "E + A*params*10**10**10",
    "E + A*params*10**400",
    "E + A*params*2**1024",
    "E + A*params*2**2**2**2**2**2",
    "E + A*params*10**(10**(10**10))",
    "E + A*params*(9**9)**(9**9)",
    "E + A*params*1e308*10",
    "E + A*params + (1e308 + 1e308)",
    "E + A*params + (-1e308 - 1e308)",
    "E + A*params*exp(1000)",
    "E + A*params*(1e200*1e200)",
    "E + A*params/1e-320/1e-320",
    # literals beyond float range
    "E + A*params*1e309",
    "E + A*params*1e-400",
    "E + A*params - 1e309",
    "-1e309 + A*params",
    "E + A*params*" + "1" * 1500,
    "E + A*params*0x" + "f" * 400,
    "E + A*params*0b1" + "0" * 1100,
    "E + A*params*1" + "0" * 400 + ".0",
    # complex results and complex literals
    "E + A*params*(-8)**0.5",
    "E + A*params*(-1)**0.5",
    "E + A*params*(-8)**(1/3)",
    "E + A*params + 1j",
    "E + A*params**(2+1j)",
    "E + A*params*log(-1)",
    "E + A*params*sqrt(-4)",
    "E + A*params*log(0)",
    "E + A*params*log10(0)",
    "E + A*params*log2(-2)",
    # the response as an input
    "E * loss",
    "E + A*params + 0*loss",
    "loss = E * loss",
    "E * ｌｏｓｓ",  # fullwidth letters: Python normalises names (NFKC) to 'loss'
    "E + A/params**alpha + B*log(loss)",
    # outside the grammar
    "__import__('os').system('true') + params",
    "A.real * params",
    "params[0] * A",
    "(lambda: 1)() * params",
    "A if params else B",
    "A @ params",
    "A // params",
    "A % params",
    "A ^ params",
    "~A * params",
    "A < params",
    "[A] * params",
    "'a' * params",
    "b'x' * params",
    "f'{A}' * params",
    "maximum(A) * params",
    "exp(x=A) * params",
    "exp(*A) * params",
    "open('x') * params",
    "params * True",
    "params * None",
    "A * params * ...",
    "_A * params",
    # syntax: unicode digits, null bytes, nesting, length
    "E + A*params*١٢",
    "E + A*params\x00",
    "A * params +",
    "A * params)",
    "exp(" * 70 + "A*params" + ")" * 70,
    "(" * 300 + "A*params" + ")" * 300,
    "-" * 100 + "A*params",
    "A*params" + "+1" * 70,
    "A*params" + "+1" * MAX_LENGTH,
    "   ",
]


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(0)
    params = np.geomspace(1e7, 1e10, 12)
    tokens = np.geomspace(1e9, 1e12, 12)[::-1]
    loss = 1.7 + 400 / params**0.34 + 410 / tokens**0.28 + rng.normal(0, 1e-3, 12)
    frame = pd.DataFrame(
        {
            "params": params,
            "tokens": tokens,
            "loss": loss,
            "depth": np.arange(2, 14),
            "width": 64 * np.arange(1, 13),
            "variant": ["pre_ln", "lns"] * 6,
        }
    )
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("formula", FORMULA_REFUSED, ids=lambda t: repr(t)[:40])
def test_formula_is_refused_in_one_line(table, tmp_path, capsys, formula):
    out = tmp_path / "r.json"
    result = cli(capsys, ["fit", table, f"--formula={formula}", "--starts", 2, "--out", out])
    assert_refused(result, "formula", outputs=[out], case=formula)


WHERE_REFUSED = [
    "depth > 1/0",
    "depth > 1/0.0",
    "depth > 0**-1",
    "depth > 10**10**10",
    "depth < 10**400",
    "depth < 2**1024",
    "depth > " + "9" * 1500,
    "depth > (-8)**0.5",
    "depth > (-1)**0.5",
    "depth > 1j",
    "depth == 1+2j",
    "depth > 1e309",
    "depth > -1e309",
    "depth > 1e-400",
    "depth > -2.5e-330",
    "depth in [1, 1/0]",
    "depth in [1j]",
    "depth in [10**400]",
    "depth > log(0)",
    "depth > sqrt(-1)",
    # arithmetic that fails on the data's rows
    "width/(depth-depth) > 1",
    "log(depth - 100) > 0",
    "sqrt(-depth) > 0",
    "exp(depth*1000) > 0",
    "depth**1000 > 0",
    "width**width > 0",
    "1/(depth - 2) > 0",
    # types
    "'a' * 3 == variant",
    "variant + 1 > 0",
    "-variant == 'x'",
    "depth > 'a'",
    "log(variant) > 0",
    # not a test, not the grammar, unknown names
    "depth",
    "depth + 1",
    "dpeth > 2",
    "__import__('os').system('true')",
    "depth.real > 1",
    "depth > 1 if 1 else 0",
    "depth =! 2",
    "depth > 1\x00",
    "depth > " + "(" * 300 + "1" + ")" * 300,
    "depth > 1" + " and depth > 1" * 200,
    "depth > ١",
]


@pytest.mark.parametrize("where", WHERE_REFUSED, ids=lambda t: repr(t)[:40])
def test_where_is_refused_in_one_line(table, tmp_path, capsys, where):
    out = tmp_path / "r.json"
    args = ["fit", table, "--law", "chinchilla", f"--where={where}", "--starts", 2, "--out", out]
    assert_refused(cli(capsys, args), "--where", outputs=[out], case=where)


def test_huge_powers_are_refused_before_they_are_computed():
    """10**10**10 as an exact integer would take minutes; folded in floats it fails at once."""
    for text in ("10**10**10", "9**9**9**9", "2**2**2**2**2**2**2"):
        with pytest.raises(ScaleFitError, match="overflows float range"):
            parse(text)


def test_messages_name_the_faulty_sub_expression():
    with pytest.raises(ScaleFitError, match=r"divides by zero in '1/0'"):
        parse("A*params + 1/0")
    with pytest.raises(ScaleFitError, match=r"complex result .* in '\(-8\)\*\*0\.5'"):
        parse("depth > (-8)**0.5", kind="filter")
    with pytest.raises(ScaleFitError, match=r"literal 1e309, which is beyond float range"):
        parse("A * 1e309")
    with pytest.raises(ScaleFitError, match=r"literal 1e-400, which is below float range"):
        parse("A * 1e-400")
    with pytest.raises(ScaleFitError, match=r"1111111111.*\(1500 characters\)"):
        parse("A * " + "1" * 1500)
    frame = pd.DataFrame({"depth": [1.0, 2.0, 3.0]})
    with pytest.raises(ScaleFitError, match=r"no real value .* on 2 of 3 rows in 'log\(depth-2\)'"):
        filter_rows(frame, "log(depth-2) > 0")
    with pytest.raises(ScaleFitError, match=r"infinite .* on 3 of 3 rows"):
        filter_rows(frame, "depth/(depth-depth) > 0")


def test_long_expressions_are_cut_in_messages():
    text = "A*params*" + "1" * 1500
    with pytest.raises(ScaleFitError) as info:
        parse(text)
    assert len(str(info.value)) < 400 and "\n" not in str(info.value)


FORMULA_OK = [
    ("A * 1_000", {"A": 2.0}, 2000.0),
    ("A + 1e-300", {"A": 2.0}, 2.0),
    ("A * (-2)**2", {"A": 1.0}, 4.0),
    ("A * (-8)**3", {"A": 1.0}, -512.0),
    ("A * 0**0", {"A": 3.0}, 3.0),
    ("A * 0**0.5", {"A": 3.0}, 0.0),
    ("A * 1e308 / 10", {"A": 1.0}, 1e307),
    ("A * 2**-1074", {"A": 1.0}, 5e-324),
    ("A * 10**308", {"A": 1.0}, 1e308),
    ("A * exp(-1000)", {"A": 1.0}, 0.0),
    ("A * log(e)", {"A": 2.0}, 2.0),
    ("A * maximum(1, 2)", {"A": 1.0}, 2.0),
    ("-(-(-A))", {"A": 1.5}, -1.5),
]


@pytest.mark.parametrize(("text", "env", "value"), FORMULA_OK, ids=[t for t, _, _ in FORMULA_OK])
def test_formula_edges_that_are_fine(text, env, value):
    assert float(parse(text).evaluate(env)) == pytest.approx(value, rel=1e-12, abs=0)


WHERE_OK = [
    ("depth >= 1_0", 4),
    ("depth > 1e-300", 12),
    ("depth**-1 > 0.1", 8),
    ("variant in ['lns'] and depth > 2 ** 3", 3),
    ("not width / depth > 40", 1),
    ("(" * 70 + "depth > 2" + ")" * 70, 11),
    ("log(depth) > 2", 6),
    ("depth > -1e308", 12),
]


@pytest.mark.parametrize(("where", "kept"), WHERE_OK, ids=[w[:40] for w, _ in WHERE_OK])
def test_filter_edges_that_are_fine(table, where, kept):
    frame = pd.read_csv(table)
    assert len(filter_rows(frame, where)) == kept


def test_integer_columns_are_powered_as_floats():
    """int64 ** int64 would wrap around silently; the filter computes in floats and checks."""
    frame = pd.DataFrame({"k": np.array([10, 20, 30], dtype=np.int64)})
    with pytest.raises(ScaleFitError, match="infinite"):
        filter_rows(frame, "k ** k ** k > 0")
    assert len(filter_rows(frame, "k ** 2 > 150")) == 2


def test_complex_column_in_a_filter_is_refused():
    frame = pd.DataFrame({"z": np.array([1 + 1j, 2 + 0j]), "depth": [1, 2]})
    with pytest.raises(ScaleFitError, match="'z', which holds complex numbers"):
        filter_rows(frame, "z > 1")


def test_overflow_on_data_is_a_non_finite_prediction_not_a_crash():
    """Unchecked evaluation (what the fitter traces) leaves inf; the fitter rejects such starts."""
    law_expr = parse("E + exp(A * params)")
    with np.errstate(over="ignore"):
        out = law_expr.evaluate({"E": 1.0, "A": 1.0, "params": np.array([1.0, 1e9])})
    assert np.isfinite(out[0]) and np.isinf(out[1])
    with pytest.raises(ScaleFitError, match=r"is infinite .* on 1 of 2 rows"):
        law_expr.evaluate({"E": 1.0, "A": 1.0, "params": np.array([1.0, 1e9])}, checked=True)


def test_python_integers_in_the_environment_are_not_powered_exactly():
    with np.errstate(over="ignore"):
        assert np.isinf(parse("a ** b").evaluate({"a": 10, "b": 10**10}))
    with pytest.raises(ScaleFitError, match="'b' is beyond float range"):
        parse("a ** b").evaluate({"a": 10, "b": 10**400})


def test_jax_evaluation_is_unchanged():
    jnp = pytest.importorskip("jax.numpy")
    expr = parse("E + A / params**alpha + 2*pi*0")
    env = {"E": 1.0, "A": 4.0, "alpha": 0.5, "params": jnp.asarray([16.0, 64.0])}
    np.testing.assert_allclose(np.asarray(expr.evaluate(env, jnp)), [2.0, 1.5])


def test_a_formula_cli_fit_still_runs(table, tmp_path, capsys):
    out = tmp_path / "r.json"
    args = ["fit", table, "--formula", "E + A/params**alpha + B/tokens**beta", "--out", out]
    code, text, err = cli(
        capsys, [*args, "--starts", 16, "--no-progress", "--where", "width>=1_28"]
    )
    assert code in (0, 3), err
    saved = json.loads(out.read_text())
    assert set(saved["params"]) == {"E", "A", "alpha", "B", "beta"}
