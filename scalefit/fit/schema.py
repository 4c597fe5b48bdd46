"""The declared schema of a result file, checked before anything reads it.

A result file is what :meth:`~scalefit.fit.result.FitResult.save` writes (least squares, with or
without bootstrap draws and a hold-out check, and Bayesian fits alike). The declarations below
are JSON Schema (draft 2020-12), checked with :mod:`jsonschema`; the schema of the per-parameter
fields is built from the file's law. Each node's ``description`` holds the words of the
message, so every refusal has one shape::

    r.json: field 'n_rows' must be an int >= 1. Got 'abc' instead.

What is checked
---------------
- ``schema_version`` is one of :data:`READABLE_VERSIONS` (a newer or unknown version is refused,
  never guessed at).
- ``law_spec`` names a registered law (with options of the right type) or is a formula law whose
  text is parsed by :mod:`scalefit.core.expr`'s grammar (never ``eval``); ``law`` is its name.
- Every other field has a type, a range and, where it is per parameter, a shape fixed by the law:
  ``params`` names the law's parameters in the law's order (the order of the draws' columns),
  ``corr`` is P x P (or empty), ``draws`` N x P, ``internal`` has P entries (or none), ``refs``
  names only the law's pivot inputs, ``n_boot`` counts the draws.
- A Bayesian result (``method`` "bayes") also carries its draws, an interval and an HDI for
  every parameter and the posterior median noise scale (what its readers use).
- ``null`` stands where ``save()`` wrote a NaN (a failed resample, an undefined correlation);
  numeric fields that may hold it (``"x-float"`` in the schema) read it back as NaN.

Unknown fields
--------------
Refused at the top level and inside ``law_spec``, ``metrics``, ``holdout`` and ``ci`` (a field
nobody wrote is damage). ``conventions`` and ``diagnostics`` are open records (each method writes
its own keys, software versions among them): the keys any reader uses are declared and checked
here; any other key is kept as data and read by nothing.
"""

import math
import sys
from typing import Any

import numpy as np
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match

from ..core._validation import Interval, did_you_mean, fmt_value
from ..core.errors import ScaleFitError

__all__ = ["READABLE_VERSIONS", "SCHEMA_VERSION", "check_result"]

#: The version ``save()`` writes.
SCHEMA_VERSION = 2
#: The versions this package reads; any other is refused.
READABLE_VERSIONS = (2,)
#: Largest magnitude a stored parameter value may have: beyond it a value is damage, not a fit.
ABSURD = 1e100
_BIG = sys.float_info.max  # the bound of an unbounded side: refuses 1e999 (read as infinity)

# An int in a result file is a JSON integer literal: not a bool, not 2.0.
_Validator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: type(value) is int
    ),
)


# ------------------------------------------------------------------------------ node builders
def num(
    kind: type = float,
    lo: float | None = None,
    hi: float | None = None,
    closed: str = "both",
    *,
    finite: bool = False,
    null: bool = False,
    nan: bool | None = None,
) -> dict:
    """A number in a range (:class:`~scalefit.core._validation.Interval` gives the words).

    ``null``: ``null`` is allowed; ``nan`` (default: ``null`` for floats): it stands for a NaN
    ``save()`` wrote, and floats are read back as floats (``"x-float"``).
    """
    words = Interval(kind, lo, hi, closed, finite).describe()
    node: dict[str, Any] = {"type": ["integer" if kind is int else "number"]}
    node["minimum" if closed in ("both", "left") or lo is None else "exclusiveMinimum"] = (
        -_BIG if lo is None else lo
    )
    node["maximum" if closed in ("both", "right") or hi is None else "exclusiveMaximum"] = (
        _BIG if hi is None else hi
    )
    if null:
        node["type"].append("null")
        words += " or null"
    if kind is float and (null if nan is None else nan):
        node["x-float"] = True
    return {**node, "description": f"must be {words}"}


