"""The declared schema of a result file, checked before anything reads it.

A result file is what :meth:`~scalefit.fit.result.FitResult.save` writes (least squares, with or
without bootstrap draws and a hold-out check, and Bayesian fits alike). :func:`check_result`
checks a parsed file against the declarations below, field by field, with the constraints of
:mod:`scalefit._validation`, so every refusal has one shape::

    r.json: field 'n_rows' must be an int >= 1. Got 'abc' instead.

What is checked
---------------
- ``schema_version`` is one of :data:`READABLE_VERSIONS` (a newer or unknown version is refused,
  never guessed at).
- ``law_spec`` names a registered law (with options of the right type) or is a formula law whose
  text is parsed by :mod:`scalefit.expr`'s grammar (never ``eval``); ``law`` is its name.
- Every other field has a type, a range and, where it is per parameter, a shape fixed by the law:
  ``params`` names the law's parameters in the law's order (the order of the draws' columns),
  ``corr`` is P x P (or empty), ``draws`` N x P, ``internal`` has P entries (or none), ``refs``
  names only the law's pivot inputs, ``n_boot`` counts the draws.
- A Bayesian result (``method`` "bayes") also carries its draws, an interval and an HDI for
  every parameter and the posterior median noise scale (what its readers use).
- ``null`` stands where ``save()`` wrote a NaN (a failed resample, an undefined correlation);
  numeric fields that may hold it read it back as NaN.

Unknown fields
--------------
Refused at the top level and inside ``law_spec``, ``metrics``, ``holdout`` and ``ci`` (a field
nobody wrote is damage). ``conventions`` and ``diagnostics`` are open records (each method writes
its own keys, software versions among them): the keys any reader uses are declared and checked
here; any other key is kept as data and read by nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._validation import Interval, IsType, Matches, Options, check_field, fmt_value
from ..errors import ScaleFitError

__all__ = ["READABLE_VERSIONS", "SCHEMA_VERSION", "check_result"]

#: The version ``save()`` writes.
SCHEMA_VERSION = 2
#: The versions this package reads; any other is refused.
READABLE_VERSIONS = (2,)
#: Largest magnitude a stored parameter value may have: beyond it a value is damage, not a fit.
ABSURD = 1e100

NAME = Matches(r"[A-Za-z_][A-Za-z0-9_]{0,63}", "an identifier (letters, digits, _; 1-64 chars)")
LABEL = Matches(r"[^\x00-\x1f\x7f]{1,200}", "a one-line name of 1-200 characters")
TEXT = IsType(str, "a string")
BOOL = "boolean"
FINITE = Interval(float, finite=True)
NONNEG = Interval(float, 0, None, finite=True)
PROB_OPEN = Interval(float, 0, 1, closed="neither")
UNIT = Interval(float, 0, 1)
COUNT = Interval(int, 0, None)
POSITIVE_INT = Interval(int, 1, None)
SCALAR = IsType((str, int, float, bool), "a string, number or bool")


# ------------------------------------------------------------------------------ declarations
@dataclass(frozen=True)
class Leaf:
    """A value satisfying one of ``constraints``; ``nan`` reads a ``null`` back as NaN."""

    constraints: tuple
    nan: bool = False


def num(*constraints: Any, null: bool = True) -> Leaf:
    """A number (or ``null`` for a NaN ``save()`` wrote, read back as NaN)."""
    return Leaf((*constraints, None) if null else constraints, nan=null)


@dataclass(frozen=True)
class Param:
    """A parameter value: finite, within :data:`ABSURD`, not negative for positive kinds."""

    null: bool = False


@dataclass(frozen=True)
class ParamName:
    """The name of one of the law's parameters."""


@dataclass(frozen=True)
class ListOf:
    """A list of ``item``.

    ``length``: an exact length, ``"P"`` (the law's parameter count) or ``None``; ``empty``:
    ``[]`` is accepted whatever ``length`` says; ``per_param``: item ``i`` belongs to parameter
    ``i`` (for :class:`Param` items).
    """

    item: Any
    length: int | str | None = None
    empty: bool = False
    per_param: bool = False
    ordered: bool = False  # a [lo, hi] pair: lo <= hi when both are numbers


