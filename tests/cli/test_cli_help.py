"""Every option of every command has a help text that ends with its true default.

The parsers are walked through scalefit's own records (``Parser.commands``, ``Parser.options``,
``Parser.fallbacks``): the options a command module added, in the order it added them. A
default the help shows is generated from the option's declaration; an option whose default is
applied later by the command (``fallback``) is checked here against what the command does.
"""

from __future__ import annotations

import argparse
import re

import pytest

from scalefit.cli import Parser, build_parser, main

DEFAULT = re.compile(r"\(default: (.*)\)$", re.DOTALL)


def _walk(parser):
    yield parser
    for sub in parser.commands.values():
        yield from _walk(sub)


def _options():
    return [
        (parser, action)
        for parser in _walk(build_parser())
        for action in parser.options
        if action.help is not argparse.SUPPRESS and not isinstance(action, argparse._HelpAction)
    ]


def _name(parser, action) -> str:
    return f"{parser.prog} {action.option_strings[0] if action.option_strings else action.dest}"


def test_the_walk_sees_every_command():
    progs = {p.prog for p in _walk(build_parser())}
    for cmd in ("fit", "bayes", "compare", "allocate", "isoflop", "design", "demo", "laws"):
        assert f"scalefit {cmd}" in progs
    for cmd in ("toy run", "toy fit", "probe toy", "probe hf", "train run", "data prepare"):
        assert f"scalefit {cmd}" in progs
    assert len(_options()) > 150


def test_every_option_has_a_help_text():
    missing = [_name(p, a) for p, a in _options() if not (a.help or "").strip()]
    assert not missing, missing


def test_every_option_shows_its_default_once_or_says_required():
    wrong = []
    for parser, action in _options():
        text = action.help or ""
        if not action.option_strings:  # positionals: no default unless described
            continue
        if action.required:
            ok = text.endswith("(required)") and "default" not in text.lower()
        elif "(required: this or " in text:  # one of a required group
            ok = "default" not in text.lower()
        elif action.nargs == 0:  # flags
            ok = "default" not in text.lower()
        else:
            ok = text.lower().count("default") == 1 and DEFAULT.search(text) is not None
        if not ok:
            wrong.append(f"{_name(parser, action)}: {text!r}")
    assert not wrong, wrong


def test_a_shown_value_is_the_value_parsed():
    """Where the help shows a value, it is the value the parser hands the command."""
    wrong = []
    for parser, action in _options():
        match = DEFAULT.search(action.help or "")
        if not match or not action.option_strings or action.default is None:
            continue
        shown = match.group(1).replace("%%", "%")
        value = action.default
        if value == []:
            same = shown == "none"
        elif isinstance(value, float):
            same = float(shown) == value
        else:
            same = shown == str(value)
        if not same:
            wrong.append(f"{_name(parser, action)}: shows {shown!r}, parses {value!r}")
    assert not wrong, wrong


def test_a_not_set_option_is_never_filled_in_later():
    """`not set` only where the command treats the option as absent (no hidden default)."""
    for parser, action in _options():
        if (action.help or "").endswith("(default: not set)"):
            assert action.option_strings[0] not in parser.fallbacks, _name(parser, action)
            assert action.default is None


# ---- options whose default is applied by the command: the help's value is what it does ----

DECOMPOSED = "c_width=50,a_width=0.5,c_depth=2,a_depth=0.7,c_tokens=400,a_tokens=0.3,L0=1.5"