def one_of(*values: Any, null: bool = False) -> dict:
    """One of ``values`` (strings)."""
    words = "one of " + ", ".join(repr(v) for v in sorted(values, key=str))
    return {
        "type": ["string", "null"] if null else "string",
        "enum": [*values, None] if null else list(values),
        "description": f"must be {words}{' or null' if null else ''}",
    }


def text(pattern: str | None = None, words: str = "a string", *, null: bool = False) -> dict:
    """A string (matching ``pattern`` in full)."""
    node: dict[str, Any] = {"type": ["string", "null"] if null else "string"}
    if pattern is not None:
        node["pattern"] = rf"^(?:{pattern})\Z"
    return {**node, "description": f"must be {words}{' or null' if null else ''}"}


def list_of(item: Any, n: int | None = None, *, words: str | None = None, null=False) -> dict:
    """A list of ``item`` (of exactly ``n``)."""
    node: dict[str, Any] = {"type": ["array", "null"] if null else "array", "items": item}
    if n is not None:
        node |= {"minItems": n, "maxItems": n}
    words = words or ("a list" if n is None else f"a list of {n} value{'s' * (n != 1)}")
    return {**node, "description": f"must be {words}{' or null' if null else ''}"}


def record(fields: dict, required: Any = (), *, open_: bool = False, null=False) -> dict:
    """A JSON object with declared ``fields``; unknown keys refused unless ``open_``."""
    return {
        "type": ["object", "null"] if null else "object",
        "properties": fields,
        "required": sorted(required),
        "additionalProperties": open_,
        "description": f"must be a JSON object{' or null' if null else ''}",
    }


def map_of(value: Any) -> dict:
    """A JSON object with any keys and ``value`` items."""
    return {"type": "object", "additionalProperties": value, "description": "must be a JSON object"}


def keyed(names: tuple[str, ...], value: Any, what: str, *, exact: bool = False) -> dict:
    """A JSON object keyed by some (``exact``: all, in order) of ``names``; ``value(name)``."""
    must = "name exactly the" if exact else "name only"
    order = ", in that order" if exact else ""
    return {
        "type": "object",
        "properties": {k: value(k) for k in names},
        "required": list(names) if exact else [],
        "additionalProperties": False,
        "x-keys": True,
        "description": f"must {must} {what} of the law ({', '.join(names) or 'none'}{order})",
    }


# ------------------------------------------------------------------------------ declarations
NAME = text(r"[A-Za-z_][A-Za-z0-9_]{0,63}", "an identifier (letters, digits, _; 1-64 chars)")
LABEL = text(r"[^\x00-\x1f\x7f]{1,200}", "a one-line name of 1-200 characters")
TEXT = text()
BOOL = {"type": "boolean", "description": "must be a bool"}
NONNEG = num(float, 0, finite=True, null=True)
PROB_OPEN = num(float, 0, 1, "neither")
UNIT = num(float, 0, 1, null=True)
COUNT = num(int, 0)
POSITIVE_INT = num(int, 1)
FINITE_NULL = num(float, finite=True, null=True)
POSITIVE = num(float, 0, None, "neither", finite=True)
SCALAR = {
    "type": ["string", "number", "boolean", "null"],
    "description": "must be a string, number or bool or null",
}
TEXT_LIST = list_of(TEXT)

