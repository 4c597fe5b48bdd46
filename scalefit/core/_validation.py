"""Declared-constraints validation: one helper, one message shape, for every public argument.

Modelled on scikit-learn's ``validate_params``: each argument is checked against a list of
constraints, and any failure raises :class:`~scalefit.core.errors.ScaleFitError` with one message
shape::

    The 'ci_prob' parameter of bootstrap must be a float in the range (0, 1). Got 1.7 instead.

The same helper validates configuration files (trainer, toy specs, priors): pass
``where="config.toml"`` and the message names the file and key instead of a function (result
files are checked by their JSON Schema, :mod:`scalefit.fit.schema`, in the same shape).

Constraints
-----------
- :class:`Interval` — a real or integer range, open or closed at either end;
- :class:`Options` — one of a fixed set of values (with a "did you mean" for strings);
- :class:`IsType` — an instance of a type (e.g. ``str``, ``Mapping``);
- :class:`Matches` — a string that matches a regular expression (a name, an identifier);
- ``None`` — the value may be ``None``;
- ``"boolean"`` — ``True`` or ``False`` (not 0/1);
- ``"finite"`` — any finite real number;
- ``"array-like"`` — a list, tuple or numpy array.

Examples
--------
>>> from scalefit.core._validation import Interval, Options, validate
>>> validate("bootstrap", {"ci_prob": 0.9, "ci_method": "bca"},
...          {"ci_prob": [Interval(float, 0, 1, closed="neither")],
...           "ci_method": [Options({"percentile", "bca"})]})
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ScaleFitError

#: Largest random seed accepted anywhere (numpy, JAX and torch all take seeds in [0, 2**32)).
MAX_SEED = 2**32 - 1
#: Most random starts (and bootstrap resamples) one fit accepts: beyond this the start matrix
#: alone would not fit in memory.
MAX_STARTS = 100_000


def fmt_value(value: Any) -> str:
    """Format a value for an error message: plain Python reprs, never ``np.float64(...)``.

    Parameters
    ----------
    value : any
        The offending value.

    Returns
    -------
    str
        ``repr`` of the value after converting numpy scalars and arrays to Python objects, cut to
        80 characters.
    """
    if isinstance(value, np.generic):
        value = value.item()
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def interval_text(
    value: float,
    lo: float,
    hi: float,
    fmt: Callable[[float], str] = "{:.3g}".format,
    why: str = "the draws sit to one side of it",
) -> str:
    """`` [lo, hi]`` to print after ``value``; when ``value`` lies outside, also why.

    The reports' one rule for an estimate and its interval: the estimate is inside its printed
    interval, or the same line says why it is not.

    Parameters
    ----------
    value, lo, hi : float
        The estimate and its interval (NaN ends: no interval, an empty string).
    fmt : callable, default ``"{:.3g}".format``
        How a number is written.
    why : str
        The reason printed for an estimate outside its interval.

    Returns
    -------
    str
        ``" [2.1, 2.5]"`` or ``" [2.1, 2.5] (estimate outside: ...)"``.

    Examples
    --------
    >>> interval_text(3.05, 0.0159, 1.99)
    ' [0.0159, 1.99] (estimate outside: the draws sit to one side of it)'
    """
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    text = f" [{fmt(lo)}, {fmt(hi)}]"
    if np.isfinite(value) and not lo <= value <= hi:
        text += f" (estimate outside: {why})"
    return text


def spelled(python: str, cli: str | None = None) -> str:
    """An argument named for both audiences of a message: Python and the command line.

    Library messages are written once, in the library's words, and read the same from Python
    and from ``scalefit``: where a message tells the user what to pass, it names both spellings.

    Parameters
    ----------
    python : str
        The keyword as Python takes it, e.g. ``"bootstrap=B"``.
    cli : str, optional
        The option as the command line takes it; by default the keyword with dashes and the
        same value (``"--bootstrap B"``).

    Returns
    -------
    str
        ``"bootstrap=B (--bootstrap B on the command line)"``.
    """
    if cli is None:
        name, _, value = python.partition("=")
        cli = f"--{name.replace('_', '-')} {value}".strip()
    return f"{python} ({cli} on the command line)"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest choice, or an empty string.

    Parameters
    ----------
    word : str
        What the user typed.
    choices : iterable of str
        The valid names.

    Returns
    -------
    str
        A sentence to append to an error message (with a leading space), or ``""``.
    """
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


