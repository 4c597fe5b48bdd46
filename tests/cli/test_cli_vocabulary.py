"""One command-line vocabulary: --plots DIR and a repeated --budget everywhere, old spellings
with one deprecation line, `wrote` for every output, library messages that name both spellings,
options that do not apply refused, a columns hint, and one exit-code rule for fit, bayes and
compare."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from conftest import assert_png

from scalefit.cli import main

DECOMPOSED = "c_width=50,a_width=0.5,c_depth=2,a_depth=0.7,c_tokens=400,a_tokens=0.3,L0=1.5"
CHINCHILLA = "E=1.69,A=406.4,B=410.7,alpha=0.3392,beta=0.2849"
BUDGETS = [1e18, 3e18, 1e19, 3e19]


def _run(argv, capsys):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # a usage error
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A synthetic IsoFLOP sweep (4 budgets x 6 sizes) as a CSV, and a chinchilla fit of it."""
    from scalefit import fit
    from scalefit.isoflop import synthetic_isoflops

    folder = tmp_path_factory.mktemp("vocab")
    table = synthetic_isoflops(budgets=BUDGETS, n_per_budget=6, sigma=0.005)
    csv = folder / "runs.csv"
    table.drop(columns="budget").to_csv(csv, index=False)
    res = fit(table.drop(columns="budget"), "chinchilla", bootstrap=20, starts=16, progress=False)
    res.save(folder / "pilot.json")
    return csv, folder / "pilot.json"


# ---------------------------------------------------------------------------- isoflop


def test_isoflop_repeated_budget_and_plots_folder(runs, tmp_path, capsys):
    csv, _ = runs
    argv = ["isoflop", csv, "--out", tmp_path / "a.csv", "--plots", tmp_path / "figs"]
    for b in BUDGETS:
        argv += ["--budget", f"{b:g}"]
    code, out, err = _run(argv, capsys)
    assert code == 0 and err == ""
    assert f"wrote {tmp_path / 'a.csv'}" in out
    assert f"wrote {tmp_path / 'figs' / 'isoflop.png'}" in out
    assert_png(tmp_path / "figs" / "isoflop.png")
    # budgets as the command line writes them, not 1.000000e+18
    first = out.splitlines()[1].split()
    assert first[0] == "1e18" and "e+18" not in out.splitlines()[1]


@pytest.mark.parametrize(
    ("old", "hint"),
    [
        (["--budgets", "1e19,1e20"], "--budget"),
        (["--plot", "fig.png"], "--plots"),
        (["--prob", "0.9"], "--ci-prob"),
    ],
)
def test_isoflop_old_spellings_are_gone(runs, old, hint, capsys):
    """0.1.0 was never released: its old spellings are usage errors with a did-you-mean."""
    csv, _ = runs
    code, _, err = _run(["isoflop", csv, *old], capsys)
    assert code == 2 and err.count("\n") == 1
    assert f"unrecognized arguments: {old[0]}" in err and f"Did you mean '{hint}'?" in err


