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

import math
from typing import Any

from .._validation import Interval, IsType, Matches, Options, check_field, fmt_value
from ..errors import ScaleFitError
from ._schema_nodes import (
    ABSURD,
    Ctx,
    Either,
    Leaf,
    ListOf,
    MapOf,
    Param,
    ParamName,
    Record,
    check,
    fail,
    got,
    num,
)

__all__ = ["READABLE_VERSIONS", "SCHEMA_VERSION", "check_result"]

#: The version ``save()`` writes.
SCHEMA_VERSION = 2
#: The versions this package reads; any other is refused.
READABLE_VERSIONS = (2,)

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
        "data_range": MapOf(
            ListOf(num(Interval(float, 0, None, closed="neither", finite=True)), length=2)
        ),
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
        "stderr_na": MapOf(Leaf((TEXT,)), keys="params"),
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
        "method": Leaf((Options({"jax", "lmfit", "varpro", "bayes"}),)),
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
# ------------------------------------------------------------------------------ the law
def _law(ctx: Ctx, data: dict) -> Any:
    """Check ``law_spec`` and build the law it describes (no code runs: a name or a formula)."""
    from ..laws import get_law, law_from_spec, list_laws

    spec = data["law_spec"]
    if not isinstance(spec, dict):
        raise fail(
            ctx,
            "law_spec",
            f"must be a JSON object (a registered law or a formula). Got {got(spec)} instead.",
        )
    kind = spec.get("type")
    if kind not in ("registered", "formula"):
        check_field(ctx.where, "law_spec.type", kind, (Options({"registered", "formula"}),))
    if kind == "registered":
        spec = check(ctx, REGISTERED_SPEC, spec, "law_spec")
        check_field(ctx.where, "law_spec.name", spec["name"], (Options(set(list_laws())),))
        opts = BUILTIN_OPTIONS.get(spec["name"])
        if opts is not None:
            check(ctx, opts, spec["options"], "law_spec.options")
        try:
            law = get_law(spec["name"], **spec["options"])
        except ScaleFitError as exc:
            raise fail(ctx, "law_spec.options", f"is not accepted: {exc}") from None
    else:
        spec = check(ctx, FORMULA_SPEC, spec, "law_spec")
        _check_formula(ctx, spec)
        try:
            law = law_from_spec(spec, where=ctx.where)
        except ScaleFitError as exc:
            text = str(exc)
            prefix = f"{ctx.where}: "
            raise ScaleFitError(text if text.startswith(prefix) else prefix + text) from None
    if data["law"] != law.name:
        raise fail(
            ctx,
            "law",
            f"must be the name of the law in 'law_spec' ({law.name!r}). Got "
            f"{fmt_value(data['law'])} instead; the file was edited or is damaged.",
        )
    return law