@dataclass(frozen=True)
class MapOf:
    """A JSON object with ``value`` items; ``keys``: any string, or the law's parameters.

    ``keys="params"``: a subset of the parameter names; ``"params!"``: exactly them, in the law's
    order; ``"pivots"``: a subset of the law's pivot inputs.
    """

    value: Any
    keys: str | None = None


@dataclass(frozen=True)
class Record:
    """A JSON object with declared fields; ``extra``: ``"refuse"`` or ``"keep"`` unknown keys."""

    fields: Mapping[str, Any]
    required: frozenset = frozenset()
    extra: str = "refuse"


@dataclass(frozen=True)
class Either:
    """``null`` or the node ``node``."""

    node: Any


PAIR = ListOf(Param(null=True), length=2, ordered=True)
SCORES = {
    "predictive": Leaf((TEXT,)),
    "coverage": num(UNIT),
    "coverage_50": num(UNIT),
    "width_log": num(NONNEG),
    "lpd": Leaf((FINITE, None)),  # null: not available ("n/a" in the report)
    "pit": Either(ListOf(num(UNIT))),
}
HOLDOUT = Record(
    {
        "fraction": Leaf((PROB_OPEN,)),
        "split_by": Leaf((NAME,)),
        "threshold": num(FINITE),
        "n_train": Leaf((POSITIVE_INT,)),
        "n_test": Leaf((POSITIVE_INT,)),
        "mae_log": num(NONNEG),
        "mae": num(NONNEG),
        "max_rel_err": num(NONNEG),
        **SCORES,
        "band_prob": Leaf((PROB_OPEN,)),
        "train_params": MapOf(Param(), keys="params!"),
        "train_converged": Leaf((BOOL,)),
        "uncalibrated": Record(SCORES, frozenset({"predictive", "coverage"})),
        "calibration": MapOf(num(FINITE)),
    },
    frozenset({"n_train", "n_test", "mae_log", "max_rel_err", "coverage", "band_prob"}),
)
METRICS = Record(
    {
        "r2": num(Interval(float, None, 1, finite=True)),
        "rmse": num(NONNEG),
        "rmse_log": num(NONNEG),
        "mean_rel_err": num(NONNEG),
        "max_rel_err": num(NONNEG),
    },
)
#: Keys of ``conventions`` that readers use (report, predict, bootstrap, Bayes predictive).
CONVENTIONS = Record(
    {
        "law": Leaf((LABEL,)),
        "law_options": MapOf(Leaf((SCALAR, None))),
        "loss": Leaf((Options({"mse", "huber", "lad", "bayes"}),)),
        "delta": Leaf((Interval(float, 0, None, closed="neither", finite=True),)),
        "residuals": Leaf((Options({"log", "linear"}),)),
        "likelihood": Leaf((Options({"student_t", "normal"}),)),
        "weights": Leaf((TEXT, None)),
        "weight_column": Leaf((TEXT, None)),
        "starts": Leaf((POSITIVE_INT,)),
        "seed": Leaf((COUNT, None)),
        "ci_method": Leaf((Options({"percentile", "bca"}),)),
        "outlier_rule": Leaf((TEXT,)),
        "derived": ListOf(Leaf((TEXT,))),
        "source": Leaf((TEXT, None)),
        "dataset": Leaf((TEXT, None)),
        "n_read": Leaf((COUNT,)),
        "drop_highest": Leaf((COUNT,)),
        "reference_points": MapOf(num(Interval(float, 0, None, finite=True))),
        "bootstrap": Leaf((COUNT,)),
        "chains": Leaf((POSITIVE_INT,)),
        "draws": Leaf((POSITIVE_INT,)),
    },
    extra="keep",
)
#: Keys of ``diagnostics`` that readers use (report, Bayes summary and plots, comparison).
DIAGNOSTICS = Record(
    {
        "n_starts": Leaf((POSITIVE_INT,)),
        "n_best": Leaf((COUNT,)),
        "n_converged": Leaf((COUNT,)),
        "n_boot": Leaf((COUNT,)),
        "boot_failed": Leaf((COUNT,)),
        "resample": Leaf((TEXT,)),
        "checks_failed": ListOf(Leaf((TEXT,))),
        "grad_max": num(NONNEG),
        "hessian_cond": num(NONNEG),
        "hdi": MapOf(PAIR, keys="params"),
        "hdi_prob": Leaf((PROB_OPEN,)),
        "noise": MapOf(Leaf((Interval(float, 0, None, closed="neither", finite=True),))),
        "r_hat": MapOf(num(NONNEG)),
        "ess_bulk": MapOf(num(NONNEG)),
        "ess_tail": MapOf(num(NONNEG)),
        "r_hat_max": num(NONNEG),
        "ess_bulk_min": num(NONNEG),
        "ess_tail_min": num(NONNEG),
        "divergences": Leaf((COUNT,)),
        "chains": Leaf((POSITIVE_INT,)),
        "draws": Leaf((POSITIVE_INT,)),
        "loo": MapOf(num(FINITE)),
        "ppc": MapOf(num(UNIT)),
        "total_seconds": num(NONNEG),
    },
    extra="keep",
)
#: A schema-2 result file (what ``FitResult.save`` writes). Every field is required.
RESULT = Record(
    {
        "schema_version": Leaf((Options(set(READABLE_VERSIONS)),)),
        "law": Leaf((LABEL,)),
        "law_spec": None,  # checked first, by _law (it fixes the parameters)
        "params": MapOf(Param(), keys="params!"),
        "method": Leaf((Options({"jax", "lmfit", "bayes"}),)),
        "objective": num(NONNEG),
        "converged": Leaf((BOOL,)),
        "n_rows": Leaf((POSITIVE_INT,)),
        "metrics": METRICS,
        "stderr": MapOf(num(NONNEG), keys="params"),
        "corr": ListOf(ListOf(num(Interval(float, -1, 1)), length="P"), length="P", empty=True),
        "ci": MapOf(PAIR, keys="params"),
        "ci_prob": Leaf((PROB_OPEN,)),
        "draws": Either(ListOf(ListOf(Param(null=True), length="P", per_param=True))),
        "warnings": ListOf(Leaf((TEXT,))),
        "conventions": CONVENTIONS,
        "diagnostics": DIAGNOSTICS,
        "holdout": Either(HOLDOUT),
        "internal": ListOf(Leaf((FINITE,)), length="P", empty=True),
        "refs": MapOf(Leaf((FINITE,)), keys="pivots"),
        "not_identified": ListOf(ParamName()),
        "n_boot": Leaf((COUNT,)),
    },
    frozenset(
        {
            "schema_version",
            "law",
            "law_spec",
            "params",
            "method",
            "objective",
            "converged",
            "n_rows",
            "metrics",
            "stderr",
            "corr",
            "ci",
            "ci_prob",
            "draws",
            "warnings",
            "conventions",
            "diagnostics",
            "holdout",
            "internal",
            "refs",
            "not_identified",
            "n_boot",
        }
    ),
)