SCORES = {
    "predictive": TEXT,
    "coverage": UNIT,
    "coverage_50": UNIT,
    "width_log": NONNEG,
    "lpd": num(float, finite=True, null=True, nan=False),  # null: not available ("n/a")
    "pit": list_of(UNIT, null=True),
}
#: Keys of ``conventions`` that readers use (report, predict, bootstrap, Bayes predictive).
CONVENTIONS = record(
    {
        "law": LABEL,
        "law_options": map_of(SCALAR),
        "loss": one_of("mse", "huber", "lad", "bayes"),
        "delta": POSITIVE,
        "residuals": one_of("log", "linear"),
        "likelihood": one_of("student_t", "normal"),
        "weights": text(null=True),
        "weight_column": text(null=True),
        "starts": POSITIVE_INT,
        "seed": num(int, 0, null=True),
        "ci_method": one_of("percentile", "bca"),
        "outlier_rule": TEXT,
        "derived": TEXT_LIST,
        "source": text(null=True),
        "dataset": text(null=True),
        "loss_unit": text(null=True),
        "n_read": COUNT,
        "drop_highest": COUNT,
        "reference_points": map_of(num(float, 0, finite=True, null=True)),
        "data_range": map_of(list_of(num(float, 0, None, "neither", finite=True, null=True), 2)),
        "bootstrap": COUNT,
        "chains": POSITIVE_INT,
        "draws": POSITIVE_INT,
    },
    open_=True,
)
METRICS = record(
    {
        "r2": num(float, None, 1, finite=True, null=True),
        **dict.fromkeys(("rmse", "rmse_log", "mean_rel_err", "max_rel_err"), NONNEG),
    }
)

#: The law spec of a formula law (``Law.from_formula``).
_BOUNDED = num(float, -ABSURD, ABSURD)
FORMULA_SPEC = record(
    {
        "type": one_of("formula"),
        "name": LABEL,
        "formula": text(r"[^\x00-\x1f\x7f]{1,2000}", "formula text (1-2000 chars)"),
        "inputs": list_of(NAME),
        "params": list_of(
            record(
                {
                    "name": NAME,
                    "kind": one_of("free", "positive", "exponent"),
                    "start": list_of(_BOUNDED, 2, words="a pair [lo, hi]"),
                    "bounds": list_of(
                        num(float, finite=True, null=True, nan=False), 2, words="a pair [lo, hi]"
                    ),
                    "range_kind": one_of("validity", "constraint"),
                },
                {"name", "kind", "start", "bounds"},
            )
        ),
        "start_points": list_of(map_of(_BOUNDED)),
    },
    {"type", "name", "formula", "inputs", "params"},
)
#: The law spec of a registered law; options of the built-in laws are declared here.
REGISTERED_SPEC = record(
    {"type": one_of("registered"), "name": LABEL, "options": map_of(SCALAR)},
    {"type", "name", "options"},
)
_CRITICAL_DEPTH = {
    "vocab": num(float, 1, 1e8),
    "embeddings": one_of("tied", "untied", "excluded"),
    "params_from": one_of("accounting", "column"),
}
BUILTIN_OPTIONS = {
    "chinchilla": record({}),
    "decomposed": record({}),
    "depth_power": record({}),
    "critical_depth": record({"form": one_of("log", "power"), **_CRITICAL_DEPTH}),
    "critical_depth_power": record({"form": one_of("power"), **_CRITICAL_DEPTH}),
}


def _low(kind: str) -> float:
    """The smallest value a parameter of ``kind`` may have."""
    return 0.0 if kind in ("coef", "positive", "floor") else -ABSURD


