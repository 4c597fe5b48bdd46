"""The decomposed law on the bundled Gemstones grid: a certified optimum, at or below the authors'.

McLeish et al. published their fit of the same law on the same 770 checkpoints with its objective,
0.0038782 (``scalefit.datasets.gemstones.PUBLISHED``). Their objective is the *summed*
``scipy.special.huber(1e-3, r)`` of the log residuals, which is scalefit's ``loss="huber"``,
``delta=1e-3``: the two fits are compared under it, and under the default least squares.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from scipy.special import huber

import scalefit
from scalefit.cli import main
from scalefit.cli.fit import published_line
from scalefit.core.errors import ConvergenceWarning
from scalefit.datasets import load
from scalefit.datasets.gemstones import PUBLISHED, published_params
from scalefit.laws import get_law


@pytest.fixture(scope="module")
def table():
    return load("gemstones")


def _their_residuals(table, delta):
    pred = get_law("decomposed").evaluate(published_params(delta), table)
    return np.log(np.asarray(pred, dtype=float)) - np.log(table["loss"].to_numpy(dtype=float))


@pytest.mark.parametrize("delta", sorted(PUBLISHED))
def test_the_published_objective_is_the_summed_huber_of_log_residuals(table, delta):
    rho = huber(delta, _their_residuals(table, delta))
    assert np.sum(rho) == pytest.approx(PUBLISHED[delta]["objective"], rel=1e-7)
    assert np.mean(rho) < PUBLISHED[delta]["objective"] / 100  # not the mean
    assert published_params(delta)["L0"] < 1e-60  # exp(-4555), exp(-156): no floor at all


def test_the_huber_fit_is_certified_and_at_or_below_the_authors(table):
    with pytest.warns(ConvergenceWarning) as said:
        res = scalefit.fit(table, "decomposed", loss="huber", delta=1e-3, starts=32, seed=0)
    said = [str(w.message) for w in said]
    assert any(m.startswith("L0 = ") and "ran to its lower bound 0" in m for m in said), said
    theirs = float(np.sum(huber(1e-3, _their_residuals(table, 1e-3))))
    assert res.converged and res.objective <= theirs
    assert res.objective == pytest.approx(theirs, rel=1e-6)  # the same optimum, L0 at 0 too
    assert res.params["L0"] < 1e-6 and "L0" in res.not_identified
    assert res.params["a_depth"] == pytest.approx(0.1416, abs=2e-3)
    line = published_line(res, table)
    assert line.startswith("published  McLeish et al.'s fit (Huber delta 0.001) scores 0.00387821")
    assert "this fit is lower by" in line


def test_the_command_converges_and_reports_the_comparison():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["fit", "gemstones", "--law", "decomposed", "--no-progress"])
    text = out.getvalue()
    assert code == 0 and "converged  yes;" in text and "770 rows" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("published"))
    assert "scores 0.06101397" in line and "this fit is lower by 0.0101" in line
    # not on another table or a filtered one
    with contextlib.redirect_stdout(io.StringIO()) as other:
        main(["fit", "gemstones", "--where", "depth > 3", "--law", "decomposed", "--starts", "8"])
    assert "published" not in other.getvalue()


def test_an_irreducible_loss_whose_interval_reaches_zero_is_called_not_identified():
    """On Gemstones L0's run-bootstrap interval reaches 0 and the report says the data bound it
    from above only; on data with a clear floor (1.5) no such line appears."""
    import warnings

    import numpy as np
    import pandas as pd

    import scalefit

    line = "L0's 95% interval reaches 0: the data bound it from above only"
    gem = scalefit.datasets.load("gemstones")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the width and depth pairs' correlation warnings
        res = scalefit.fit(gem, "decomposed", bootstrap=20, cluster="run", seed=0, starts=32)
    assert res.ci["L0"][0] < 1e-3 * res.ci["L0"][1] and line in res.report()
    rng = np.random.default_rng(0)
    grid = [(w, d, t) for w in (256, 512, 1024) for d in (4, 8, 16) for t in (1e9, 4e9, 16e9)]
    width, depth, tokens = (np.array(c, float) for c in zip(*grid, strict=True))
    loss = 1.5 + 8 / width**0.26 + 2 / depth**0.14 + 1e5 / tokens**0.53
    loss = loss * np.exp(rng.normal(0, 0.003, len(loss)))
    table = pd.DataFrame({"width": width, "depth": depth, "tokens": tokens, "loss": loss})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = scalefit.fit(table, "decomposed", bootstrap=20, seed=0, starts=32)
    assert res.ci["L0"][0] > 0.1 and line not in res.report()


def test_the_plain_fit_report_says_the_floor_is_bounded_from_above_only(capsys):
    """`scalefit fit gemstones --law decomposed` (no bootstrap) says L0 is not identified."""
    from scalefit.cli import main

    assert main(["fit", "gemstones", "--law", "decomposed", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "floor      L0 = 0.0558 +- 1.96 x 0.127 reaches 0: the data bound it from above" in out
    assert "--bootstrap B on the command line" in out