@dataclass(frozen=True)
class Interval:
    """A numeric range constraint.

    Parameters
    ----------
    kind : {int, float}
        ``int`` accepts integers only (not bools, not floats); ``float`` accepts any real number
        (ints included) that is not NaN.
    left, right : float or None
        Bounds; ``None`` means unbounded on that side.
    closed : {"both", "left", "right", "neither"}, default "both"
        Which bounds are included.
    finite : bool, default False
        Refuse infinite values too (a JSON literal such as ``1e999`` reads as infinity).
    """

    kind: type
    left: float | None = None
    right: float | None = None
    closed: str = "both"
    finite: bool = False

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` satisfies the constraint."""
        if isinstance(value, bool | np.bool_):
            return False
        if self.kind is int:
            if not isinstance(value, numbers.Integral):
                return False
        elif not isinstance(value, numbers.Real):
            return False
        try:
            v = float(value)
        except OverflowError:  # an int beyond float range
            return False
        if math.isnan(v):
            return False
        if self.finite and not math.isfinite(v):
            return False
        if self.left is not None:
            if v < self.left or (v == self.left and self.closed in ("right", "neither")):
                return False
        if self.right is not None:
            if v > self.right or (v == self.right and self.closed in ("left", "neither")):
                return False
        return True

    def describe(self) -> str:
        """Words for the message, e.g. ``"a float in the range (0, 1)"``."""
        noun = "an int" if self.kind is int else "a float"
        if self.finite and self.kind is not int:
            noun = "a finite float"
        if self.left is None and self.right is None:
            if self.kind is int:
                return noun
            return noun if self.finite else "a real number (not NaN)"
        if self.right is None:
            op = ">=" if self.closed in ("both", "left") else ">"
            return f"{noun} {op} {_num(self.left)}"
        if self.left is None:
            op = "<=" if self.closed in ("both", "right") else "<"
            return f"{noun} {op} {_num(self.right)}"
        lo = "[" if self.closed in ("both", "left") else "("
        hi = "]" if self.closed in ("both", "right") else ")"
        return f"{noun} in the range {lo}{_num(self.left)}, {_num(self.right)}{hi}"


def _num(x: float) -> str:
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values."""

    values: frozenset | set | tuple

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is one of the options."""
        try:
            return value in self.values
        except TypeError:  # unhashable
            return False

    def describe(self) -> str:
        """Words for the message."""
        return "one of " + ", ".join(repr(v) for v in sorted(self.values, key=str))


@dataclass(frozen=True)
class IsType:
    """An instance of one or more types."""

    types: type | tuple[type, ...]
    name: str = ""

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is an instance."""
        return isinstance(value, self.types)

    def describe(self) -> str:
        """Words for the message."""
        if self.name:
            return self.name
        types = self.types if isinstance(self.types, tuple) else (self.types,)
        return "an instance of " + " or ".join(t.__name__ for t in types)


@dataclass(frozen=True)
class Matches:
    """A string that matches a regular expression in full."""

    pattern: str
    name: str

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is a string matching the pattern."""
        return isinstance(value, str) and re.fullmatch(self.pattern, value) is not None

    def describe(self) -> str:
        """Words for the message."""
        return self.name


def _named(constraint: Any) -> tuple[Callable[[Any], bool], str]:
    if constraint is None:
        return (lambda v: v is None), "None"
    if constraint == "boolean":
        return (lambda v: isinstance(v, bool | np.bool_)), "a bool"
    if constraint == "finite":
        return Interval(float, finite=True).accepts, "a finite number"
    if constraint == "array-like":
        return (lambda v: isinstance(v, list | tuple | np.ndarray)), "an array-like"
    if hasattr(constraint, "accepts"):
        return constraint.accepts, constraint.describe()
    raise TypeError(f"unknown constraint {constraint!r}")  # programming error


def _allowed(value: Any, constraints: Sequence[Any]) -> tuple[str, str]:
    """The words for what ``constraints`` allow, and a "did you mean" hint for ``value``."""
    words = [_named(c)[1] for c in constraints]
    allowed = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
    hint = ""
    if isinstance(value, str):
        for c in constraints:
            if isinstance(c, Options):
                hint = did_you_mean(value, [str(v) for v in c.values])
    return allowed, hint


def _message(
    name: str, owner: str, value: Any, constraints: Sequence[Any], noun: str = "parameter"
) -> str:
    allowed, hint = _allowed(value, constraints)
    got = fmt_value(value)
    return f"The {name!r} {noun} of {owner} must be {allowed}. Got {got} instead.{hint}"


def validate(
    owner: str,
    values: Mapping[str, Any],
    constraints: Mapping[str, Sequence[Any]],
    *,
    noun: str = "parameter",
) -> None:
    """Check arguments against declared constraints; raise one clear error on the first failure.

    Parameters
    ----------
    owner : str
        The function (``"bootstrap"``) or the place (``"config train.toml"``) the values belong to.
    values : mapping
        Argument name to value.
    constraints : mapping
        Argument name to a list of constraints; the value must satisfy at least one. Names missing
        from ``constraints`` are not checked.

    Raises
    ------
    ScaleFitError
        ``The 'x' parameter of owner must be <allowed>. Got <value> instead.``
    """
    for name, value in values.items():
        cons = constraints.get(name)
        if cons is None:
            continue
        if not any(_named(c)[0](value) for c in cons):
            raise ScaleFitError(_message(name, owner, value, cons, noun))


def validate_mapping(
    where: str,
    data: Mapping[str, Any],
    constraints: Mapping[str, Sequence[Any]],
    *,
    required: Iterable[str] = (),
    allow_unknown: bool = False,
) -> None:
    """Validate a configuration mapping (a TOML table, a JSON object): keys, then values.

    Parameters
    ----------
    where : str
        What the mapping is, for messages (e.g. ``"trainer config 'run.toml'"``).
    data : mapping
        The parsed configuration.
    constraints : mapping
        Key to a list of constraints (see :func:`validate`).
    required : iterable of str
        Keys that must be present.
    allow_unknown : bool, default False
        Accept keys that have no constraint.

    Raises
    ------
    ScaleFitError
        On a missing or unknown key (with a "did you mean") or a value that breaks its constraint.
    """
    if not isinstance(data, Mapping):
        raise ScaleFitError(f"{where} must be a table of key = value pairs. Got {fmt_value(data)}.")
    for key in required:
        if key not in data:
            raise ScaleFitError(f"{where} is missing the required key {key!r}.")
    if not allow_unknown:
        for key in data:
            if key not in constraints:
                raise ScaleFitError(
                    f"{where} has an unknown key {key!r}.{did_you_mean(key, constraints)} "
                    f"Known keys: {', '.join(sorted(constraints))}."
                )
    validate(where, data, constraints, noun="key")


# ---- the option vocabulary: each option declared once, for the API and the command line ----

#: The one seed rule of every entry point (numpy, JAX and torch all take seeds in [0, 2**32)).
SEED = Interval(int, 0, MAX_SEED)
_UNIT = Interval(float, 0, 1, closed="neither")


@dataclass(frozen=True)
class Option:
    """One option: what it allows, its default, its help and its command-line spelling.

    The API validates an argument with :func:`constraints` (one message shape); the command
    line's parser is generated with :meth:`argparse_kwargs` (same default, same choices, the
    same range checked by :meth:`parse`), so the two cannot drift apart.

    Parameters
    ----------
    name : str
        The Python keyword; the flag is ``--`` + the name with dashes (:attr:`flag`).
    allowed : tuple
        Constraints (see :func:`validate`); a value must satisfy one.
    default : any
        The default of the keyword and of the flag.
    help : str
        One line for ``--help`` (the parser adds the default).
    metavar : str, optional
        The placeholder in ``--help``.
    shown : str, optional
        Words for a default that is not a value (``"every row"``).
    action : str, optional
        argparse's action: ``"store_true"`` for a flag, ``"append"`` for a repeatable option.
    """

    name: str
    allowed: tuple
    default: Any = None
    help: str = ""
    metavar: str | None = None
    shown: str | None = None
    action: str | None = None

    @property
    def flag(self) -> str:
        """The command-line spelling, e.g. ``--ci-method``."""
        return "--" + self.name.replace("_", "-")

    def but(self, **changes: Any) -> Option:
        """A copy with ``changes`` (a command's own default or help)."""
        return dataclasses.replace(self, **changes)

    def parse(self, text: str) -> Any:
        """Read a command-line value and check it against :attr:`allowed` (argparse's ``type``)."""
        kind = next(c.kind for c in self.allowed if isinstance(c, Interval))
        try:
            value = kind(text)
        except ValueError:
            noun = "whole number" if kind is int else "number"
            raise argparse.ArgumentTypeError(f"not a {noun}: {text!r}") from None
        if not any(_named(c)[0](value) for c in self.allowed if c is not None):
            allowed, _ = _allowed(value, [c for c in self.allowed if c is not None])
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}")
        return value

    def argparse_kwargs(self, **changes: Any) -> dict[str, Any]:
        """Keywords of ``add_argument`` generated from the declaration (``changes`` on top)."""
        if self.action == "store_true":
            return {"action": "store_true", "help": self.help, **changes}
        kw: dict[str, Any] = {"default": self.default, "help": self.help}
        if self.action:
            kw["action"] = self.action
        if self.metavar:
            kw["metavar"] = self.metavar
        if self.shown:
            kw["shown"] = self.shown
        choices = [c for c in self.allowed if isinstance(c, Options)]
        if choices:
            kw["choices"] = sorted(choices[0].values, key=str)
        elif any(isinstance(c, Interval) for c in self.allowed):
            kw["type"] = self.parse
        return {**kw, **changes}


def _opt(name: str, allowed: Any, default: Any = None, help: str = "", **kw: Any) -> Option:
    allowed = tuple(allowed) if isinstance(allowed, list) else (allowed,)
    return Option(name, allowed, default, help, **kw)


_COLUMN = IsType(str, "a column name")
_TEXT = IsType(str, "a string")
_POSITIVE = Interval(float, 0, None, closed="neither", finite=True)


def _flag(name: str, help: str) -> Option:
    return Option(name, ("boolean",), False, help, action="store_true")


#: Every option shared by the API and the command line, declared once. Choices that name an
#: implementation (losses, methods) are checked against the modules that implement them by
#: ``tests/core/test_options.py``.
VOCABULARY: dict[str, Option] = {
    o.name: o
    for o in (
        _opt("seed", SEED, 0, "random seed"),
        _opt("starts", Interval(int, 1, MAX_STARTS), 256, "random starts of the optimiser"),
        _opt(
            "bootstrap",
            Interval(int, 0, MAX_STARTS),
            0,
            "bootstrap resamples (0: none)",
            metavar="B",
        ),  # fmt: skip
        _opt("n_boot", Interval(int, 1, MAX_STARTS), 200, "bootstrap resamples", metavar="B"),
        _opt("boot_starts", Interval(int, 0, MAX_STARTS), 7, "random starts per resample"),
        _opt(
            "cluster",
            [None, _COLUMN],
            None,
            "resample whole groups sharing this column's value (every row needs a value)",
            metavar="COLUMN",
            shown="rows resampled one by one",
        ),  # fmt: skip
        _opt("ci_prob", _UNIT, 0.95, "probability of the intervals", metavar="P"),
        _opt(
            "interval",
            Options({"calibrated", "draws"}),
            "calibrated",
            "what the optimum's intervals include: the fit's draws plus the law's misfit in N* "
            "(measured on public IsoFLOP sweeps), or the draws alone",
        ),  # fmt: skip
        _opt(
            "ci_method",
            Options({"percentile", "bca"}),
            "percentile",
            "bootstrap interval: percentile or bias-corrected and accelerated (bca)",
        ),  # fmt: skip
        _opt(
            "holdout",
            [None, _UNIT],
            None,
            "also fit on the lowest-compute rows and test on this share of the rest",
            metavar="FRACTION",
            shown="no held-out check",
        ),  # fmt: skip
        _opt(
            "held_out_params",
            _POSITIVE,
            None,
            "hold out the runs of at least this many parameters; fit on the smaller ones",
            metavar="PARAMS",
        ),  # fmt: skip
        _opt(
            "predictive",
            Options({"law", "calibrated"}),
            "law",
            "predictive that scores the --holdout rows: bootstrap draws with the training "
            "RMSE's noise (law) or the calibrated one (see docs/extrapolation.md)",
        ),  # fmt: skip
        _opt(
            "loss",
            Options({"mse", "huber", "lad"}),
            "mse",
            "loss of the residuals: squared (mse), Huber, or absolute (lad)",
        ),  # fmt: skip
        _opt(
            "delta",
            Interval(float, 0, None, closed="neither"),
            1e-3,
            "Huber threshold (residual units)",
        ),  # fmt: skip
        _opt(
            "residuals",
            Options({"log", "linear"}),
            "log",
            "residuals on log loss (log y - log f) or on loss (y - f)",
        ),  # fmt: skip
        _opt(
            "method",
            Options({"jax", "varpro", "lmfit"}),
            "jax",
            "optimiser: scalefit's own (jax), the same with variable projection of the "
            "coefficients the law is linear in (varpro), or lmfit's least squares",
        ),  # fmt: skip
        _opt(
            "drop_highest",
            Interval(int, 0, None),
            0,
            "drop the K highest losses (keeps rows strictly below the K-th highest)",
            metavar="K",
        ),  # fmt: skip
        _opt(
            "weights",
            [None, _COLUMN, "array-like"],
            None,
            "per-row weights column",
            metavar="COLUMN",
            shown="every row weighs the same",
        ),  # fmt: skip
        _opt("chains", Interval(int, 1, None), 4, "number of chains"),
        _opt("draws", Interval(int, 10, None), 1000, "kept draws per chain"),
        _opt("warmup", Interval(int, 10, None), 1000, "warm-up steps per chain"),
        _opt(
            "likelihood",
            Options({"student_t", "normal"}),
            "student_t",
            "noise model of log loss: Student-t (robust to outliers) or normal",
        ),  # fmt: skip
        _opt("target_accept", _UNIT, 0.99, "target acceptance rate of NUTS"),
        _opt(
            "chain_method",
            Options({"vectorized", "parallel", "sequential"}),
            "vectorized",
            "how the chains run",
        ),  # fmt: skip
        _opt("progress", [None, "boolean"], None, "show progress bars"),
        # allocation
        _opt("head_dim", Interval(int, 1, None), 64, "width is a multiple of this"),
        _opt(
            "mlp_ratio",
            _POSITIVE,
            4.0,
            "MLP hidden size / width of the standard block, for the parameter accounting",
        ),  # fmt: skip
        _opt("min_depth", Interval(int, 1, None), 1, "smallest depth searched"),
        _opt(
            "aspect_max",
            [None, Interval(float, 0, None, closed="neither")],
            None,
            "upper bound on width/depth",
            shown="no bound",
        ),  # fmt: skip
        _opt(
            "tokens_per_step",
            [None, _POSITIVE],
            None,
            "tokens per optimiser step",
            metavar="N",
        ),  # fmt: skip
        # recipe comparisons
        _opt(
            "target_loss",
            [None, _POSITIVE],
            None,
            "loss at which to compare the compute the two fitted laws need",
            metavar="LOSS",
            shown="the larger compute-optimal loss at the middle of the shared compute range",
        ),  # fmt: skip
        _flag("shared_floor", "fix both fits' irreducible loss to a fit of the pooled tables"),
        # sweeps and runs
        _opt("workers", Interval(int, 0, 4096), 1, "local worker processes", metavar="N"),
        _opt("threads", Interval(int, 1, 4096), 1, "torch threads per worker", metavar="T"),
        _opt(
            "executor",
            Options({"local", "slurm"}),
            "local",
            "run the jobs here (local) or submit them to Slurm",
        ),  # fmt: skip
        _flag("overwrite", "replace what --out holds from a run with other settings"),
        # plans (scalefit.plan)
        _opt("k", Interval(int, 1, None), 12, "most runs to choose", metavar="K"),
        _opt(
            "max_run_flops",
            [None, _POSITIVE],
            None,
            "the largest run the hardware allows (6 N T)",
            metavar="FLOPS",
            shown="no limit",
        ),  # fmt: skip
        _opt(
            "total_flops",
            [None, _POSITIVE],
            None,
            "compute for all the plan's runs together",
            metavar="FLOPS",
            shown="no limit but the candidates",
        ),  # fmt: skip
        _opt(
            "stop_width",
            Interval(float, 1, None, closed="neither", finite=True),
            1.5,
            "stop when the draws' interval of N* at the target budget has hi/lo at most this",
            metavar="RATIO",
        ),  # fmt: skip
        _opt(
            "rounds",
            [None, Interval(int, 1, None)],
            None,
            "most ask-train-tell rounds",
            metavar="N",
            shown="until the plan stops",
        ),  # fmt: skip
        _opt(
            "trainer",
            [None, _TEXT],
            None,
            "trainer settings (TOML of scalefit.train keys, without depth, width, tokens)",
            metavar="TOML",
            shown="none: train elsewhere and tell",
        ),  # fmt: skip
        _opt(
            "resume_from",
            [None, _TEXT],
            None,
            "the grid's loss table, from any machine: run only the runs it lacks, most "
            "informative first, and add each finished run's rows to it with the machine",
            metavar="CSV",
            shown="run every unfinished run of --out",
        ),  # fmt: skip
        _opt(
            "max_minutes",
            [None, _POSITIVE],
            None,
            "with --resume-from: start a run only if it can finish within this many minutes "
            "(timed from the runs this device already did)",
            metavar="M",
            shown="no limit",
        ),  # fmt: skip
        _opt(
            "nproc_per_node",
            [None, Interval(int, 1, 4096)],
            None,
            "start N processes on this node (torch's launcher, as torchrun does); a failed "
            "process is reported in one line",
            metavar="N",
            shown="this process alone, or those torchrun started",
        ),  # fmt: skip
        # the command line's own: inputs, outputs and what a command prints
        _opt(
            "budget",
            _POSITIVE,
            None,
            "training budget in FLOPs, e.g. 1e21; repeat the option for several budgets",
            metavar="FLOPS",
            action="append",
        ),  # fmt: skip
        _opt("law", [None, _TEXT], None, "law name (see `scalefit laws`)"),
        _opt(
            "law_option",
            [None, _TEXT],
            None,
            "law options, e.g. form=power,vocab=32000 for critical_depth",
            metavar="K=V,...",
        ),  # fmt: skip
        _opt(
            "columns",
            [None, _TEXT],
            None,
            "explicit column mapping, e.g. 'D=tokens,N=params'",
            metavar="SRC=CANON,...",
        ),  # fmt: skip
        _opt(
            "data_dir",
            [None, _TEXT],
            None,
            "folder with the public reference CSVs",
            metavar="DIR",
            shown="SCALEFIT_DATA_DIR, then the cache, then a checksummed download",
        ),  # fmt: skip
        _opt(
            "where",
            [None, _TEXT],
            None,
            "keep only the rows matching a filter over column names (comparisons, and/or/not, "
            "in [...]; no calls or attributes), e.g. \"variant == 'pre_ln' and depth >= 4\"; "
            "applied before --drop-highest",
            metavar="EXPR",
            shown="every row",
        ),  # fmt: skip
        _opt("text_field", _TEXT, "text", "text field of .jsonl or parquet", metavar="FIELD"),
        _opt("out", [None, _TEXT], None, "write the output here", metavar="PATH"),
        _opt("plots", [None, _TEXT], None, "write the figures into DIR", metavar="DIR"),
        _flag("no_plots", "skip the figures"),
        _flag("no_progress", "hide the progress bars"),
        _flag("quiet", "no progress bar"),
    )
}


def constraints(*names: str) -> dict[str, list[Any]]:
    """The validation constraints of the named options of :data:`VOCABULARY`."""
    return {n: list(VOCABULARY[n].allowed) for n in names}
