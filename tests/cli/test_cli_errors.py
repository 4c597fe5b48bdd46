"""Thirty-odd mistakes a new user makes on the command line: each is ONE line on stderr, exit 2.

Every case runs the real CLI in-process (``scalefit.cli.main``); argparse's own errors raise
``SystemExit(2)``, the commands' errors return 2. Either way: one line, no traceback, no numpy
reprs, and a "did you mean" where the mistake is a misspelling.
"""

from __future__ import annotations

import importlib.util

import pytest

from scalefit.cli import main

TABLE = "depth_delusion"  # bundled: no data folder or network needed


def _run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def files(tmp_path):
    csv = tmp_path / "runs.csv"
    csv.write_text("params,tokens,loss\n1e6,2e7,3.1\n2e6,4e7,2.9\n4e6,8e7,2.7\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("params,tokens,loss\n1e6,2e7,-3.1\n2e6,4e7,2.9\n4e6,8e7,2.7\n")
    toml = tmp_path / "broken.toml"
    toml.write_text("this is = = not toml\n")
    notjson = tmp_path / "result.json"
    notjson.write_text("{not json")
    ndl = tmp_path / "ndl.csv"
    ndl.write_text("N,D,L\n1e6,2e7,3.1\n2e6,4e7,2.9\n4e6,8e7,2.7\n")
    (tmp_path / "tb" / "run1").mkdir(parents=True)  # a TensorBoard log folder
    (tmp_path / "tb" / "run1" / "events.out.tfevents.1.host").write_bytes(b"\x00\x01")
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "history.csv").write_text("step,loss\n1,3.0\n")
    return {
        "csv": str(csv),
        "bad": str(bad),
        "toml": str(toml),
        "json": str(notjson),
        "missing": str(tmp_path / "nope.csv"),
        "dir": str(tmp_path),
        "ndl": str(ndl),
        "tb": str(tmp_path / "tb"),
        "trainer": str(tmp_path / "trainer"),
    }


# (argv with {placeholders}, a word the message must contain)
MISTAKES = [
    # misspelt commands and options
    (["fitt", TABLE], "Did you mean 'fit'?"),
    (["alocate", "--budget", "1e21"], "Did you mean 'allocate'?"),
    (["dmeo"], "Did you mean 'demo'?"),
    (["fit", TABLE, "--lw", "chinchilla"], "Did you mean '--law'?"),
    (["fit", TABLE, "--law", "decomposed", "--bootsrap", "5"], "Did you mean '--bootstrap'?"),
    (["allocate", "--law", "chinchilla", "--budgt", "1e21"], "Did you mean '--budget'?"),
    (["demo", "--bugdet", "1e20"], "Did you mean '--budget'?"),
    (["bayes", TABLE, "--law", "decomposed", "--chians", "2"], "Did you mean '--chains'?"),
    (["toy", "rnu", "{toml}"], "Did you mean 'run'?"),
    (["train", "grdi", "{toml}"], "Did you mean 'grid'?"),
    (["fit", TABLE, "--law", "decomposed", "--loss", "hubber"], "Did you mean 'huber'?"),
    (["fit", TABLE, "--law", "decomposed", "--method", "lmfti"], "Did you mean 'lmfit'?"),
    (["allocate", "--law", "chinchilla", "--budget", "1e21", "--embeddings", "tide"], "'tied'"),
    # misspelt laws
    (["fit", TABLE, "--law", "decomposd"], "Did you mean 'decomposed'?"),
    (["fit", TABLE, "--law", "chinchila"], "Did you mean 'chinchilla'?"),
    (["allocate", "--law", "chinchilal", "--params", "E=1", "--budget", "1e21"], "'chinchilla'?"),
    (["demo", "--bootstrp", "5"], "Did you mean '--bootstrap'?"),
    (["demo", "--bootstrap", "1"], "'1'"),
    # bad numbers
    (["allocate", "--law", "chinchilla", "--budget", "-1e21"], "-1e21"),
    (["allocate", "--law", "chinchilla", "--budget", "abc"], "'abc'"),
    (["allocate", "--law", "chinchilla", "--budget", "0"], "'0'"),
    (["allocate", "--law", "chinchilla", "--budget", "inf"], "'inf'"),
    (["allocate", "--law", "chinchilla", "--budget", "1e21", "--head-dim", "x"], "'x'"),
    (["fit", TABLE, "--law", "decomposed", "--bootstrap", "-3"], "-3"),
    (["fit", TABLE, "--law", "decomposed", "--starts", "1.5"], "'1.5'"),
    (["fit", TABLE, "--law", "decomposed", "--drop-highest", "ten"], "'ten'"),
    (["demo", "--budget", "-1e20"], "-1e20"),
    (["demo", "--budget", "lots"], "lots"),
    (["demo", "--bootstrap", "many"], "'many'"),
    # missing or wrong files and arguments
    (["fit", "{missing}", "--law", "chinchilla"], "nope.csv"),
    (["fit", "{bad}", "--law", "chinchilla"], "loss"),
    (["allocate", "{missing}", "--budget", "1e21"], "nope.csv"),
    (["allocate", "{json}", "--budget", "1e21"], "result.json"),
    (["allocate", "--budget", "1e21"], "RESULT.json"),
    (["fit", TABLE], "--law"),
    (["toy", "run", "{missing}"], "nope.csv"),
    (["train", "run", "{toml}"], "broken.toml"),
    (["fit", "chinchila", "--law", "chinchilla"], "chinchilla"),
    # another command's job: point to it
    (["fit", TABLE, "--law", "chinchilla", "--budget", "1e21"], "scalefit allocate FIT.json"),
    (["fit", TABLE, "--budget", "1e21"], "'scalefit allocate FIT.json --budget FLOPS'"),
    (["fit", "{tb}", "--law", "chinchilla"], "TensorBoard event files, that is loss curves"),
    (["fit", "{tb}/run1/events.out.tfevents.1.host", "--law", "chinchilla"], "curves fit"),
    (["fit", "{trainer}", "--law", "chinchilla"], "(scalefit curves fit"),
    # every column problem in the first error: an ambiguous D and no loss column
    (["fit", "{ndl}", "--law", "chinchilla"], "--columns D=tokens,L=loss on the command line"),
]


@pytest.mark.parametrize(("argv", "expect"), MISTAKES, ids=[" ".join(a) for a, _ in MISTAKES])
def test_mistake_is_one_line_and_exit_2(argv, expect, files, capsys):
    argv = [a.format(**files) for a in argv]
    code, out, err = _run(argv, capsys)
    assert code == 2, (code, err)
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "error:" in err
    assert "Traceback" not in err + out
    assert "np.float64" not in err and "unknown []" not in err
    if argv[:2] == ["train", "run"] and importlib.util.find_spec("torch") is None:
        expect = "pip install 'scalefit[torch]'"  # an install without the torch extra
    assert expect in err, err


def test_there_are_at_least_thirty_mistakes():
    assert len(MISTAKES) >= 30


@pytest.mark.parametrize(
    "argv, usage",
    [
        ([], "usage: scalefit [-h]"),
        (["train"], "usage: scalefit train [-h] SUBCOMMAND"),
        (["data"], "usage: scalefit data [-h] SUBCOMMAND"),
        (["curves"], "usage: scalefit curves [-h] COMMAND"),
    ],
)
def test_a_group_without_its_sub_command_prints_its_own_help(argv, usage, capsys):
    """No command, or a group without its sub-command: that parser's help on stdout, exit 2."""
    code, out, err = _run(argv, capsys)
    assert code == 2 and out.startswith(usage) and not err