def result_schema(law: Any) -> dict:
    """The schema of a result file of ``law`` (its parameters fix names, ranges and shapes).

    Length: a flat declaration of every field of a result file, one line each, with the few
    helpers that depend on the law's parameters; splitting it would scatter one schema.
    """
    names = tuple(law.param_names)
    kinds = {p.name: p.kind for p in law.params}
    pivots = tuple(dict.fromkeys(p.pivot[1] for p in law.params if p.kind == "coef"))
    p = len(names)

    def param(name: str, null: bool = False) -> dict:
        return {**num(float, _low(kinds[name]), ABSURD, null=null), "x-float": True}

    def params(value=param, exact=False) -> dict:
        return keyed(names, value, "parameters", exact=exact)

    def pair(name: str) -> dict:
        return list_of(param(name, null=True), 2, words="a pair [lo, hi]")

    per_param = f"a list of {p} value{'s' * (p != 1)} (one per parameter of the law)"
    draw = {**list_of(None, p, words=per_param), "prefixItems": [param(n, True) for n in names]}
    del draw["items"]
    holdout = record(
        {
            "fraction": PROB_OPEN,
            "split_by": NAME,
            "threshold": FINITE_NULL,
            "n_train": POSITIVE_INT,
            "n_test": POSITIVE_INT,
            "mae_log": NONNEG,
            "mae": NONNEG,
            "max_rel_err": NONNEG,
            **SCORES,
            "band_prob": PROB_OPEN,
            "train_params": params(exact=True),
            "train_converged": BOOL,
            "uncalibrated": record(SCORES, {"predictive", "coverage"}),
            "calibration": map_of(FINITE_NULL),
        },
        {"n_train", "n_test", "mae_log", "max_rel_err", "coverage", "band_prob"},
        null=True,
    )
    diagnostics = record(
        {
            **dict.fromkeys(("n_best", "n_converged", "n_boot", "boot_failed"), COUNT),
            **dict.fromkeys(("n_starts", "chains", "draws"), POSITIVE_INT),
            "resample": TEXT,
            "checks_failed": TEXT_LIST,
            "stderr_na": params(lambda name: TEXT),
            "hdi": params(pair),
            "hdi_prob": PROB_OPEN,
            "noise": map_of(POSITIVE),
            **dict.fromkeys(("r_hat", "ess_bulk", "ess_tail"), map_of(NONNEG)),
            **dict.fromkeys(("grad_max", "hessian_cond", "total_seconds"), NONNEG),
            **dict.fromkeys(("r_hat_max", "ess_bulk_min", "ess_tail_min"), NONNEG),
            "divergences": COUNT,
            "loo": map_of(FINITE_NULL),
            "ppc": map_of(UNIT),
        },
        open_=True,
    )
    corr_row = list_of(num(float, -1, 1, null=True), p, words=per_param)
    empty_or_p = [  # the words on each branch: the message of whichever fails
        {"maxItems": 0, "description": f"must be {per_param} or []"},
        {"minItems": p, "maxItems": p, "description": f"must be {per_param} or []"},
    ]
    fields = {
        "schema_version": {},  # checked first, by check_result
        "law": LABEL,
        "law_spec": {},  # checked first, by _law (it fixes the parameters)
        "params": params(exact=True),
        "method": one_of("jax", "lmfit", "varpro", "bayes"),
        "objective": NONNEG,
        "converged": BOOL,
        "n_rows": POSITIVE_INT,
        "metrics": METRICS,
        "stderr": params(lambda _: NONNEG),
        "corr": {
            **list_of(corr_row, words=per_param + " or []"),
            "anyOf": empty_or_p,
        },
        "ci": params(pair),
        "ci_prob": PROB_OPEN,
        "draws": list_of(draw, null=True),
        "warnings": TEXT_LIST,
        "conventions": CONVENTIONS,
        "diagnostics": diagnostics,
        "holdout": holdout,
        "internal": {
            **list_of(num(float, finite=True), words=per_param + " or []"),
            "anyOf": empty_or_p,
        },
        "refs": keyed(pivots, lambda _: num(float, finite=True), "pivot inputs"),
        "not_identified": {
            **list_of(one_of(*names)),
            "uniqueItems": True,
            "description": "must be a list of parameters of the law, none repeated",
        },
        "n_boot": COUNT,
    }
    return record(fields, fields)


# ------------------------------------------------------------------------------ checking
def _path(parts: Any) -> str:
    out = ""
    for key in parts:
        out = f"{out}[{key}]" if isinstance(key, int) else (f"{out}.{key}" if out else key)
    return out


