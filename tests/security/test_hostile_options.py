"""Hostile numeric options: sizes that would exhaust memory and seeds no generator takes.

Each is refused in one line before any work (exit 2, the option named, nothing written)."""

from __future__ import annotations

import pytest
from hostile import assert_refused, cli

TABLE = "lm_grid_shakespeare"
FIT = ["fit", TABLE, "--law", "decomposed", "--where", "variant == 'pre_ln'", "--no-progress"]

CASES = {
    "starts beyond memory": (FIT + ["--starts", "99999999999"], "starts"),
    "bootstrap beyond memory": (FIT + ["--bootstrap", "99999999999"], "bootstrap"),
    "negative seed (fit)": (FIT + ["--seed", "-1"], "--seed"),
    "seed over 2**32 (fit)": (FIT + ["--seed", str(2**32)], "--seed"),
    "50-digit seed (fit)": (FIT + ["--seed", "1" + "0" * 50], "--seed"),
    "negative seed (isoflop)": (["isoflop", TABLE, "--seed", "-5"], "--seed"),
    "negative seed (bayes)": (["bayes", TABLE, "--law", "decomposed", "--seed", "-1"], "--seed"),
    "negative seed (toy fit)": (["toy", "fit", "x.csv", "--seed", "-1"], "--seed"),
    "float seed (fit)": (FIT + ["--seed", "1.5"], "--seed"),
}


@pytest.mark.parametrize("case", CASES)
def test_hostile_option_is_one_line(tmp_path, capsys, case):
    args, name = CASES[case]
    out = tmp_path / "r.json"
    result = cli(capsys, [*args, "--out", out] if args[0] == "fit" else args)
    if result[0] == 2 and not result[2].startswith("scalefit: error"):
        # argparse usage errors print the usage line first; the error line names the option
        code, stdout, err = result
        lines = [ln for ln in err.splitlines() if "error:" in ln]
        assert len(lines) == 1 and name in lines[0], err
        assert not out.exists()
        return
    assert_refused(result, name, outputs=[out], case=case)


def test_largest_seed_is_accepted(capsys):
    code, _, err = cli(capsys, [*FIT, "--starts", "4", "--seed", str(2**32 - 1)])
    assert code in (0, 3), err


@pytest.mark.parametrize(
    ("blocked", "args"),
    [
        ("torch", ["train", "run", "configs/train_tiny.toml", "--out", "{tmp}/run"]),
        ("torch", ["toy", "run", "toy/cpu.toml", "--out", "{tmp}/toy"]),
        ("numpyro", ["bayes", "lm_grid_shakespeare", "--law", "decomposed"]),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(tmp_path, blocked, args):
    """A user who installed without an extra gets the pip command, not a traceback."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = (
        f"import sys; sys.modules[{blocked!r}] = None; from scalefit.cli import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=root
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("scalefit: warning:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "pip install 'scalefit[" in lines[0] and blocked in lines[0]
