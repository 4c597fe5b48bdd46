"""`ci_prob` is the one name of an interval probability; the old `prob` still works, with a
DeprecationWarning naming `ci_prob`, for one minor version (and `--prob` on the command line)."""

from __future__ import annotations

import pytest

from scalefit.allocate import allocate
from scalefit.cli import main
from scalefit.errors import ScaleFitError

DECOMPOSED = dict(
    c_width=50.0, a_width=0.5, c_depth=2.0, a_depth=0.7, c_tokens=400.0, a_tokens=0.3, L0=1.5
)


def test_old_prob_keyword_warns_and_gives_the_same_answer():
    new = allocate("decomposed", [1e20], params=DECOMPOSED, ci_prob=0.8)
    with pytest.warns(
        DeprecationWarning, match="'prob' parameter of allocate is deprecated; use 'ci_prob'"
    ):
        old = allocate("decomposed", [1e20], params=DECOMPOSED, prob=0.8)
    assert old.ci_prob == new.ci_prob == 0.8
    with pytest.warns(DeprecationWarning, match="Allocation.prob is deprecated; use .ci_prob"):
        assert old.prob == 0.8
    assert old.summary.equals(new.summary)


def test_both_names_at_once_are_refused():
    with pytest.raises(ScaleFitError, match="allocate got 'ci_prob' and its old name 'prob'"):
        allocate("decomposed", [1e20], params=DECOMPOSED, ci_prob=0.8, prob=0.9)


def test_bad_ci_prob_names_the_new_name():
    with pytest.raises(ScaleFitError, match="The 'ci_prob' parameter of allocate must be a float"):
        allocate("decomposed", [1e20], params=DECOMPOSED, ci_prob=1.5)


def test_cli_old_prob_flag_is_one_deprecation_line(capsys):
    params = ",".join(f"{k}={v}" for k, v in DECOMPOSED.items())
    argv = ["allocate", "--law", "decomposed", "--params", params, "--budget", "1e20"]
    assert main([*argv, "--ci-prob", "0.8"]) == 0
    new = capsys.readouterr()
    assert new.err == ""
    assert main([*argv, "--prob", "0.8"]) == 0
    old = capsys.readouterr()
    assert old.err == "scalefit: warning: --prob is deprecated; use --ci-prob\n"
    assert old.out == new.out
