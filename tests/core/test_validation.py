"""scalefit.core._validation as such: each constraint's rule, its words, and the one message shape.

The public functions' refusals that go through these helpers are tested where those functions
are; here the helpers are checked directly, so a change of rule or wording shows up in one place.
"""

import math
from collections.abc import Mapping

import numpy as np
import pytest

from scalefit.core._validation import (
    MAX_SEED,
    Interval,
    IsType,
    Matches,
    Options,
    did_you_mean,
    fmt_value,
    validate,
    validate_mapping,
)
from scalefit.core.errors import ScaleFitError


def test_values_are_shown_as_plain_python():
    assert fmt_value(np.float64(0.5)) == "0.5"
    assert fmt_value(np.int32(3)) == "3"
    assert fmt_value(np.array([1.0, 2.0])) == "[1.0, 2.0]"
    assert fmt_value("abc") == "'abc'"
    long = fmt_value("x" * 200)
    assert len(long) == 80 and long.endswith("...") and long.startswith("'xxx")


def test_did_you_mean_names_the_closest_choice_or_nothing():
    assert did_you_mean("bca_", ["percentile", "bca"]) == " Did you mean 'bca'?"
    assert did_you_mean("zzz", ["percentile", "bca"]) == ""


@pytest.mark.parametrize(
    ("interval", "inside", "outside", "words"),
    [
        (Interval(float, 0, 1, closed="neither"), [0.5, 1e-300], [0, 1, math.nan],
         "a float in the range (0, 1)"),
        (Interval(float, 0, 1), [0, 1, 0.5], [-1e-9, 1.0000001], "a float in the range [0, 1]"),
        (Interval(float, 0, 1, closed="left"), [0], [1], "a float in the range [0, 1)"),
        (Interval(float, 0, 1, closed="right"), [1], [0], "a float in the range (0, 1]"),
        (Interval(int, 1, None), [1, 10**30, np.int64(5)], [0, 1.0, True], "an int >= 1"),
        (Interval(int, None, 0, closed="neither"), [-1], [0], "an int < 0"),
        (Interval(float, 0, None, closed="neither"), [1e-9, math.inf], [0, -1], "a float > 0"),
        (Interval(float, None, 2.5), [2.5, -math.inf], [2.6], "a float <= 2.5"),
        (Interval(float), [math.inf, -3], [math.nan, "1", None], "a real number (not NaN)"),
        (Interval(float, finite=True), [1e308], [math.inf, -math.inf], "a finite float"),
        (Interval(int), [0, -(10**9)], [0.0, np.bool_(True)], "an int"),
    ],
)  # fmt: skip
def test_intervals_accept_their_range_and_say_it(interval, inside, outside, words):
    assert all(interval.accepts(v) for v in inside), inside
    assert not any(interval.accepts(v) for v in outside), outside
    assert interval.describe() == words


def test_an_int_beyond_float_range_is_refused_not_raised():
    assert not Interval(float, finite=True).accepts(10**400)
    assert not Interval(float, 0, 1).accepts(10**400)


def test_options_types_and_patterns():
    opts = Options({"bca", "percentile"})
    assert opts.accepts("bca") and not opts.accepts("BCA") and not opts.accepts(["bca"])
    assert opts.describe() == "one of 'bca', 'percentile'"
    assert IsType((list, tuple)).accepts((1,)) and not IsType((list, tuple)).accepts("ab")
    assert IsType((list, tuple)).describe() == "an instance of list or tuple"
    assert IsType(Mapping, "a table").describe() == "a table"
    ident = Matches(r"[a-z_]+", "a lower-case name")
    assert ident.accepts("a_b") and not ident.accepts("a-b") and not ident.accepts("ab\n")
    assert not ident.accepts(3) and ident.describe() == "a lower-case name"


def test_the_one_message_shape_names_owner_parameter_allowed_and_given():
    cons = {"ci_prob": [Interval(float, 0, 1, closed="neither")]}
    validate("bootstrap", {"ci_prob": 0.9}, cons)  # accepted: nothing raised
    with pytest.raises(ScaleFitError) as err:
        validate("bootstrap", {"ci_prob": np.float64(1.7)}, cons)
    assert str(err.value) == (
        "The 'ci_prob' parameter of bootstrap must be a float in the range (0, 1). Got 1.7 instead."
    )


def test_several_constraints_are_listed_and_a_string_gets_a_hint():
    cons = {"method": [None, "boolean", Options({"percentile", "bca"})]}
    validate("f", {"method": None}, cons)
    validate("f", {"method": True}, cons)
    with pytest.raises(ScaleFitError) as err:
        validate("f", {"method": "bcaa"}, cons)
    assert str(err.value) == (
        "The 'method' parameter of f must be None, a bool or one of 'bca', 'percentile'. "
        "Got 'bcaa' instead. Did you mean 'bca'?"
    )


@pytest.mark.parametrize(
    ("constraint", "good", "bad"),
    [
        ("finite", [0, -2.5, np.float32(1)], [math.inf, math.nan, True, "1", 10**400]),
        ("boolean", [True, np.bool_(False)], [0, 1, "true"]),
        ("array-like", [[1], (1,), np.zeros(2)], [1, "ab", {1: 2}]),
    ],
)
def test_named_constraints(constraint, good, bad):
    for value in good:
        validate("f", {"x": value}, {"x": [constraint]})
    for value in bad:
        with pytest.raises(ScaleFitError, match="The 'x' parameter of f must be "):
            validate("f", {"x": value}, {"x": [constraint]})


def test_unconstrained_names_are_not_checked():
    validate("f", {"anything": object()}, {"x": ["finite"]})


def test_seeds_fit_every_generator():
    seed = Interval(int, 0, MAX_SEED)
    assert seed.accepts(2**32 - 1) and not seed.accepts(2**32) and not seed.accepts(-1)


def test_a_config_mapping_is_checked_key_by_key():
    cons = {"steps": [Interval(int, 1, None)], "lr": [Interval(float, 0, None, closed="neither")]}
    where = "trainer config 'run.toml'"
    validate_mapping(where, {"steps": 10, "lr": 1e-3}, cons, required=["steps"])
    with pytest.raises(ScaleFitError) as err:
        validate_mapping(where, {"step": 10}, cons)
    assert str(err.value) == (
        "trainer config 'run.toml' has an unknown key 'step'. Did you mean 'steps'? "
        "Known keys: lr, steps."
    )
    with pytest.raises(
        ScaleFitError, match=r"^trainer config 'run.toml' is missing the required key 'steps'\.$"
    ):
        validate_mapping(where, {"lr": 1e-3}, cons, required=["steps"])
    with pytest.raises(ScaleFitError) as err:
        validate_mapping(where, {"steps": 0}, cons)
    assert str(err.value) == (
        "The 'steps' key of trainer config 'run.toml' must be an int >= 1. Got 0 instead."
    )
    validate_mapping(where, {"steps": 1, "extra": "x"}, cons, allow_unknown=True)
    with pytest.raises(ScaleFitError, match="must be a table of key = value pairs. Got"):
        validate_mapping(where, [1, 2], cons)
