"""One option vocabulary (scalefit.core._validation.VOCABULARY) for the API and the command line.

Each option is declared once; the API's validation and the CLI's parsers are generated from it.
These tests walk the table: every option has the same range, choices and default in the API
and in every command's parser that offers it.
"""

from __future__ import annotations

import argparse
import inspect

import pytest

import scalefit
from scalefit.cli import build_parser
from scalefit.core._validation import MAX_SEED, VOCABULARY, Interval, Options
from scalefit.core.errors import ScaleFitError
from scalefit.fit import api as fit_api
from scalefit.fit import bayes as fit_bayes_module
from scalefit.fit.bootstrap import CI_METHODS
from scalefit.fit.synthetic import simulate_table

#: command -> (the public function its options belong to, its validated constraints).
COMMANDS = {
    "fit": (scalefit.fit, fit_api._CONSTRAINTS),
    "bayes": (fit_bayes_module.fit_bayes, fit_bayes_module._CONSTRAINTS),
}


@pytest.fixture(scope="module")
def fitted():
    table = simulate_table("chinchilla", seed=0).iloc[:40]
    return scalefit.fit(table, "chinchilla", starts=4), table


@pytest.mark.parametrize("seed", [-5, MAX_SEED + 1, 1.5, True])
def test_one_seed_rule_for_every_entry_point(fitted, seed):
    """bootstrap(seed=-5) was a raw numpy ValueError; fit refused it: one rule now."""
    res, table = fitted
    shape = r"The 'seed' parameter of {} must be an int in the range \[0, 4294967295\]"
    with pytest.raises(ScaleFitError, match=shape.format("bootstrap")):
        scalefit.bootstrap(res, table, 5, seed=seed)
    with pytest.raises(ScaleFitError, match=shape.format("fit")):
        scalefit.fit(table, "chinchilla", seed=seed)
    with pytest.raises(ScaleFitError, match=shape.format("fit_bayes")):
        fit_bayes_module.fit_bayes(table, "chinchilla", seed=seed)


def _actions(command: str) -> dict[str, argparse.Action]:
    parser = build_parser().commands[command]
    return {a.option_strings[0]: a for a in parser.options if a.option_strings}


def _samples(option) -> list:
    """Values on both sides of each bound of the option's range."""
    out = []
    for c in option.allowed:
        if isinstance(c, Interval):
            for bound in (c.left, c.right):
                if bound is not None:
                    out += [bound, bound - 1, bound + 1, bound - 0.5, bound + 0.5]
    return [int(v) if float(v).is_integer() else v for v in out]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_has_one_range_in_the_api_and_the_cli(command):
    func, api_constraints = COMMANDS[command]
    actions = _actions(command)
    signature = inspect.signature(func).parameters
    walked = 0
    for name, option in VOCABULARY.items():
        declared = fit_api.OPTIONS if command == "fit" else fit_bayes_module.OPTIONS
        if option.flag not in actions or name not in declared:  # e.g. law: a Law in Python
            continue
        walked += 1
        action = actions[option.flag]
        assert list(api_constraints[name]) == list(option.allowed), name
        assert action.default == signature[name].default, (command, name)
        choices = [c for c in option.allowed if isinstance(c, Options)]
        if choices:
            assert sorted(action.choices) == sorted(choices[0].values), (command, name)
        for value in _samples(option):
            in_api = any(
                c.accepts(value) for c in option.allowed if c is not None and hasattr(c, "accepts")
            )
            try:
                action.type(str(value))
                in_cli = True
            except argparse.ArgumentTypeError:
                in_cli = False
            assert in_api == in_cli, (command, name, value)
    assert walked >= 5, command


def _other_commands():
    """(command words, the public function, a call of it with one option given, the options)."""
    import pandas as pd

    from scalefit.allocate import allocate
    from scalefit.isoflop import approach2
    from scalefit.isoflop.synthetic import synthetic_isoflops
    from scalefit.workflows.toy import fit_depth_exponents

    runs = synthetic_isoflops(seed=0)
    decomposed = {"c_width": 50, "a_width": 0.5, "c_depth": 2, "a_depth": 0.7, "c_tokens": 400}
    decomposed |= {"a_tokens": 0.3, "L0": 1.5}
    return [
        (("isoflop",), approach2, lambda **kw: approach2(runs, **kw), ("ci_prob", "seed")),
        (
            ("allocate",),
            allocate,
            lambda **kw: allocate("decomposed", [1e20], params=decomposed, **kw),
            ("head_dim", "min_depth", "aspect_max", "ci_prob"),
        ),
        (
            ("toy", "fit"),
            fit_depth_exponents,
            lambda **kw: fit_depth_exponents(pd.DataFrame(), **kw),
            ("bootstrap", "seed"),
        ),
    ]


def test_the_other_commands_share_their_apis_ranges():
    """allocate, isoflop, toy fit: the flag refuses what the function refuses, with one default.

    A value outside an option's declared range is refused by the command line's parser AND by
    the public function (one message naming the parameter); inside it, the parser takes it.
    """
    root = build_parser()
    for words, func, call, names in _other_commands():
        parser = root
        for word in words:
            parser = parser.commands[word]
        actions = {a.option_strings[0]: a for a in parser.options if a.option_strings}
        signature = inspect.signature(func).parameters
        for name in names:
            option = VOCABULARY[name]
            action = actions[option.flag]
            shown = parser.fallbacks.get(option.flag, action.default)  # applied by the command
            if signature[name].default is not None:
                assert shown == signature[name].default, (words, name)
            for value in _samples(option):
                allowed = any(
                    c.accepts(value)
                    for c in option.allowed
                    if c is not None and hasattr(c, "accepts")
                )
                try:
                    action.type(str(value))
                    in_cli = True
                except argparse.ArgumentTypeError:
                    in_cli = False
                assert allowed == in_cli, (words, name, value)
                if not allowed:
                    with pytest.raises(ScaleFitError, match=f"The '{name}' parameter of"):
                        call(**{name: value})


def test_the_api_defaults_are_the_table_defaults():
    """The signature of each public function shows the vocabulary's default (or its own)."""
    own = {("fit_bayes", "predictive"), ("fit_bayes", "target_accept")}
    for func, names in (
        (scalefit.fit, fit_api.OPTIONS),
        (fit_bayes_module.fit_bayes, fit_bayes_module.OPTIONS),
        (scalefit.bootstrap, ("boot_starts", "cluster", "seed", "ci_prob", "ci_method")),
    ):
        params = inspect.signature(func).parameters
        for name in names:
            if (func.__name__, name) in own:
                continue
            assert params[name].default == VOCABULARY[name].default, (func.__name__, name)


def test_choices_are_the_implemented_ones():
    from scalefit.fit.engine import LOSSES
    from scalefit.fit.observation import RESIDUALS

    values = {
        name: c.values
        for name, option in VOCABULARY.items()
        for c in option.allowed
        if isinstance(c, Options)
    }
    assert set(values["loss"]) == set(LOSSES)
    assert set(values["residuals"]) == set(RESIDUALS)
    assert set(values["method"]) == set(fit_api.METHODS)
    assert set(values["ci_method"]) == set(CI_METHODS)
    assert set(values["likelihood"]) == set(fit_bayes_module.LIKELIHOODS)
    assert set(values["chain_method"]) == set(fit_bayes_module.CHAIN_METHODS)
    assert set(values["predictive"]) == set(fit_bayes_module.PREDICTIVES)