def _message(where: str, error: ValidationError, prefix: tuple) -> str:
    """One line for the first schema error: the file, the field, what it must be, what it is."""
    parts = (*prefix, *error.absolute_path)
    node, value, field = error.schema, error.instance, _path(parts)
    if error.validator in ("required", "additionalProperties") and not node.get("x-keys"):
        if error.validator == "required":
            key = next(k for k in error.validator_value if k not in value)
            return f"{where}: field {_path((*parts, key))!r} is missing (every result file has it)."
        key = next(k for k in value if k not in node.get("properties", {}))
        owner = repr(field) if field else "a result file"
        known = ", ".join(sorted(node.get("properties", {}))) or "none"
        return (
            f"{where}: unknown field {_path((*parts, key))!r} (the fields of {owner} are: {known})."
        )
    if isinstance(value, dict) and node.get("x-keys"):
        got = ", ".join(map(str, value)) or "none"
    elif isinstance(value, list) and error.validator in ("minItems", "maxItems", "anyOf"):
        got = f"a list of {len(value)}"
    else:
        got = "null" if value is None else fmt_value(value)
    options = [v for v in node.get("enum", ()) if isinstance(v, str)]
    hint = did_you_mean(value, options) if isinstance(value, str) and options else ""
    return f"{where}: field {field!r} {node['description']}. Got {got} instead.{hint}"


def _check(where: str, schema: dict, value: Any, prefix: tuple = ()) -> Any:
    """Check ``value`` against ``schema``; return it with NaN-able nulls read back as NaN."""
    error = best_match(_Validator(schema).iter_errors(value))
    if error is not None:
        raise ScaleFitError(_message(where, error, prefix))
    return _read(schema, value)


def _read(node: Any, value: Any) -> Any:
    """``value`` as read: in ``"x-float"`` nodes a null is NaN and an int a float."""
    if not isinstance(node, dict):
        return value
    if node.get("x-float"):
        return math.nan if value is None else float(value)
    if isinstance(value, dict):
        props, extra = node.get("properties", {}), node.get("additionalProperties")
        return {k: _read(props.get(k, extra), v) for k, v in value.items()}
    if isinstance(value, list):
        if "prefixItems" in node:
            if None not in value and all(type(v) is float for v in value):
                return value  # a row of draws: the common case, fast
            return [_read(n, v) for n, v in zip(node["prefixItems"], value, strict=True)]
        return [_read(node.get("items"), v) for v in value]
    return value


def _fail(where: str, field: str, what: str) -> ScaleFitError:
    return ScaleFitError(f"{where}: field {field!r} {what}")


def _law(where: str, data: dict) -> Any:
    """Check ``law_spec`` and build the law it describes (no code runs: a name or a formula)."""
    from ..laws import get_law, law_from_spec, list_laws

    spec = data["law_spec"]
    if not isinstance(spec, dict):
        raise _fail(
            where,
            "law_spec",
            "must be a JSON object (a registered law or a formula). Got "
            f"{'null' if spec is None else fmt_value(spec)} instead.",
        )
    kind = spec.get("type")
    if kind not in ("registered", "formula"):
        _check(where, one_of("registered", "formula"), kind, ("law_spec", "type"))
    if kind == "registered":
        spec = _check(where, REGISTERED_SPEC, spec, ("law_spec",))
        _check(where, one_of(*list_laws()), spec["name"], ("law_spec", "name"))
        opts = BUILTIN_OPTIONS.get(spec["name"])
        if opts is not None:
            _check(where, opts, spec["options"], ("law_spec", "options"))
        try:
            law = get_law(spec["name"], **spec["options"])
        except ScaleFitError as exc:
            raise _fail(where, "law_spec.options", f"is not accepted: {exc}") from None
    else:
        spec = _check(where, FORMULA_SPEC, spec, ("law_spec",))
        _check_formula(where, spec)
        try:
            law = law_from_spec(spec, where=where)
        except ScaleFitError as exc:
            msg, prefix = str(exc), f"{where}: "
            raise ScaleFitError(msg if msg.startswith(prefix) else prefix + msg) from None
    if data["law"] != law.name:
        raise _fail(
            where,
            "law",
            f"must be the name of the law in 'law_spec' ({law.name!r}). Got "
            f"{fmt_value(data['law'])} instead; the file was edited or is damaged.",
        )
    return law


