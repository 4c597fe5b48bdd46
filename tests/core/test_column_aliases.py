"""Column aliases never swallow a user's column; ``--formula`` takes starts, ranges and kinds.

Reference problems from Moré, Garbow & Hillstrom (1981), "Testing unconstrained optimization
software", ACM TOMS 7(1): Biggs EXP6 (zero-residual, generated data) and Osborne 2 (Osborne's 65
observations, optimum sum of squares 4.01377e-2), both with an input named ``t``.
"""

import json
import re

import numpy as np
import pandas as pd
import pytest

import scalefit
from scalefit.cli import main
from scalefit.core.errors import ScaleFitError
from scalefit.core.table import read_table

# Biggs EXP6's x1/x4 correlation is a true property of the problem; scalefit warns about it.
pytestmark = pytest.mark.filterwarnings("ignore::scalefit.core.errors.ConvergenceWarning")

OSBORNE_Y = [
    1.366, 1.191, 1.112, 1.013, 0.991, 0.885, 0.831, 0.847, 0.786, 0.725,
    0.746, 0.679, 0.608, 0.655, 0.616, 0.606, 0.602, 0.626, 0.651, 0.724,
    0.649, 0.649, 0.694, 0.644, 0.624, 0.661, 0.612, 0.558, 0.533, 0.495,
    0.500, 0.423, 0.395, 0.375, 0.372, 0.391, 0.396, 0.405, 0.428, 0.429,
    0.523, 0.562, 0.607, 0.653, 0.672, 0.708, 0.633, 0.668, 0.645, 0.632,
    0.591, 0.559, 0.597, 0.625, 0.739, 0.710, 0.729, 0.720, 0.636, 0.581,
    0.428, 0.292, 0.162, 0.098, 0.054,
]  # fmt: skip
OSBORNE_FORMULA = (
    "b1*exp(-t*b5) + b2*exp(-(t-b9)**2*b6) + b3*exp(-(t-b10)**2*b7) + b4*exp(-(t-b11)**2*b8)"
)
OSBORNE_START = "b1=1.3,b2=0.65,b3=0.65,b4=0.7,b5=0.6,b6=3,b7=5,b8=7,b9=2,b10=4.5,b11=5.5"
OSBORNE_SSR = 4.01377e-2
OSBORNE_OPT = {"b1": 1.30998, "b5": 0.754183, "b9": 2.39868, "b11": 5.67534}


def test_single_letter_alias_renames_only_when_no_one_else_needs_the_name():
    frame = pd.DataFrame({"n": [1e8, 1e9], "t": [2e9, 2e10], "loss": [3.1, 2.7]})
    assert {"params", "tokens"} <= set(read_table(frame).columns)
    # the law reads 't' under its own name: it stays
    kept = read_table(frame, keep=("t",))
    assert "t" in kept.columns and "tokens" not in kept.columns
    assert kept.attrs["scalefit"]["renamed"] == {"n": "params"}
    # a name mapped onto itself is kept as it is
    assert "n" in read_table(frame, {"n": "n"}).columns
    # a single letter never takes a name another column has
    both = read_table(pd.DataFrame({"t": [0.0, 1.0], "tokens": [1e9, 2e9], "loss": [3.0, 2.0]}))
    assert list(both["t"]) == [0.0, 1.0] and list(both["tokens"]) == [1e9, 2e9]


def test_full_name_aliases_still_collide_loudly():
    frame = pd.DataFrame({"tokens": [1.0, 2.0], "num_tokens": [1.0, 2.0], "loss": [3.0, 2.0]})
    with pytest.raises(ScaleFitError, match="both map to 'tokens'"):
        read_table(frame)


def _biggs_exp6() -> pd.DataFrame:
    t = 0.1 * np.arange(1, 14)
    y = np.exp(-t) - 5 * np.exp(-10 * t) + 3 * np.exp(-4 * t)
    return pd.DataFrame({"t": t, "loss": y})


def test_formula_with_an_input_named_t_fits_biggs_exp6(tmp_path):
    path = tmp_path / "biggs.csv"
    _biggs_exp6().to_csv(path, index=False)
    res = scalefit.fit(
        str(path),
        formula="x3*exp(-t*x1) - x4*exp(-t*x2) + x6*exp(-t*x5)",
        residuals="linear",
        x0={"x1": 1, "x2": 2, "x3": 1, "x4": 1, "x5": 1, "x6": 1},
        starts=32,
        seed=0,
    )
    assert res.law.inputs == ("t",)
    assert res.objective < 1e-12  # zero-residual problem


