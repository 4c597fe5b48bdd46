"""The law specification: one definition per functional form.

A :class:`Law` names its inputs (canonical table columns), its parameters (with how each is fitted:
a coefficient pinned at a reference point, a positive scale, a free exponent) and one expression
written over an array namespace ``xp`` (``numpy`` or ``jax.numpy``). Least squares, bootstrap,
Bayesian fits, allocation and plots all read the same object.

Internal coordinates ("for the ridge")
--------------------------------------
A term ``c / x**a`` has a near-flat valley along ``(log c, a)`` when the data sit far from
``x = 1``. A coefficient declared with ``pivot=(exponent, input)`` is therefore fitted as
``t = log c - a * log(x_ref)``, the log of the term's value at ``x_ref`` (the geometric mean of that
input over the fitted rows). Positive parameters are fitted in log space; exponents and free
parameters as they are. Results are always reported in raw units.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from ..core.errors import ScaleFitError
from ..core.expr import CONSTANTS, parse

Kind = Literal["coef", "positive", "floor", "exponent", "free"]
#: What a declared range means (see :class:`Param`).
RangeKind = Literal["constraint", "validity"]
#: Relative slack of the range tests (a value held on a bound, mapped through log and exp).
RANGE_RTOL = 1e-12
#: Kinds fitted in log coordinates: their lower bound 0 is kept by the coordinates themselves.
LOG_KINDS = ("coef", "positive", "floor")

#: Canonical columns a formula law may read without naming them in ``inputs=``.
CANONICAL_INPUTS = ("params", "tokens", "flops", "width", "depth")
#: The response column: what a law predicts, never one of its inputs or parameters.
RESPONSE = "loss"


@dataclass(frozen=True)
class Param:
    """One parameter of a law.

    Parameters
    ----------
    name : str
        Public name used in results, JSON and docs.
    kind : {"coef", "positive", "floor", "exponent", "free"}
        ``coef``: positive coefficient of a power-law term, fitted as the log of the term at a
        reference point (needs ``pivot``). ``positive``: fitted in log space. ``floor``: an
        irreducible loss, positive and below every observed loss (fitted in log space).
        ``exponent`` and ``free``: fitted as they are.
    pivot : tuple of (str, str), optional
        For ``coef``: ``(exponent_name, input_name)`` of the term ``coef / input**exponent``.
    start : tuple of float, optional
        Range of random starting values in public units (``exponent``, ``free``, ``positive``;
        log-uniform for ``positive``). ``coef`` and ``floor`` starts are set from the data.
    bounds : tuple of float, optional
        Public-unit range ``(lo, hi)``; also the lmfit method's bounds and the prior's support.
    range_kind : {"validity", "constraint"}, default "validity"
        What the range means. ``"validity"``: the law is physically meaningful only inside it,
        so a fit that ends outside is ``converged=False`` with a reason naming the parameter,
        its value and the range (and a bootstrap resample that ends outside counts as failed).
        ``"constraint"``: the solver keeps the parameter inside, and a fit that ends on a bound
        lists the parameter in ``diagnostics["at_bound"]`` (report line "at bound"). A
        ``coef``/``positive``/``floor`` parameter is fitted in log coordinates, so its lower
        bound 0 is always a constraint (it can run to 0, never below; flagged at bound); any
        other end of its range follows ``range_kind``.
    prior : dict, optional
        Prior in internal coordinates for the Bayesian fitter, e.g.
        ``{"dist": "normal", "loc": 1.0, "scale": 1.0}``; ``None`` uses the kind's default.
    description : str
        One line for ``scalefit laws`` and the docs.
    """

    name: str
    kind: Kind
    pivot: tuple[str, str] | None = None
    start: tuple[float, float] | None = None
    bounds: tuple[float, float] = (-np.inf, np.inf)
    prior: Mapping[str, Any] | None = None
    description: str = ""
    range_kind: RangeKind = "validity"


Expr = Callable[[Any, Mapping[str, Any], Mapping[str, Any]], Any]
Features = Callable[[Any, Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Law:
    """A scaling law: inputs, parameters and one expression.

    Parameters
    ----------
    name : str
        Registry name.
    inputs : sequence of str
        Canonical table columns the law reads.
    params : sequence of Param
        Parameters in their public order.
    expr : callable
        ``expr(xp, p, x) -> loss`` with ``p`` a mapping of public parameter values and ``x`` a
        mapping of input arrays (plus whatever ``features`` adds). Must work for ``xp=numpy`` and
        ``xp=jax.numpy`` and broadcast over leading axes of the parameters.
    formula : str
        Human-readable formula.
    features : callable, optional
        ``features(xp, x) -> dict`` of derived inputs (e.g. a parameter count from depth and
        width) that ``expr`` and pivots may use.
    options : dict
        The options the law was built with (recorded in results so they can be rebuilt).
    reference : str
        Source of the law.
    start_points : sequence of dict
        Deterministic public-unit starting points tried before random starts (optional).
    spec : dict, optional
        JSON-able description of a formula law (set by :meth:`from_formula`); results save it so
        the law round-trips without running any code.
    kink : callable, optional
        ``kink(xp, p, x) -> array`` of one value per row whose zero is the hinge of the row's
        ``max(0, ...)`` term, in relative units (e.g. ``(depth - lc) / lc``). Laws with a hinge
        declare it so a fit that stalls on the hinge can be certified a minimum
        (:func:`~scalefit.fit.kink.polish_on_kink`); smooth laws leave it None.
    """

    name: str
    inputs: tuple[str, ...]
    params: tuple[Param, ...]
    expr: Expr
    formula: str
    features: Features | None = None
    options: dict[str, Any] = field(default_factory=dict)
    reference: str = ""
    start_points: tuple[dict[str, float], ...] = ()
    spec: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    #: Parameters held at a value (public units) by :meth:`fixing`; not fitted.
    fixed: Mapping[str, float] = field(default_factory=dict, compare=False, repr=False)
    kink: Expr | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if RESPONSE in self.inputs:
            raise ScaleFitError(
                f"law {self.name!r} reads {RESPONSE!r}, the response column it predicts; a law "
                "may not use the response as an input."
            )

    def __repr__(self) -> str:
        return f"Law({self.name!r}: {self.formula})"

    @classmethod
    def from_formula(
        cls,
        formula: str,
        *,
        name: str = "formula",
        inputs: Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
        kinds: Mapping[str, str] | None = None,
        bounds: Mapping[str, tuple[float, float]] | None = None,
        starts: Mapping[str, float | tuple[float, float]] | None = None,
        range_kind: RangeKind = "validity",
    ) -> Law:
        """A law written as a formula, parsed by :func:`scalefit.core.expr.parse` (never ``eval``).

        Parameters
        ----------
        formula : str
            The right-hand side, e.g. ``"E + A/params**alpha + B/tokens**beta"``; a leading
            ``"loss ="`` (any single name and ``=``) is accepted and dropped.
        name : str, default "formula"
            Name shown in reports.
        inputs : sequence of str, optional
            Table columns the formula reads. Default: the names in the formula that are canonical
            columns (params, tokens, flops, width, depth) or listed in ``columns``.
        columns : sequence of str, optional
            Columns of the table that will be fitted (used to infer ``inputs``).
        kinds : mapping, optional
            ``name -> "free" | "positive" | "exponent"``; default ``"free"`` (fitted as is).
            ``positive`` parameters are fitted in log space.
        bounds : mapping, optional
            ``name -> (lo, hi)``: declared range, a validity condition (a fit that ends outside
            is not converged, with the reason; see :class:`Param`); also lmfit's bounds and the
            prior's support.
        starts : mapping, optional
            ``name -> value`` (a deterministic starting point, tried first) or ``(lo, hi)``
            (the range of random starts). Without either, random starts are drawn from the
            finite ``bounds``, else around the given value (÷10 to ×10), else from (-1, 1)
            (``free``/``exponent``) or log-uniformly from (1e-3, 1e3) (``positive``).
        range_kind : {"validity", "constraint"}, default "validity"
            What the declared ``bounds`` are (see :class:`Param`): a validity condition, or a
            constraint the solver keeps the parameter inside (``--bound`` on the command line).

        Returns
        -------
        Law

        Examples
        --------
        >>> law = Law.from_formula("E + A/params**alpha", kinds={"A": "positive", "E": "positive"})
        >>> law.inputs, law.param_names
        (('params',), ('A', 'E', 'alpha'))
        """
        text = _strip_lhs(formula)
        expression = parse(text, kind="formula")
        _refuse_response(expression.names, expression.text)
        names = set(expression.names) - set(CONSTANTS)
        inputs = _formula_inputs(text, names, inputs, columns)
        params, point = _formula_params(text, sorted(names - set(inputs)), kinds, bounds, starts)
        if range_kind != "validity":
            given = set(bounds or {})
            params = [replace(p, range_kind=range_kind) if p.name in given else p for p in params]
        return _formula_law(text, name, tuple(inputs), tuple(params), (point,) if point else ())

    @property
    def param_names(self) -> tuple[str, ...]:
        """Public parameter names, in order."""
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        """Return the :class:`Param` called ``name``."""
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def variables(self, xp, x: Mapping[str, Any]) -> dict[str, Any]:
        """Inputs plus derived features, as arrays of ``xp``."""
        out = {k: xp.asarray(v) for k, v in x.items()}
        if self.features is not None:
            out.update(self.features(xp, out))
        return out

    def evaluate(self, params: Mapping[str, Any], x: Mapping[str, Any], xp=np):
        """Predicted loss for public parameter values ``params`` at inputs ``x``.

        Parameters
        ----------
        params : mapping
            Public parameter values (scalars or arrays broadcasting against the inputs).
        x : mapping
            Input arrays by canonical name (a DataFrame works).
        xp : module, default numpy
            Array namespace.

        Returns
        -------
        array
            Predicted loss.
        """
        data = {k: np.asarray(x[k], dtype=float) if xp is np else x[k] for k in self.inputs}
        return self.expr(xp, params, self.variables(xp, data))

    # ------------------------------------------------------------------ internal coordinates
    def pivot_inputs(self) -> tuple[str, ...]:
        """Names of the variables that coefficients are pinned to."""
        return tuple(sorted({p.pivot[1] for p in self.params if p.kind == "coef"}))

    def references(self, x: Mapping[str, Any]) -> dict[str, float]:
        """Log reference points (log of the geometric mean) of each pivot variable."""
        v = self.variables(np, {k: np.asarray(x[k], dtype=float) for k in self.inputs})
        return {name: float(np.mean(np.log(v[name]))) for name in self.pivot_inputs()}

    def to_public(self, z, refs: Mapping[str, float], xp=np) -> dict[str, Any]:
        """Map internal coordinates ``z[..., i]`` to public parameter values."""
        out: dict[str, Any] = {}
        for i, p in enumerate(self.params):
            if p.kind in ("exponent", "free"):
                out[p.name] = z[..., i]
            elif p.kind in ("positive", "floor"):
                out[p.name] = xp.exp(z[..., i])
        for i, p in enumerate(self.params):
            if p.kind == "coef":
                a_name, var = p.pivot
                a = out[a_name] if a_name in out else self.fixed[a_name]
                out[p.name] = xp.exp(z[..., i] + a * refs[var])
        return {p.name: out[p.name] for p in self.params}

    def to_internal(self, values: Mapping[str, float], refs: Mapping[str, float]) -> np.ndarray:
        """Map public parameter values to internal coordinates (inverse of :meth:`to_public`)."""
        z = np.empty(len(self.params))
        for i, p in enumerate(self.params):
            v = float(values[p.name])
            if p.kind in ("exponent", "free"):
                z[i] = v
            elif p.kind in ("positive", "floor"):
                z[i] = np.log(v)
            else:
                a_name, var = p.pivot
                a = values[a_name] if a_name in values else self.fixed[a_name]
                z[i] = np.log(v) - float(a) * refs[var]
        return z

    def fixing(self, values: Mapping[str, float]) -> Law:
        """The same law with some parameters held at ``values`` (public units) and not fitted.

        Used to keep a parameter whose range is a hard constraint on its bound (the fitter's
        active set). A coefficient pinned to a held exponent keeps its coordinates.

        Parameters
        ----------
        values : mapping
            ``name -> value`` for parameters of this law.

        Returns
        -------
        Law
            A law over the remaining parameters (``fixed`` holds ``values``).
        """
        held = {**dict(self.fixed), **{k: float(v) for k, v in values.items()}}
        unknown = sorted(set(values) - set(self.param_names))
        if unknown:
            raise KeyError(f"law {self.name!r} has no parameters {unknown}")
        base = self.expr
        consts = dict(held)

        def expr(xp, p, x):
            return base(xp, {**consts, **p}, x)

        def kink(xp, p, x):
            return self.kink(xp, {**consts, **p}, x)

        return Law(
            name=self.name,
            inputs=self.inputs,
            params=tuple(p for p in self.params if p.name not in values),
            expr=expr,
            formula=self.formula,
            features=self.features,
            options={**self.options, "_held": consts, "_base": id(base)},
            reference=self.reference,
            fixed=held,
            kink=None if self.kink is None else kink,
        )

    def describe(self) -> str:
        """Multi-line description: formula, inputs, parameters.

        Numbered inputs ``x1 .. xK`` (e.g. the multi-power law's quadrature columns) are one
        entry, ``x{1..K}``.
        """
        families: dict[str, list[str]] = {}
        for name in self.inputs:
            m = re.fullmatch(r"(.*\D)(\d+)", name)
            families.setdefault(m.group(1) if m else name, []).append(name)
        shown = [
            f"{stem}{{1..{len(names)}}}"
            if names == [f"{stem}{j}" for j in range(1, len(names) + 1)] and len(names) > 2
            else ", ".join(names)
            for stem, names in families.items()
        ]
        lines = [f"{self.name}: {self.formula}", f"  inputs: {', '.join(shown)}"]
        for p in self.params:
            lines.append(f"  {p.name:<8} {p.kind:<8} {p.description}")
        if self.reference:
            lines.append(f"  source: {self.reference}")
        return "\n".join(lines)


def check_law(law: Law) -> None:
    """Validate a law definition; raises :class:`ScaleFitError` naming the problem."""
    names, where = law.param_names, f"law {law.name!r}"
    kinds = {p.name: p.kind for p in law.params}
    if len(set(names)) != len(names):
        raise ScaleFitError(f"{where}: parameter names must differ. Got {names}.")
    for p in law.params:
        if p.kind == "coef" and p.pivot is None:
            raise ScaleFitError(f"{where}: coef {p.name!r} needs pivot=(exponent, input).")
        if p.kind == "coef" and kinds.get(p.pivot[0]) not in ("exponent", "free"):
            raise ScaleFitError(f"{where}: pivot exponent of {p.name!r} is not an exponent.")
        if p.kind in ("exponent", "free", "positive") and p.start is None:
            raise ScaleFitError(f"{where}: parameter {p.name!r} needs a start range (lo, hi).")


def range_text(p: Param) -> str:
    """A parameter's declared range as text, e.g. ``[0, 5]``."""
    return f"[{p.bounds[0]:g}, {p.bounds[1]:g}]"


def outside_range(law: Law, values: Any, kind: RangeKind) -> np.ndarray:
    """Which entries of ``values`` leave the declared range of parameters of ``kind``.

    Parameters
    ----------
    law : Law
        The law.
    values : ndarray, shape (..., n_params)
        Public parameter values in the law's order (NaN counts as inside).
    kind : {"validity", "constraint"}
        Which ranges to test.

    Returns
    -------
    ndarray of bool, shape (..., n_params)
        True where a parameter of that ``range_kind`` lies outside its range. The lower bound
        of a log-coordinate parameter never counts (its coordinates keep it there).
    """
    v = np.asarray(values, dtype=float)
    out = np.zeros(v.shape, dtype=bool)
    for i, p in enumerate(law.params):
        if p.range_kind != kind:
            continue
        lo, hi = p.bounds
        col = v[..., i]
        # a value on the bound that went through log/exp may sit an ulp outside
        tol_lo, tol_hi = (
            RANGE_RTOL * max(1.0, abs(b)) if np.isfinite(b) else 0.0 for b in (lo, hi)
        )
        with np.errstate(invalid="ignore"):
            below = (col < lo - tol_lo) & (p.kind not in LOG_KINDS)
            out[..., i] = below | (col > hi + tol_hi)
    return out


def validity_reasons(law: Law, values: Mapping[str, float]) -> list[str]:
    """One reason per parameter outside a range that the law declares a validity condition."""
    theta = np.array([float(values[n]) for n in law.param_names])
    bad = outside_range(law, theta, "validity")
    return [
        f"{p.name} = {theta[i]:.4g} is outside its physical range {range_text(p)} "
        f"(the law {law.name!r} is valid only there)"
        for i, p in enumerate(law.params)
        if bad[i]
    ]


def sample_starts(
    law: Law, n: int, loss: np.ndarray, *, seed: int, include: Sequence[np.ndarray] = ()
) -> np.ndarray:
    """Random starting points in internal coordinates, scaled from the observed losses.

    Parameters
    ----------
    law : Law
        The law.
    n : int
        Total number of starts (``include`` first, then random ones).
    loss : ndarray
        Observed losses (sets the scale of coefficient and floor starts).
    seed : int
        Random seed.
    include : sequence of ndarray
        Internal points to put first (deterministic starts).

    Returns
    -------
    ndarray, shape (n, n_params)
    """
    rng = np.random.default_rng(seed)
    lmin, lmean = float(np.min(loss)), float(np.mean(loss))
    z = np.empty((n, len(law.params)))
    for i, p in enumerate(law.params):
        if p.kind == "coef":
            z[:, i] = rng.uniform(np.log(0.01 * lmean), np.log(lmean), n)
        elif p.kind == "floor":
            z[:, i] = rng.uniform(np.log(0.05 * lmin), np.log(0.995 * lmin), n)
        elif p.kind == "positive":
            lo, hi = p.start
            z[:, i] = rng.uniform(np.log(lo), np.log(hi), n)
        else:
            lo, hi = p.start
            z[:, i] = rng.uniform(lo, hi, n)
    k = min(len(include), n)
    if k:
        z[:k] = np.asarray(include[:k])
    return z


# ------------------------------------------------------------------------------ formula laws
def _strip_lhs(formula: Any) -> Any:
    """Drop a leading ``name =`` (not ``==``) from a formula."""
    if not isinstance(formula, str):
        return formula
    m = re.match(r"^\s*[A-Za-z_][A-Za-z_0-9]*\s*=(?!=)", formula)
    return formula[m.end() :] if m else formula


def _refuse_response(names, text: str, where: str = "") -> None:
    """A formula may not read the response column (it would "fit" by predicting y from y)."""
    if RESPONSE in names:
        raise ScaleFitError(
            f"{where}the formula {text!r} reads {RESPONSE!r}, the response column the law "
            "predicts; a formula may not use the response as an input or parameter."
        )


def _formula_inputs(text: str, names: set[str], inputs, columns) -> tuple[str, ...]:
    """The inputs of a formula law: as given (checked), else its canonical or listed columns."""
    if inputs is None:
        known = set(CANONICAL_INPUTS) | set(columns or ())
        inputs = tuple(sorted(n for n in names if n in known))
    else:
        inputs = tuple(inputs)
        unknown = [i for i in inputs if i not in names]
        if unknown:
            raise ScaleFitError(
                f"The 'inputs' parameter of Law.from_formula names {unknown}, which the "
                f"formula {text!r} does not use."
            )
    if not inputs:
        raise ScaleFitError(
            f"the formula {text!r} reads no input: name a column (params, tokens, flops, "
            "width, depth, or any numeric column passed with inputs=...)."
        )
    return inputs


def _formula_arg(what: str) -> str:
    """``The 'starts' parameter of Law.from_formula (--start on the command line)``."""
    return f"The {what!r} parameter of Law.from_formula (--{what[:-1]} on the command line)"


def _formula_params(
    text: str, pnames: list[str], kinds, bounds, starts
) -> tuple[list[Param], dict[str, float]]:
    """The parameters of a formula law and its starting point (see :meth:`Law.from_formula`)."""
    if not pnames:
        raise ScaleFitError(f"the formula {text!r} has no parameter to fit.")
    kinds, bounds, starts = dict(kinds or {}), dict(bounds or {}), dict(starts or {})
    for what, given in (("kinds", kinds), ("bounds", bounds), ("starts", starts)):
        extra = sorted(set(given) - set(pnames))
        if extra:
            raise ScaleFitError(
                f"{_formula_arg(what)} names {extra}, which are not "
                f"parameters of {text!r} (parameters: {', '.join(pnames)})."
            )
    params, point = [], {}
    for p in pnames:
        kind = kinds.get(p, "free")
        if kind not in ("free", "positive", "exponent"):
            raise ScaleFitError(
                f"{_formula_arg('kinds')} must map {p!r} to one of "
                f"'free', 'positive', 'exponent'. Got {kind!r} instead."
            )
        lo, hi = (float(v) for v in bounds.get(p, (-np.inf, np.inf)))
        s = starts.get(p)
        if s is not None and np.ndim(s) == 0:
            point[p] = float(s)
        params.append(Param(p, kind, start=_default_range(kind, lo, hi, s), bounds=(lo, hi)))
    if point and len(point) != len(pnames):
        missing = sorted(set(pnames) - set(point))
        raise ScaleFitError(
            f"{_formula_arg('starts')} gives a starting value for some "
            f"parameters but not for {missing}; give all or none."
        )
    return params, point


def _default_range(kind: str, lo: float, hi: float, start: Any) -> tuple[float, float]:
    """Random-start range of a formula parameter (see :meth:`Law.from_formula`)."""
    if start is not None and np.ndim(start) == 1:
        a, b = (float(v) for v in start)
        if not (math.isfinite(a) and math.isfinite(b) and a < b) or (kind == "positive" and a <= 0):
            raise ScaleFitError(
                f"{_formula_arg('starts')} must give a range (lo, hi) with "
                f"lo < hi{' and lo > 0' if kind == 'positive' else ''}. Got {(a, b)!r} instead."
            )
        return a, b
    if start is not None:
        v = float(start)
        if not math.isfinite(v) or (kind == "positive" and v <= 0):
            raise ScaleFitError(
                f"{_formula_arg('starts')} must give finite starting values"
                f"{' (> 0 for a positive parameter)' if kind == 'positive' else ''}. "
                f"Got {v!r} instead."
            )
        if v == 0:
            return (-1.0, 1.0)
        return (v / 10, v * 10) if v > 0 else (v * 10, v / 10)
    if kind == "positive":
        a, b = max(lo, 0.0), hi
        if a > 0 and math.isfinite(b):
            return a, b
        return 1e-3, 1e3
    if math.isfinite(lo) and math.isfinite(hi):
        return lo, hi
    return -1.0, 1.0


def _bound(v: Any, default: float) -> float:
    return default if v is None else float(v)


def law_from_formula_spec(spec: Mapping[str, Any], *, where: str = "law spec") -> Law:
    """Build a formula law from its JSON spec (see :meth:`Law.from_formula`).

    Raises
    ------
    ScaleFitError
        On a malformed spec, naming ``where``.
    """
    try:
        text = spec["formula"]
        inputs = tuple(str(i) for i in spec["inputs"])
        params = tuple(
            Param(
                str(p["name"]),
                p["kind"],
                start=(float(p["start"][0]), float(p["start"][1])),
                bounds=(_bound(p["bounds"][0], -np.inf), _bound(p["bounds"][1], np.inf)),
                range_kind=p.get("range_kind", "validity"),
            )
            for p in spec["params"]
        )
        points = tuple(
            {str(k): float(v) for k, v in sp.items()} for sp in spec.get("start_points", [])
        )
        name = str(spec.get("name", "formula"))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ScaleFitError(f"{where}: malformed formula law spec ({exc!r}).") from None
    return _formula_law(text, name, inputs, params, points, where)


def _formula_law(text, name: str, inputs, params, points, where: str = "law spec") -> Law:
    """A formula law from its parts: what :meth:`Law.from_formula` and the spec reader share."""
    expression = parse(text, kind="formula")
    _refuse_response(expression.names, expression.text, where=f"{where}: ")
    declared = set(inputs) | {p.name for p in params}
    if set(expression.names) - set(CONSTANTS) != declared:
        raise ScaleFitError(
            f"{where}: the formula {text!r} does not read exactly the declared inputs and "
            f"parameters {sorted(declared)}."
        )
    if any(p.kind not in ("free", "positive", "exponent") for p in params):
        raise ScaleFitError(f"{where}: formula parameters must be free, positive or exponent.")

    def expr(xp, p, x):
        return expression.evaluate({**x, **p}, xp)

    clean = {
        "type": "formula",
        "name": name,
        "formula": text,
        "inputs": list(inputs),
        "params": [
            {
                "name": p.name,
                "kind": p.kind,
                "start": list(p.start),
                "bounds": [None if math.isinf(b) else b for b in p.bounds],
            }
            | ({"range_kind": p.range_kind} if p.range_kind != "validity" else {})
            for p in params
        ],
        "start_points": [dict(sp) for sp in points],
    }
    return Law(
        name=name,
        inputs=inputs,
        params=params,
        expr=expr,
        formula=f"y = {text}",
        reference="formula",
        start_points=points,
        spec=clean,
    )