@pytest.fixture(scope="module")
def allocate_header(tmp_path_factory):
    """The report header of `allocate` for a law of depth and width, no shape option given."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["allocate", "--law", "decomposed", "--params", DECOMPOSED, "--budget", "1e20"])
    assert code == 0
    return buf.getvalue()


def _allocate_prob() -> float:
    from scalefit.allocate import allocate

    values = dict(kv.split("=") for kv in DECOMPOSED.split(","))
    alloc = allocate("decomposed", [1e20], params={k: float(v) for k, v in values.items()})
    return alloc.ci_prob


#: (command, option) -> what the command does when the option is not given.
BEHAVIOUR = {
    ("scalefit allocate", "--vocab"): lambda h: int(re.search(r"\(vocab (\d+)\)", h).group(1)),
    ("scalefit allocate", "--embeddings"): lambda h: re.search(r"\+ (\w+) embeddings", h).group(1),
    ("scalefit allocate", "--head-dim"): lambda h: int(
        re.search(r"a multiple of (\d+)", h).group(1)
    ),
    ("scalefit allocate", "--min-depth"): lambda h: int(re.search(r"depth ≥ (\d+)", h).group(1)),
    ("scalefit allocate", "--mlp-ratio"): lambda h: float(
        re.search(r"MLP ([\d.]+)·width", h).group(1)
    ),
    ("scalefit allocate", "--ci-prob"): lambda h: _allocate_prob(),
}


def test_every_fallback_is_checked_against_the_behaviour(allocate_header):
    declared = {
        (parser.prog, flag): value for parser in _walk(build_parser()) for flag, value in
        parser.fallbacks.items()
    }  # fmt: skip
    assert set(declared) == set(BEHAVIOUR), "add a behaviour probe for every fallback"
    for key, value in declared.items():
        assert BEHAVIOUR[key](allocate_header) == value, key


def test_allocate_help_reads_true(capsys):
    with pytest.raises(SystemExit):
        main(["allocate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--vocab VOCAB vocabulary size for the parameter accounting (default: 32000" in out
    assert "(default: 0.95, or the fit's own interval probability)" in out
    assert "--budget FLOPS training budget in FLOPs" in out and "several budgets (required)" in out
    assert "--head-dim HEAD_DIM width is a multiple of this (default: 64)" in out
    assert "not set) (default" not in out and "(required) (default" not in out


def test_fit_help_names_the_required_pair_and_gap_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(required: this or --formula)" in out and "(required: this or --law)" in out
    assert "(default: mse)" in out and "(default: percentile)" in out
    assert "(default: jax)" in out and "(bootstrap) (default: 0)" not in out
    assert re.search(r"--seed SEED .*?\(default: 0\)", out)


def test_bayes_help_has_no_doubled_default(capsys):
    with pytest.raises(SystemExit):
        main(["bayes", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(4) (default: 4)" not in out and "number of chains (default: 4)" in out
    assert (
        "(default: student_t)" in out
        and "--law LAW law name (see `scalefit laws`) (required)" in out
    )


def test_parser_writes_the_suffix_from_the_declaration():
    """The rules themselves, on a parser built here: each kind of option gets its own suffix."""
    p = Parser(prog="t")
    p.add_argument("--need", required=True, help="a")
    p.add_argument("--later", type=int, default=None, help="b", fallback=7, shown="or the law's")
    p.add_argument("--described", default=None, help="c", shown="runs/NAME")
    p.add_argument("--off", default=None, help="d")
    p.add_argument("--tol", type=float, default=1e21, help="e %% share")
    p.add_argument("--flag", action="store_true", help="f")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--x", help="g")
    group.add_argument("--y", help="h")
    helps = {a.option_strings[0]: a.help for a in p.options}
    assert helps["--need"] == "a (required)"
    assert helps["--later"] == "b (default: 7, or the law's)" and p.fallbacks == {"--later": 7}
    assert helps["--described"] == "c (default: runs/NAME)"
    assert helps["--off"] == "d (default: not set)"
    assert helps["--tol"] == "e %% share (default: 1e21)"
    assert helps["--flag"] == "f"
    assert (
        helps["--x"] == "g (required: this or --y)" and helps["--y"] == "h (required: this or --x)"
    )
    assert "e % share (default: 1e21)" in " ".join(p.format_help().split())