#: The law spec of a formula law (``Law.from_formula``).
FORMULA_PARAM = Record(
    {
        "name": Leaf((NAME,)),
        "kind": Leaf((Options({"free", "positive", "exponent"}),)),
        "start": ListOf(Leaf((Interval(float, -ABSURD, ABSURD),)), length=2, ordered=True),
        "bounds": ListOf(Leaf((FINITE, None)), length=2, ordered=True),
    },
    frozenset({"name", "kind", "start", "bounds"}),
)
FORMULA_SPEC = Record(
    {
        "type": Leaf((Options({"formula"}),)),
        "name": Leaf((LABEL,)),
        "formula": Leaf((Matches(r"[^\x00-\x1f\x7f]{1,2000}", "formula text (1-2000 chars)"),)),
        "inputs": ListOf(Leaf((NAME,))),
        "params": ListOf(FORMULA_PARAM),
        "start_points": ListOf(MapOf(Leaf((Interval(float, -ABSURD, ABSURD),)))),
    },
    frozenset({"type", "name", "formula", "inputs", "params"}),
)
#: The law spec of a registered law; options of the built-in laws are declared here.
REGISTERED_SPEC = Record(
    {
        "type": Leaf((Options({"registered"}),)),
        "name": Leaf((LABEL,)),
        "options": MapOf(Leaf((SCALAR, None))),
    },
    frozenset({"type", "name", "options"}),
)
_CRITICAL_DEPTH = {
    "vocab": Leaf((Interval(float, 1, 1e8),)),
    "embeddings": Leaf((Options({"tied", "untied", "excluded"}),)),
    "params_from": Leaf((Options({"accounting", "column"}),)),
}
BUILTIN_OPTIONS = {
    "chinchilla": Record({}),
    "decomposed": Record({}),
    "depth_power": Record({}),
    "critical_depth": Record({"form": Leaf((Options({"log", "power"}),)), **_CRITICAL_DEPTH}),
    "critical_depth_power": Record({"form": Leaf((Options({"power"}),)), **_CRITICAL_DEPTH}),
}


