"""``scalefit tasks``: a synthetic ladder end to end, and bad tables as one line with exit 2."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scalefit.cli import main
from scalefit.tasks import sigmoid


@pytest.fixture
def ladder(tmp_path):
    """Four rungs x three budgets, 8 checkpoints a run, bpb from a Chinchilla law."""
    rng = np.random.default_rng(0)
    rows = []
    for n in (1e8, 2e8, 4e8, 8e8, 1.6e9):
        for k in (1, 2, 5):
            tokens = 20 * k * n * np.linspace(0.2, 1, 8)
            bpb = 0.5 + 300 / n**0.3 + 300 / tokens**0.3
            acc = sigmoid(bpb, 0.6, -6.0, 1.6, 0.25) + 0.003 * rng.standard_normal(8)
            rows.append(
                pd.DataFrame(
                    {
                        "run": f"{n:.0e}-{k}x",
                        "params": n,
                        "tokens": tokens,
                        "loss": bpb,
                        "bpb_toy": bpb,
                        "acc_toy": acc,
                    }
                )
            )
    path = tmp_path / "ladder.csv"
    pd.concat(rows).to_csv(path, index=False)
    return path


def _run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_predicts_the_held_out_rung_and_writes_the_table(ladder, tmp_path, capsys):
    out = tmp_path / "pred.csv"
    argv = [str(ladder), "--target", "params > 1e9", "--n-boot", "5", "--out", str(out)]
    code, printed, err = _run(["tasks", *argv], capsys)
    assert code == 0, err
    res = pd.read_csv(out)
    assert len(res) == 3 and set(res["task"]) == {"toy"}
    assert (res["abs_err"] < 0.03).all() and "acc_single" in printed


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--task", "nope"], "lacks column(s) ['bpb_nope', 'acc_nope']"),
        (["--where", "params == 1e8"], "at least 2 rungs"),
        (["--target", "params > 1e12"], "--target 'params > 1e12' keeps no rows"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(ladder, capsys, extra, match):
    argv = ["tasks", str(ladder), "--target", "params > 1e9", *extra]
    code, _, err = _run(argv, capsys)
    assert code == 2 and match in err and err.count("\n") == 1


def test_accuracies_outside_0_1_are_refused(ladder, tmp_path, capsys):
    table = pd.read_csv(ladder)
    table["acc_toy"] *= 100
    bad = tmp_path / "percent.csv"
    table.to_csv(bad, index=False)
    code, _, err = _run(["tasks", str(bad), "--target", "params > 1e9"], capsys)
    assert code == 2 and "'acc_toy' column must hold accuracies in [0, 1]" in err
