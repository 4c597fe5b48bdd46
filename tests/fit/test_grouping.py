"""One grouping check for every path that groups rows (issue 39, item 6).

A grouping column with an empty cell used to pass the least-squares bootstrap: pandas numbers
such a row -1, and ``counts[:, codes]`` then resampled it with the LAST cluster, exit 0. The
bootstrap, the command line and the Bayesian fitter now refuse it through one function.
"""

from __future__ import annotations

import numpy as np
import pytest

import scalefit
from scalefit.cli import main
from scalefit.core.errors import ScaleFitError
from scalefit.fit.bayes import fit_bayes
from scalefit.fit.data import group_codes
from scalefit.fit.synthetic import simulate_table


@pytest.fixture(scope="module")
def table():
    tab = simulate_table("chinchilla", seed=0).iloc[:60].reset_index(drop=True)
    return tab.assign(model=np.where(np.arange(60) == 7, None, (np.arange(60) // 6).astype(str)))


def test_the_bootstrap_refuses_an_empty_cluster_cell(table):
    res = scalefit.fit(table, "chinchilla", starts=4)
    with pytest.raises(ScaleFitError, match="cluster column 'model' is empty in row 7"):
        scalefit.bootstrap(res, table, 5, cluster="model", seed=0)
    with pytest.raises(ScaleFitError, match="cluster column 'model' is empty in row 7"):
        scalefit.fit(table, "chinchilla", starts=4, bootstrap=5, cluster="model")


def test_the_command_line_refuses_it_in_one_line(table, tmp_path, capsys):
    path = tmp_path / "t.csv"
    table.to_csv(path, index=False)
    args = ["fit", str(path), "--law", "chinchilla", "--starts", "4", "--bootstrap", "5"]
    assert main([*args, "--cluster", "model", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "cluster column 'model' is empty in row 7" in err and len(err.splitlines()) == 1


def test_bayes_refuses_it_through_the_same_check(table):
    with pytest.raises(ScaleFitError, match="group column 'model' is empty in row 7"):
        fit_bayes(table, "chinchilla", group="model", chains=1, draws=10, warmup=10)


@pytest.mark.parametrize(
    ("column", "message"),
    [
        ("nope", "The 'cluster' parameter of bootstrap must name a column of the table"),
        ("one", "must have at least 2 groups; it has 1 group"),
        ("blank", "cluster column 'blank' is empty in row 0"),
    ],
)
def test_each_refusal_names_the_column(table, column, message):
    tab = table.assign(one="a", blank=" ")
    with pytest.raises(ScaleFitError, match=message):
        group_codes(tab, column, owner="bootstrap", name="cluster")


def test_codes_follow_first_appearance_or_sorted_labels():
    import pandas as pd

    tab = pd.DataFrame({"g": ["b", "a", "b", "c"]})
    assert group_codes(tab, "g", owner="f", name="g")[0].tolist() == [0, 1, 0, 2]
    codes, labels = group_codes(tab, "g", owner="f", name="g", sort=True)
    assert codes.tolist() == [1, 0, 1, 2] and labels == ["a", "b", "c"]