def _check_formula(where: str, spec: dict) -> None:
    """The formula parses in the grammar and reads exactly its declared inputs and parameters."""
    from ..core.expr import CONSTANTS, parse

    inputs, names = spec["inputs"], [p["name"] for p in spec["params"]]
    if not inputs:
        raise _fail(where, "law_spec.inputs", "must name at least one input column. Got [].")
    if not names:
        raise _fail(where, "law_spec.params", "must declare at least one parameter. Got [].")
    for key, items in (("inputs", inputs), ("params", names)):
        dup = sorted({n for n in items if items.count(n) > 1})
        if dup:
            raise _fail(where, f"law_spec.{key}", f"must not repeat a name. Got {dup} twice.")
    clash = sorted((set(inputs) & set(names)) | ((set(inputs) | set(names)) & set(CONSTANTS)))
    if clash:
        raise _fail(
            where, "law_spec", f"names {clash} as more than one of input, parameter, constant."
        )
    if "loss" in inputs:
        raise _fail(where, "law_spec.inputs", "must not name 'loss', the response column.")
    for i, p in enumerate(spec["params"]):
        for key in ("start", "bounds"):
            _ordered(where, f"law_spec.params[{i}].{key}", p[key])
    for i, point in enumerate(spec.get("start_points", [])):
        extra = sorted(set(point) - set(names))
        if extra:
            raise _fail(
                where, f"law_spec.start_points[{i}]", f"names {extra}, which are not parameters."
            )
    try:
        expression = parse(spec["formula"], kind="formula")
    except ScaleFitError as exc:
        raise _fail(where, "law_spec.formula", f"is not a formula: {exc}") from None
    except (RecursionError, ValueError, ArithmeticError, MemoryError) as exc:
        raise _fail(
            where, "law_spec.formula", f"is not a formula ({type(exc).__name__})."
        ) from None
    read = set(expression.names) - set(CONSTANTS)
    if read != set(inputs) | set(names):
        raise _fail(
            where,
            "law_spec.formula",
            f"must read exactly the declared inputs and parameters "
            f"{sorted(set(inputs) | set(names))}. It reads {sorted(read)}.",
        )


def _ordered(where: str, field: str, pair: list) -> None:
    """A ``[lo, hi]`` pair has ``lo <= hi`` where both are numbers (a NaN or null: no order)."""
    lo, hi = (math.nan if v is None else float(v) for v in pair)
    if lo > hi:
        raise _fail(where, field, f"must be [lo, hi] with lo <= hi. Got {fmt_value(pair)} instead.")


# ------------------------------------------------------------------------------ the result
def check_result(data: Any, *, where: str) -> tuple[Any, dict[str, Any]]:
    """Check a parsed result file against the declared schema; nothing is built from it before.

    Parameters
    ----------
    data : any
        The parsed JSON (see :func:`scalefit.core._io.read_json`).
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
    if not isinstance(data, dict):
        raise ScaleFitError(
            f"{where}: not a scalefit result file (a JSON object with 'schema_version', 'law', "
            f"'params', ...). Got {type(data).__name__ if data is not None else 'null'}."
        )
    if "schema_version" not in data:
        raise _fail(where, "schema_version", "is missing: not a scalefit result file.")
    version = data["schema_version"]
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise _fail(
            where,
            "schema_version",
            f"must be one of {', '.join(map(str, READABLE_VERSIONS))} (the versions this "
            f"scalefit reads). Got {fmt_value(version)} instead.",
        )
    for key in ("law", "law_spec"):
        if key not in data:
            raise _fail(where, key, "is missing (every result file has it).")
    _check(where, LABEL, data["law"], ("law",))
    law = _law(where, data)
    draws = data.get("draws")
    plain = _plain_draws(law, draws)  # checked at once: a million rows is common
    out = _check(where, result_schema(law), {**data, "draws": []} if plain else data)
    if plain:
        out["draws"] = draws
    _consistent(where, law, out)
    return law, out


def _plain_draws(law: Any, draws: Any) -> bool:
    """Whether ``draws`` is a non-empty list of rows of P floats each in its parameter's range."""
    p = len(law.param_names)
    if not isinstance(draws, list) or not draws:
        return False
    if not all(type(r) is list and len(r) == p and all(type(v) is float for v in r) for r in draws):
        return False
    low = [_low(x.kind) for x in law.params]
    values = np.asarray(draws)
    return bool(((values >= np.asarray(low)) & (values <= ABSURD)).all())