# ------------------------------------------------------------------------------ checking
@dataclass
class _Ctx:
    where: str
    names: tuple[str, ...] = ()
    kinds: dict[str, str] = field(default_factory=dict)
    pivots: tuple[str, ...] = ()


def _got(value: Any) -> str:
    """A value as the message shows it (``null`` as in the file)."""
    return "null" if value is None else fmt_value(value)


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def _fail(ctx: _Ctx, path: str, what: str) -> ScaleFitError:
    return ScaleFitError(f"{ctx.where}: field {path!r} {what}")


def _low(ctx: _Ctx, name: str) -> float:
    return 0.0 if ctx.kinds.get(name) in ("coef", "positive", "floor") else -ABSURD


def _param(ctx: _Ctx, node: Param, value: Any, path: str, name: str) -> Any:
    low = _low(ctx, name)
    if type(value) is float and low <= value <= ABSURD:  # the common case, fast (NaN fails)
        return value
    cons: tuple = (Interval(float, low, ABSURD),)
    if node.null:
        cons = (*cons, None)
    check_field(ctx.where, path, value, cons)
    return math.nan if value is None else float(value)


def _check(ctx: _Ctx, node: Any, value: Any, path: str, param: str = "") -> Any:
    """Check ``value`` against ``node``; return the value to build from (nulls as NaN)."""
    if isinstance(node, Leaf):
        check_field(ctx.where, path, value, node.constraints)
        if value is None and node.nan:
            return math.nan
        return float(value) if isinstance(value, float) else value
    if isinstance(node, Either):
        if value is None:
            return None
        inner = node.node
        if isinstance(inner, ListOf) and not isinstance(value, list):
            raise _fail(ctx, path, f"must be a list or null. Got {_got(value)} instead.")
        if isinstance(inner, Record | MapOf) and not isinstance(value, dict):
            raise _fail(ctx, path, f"must be a JSON object or null. Got {_got(value)} instead.")
        return _check(ctx, inner, value, path, param)
    if isinstance(node, Param):
        return _param(ctx, node, value, path, param)
    if isinstance(node, ParamName):
        check_field(ctx.where, path, value, (Options(set(ctx.names)),))
        return value
    if isinstance(node, ListOf):
        return _check_list(ctx, node, value, path, param)
    if isinstance(node, MapOf):
        return _check_map(ctx, node, value, path)
    if isinstance(node, Record):
        return _check_record(ctx, node, value, path)
    raise TypeError(f"unknown schema node {node!r}")  # programming error


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _check_list(ctx: _Ctx, node: ListOf, value: Any, path: str, param: str = "") -> list:
    n = len(ctx.names) if node.length == "P" else node.length
    if node.ordered:
        shape = "a pair [lo, hi]"
    elif n is None:
        shape = "a list"
    else:
        shape = f"a list of {n} value{'s' if n != 1 else ''}"
        shape += " (one per parameter of the law)" if node.length == "P" else ""
        shape += " or []" if node.empty else ""
    if not isinstance(value, list):
        raise _fail(ctx, path, f"must be {shape}. Got {_got(value)} instead.")
    if n is not None and len(value) != n and not (node.empty and not value):
        raise _fail(ctx, path, f"must be {shape}. Got a list of {len(value)} instead.")
    if isinstance(node.item, Param) and node.per_param:  # a row of draws: one value per param
        lows = [_low(ctx, name) for name in ctx.names]
        if all(type(v) is float and lo <= v <= ABSURD for v, lo in zip(value, lows, strict=True)):
            return value  # the common case, fast
    out = []
    for i, item in enumerate(value):
        name = ctx.names[i] if node.per_param else param
        out.append(_check(ctx, node.item, item, _path(path, i), name))
    if node.ordered and len(out) == 2:
        lo, hi = (float(v) if _is_number(v) else math.nan for v in out)
        if lo > hi:
            raise _fail(ctx, path, f"must be [lo, hi] with lo <= hi. Got {_got(value)} instead.")
    return out