def test_a_table_read_earlier_gives_the_column_back(tmp_path):
    table = read_table(_biggs_exp6())  # read without the law: 't' became 'tokens'
    assert "tokens" in table.columns
    res = scalefit.fit(
        table,
        formula="x3*exp(-t*x1) - x4*exp(-t*x2) + x6*exp(-t*x5)",
        residuals="linear",
        x0={"x1": 1, "x2": 2, "x3": 1, "x4": 1, "x5": 1, "x6": 1},
        starts=8,
        seed=0,
    )
    assert res.law.inputs == ("t",)


def _osborne_csv(tmp_path):
    path = tmp_path / "osborne2.csv"
    pd.DataFrame({"t": np.arange(65) / 10, "y": OSBORNE_Y}).to_csv(path, index=False)
    return path


def test_osborne2_is_certified_from_the_cli_with_given_starts(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(
        [
            "fit",
            str(_osborne_csv(tmp_path)),
            "--columns",
            "y=loss",
            "--formula",
            OSBORNE_FORMULA,
            "--residuals",
            "linear",
            "--start",
            OSBORNE_START,
            "--starts",
            "16",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0, capsys.readouterr()
    data = json.loads(out.read_text())
    assert data["converged"] is True
    # the objective is the plain sum of squares on linear residuals
    assert data["objective"] == pytest.approx(OSBORNE_SSR, rel=1e-5)
    for name, value in OSBORNE_OPT.items():
        assert data["params"][name] == pytest.approx(value, rel=1e-4)


def test_cli_start_ranges_bounds_and_kinds_reach_the_law(tmp_path, capsys):
    path = tmp_path / "biggs.csv"
    _biggs_exp6().to_csv(path, index=False)
    out = tmp_path / "r.json"
    code = main(
        [
            "fit",
            str(path),
            "--formula",
            "x3*exp(-t*x1) - x4*exp(-t*x2) + x6*exp(-t*x5)",
            "--residuals",
            "linear",
            "--start",
            "x1=0.5:2,x2=5:20,x3=0.5:2,x4=1:10,x5=1:8,x6=1:5",
            "--bound",
            "x2=0:inf",
            "--kind",
            "x2=positive",
            "--starts",
            "16",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0, capsys.readouterr()
    spec = json.loads(out.read_text())["law_spec"]
    x2 = next(p for p in spec["params"] if p["name"] == "x2")
    assert x2["kind"] == "positive" and x2["bounds"] == [0.0, None]
    x1 = next(p for p in spec["params"] if p["name"] == "x1")
    assert x1["start"] == [0.5, 2.0]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--law", "chinchilla", "--bound", "alpha=0:1"], "--bound applies to --formula"),
        (["--law", "chinchilla", "--kind", "alpha=free"], "--kind applies to --formula"),
        (["--law", "chinchilla", "--start", "gamma=1"], "no parameter 'gamma'"),
        (["--law", "chinchilla", "--start", "alpha=0:1"], "a range LO:HI applies"),
        (["--formula", "E + A/params**a", "--start", "a=x"], "is not a number"),
        (["--formula", "E + A/params**a", "--bound", "a=2:1"], "needs LO < HI"),
        (
            ["--formula", "E + A/params**a", "--start", "a=0.5,E=1:2"],
            "(--start on the command line) gives a starting",
        ),
        (
            ["--formula", "E + A/params**a", "--kind", "a=weird"],
            "(--kind on the command line) must map 'a'",
        ),
    ],
)
def test_cli_start_options_refused_with_one_line(extra, message, capsys):
    code = main(["fit", "depth_delusion", *extra, "--starts", "2", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "method",
    ["varpro", "jax"],
)
def test_cli_bound_is_enforced_by_every_method(tmp_path, capsys, method):
    """``--bound`` is a constraint: a fit whose free optimum lies outside ends on the bound."""
    rng = np.random.default_rng(0)
    params, tokens = np.exp(rng.uniform(np.log(1e7), np.log(1e10), (2, 40)))
    loss = (1.7 + 400 / params**0.34 + 400 / tokens**0.28) * np.exp(rng.normal(0, 0.01, 40))
    path = tmp_path / "t.csv"
    pd.DataFrame({"params": params, "tokens": tokens, "loss": loss}).to_csv(path, index=False)
    args = ["fit", path, "--formula", "E + A/params**alpha + B/tokens**beta", "--method", method]
    code = main([*map(str, args), "--bound", "alpha=0:0.3", "--starts", "16", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"^alpha +0\.3 +at bound", out, re.M), out
