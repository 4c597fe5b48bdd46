"""Compute multipliers: known truth on synthetic pairs, the closed-form frontier, bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scalefit.cli import main
from scalefit.core.errors import ScaleFitError
from scalefit.multiplier import compute_multiplier

#: a 5 x 5 grid pins A and alpha (B and beta) only jointly: the fits say so, as they should
QUIET = pytest.mark.filterwarnings("ignore::scalefit.core.errors.ConvergenceWarning")
TRUE = {"E": 1.7, "A": 400.0, "B": 410.0, "alpha": 0.34, "beta": 0.28}


def _table(
    scale: float = 1.0, noise: float = 0.005, seed: int = 0, lo: float = 1e7
) -> pd.DataFrame:
    """A 5 x 5 grid from the Chinchilla law whose loss at (N, D) is TRUE's at (N/s, D/s)."""
    n, d = np.meshgrid(np.geomspace(lo, 100 * lo, 5), np.geomspace(1e9, 1e11, 5))
    t = pd.DataFrame({"params": n.ravel(), "tokens": d.ravel()})
    p = TRUE
    clean = (
        p["E"]
        + p["A"] / (t.params / scale) ** p["alpha"]
        + p["B"] / (t.tokens / scale) ** p["beta"]
    )
    rng = np.random.default_rng(seed)
    return t.assign(loss=clean * np.exp(noise * rng.standard_normal(len(t))))


@QUIET
def test_a_table_against_itself_is_one_within_its_interval():
    t = _table()
    res = compute_multiplier(t, t, bootstrap=40, seed=0)
    assert res.multiplier == pytest.approx(1.0, abs=1e-6)
    assert res.lo <= 1.0 <= res.hi and res.n_draws >= 30
    assert "compute multiplier C_A / C_B" in res.report()


@QUIET
def test_recipe_needing_twice_the_compute_gives_two():
    # A(N, D) = B(N / sqrt 2, D / sqrt 2): at compute C, A reaches what B reaches at C / 2
    a, b = _table(scale=np.sqrt(2), seed=1), _table(seed=2)
    res = compute_multiplier(a, b, bootstrap=40, seed=0)
    assert res.multiplier == pytest.approx(2.0, rel=0.15)
    assert res.lo <= 2.0 <= res.hi and res.lo > 1.0
    exact = compute_multiplier(_table(np.sqrt(2), 0.0), _table(noise=0.0), bootstrap=0)
    assert exact.multiplier == pytest.approx(2.0, rel=1e-3) and np.isnan(exact.lo)


def test_frontier_matches_the_chinchilla_closed_form():
    t = _table(noise=0.0)
    res = compute_multiplier(t, t, bootstrap=0, target_loss=2.4)
    a, b, e = TRUE["alpha"], TRUE["beta"], TRUE["E"]
    g = (a * TRUE["A"] / (b * TRUE["B"])) ** (1 / (a + b))
    k = TRUE["A"] * g**-a + TRUE["B"] * g**b
    flops = 6 * (k / (2.4 - e)) ** ((a + b) / (a * b))
    assert res.flops_b == pytest.approx(flops, rel=1e-3)


def test_shared_floor_holds_one_floor_for_both():
    a, b = _table(scale=np.sqrt(2), seed=1), _table(seed=2)
    res = compute_multiplier(a, b, bootstrap=0, shared_floor=True)
    assert res.floor == pytest.approx(TRUE["E"], abs=0.1)
    assert "E" not in res.fit_a.params and res.multiplier == pytest.approx(2.0, rel=0.15)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (
            {"table_b": _table().drop(columns="tokens")},
            "table_b needs the columns .* missing tokens",
        ),
        ({"table_b": _table(lo=1e12)}, "compute ranges of table_a .* do not overlap"),
        ({"target_loss": 1.5}, "fitted to table_a never reaches target_loss=1.5"),
        ({"law": "decomposed"}, "needs a law of params and tokens"),
    ],
)
def test_bad_input_is_one_line(kw, match):
    kw = {"table_a": _table(), "table_b": _table(seed=3), "bootstrap": 0, **kw}
    with pytest.raises(ScaleFitError, match=match) as info:
        compute_multiplier(kw.pop("table_a"), kw.pop("table_b"), **kw)
    assert "\n" not in str(info.value)


@QUIET
def test_cli_prints_the_multiplier_and_refuses_disjoint_tables(tmp_path, capsys):
    a, b, far = (tmp_path / f"{n}.csv" for n in "abf")
    _table(scale=np.sqrt(2), seed=1).to_csv(a, index=False)
    _table(seed=2).to_csv(b, index=False)
    _table(lo=1e12).to_csv(far, index=False)
    assert main(["multiplier", str(a), str(b), "--n-boot", "10"]) == 0
    out = capsys.readouterr().out
    assert "compute multiplier C_A / C_B" in out and "recipe A needs" in out
    assert main(["multiplier", str(a), str(far), "--n-boot", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "do not overlap" in err