def _check_map(ctx: _Ctx, node: MapOf, value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise _fail(ctx, path, f"must be a JSON object. Got {_got(value)} instead.")
    if node.keys is not None:
        allowed = ctx.pivots if node.keys == "pivots" else ctx.names
        keys = tuple(value)
        exact = node.keys.endswith("!")
        if (exact and keys != allowed) or not set(keys) <= set(allowed):
            what = "pivot inputs" if node.keys == "pivots" else "parameters"
            must = "name exactly the" if exact else "name only"
            order = ", in that order" if exact else ""
            raise _fail(
                ctx,
                path,
                f"must {must} {what} of the law ({', '.join(allowed) or 'none'}{order}). "
                f"Got {', '.join(map(str, keys)) or 'none'} instead.",
            )
    return {k: _check(ctx, node.value, v, _path(path, k), k) for k, v in value.items()}


def _check_record(ctx: _Ctx, node: Record, value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise _fail(ctx, path, f"must be a JSON object. Got {_got(value)} instead.")
    for key in sorted(node.required):
        if key not in value:
            raise _fail(ctx, _path(path, key), "is missing (every result file has it).")
    out = {}
    for key, item in value.items():
        if key not in node.fields:
            if node.extra == "refuse":
                known = ", ".join(sorted(node.fields)) or "none"
                owner = repr(path) if path else "a result file"
                raise ScaleFitError(
                    f"{ctx.where}: unknown field {_path(path, key)!r} (the fields of {owner} "
                    f"are: {known})."
                )
            out[key] = item  # an open record's other keys: kept as data, read by nothing
            continue
        sub = node.fields[key]
        out[key] = item if sub is None else _check(ctx, sub, item, _path(path, key))
    return out


# ------------------------------------------------------------------------------ the law
def _law(ctx: _Ctx, data: dict) -> Any:
    """Check ``law_spec`` and build the law it describes (no code runs: a name or a formula)."""
    from ..laws import get_law, law_from_spec, list_laws

    spec = data["law_spec"]
    if not isinstance(spec, dict):
        raise _fail(
            ctx,
            "law_spec",
            f"must be a JSON object (a registered law or a formula). Got {_got(spec)} instead.",
        )
    kind = spec.get("type")
    if kind not in ("registered", "formula"):
        check_field(ctx.where, "law_spec.type", kind, (Options({"registered", "formula"}),))
    if kind == "registered":
        spec = _check(ctx, REGISTERED_SPEC, spec, "law_spec")
        check_field(ctx.where, "law_spec.name", spec["name"], (Options(set(list_laws())),))
        opts = BUILTIN_OPTIONS.get(spec["name"])
        if opts is not None:
            _check(ctx, opts, spec["options"], "law_spec.options")
        try:
            law = get_law(spec["name"], **spec["options"])
        except ScaleFitError as exc:
            raise _fail(ctx, "law_spec.options", f"is not accepted: {exc}") from None
    else:
        spec = _check(ctx, FORMULA_SPEC, spec, "law_spec")
        _check_formula(ctx, spec)
        try:
            law = law_from_spec(spec, where=ctx.where)
        except ScaleFitError as exc:
            text = str(exc)
            prefix = f"{ctx.where}: "
            raise ScaleFitError(text if text.startswith(prefix) else prefix + text) from None
    if data["law"] != law.name:
        raise _fail(
            ctx,
            "law",
            f"must be the name of the law in 'law_spec' ({law.name!r}). Got "
            f"{fmt_value(data['law'])} instead; the file was edited or is damaged.",
        )
    return law


def _check_formula(ctx: _Ctx, spec: dict) -> None:
    """The formula parses in the grammar and reads exactly its declared inputs and parameters."""
    from ..expr import CONSTANTS, parse

    inputs, names = spec["inputs"], [p["name"] for p in spec["params"]]
    if not inputs:
        raise _fail(ctx, "law_spec.inputs", "must name at least one input column. Got [].")
    if not names:
        raise _fail(ctx, "law_spec.params", "must declare at least one parameter. Got [].")
    for key, items in (("inputs", inputs), ("params", names)):
        dup = sorted({n for n in items if items.count(n) > 1})
        if dup:
            raise _fail(ctx, f"law_spec.{key}", f"must not repeat a name. Got {dup} twice.")
    clash = sorted((set(inputs) & set(names)) | ((set(inputs) | set(names)) & set(CONSTANTS)))
    if clash:
        raise _fail(
            ctx, "law_spec", f"names {clash} as more than one of input, parameter, constant."
        )
    if "loss" in inputs:
        raise _fail(ctx, "law_spec.inputs", "must not name 'loss', the response column.")
    for i, point in enumerate(spec.get("start_points", [])):
        extra = sorted(set(point) - set(names))
        if extra:
            raise _fail(
                ctx, f"law_spec.start_points[{i}]", f"names {extra}, which are not parameters."
            )
    try:
        expression = parse(spec["formula"], kind="formula")
    except ScaleFitError as exc:
        raise _fail(ctx, "law_spec.formula", f"is not a formula: {exc}") from None
    except (RecursionError, ValueError, ArithmeticError, MemoryError) as exc:
        raise _fail(ctx, "law_spec.formula", f"is not a formula ({type(exc).__name__}).") from None
    read = set(expression.names) - set(CONSTANTS)
    if read != set(inputs) | set(names):
        raise _fail(
            ctx,
            "law_spec.formula",
            f"must read exactly the declared inputs and parameters "
            f"{sorted(set(inputs) | set(names))}. It reads {sorted(read)}.",
        )


# ------------------------------------------------------------------------------ the result
def check_result(data: Any, *, where: str) -> tuple[Any, dict[str, Any]]:
    """Check a parsed result file against the declared schema; nothing is built from it before.

    Parameters
    ----------
    data : any
        The parsed JSON (see :func:`scalefit._io.read_json`).
    where : str
        The file, for messages.

    Returns
    -------
    law : Law
        The law the file's ``law_spec`` describes (a registered law or a parsed formula).
    fields : dict
        The checked fields (every ``null`` a NaN was written as read back as NaN), ready for
        :class:`~scalefit.fit.result.FitResult`.

    Raises
    ------
    ScaleFitError
        One line: ``"<where>: field '<name>' must be <allowed>. Got <value> instead."``, or a
        missing, unknown or inconsistent field named the same way.
    """
    ctx = _Ctx(where)
    if not isinstance(data, dict):
        raise ScaleFitError(
            f"{where}: not a scalefit result file (a JSON object with 'schema_version', 'law', "
            f"'params', ...). Got {type(data).__name__ if data is not None else 'null'}."
        )
    if "schema_version" not in data:
        raise _fail(ctx, "schema_version", "is missing: not a scalefit result file.")
    version = data["schema_version"]
    if type(version) is not int or version not in READABLE_VERSIONS:
        readable = ", ".join(map(str, READABLE_VERSIONS))
        raise _fail(
            ctx,
            "schema_version",
            f"must be one of {readable} (the versions this scalefit reads). Got "
            f"{fmt_value(version)} instead.",
        )
    for key in ("law", "law_spec"):
        if key not in data:
            raise _fail(ctx, key, "is missing (every result file has it).")
    check_field(where, "law", data["law"], RESULT.fields["law"].constraints)
    law = _law(ctx, data)
    ctx.names = tuple(law.param_names)
    ctx.kinds = {p.name: p.kind for p in law.params}
    ctx.pivots = tuple(dict.fromkeys(p.pivot[1] for p in law.params if p.kind == "coef"))
    out = _check(ctx, RESULT, data, "")
    _consistent(ctx, out)
    return law, out


def _consistent(ctx: _Ctx, out: dict[str, Any]) -> None:
    """Checks across fields: counts that must agree, draws that must be usable."""
    draws = out["draws"]
    n = 0 if draws is None else len(draws)
    if out["n_boot"] != n:
        raise _fail(
            ctx, "n_boot", f"must be the number of rows of 'draws' ({n}). Got {out['n_boot']}."
        )
    if n and not any(all(math.isfinite(v) for v in row) for row in draws):
        raise _fail(
            ctx,
            "draws",
            f"has {n} rows and none is usable (every row holds a null); re-run the bootstrap "
            "or write null.",
        )
    if len(set(out["not_identified"])) != len(out["not_identified"]):
        raise _fail(ctx, "not_identified", "must not repeat a parameter.")
    conv, diag, hold = out["conventions"], out["diagnostics"], out["holdout"]
    if out["method"] == "bayes":
        _bayes_complete(ctx, out)
    if conv.get("loss") == "huber" and "delta" not in conv:
        raise _fail(ctx, "conventions.delta", "is missing (the Huber loss needs its delta).")
    if "n_best" in diag:
        if "n_starts" not in diag:
            raise _fail(ctx, "diagnostics.n_starts", "is missing (n_best counts among them).")
        if diag["n_best"] > diag["n_starts"]:
            raise _fail(
                ctx,
                "diagnostics.n_best",
                f"must be at most n_starts ({diag['n_starts']}). Got {diag['n_best']}.",
            )
    if hold is not None and hold.get("pit") is not None and len(hold["pit"]) != hold["n_test"]:
        raise _fail(
            ctx,
            "holdout.pit",
            f"must hold one value per held-out row ({hold['n_test']}). Got {len(hold['pit'])}.",
        )


def _bayes_complete(ctx: _Ctx, out: dict[str, Any]) -> None:
    """A Bayesian result has what its readers use: draws, every interval and HDI, the noise."""
    names = set(ctx.names)
    if not out["draws"]:
        raise _fail(ctx, "draws", "must hold the posterior draws of a Bayesian fit. Got none.")
    for path, value in (("ci", out["ci"]), ("diagnostics.hdi", out["diagnostics"].get("hdi"))):
        if value is None or set(value) != names:
            got = "none" if value is None else ", ".join(value) or "none"
            raise _fail(
                ctx,
                path,
                f"must give every parameter of a Bayesian fit ({', '.join(ctx.names)}). "
                f"Got {got} instead.",
            )
    if "sigma" not in out["diagnostics"].get("noise", {}):
        raise _fail(
            ctx,
            "diagnostics.noise.sigma",
            "is missing (the posterior median noise scale of a Bayesian fit).",
        )
