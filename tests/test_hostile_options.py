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
