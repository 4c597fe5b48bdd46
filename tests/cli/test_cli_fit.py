import json
import subprocess
import sys

import pytest
from conftest import assert_png

from scalefit.cli import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "scalefit", *args], capture_output=True, text=True)


def test_fit_cli_writes_json_and_plots(tmp_path):
    out = tmp_path / "r.json"
    code = main(
        [
            "fit",
            "depth_delusion",
            "--law",
            "chinchilla",
            "--bootstrap",
            "20",
            "--starts",
            "32",
            "--seed",
            "1",
            "--out",
            str(out),
            "--plots",
            str(tmp_path / "plots"),
            "--no-progress",
        ]
    )
    assert code == 0
    data = json.loads(out.read_text())
    for key in ("law", "params", "objective", "n_rows", "converged", "metrics", "ci", "n_boot"):
        assert key in data
    assert set(data["metrics"]) >= {"r2", "rmse", "mean_rel_err"}
    assert data["n_boot"] == 20 and data["n_rows"] == 30
    assert all(len(v) == 2 for v in data["ci"].values())
    assert_png(tmp_path / "plots" / "fit_chinchilla.png")


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["fit", "depth_delusion", "--law", "nope"], "Unknown law"),
        (["fit", "no_such_table.csv", "--law", "chinchilla"], "no such file"),
        (["fit", "depth_delusion", "--law", "chinchilla", "--drop-highest", "99"], "drop_highest"),
        (["fit", "depth_delusion", "--law", "chinchilla", "--delta", "-1"], "delta"),
        (["fit", "depth_delusion", "--law", "depth_power", "--holdout", "0.95"], "holdout"),
        (
            ["fit", "depth_delusion", "--law", "critical_depth", "--law-option", "form=cubic"],
            "bad options",
        ),
    ],
)
def test_fit_cli_bad_input_exit_2(args, match):
    proc = run(*args)
    assert proc.returncode == 2, proc.stderr
    assert match in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr


def test_fit_cli_not_converged_exit_3(monkeypatch, capsys):
    # Allow the solver only two iterations: the fit cannot pass the convergence test.
    from scalefit.fit import lsq

    monkeypatch.setattr(lsq, "MAX_ITER", 2)
    code = main(["fit", "depth_delusion", "--law", "chinchilla", "--starts", "4", "--no-progress"])
    assert code == 3
    assert "converged  NO" in capsys.readouterr().out


def test_laws_command_lists_formulas(capsys):
    assert main(["laws"]) == 0
    text = capsys.readouterr().out
    assert "decomposed: L = c_width/width^a_width" in text


def test_where_filters_rows_before_the_outlier_rule(tmp_path, capsys):
    csv = tmp_path / "t.csv"
    rows = ["depth,loss,variant"]
    for d, loss in [(2, 3.0), (4, 2.5), (8, 2.3), (16, 2.2), (32, 2.15), (64, 2.12)]:
        rows += [f"{d},{loss},a", f"{d},{loss + 1},b"]
    csv.write_text("\n".join(rows) + "\n")
    out = tmp_path / "r.json"
    code = main(
        [
            "fit",
            str(csv),
            "--law",
            "depth_power",
            "--where",
            "variant == 'a'",
            "--drop-highest",
            "1",
            "--starts",
            "16",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    data = json.loads(out.read_text())
    assert data["n_rows"] == 5
    assert data["conventions"]["outlier_rule"] != "none"
    proc = run("fit", str(csv), "--law", "depth_power", "--where", "variant ==")
    assert proc.returncode == 2 and "not a valid expression" in proc.stderr
