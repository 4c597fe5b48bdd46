"""The held-out protocol across sizes (issue 46): small models' curves -> larger models' finals."""

import numpy as np
import pandas as pd
import pytest

from scalefit.cli import main
from scalefit.core.errors import ScaleFitError
from scalefit.curves import synthetic_curves
from scalefit.curves.holdout import BEST_RATE, EVERY_RATE, holdout_summary, run_finals, size_holdout

TRUTH = {"L0": 1.8, "A": 1.0, "alpha": 0.5, "C": 0.3, "B": 100.0, "beta": 0.3}
SIZES = (5e5, 1e6, 2e6, 5e6, 1e7)


def _curves(rates=(3e-3,), seed=0, every=50) -> pd.DataFrame:
    """WSD runs of five sizes x two lengths x ``rates`` from lr_annealing_params, with tokens."""
    scheds = [f"wsd:lr={lr},steps={n},warmup=50,decay=0.2" for lr in rates for n in (1000, 2000)]
    params = [p for p in SIZES for _ in scheds]
    curves = synthetic_curves(
        TRUTH, scheds * len(SIZES), law="lr_annealing_params", params=params, every=every,
        noise=0.003, seed=seed,
    )  # fmt: skip
    return curves.assign(tokens=curves["step"] * 32768.0)


@pytest.mark.slow
def test_curves_from_the_law_predict_the_held_out_finals_and_cover_them():
    curves = _curves(every=200)
    rows = size_holdout(curves, 5e6, laws=["lr_annealing_params"], bootstrap=8, starts=4)
    summary = holdout_summary(rows)
    assert list(summary.index) == ["curves: lr_annealing_params", EVERY_RATE, BEST_RATE]
    assert (summary["runs"] == 4).all()  # 5e6 and 1e7 params, two lengths each
    curves = summary.loc["curves: lr_annealing_params"]
    assert curves["mean_abs_log_err"] < 0.01  # the truth's law, 0.3 % noise per checkpoint
    assert curves["intervals"] == 4
    both = rows[rows["method"] == "curves: lr_annealing_params"]
    np.testing.assert_allclose(both["log_err"], np.log(both["predicted"] / both["loss"]))
    assert rows["rate_fitted"].all()


def test_a_held_out_rate_no_training_run_had_is_marked():
    curves = _curves(rates=(3e-3, 1e-3))
    curves = curves[~((curves["params"] < 1e7) & curves["schedule"].str.contains("lr=0.001"))]
    rows = size_holdout(curves, 1e7, laws=[], bootstrap=4, starts=4)
    low = rows["lr"] == 1e-3
    assert low.any() and not rows.loc[low, "rate_fitted"].any()
    assert rows.loc[~low, "rate_fitted"].all()


def test_best_rate_per_size_keeps_the_lowest_final_per_size_and_length():
    rows = size_holdout(_curves(rates=(3e-3, 1e-3)), 5e6, laws=[], bootstrap=4, starts=4)
    assert set(rows["method"]) == {EVERY_RATE, BEST_RATE}
    assert (rows.groupby("method").size() == 8).all()


def test_run_finals_leaves_out_a_run_that_stops_before_its_schedule_ends():
    curves = _curves()
    first = curves["run"].iloc[0]
    cut = curves[(curves["run"] != first) | (curves["step"] <= 500)]
    finals = run_finals(cut)
    assert first not in set(finals["run"])
    assert len(finals) == curves["run"].nunique() - 1
    assert set(finals["lr"]) == {3e-3}


@pytest.mark.parametrize(
    ("held_out", "match"),
    [(1e5, "must leave two sizes or more"), (1e8, "must leave two sizes or more"),
     (-1.0, "'held_out' parameter of size_holdout")],
)  # fmt: skip
def test_a_held_out_size_that_leaves_nothing_to_fit_or_predict_is_one_line(held_out, match):
    with pytest.raises((ScaleFitError, ValueError), match=match):
        size_holdout(_curves(), held_out, laws=[], bootstrap=4)


def test_a_bootstrap_below_two_is_refused():
    with pytest.raises((ScaleFitError, ValueError), match="'bootstrap' parameter of size_holdout"):
        size_holdout(_curves(), 5e6, laws=[], bootstrap=1)


def test_curves_without_tokens_are_one_line():
    with pytest.raises(ScaleFitError, match="need column"):
        size_holdout(_curves().drop(columns="tokens"), 5e6, laws=[], bootstrap=4)


def test_the_command_prints_the_table_and_writes_the_rows(tmp_path, capsys):
    path = tmp_path / "curves.csv"
    _curves(every=200).to_csv(path, index=False)
    out = tmp_path / "rows.csv"
    argv = ["curves", "holdout", str(path), "--held-out-params", "5e6", "--law", "lr_annealing"]
    assert main([*argv, "--bootstrap", "4", "--starts", "4", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "held out: 4 runs of >= 5e+06 params" in text
    assert "curves: lr_annealing" in text and EVERY_RATE in text and BEST_RATE in text
    assert len(pd.read_csv(out)) == 12  # 3 methods x 4 held-out runs


@pytest.mark.parametrize(
    ("extra", "match"),
    [(["--held-out-params", "0"], "held-out-params"),
     (["--held-out-params", "5e6", "--law", "no_such_law"], "no_such_law")],
)  # fmt: skip
def test_bad_command_input_is_one_line_and_exit_2(tmp_path, capsys, extra, match):
    path = tmp_path / "curves.csv"
    _curves(every=500).to_csv(path, index=False)
    try:
        code = main(["curves", "holdout", str(path), *extra])
    except SystemExit as exc:  # argparse refuses a value out of range
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 or "usage" in err[0]
    assert match in err[-1]


def test_a_cluster_column_the_curves_lack_is_one_line():
    with pytest.raises(ScaleFitError, match="lack column.*model"):
        size_holdout(_curves(), 5e6, laws=[], bootstrap=4, cluster="model")