def _consistent(where: str, law: Any, out: dict[str, Any]) -> None:
    """Checks across fields: orders, counts that must agree, draws that must be usable."""
    names = tuple(law.param_names)
    hold = out["holdout"]
    train = None if hold is None else hold.get("train_params")
    for field, params in (("params", out["params"]), ("holdout.train_params", train)):
        if params is not None and tuple(params) != names:
            raise _fail(
                where,
                field,
                f"must name exactly the parameters of the law ({', '.join(names)}, in that "
                f"order). Got {', '.join(params)} instead.",
            )
    for field, pairs in (("ci", out["ci"]), ("diagnostics.hdi", out["diagnostics"].get("hdi"))):
        for name, pair in (pairs or {}).items():
            _ordered(where, f"{field}.{name}", pair)
    draws = out["draws"]
    n = 0 if draws is None else len(draws)
    if out["n_boot"] != n:
        raise _fail(
            where, "n_boot", f"must be the number of rows of 'draws' ({n}). Got {out['n_boot']}."
        )
    if n and not any(all(math.isfinite(v) for v in row) for row in draws):
        raise _fail(
            where,
            "draws",
            f"has {n} rows and none is usable (every row holds a null); re-run the bootstrap "
            "or write null.",
        )
    conv, diag = out["conventions"], out["diagnostics"]
    if out["method"] == "bayes":
        _bayes_complete(where, names, out)
    if conv.get("loss") == "huber" and "delta" not in conv:
        raise _fail(where, "conventions.delta", "is missing (the Huber loss needs its delta).")
    if "n_best" in diag:
        if "n_starts" not in diag:
            raise _fail(where, "diagnostics.n_starts", "is missing (n_best counts among them).")
        if diag["n_best"] > diag["n_starts"]:
            raise _fail(
                where,
                "diagnostics.n_best",
                f"must be at most n_starts ({diag['n_starts']}). Got {diag['n_best']}.",
            )
    if hold is not None and hold.get("pit") is not None and len(hold["pit"]) != hold["n_test"]:
        raise _fail(
            where,
            "holdout.pit",
            f"must hold one value per held-out row ({hold['n_test']}). Got {len(hold['pit'])}.",
        )


def _bayes_complete(where: str, names: tuple[str, ...], out: dict[str, Any]) -> None:
    """A Bayesian result has what its readers use: draws, every interval and HDI, the noise."""
    if not out["draws"]:
        raise _fail(where, "draws", "must hold the posterior draws of a Bayesian fit. Got none.")
    for path, value in (("ci", out["ci"]), ("diagnostics.hdi", out["diagnostics"].get("hdi"))):
        if value is None or set(value) != set(names):
            got = "none" if value is None else ", ".join(value) or "none"
            raise _fail(
                where,
                path,
                f"must give every parameter of a Bayesian fit ({', '.join(names)}). "
                f"Got {got} instead.",
            )
    if "sigma" not in out["diagnostics"].get("noise", {}):
        raise _fail(
            where,
            "diagnostics.noise.sigma",
            "is missing (the posterior median noise scale of a Bayesian fit).",
        )