def _check_formula(ctx: Ctx, spec: dict) -> None:
    """The formula parses in the grammar and reads exactly its declared inputs and parameters."""
    from ..expr import CONSTANTS, parse

    inputs, names = spec["inputs"], [p["name"] for p in spec["params"]]
    if not inputs:
        raise fail(ctx, "law_spec.inputs", "must name at least one input column. Got [].")
    if not names:
        raise fail(ctx, "law_spec.params", "must declare at least one parameter. Got [].")
    for key, items in (("inputs", inputs), ("params", names)):
        dup = sorted({n for n in items if items.count(n) > 1})
        if dup:
            raise fail(ctx, f"law_spec.{key}", f"must not repeat a name. Got {dup} twice.")
    clash = sorted((set(inputs) & set(names)) | ((set(inputs) | set(names)) & set(CONSTANTS)))
    if clash:
        raise fail(
            ctx, "law_spec", f"names {clash} as more than one of input, parameter, constant."
        )
    if "loss" in inputs:
        raise fail(ctx, "law_spec.inputs", "must not name 'loss', the response column.")
    for i, point in enumerate(spec.get("start_points", [])):
        extra = sorted(set(point) - set(names))
        if extra:
            raise fail(
                ctx, f"law_spec.start_points[{i}]", f"names {extra}, which are not parameters."
            )
    try:
        expression = parse(spec["formula"], kind="formula")
    except ScaleFitError as exc:
        raise fail(ctx, "law_spec.formula", f"is not a formula: {exc}") from None
    except (RecursionError, ValueError, ArithmeticError, MemoryError) as exc:
        raise fail(ctx, "law_spec.formula", f"is not a formula ({type(exc).__name__}).") from None
    read = set(expression.names) - set(CONSTANTS)
    if read != set(inputs) | set(names):
        raise fail(
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
    ctx = Ctx(where)
    if not isinstance(data, dict):
        raise ScaleFitError(
            f"{where}: not a scalefit result file (a JSON object with 'schema_version', 'law', "
            f"'params', ...). Got {type(data).__name__ if data is not None else 'null'}."
        )
    if "schema_version" not in data:
        raise fail(ctx, "schema_version", "is missing: not a scalefit result file.")
    version = data["schema_version"]
    if type(version) is not int or version not in READABLE_VERSIONS:
        readable = ", ".join(map(str, READABLE_VERSIONS))
        raise fail(
            ctx,
            "schema_version",
            f"must be one of {readable} (the versions this scalefit reads). Got "
            f"{fmt_value(version)} instead.",
        )
    for key in ("law", "law_spec"):
        if key not in data:
            raise fail(ctx, key, "is missing (every result file has it).")
    check_field(where, "law", data["law"], RESULT.fields["law"].constraints)
    law = _law(ctx, data)
    ctx.names = tuple(law.param_names)
    ctx.kinds = {p.name: p.kind for p in law.params}
    ctx.pivots = tuple(dict.fromkeys(p.pivot[1] for p in law.params if p.kind == "coef"))
    out = check(ctx, RESULT, data, "")
    _consistent(ctx, out)
    return law, out


def _consistent(ctx: Ctx, out: dict[str, Any]) -> None:
    """Checks across fields: counts that must agree, draws that must be usable."""
    draws = out["draws"]
    n = 0 if draws is None else len(draws)
    if out["n_boot"] != n:
        raise fail(
            ctx, "n_boot", f"must be the number of rows of 'draws' ({n}). Got {out['n_boot']}."
        )
    if n and not any(all(math.isfinite(v) for v in row) for row in draws):
        raise fail(
            ctx,
            "draws",
            f"has {n} rows and none is usable (every row holds a null); re-run the bootstrap "
            "or write null.",
        )
    if len(set(out["not_identified"])) != len(out["not_identified"]):
        raise fail(ctx, "not_identified", "must not repeat a parameter.")
    conv, diag, hold = out["conventions"], out["diagnostics"], out["holdout"]
    if out["method"] == "bayes":
        _bayes_complete(ctx, out)
    if conv.get("loss") == "huber" and "delta" not in conv:
        raise fail(ctx, "conventions.delta", "is missing (the Huber loss needs its delta).")
    if "n_best" in diag:
        if "n_starts" not in diag:
            raise fail(ctx, "diagnostics.n_starts", "is missing (n_best counts among them).")
        if diag["n_best"] > diag["n_starts"]:
            raise fail(
                ctx,
                "diagnostics.n_best",
                f"must be at most n_starts ({diag['n_starts']}). Got {diag['n_best']}.",
            )
    if hold is not None and hold.get("pit") is not None and len(hold["pit"]) != hold["n_test"]:
        raise fail(
            ctx,
            "holdout.pit",
            f"must hold one value per held-out row ({hold['n_test']}). Got {len(hold['pit'])}.",
        )


def _bayes_complete(ctx: Ctx, out: dict[str, Any]) -> None:
    """A Bayesian result has what its readers use: draws, every interval and HDI, the noise."""
    names = set(ctx.names)
    if not out["draws"]:
        raise fail(ctx, "draws", "must hold the posterior draws of a Bayesian fit. Got none.")
    for path, value in (("ci", out["ci"]), ("diagnostics.hdi", out["diagnostics"].get("hdi"))):
        if value is None or set(value) != names:
            got = "none" if value is None else ", ".join(value) or "none"
            raise fail(
                ctx,
                path,
                f"must give every parameter of a Bayesian fit ({', '.join(ctx.names)}). "
                f"Got {got} instead.",
            )
    if "sigma" not in out["diagnostics"].get("noise", {}):
        raise fail(
            ctx,
            "diagnostics.noise.sigma",
            "is missing (the posterior median noise scale of a Bayesian fit).",
        )