def test_messages_name_both_spellings(tmp_path, capsys):
    """A library message reads the same from Python and the shell: it names both spellings."""
    few = tmp_path / "few.csv"
    few.write_text("params,tokens,loss\n1e8,2e9,3.1\n2e8,4e9,2.9\n4e8,8e10,2.8\n")
    code, _, err = _run(["isoflop", few], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "pass budgets=[...] (--budget FLOPS on the command line) or add a 'budget' column" in err


def test_fit_report_names_the_command_line_option(runs, capsys):
    csv, _ = runs
    code, out, _ = _run(
        ["fit", csv, "--law", "chinchilla", "--loss", "lad", "--starts", "8"], capsys
    )
    assert code in (0, 3)
    assert "bootstrap=B (--bootstrap B on the command line)" in out


# ---------------------------------------------------------------------------- design


def test_design_plots_folder_wrote_lines_and_no_nan_shape(runs, tmp_path, capsys):
    _, pilot = runs
    argv = ["design", pilot, "--target", "1e24", "--compute", "1e21", "--k", "4"]
    argv += ["--out", tmp_path / "runs.csv", "--plots", tmp_path / "figs"]
    code, out, err = _run(argv, capsys)
    assert code == 0 and err == ""
    assert "NaN" not in out and "nan" not in out
    assert "the law chinchilla has no depth or width" in out
    assert f"wrote {tmp_path / 'runs.csv'}" in out
    assert f"wrote {tmp_path / 'figs' / 'design.png'}" in out
    table = pd.read_csv(tmp_path / "runs.csv")  # one schema for every law: depth left empty
    assert {"depth", "width", "params", "tokens"} <= set(table.columns)


def test_design_old_plot_spelling_is_gone(runs, tmp_path, capsys):
    _, pilot = runs
    argv = ["design", pilot, "--target", "1e24", "--compute", "1e21", "--k", "2"]
    code, _, err = _run([*argv, "--plot", tmp_path / "d.png"], capsys)
    assert (
        code == 2 and "unrecognized arguments: --plot" in err and not (tmp_path / "d.png").exists()
    )


def test_design_refuses_a_shape_quantity_for_a_law_without_shape(runs, capsys):
    _, pilot = runs
    argv = ["design", pilot, "--target", "1e24", "--compute", "1e21", "--quantity", "log_depth"]
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--quantity log_depth: the law 'chinchilla' has no depth or width" in err


# ---------------------------------------------------------------------------- allocate


@pytest.mark.parametrize(
    "option",
    [["--head-dim", "128"], ["--min-depth", "2"], ["--vocab", "256"], ["--block", "swiglu"]],
)
def test_allocate_refuses_shape_options_for_a_law_without_shape(option, capsys):
    argv = ["allocate", "--law", "chinchilla", "--params", CHINCHILLA, "--budget", "1e21"]
    code, out, err = _run([*argv, *option], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert option[0] in err and "has no depth or width" in err


def test_allocate_accepts_shape_options_for_a_shape_law(capsys):
    argv = ["allocate", "--law", "decomposed", "--params", DECOMPOSED, "--budget", "1e20"]
    code, out, _ = _run([*argv, "--head-dim", "128", "--min-depth", "2"], capsys)
    assert code == 0 and "a multiple of 128, depth ≥ 2" in out


def test_allocate_numbers_read_as_written(tmp_path, capsys):
    argv = ["allocate", "--law", "decomposed", "--params", DECOMPOSED, "--budget", "1e21"]
    argv += ["--eps", "1e-9", "--out", tmp_path / "a.csv", "--shapes-out", tmp_path / "s.csv"]
    code, out, _ = _run(argv, capsys)
    assert code == 0
    assert "== budget 1e21 FLOP" in out and "1e+21" not in out
    line = next(x for x in out.splitlines() if "near-optimal" in x)
    assert re.search(r"near-optimal 1 shape within", line), line
    assert re.search(r"width \d+$", line) and "–" not in line, line
    assert "runner-ups   0 shapes" in out
    for name in ("a.csv", "s.csv"):
        text = (tmp_path / name).read_text().splitlines()
        header, first = text[0].split(","), text[1].split(",")
        row = dict(zip(header, first, strict=True))
        assert row["budget"] == "1e21"
        assert re.fullmatch(r"\d+", row["width"]) and re.fullmatch(r"\d+", row["depth"])


# ---------------------------------------------------------------------------- columns


def test_missing_column_suggests_the_closest_mapping(tmp_path, capsys):
    path = tmp_path / "mine.csv"
    path.write_text("num_params,tokens,loss\n1e8,2e9,3.1\n2e8,4e9,2.9\n4e8,8e9,2.8\n")
    code, out, err = _run(["fit", path, "--law", "chinchilla"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert (
        "Did you mean columns={'num_params': 'params'} "
        "(--columns num_params=params on the command line)?" in err
    )


def test_no_hint_when_no_column_is_close(tmp_path, capsys):
    path = tmp_path / "mine.csv"
    path.write_text("zzz,tokens,loss\n1e8,2e9,3.1\n2e8,4e9,2.9\n4e8,8e9,2.8\n")
    code, _, err = _run(["fit", path, "--law", "chinchilla"], capsys)
    assert code == 2 and "needs column(s) params" in err and "--columns" not in err


# ---------------------------------------------------------------------------- exit codes


def test_exit_codes_are_documented_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "exit codes: 0" in out and "3 " in out
    for cmd in ("fit", "bayes", "compare"):
        assert cmd in out.split("exit codes:")[1]


@pytest.mark.slow  # two NUTS compilations: about 40 s of CPU
def test_compare_exits_3_when_a_law_did_not_converge(tmp_path, capsys):
    """The rule of fit and bayes: output written, exit 3 when a fit behind it did not converge."""
    argv = ["compare", "depth_delusion", "--laws", "critical_depth,decomposed", "--chains", "2"]
    argv += ["--draws", "10", "--warmup", "10", "--no-progress", "--out", tmp_path / "c.csv"]
    code, out, _ = _run(argv, capsys)
    frame = pd.read_csv(tmp_path / "c.csv")
    assert not frame["converged"].all()  # ten draws per chain: R-hat far from 1
    assert code == 3 and "did not converge" in out


def test_train_report_takes_plots():
    from scalefit.cli import build_parser

    args = build_parser().parse_args(["train", "report", "grid", "--plots", "figs"])
    assert args.plots == "figs" and not hasattr(args, "img")


def test_demo_tables_write_budgets_and_widths_as_numbers_read(tmp_path, capsys):
    out = tmp_path / "demo"
    code = main(["demo", "--bundled", "--bootstrap", "4", "--out", str(out)])
    assert code == 0
    capsys.readouterr()
    for name in ("recommendation.csv", "allocation.csv"):
        lines = (out / name).read_text().splitlines()
        row = dict(zip(lines[0].split(","), lines[1].split(","), strict=True))
        assert row["budget"] == "1e19", name
        assert re.fullmatch(r"\d*", row["width"]) and re.fullmatch(r"\d*", row["depth"]), row


def test_ambiguous_column_message_names_the_option(tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text("N,D,loss\n1e8,2e9,3.1\n2e8,4e9,2.9\n4e8,8e9,2.8\n")
    code, _, err = _run(["fit", path, "--law", "chinchilla"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "e.g. columns={'D': 'tokens'} (--columns D=tokens on the command line)" in err
