"""`ci_prob` is the one name of an interval probability (`--prob` on the command line still works,
with a warning naming `--ci-prob`)."""

from __future__ import annotations

import pytest

from scalefit.allocate import allocate
from scalefit.cli import main
from scalefit.core.errors import ScaleFitError

DECOMPOSED = dict(
    c_width=50.0, a_width=0.5, c_depth=2.0, a_depth=0.7, c_tokens=400.0, a_tokens=0.3, L0=1.5
)


def test_the_old_prob_keyword_is_gone():
    with pytest.raises(TypeError, match="unexpected keyword argument 'prob'"):
        allocate("decomposed", [1e20], params=DECOMPOSED, prob=0.8)
    assert not hasattr(allocate("decomposed", [1e20], params=DECOMPOSED), "prob")


def test_bad_ci_prob_names_the_new_name():
    with pytest.raises(ScaleFitError, match="The 'ci_prob' parameter of allocate must be a float"):
        allocate("decomposed", [1e20], params=DECOMPOSED, ci_prob=1.5)


def test_cli_old_prob_flag_is_refused_with_the_new_name(capsys):
    params = ",".join(f"{k}={v}" for k, v in DECOMPOSED.items())
    argv = ["allocate", "--law", "decomposed", "--params", params, "--budget", "1e20"]
    assert main([*argv, "--ci-prob", "0.8"]) == 0
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--prob", "0.8"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--ci-prob" in err
