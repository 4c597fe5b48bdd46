"""A small, whitelisted expression grammar: formula laws and row filters, never ``eval``.

Text is parsed with Python's own parser (:func:`ast.parse`, which only builds a syntax tree and
runs nothing), then every node is checked against a whitelist and turned into scalefit's own tree
of :class:`Node` objects. Evaluation walks that tree over an array namespace (``numpy`` or
``jax.numpy``). There is no attribute access, no subscripting, no keyword arguments, no lambdas,
no comprehensions, no ``@`` and no call to anything but the functions in :data:`FUNCTIONS`.

Two grammars share the parser:

- **formula** (``kind="formula"``): numbers, names, ``+ - * / **``, unary minus and the functions
  of :data:`FUNCTIONS`, e.g. ``"E + A/params**alpha + B/tokens**beta"``.
- **filter** (``kind="filter"``): a formula plus comparisons (``== != < <= > >=``, chained),
  ``in`` / ``not in`` a list or tuple of constants, ``and`` / ``or`` / ``not`` and quoted strings,
  e.g. ``"variant == 'pre_ln' and depth >= 4"``.

Arithmetic is checked. Literals must be real numbers within float range; every sub-expression made
of constants only is folded when the text is parsed, and a division by zero, an overflow beyond
float range or a result with no real value (``(-8)**0.5``, ``log(-1)``) is refused there, naming
the sub-expression. All arithmetic is done on floats, so no integer power is ever computed
exactly (``10**10**10`` overflows at once instead of running). Over data, a filter refuses the same
faults row by row (:func:`filter_rows`); a formula evaluated by the fitter leaves them as
non-finite predictions, which the fitter rejects like any other non-finite objective.

Examples
--------
>>> import numpy as np
>>> from scalefit.core.expr import parse
>>> f = parse("E + A / params**alpha")
>>> sorted(f.names)
['A', 'E', 'alpha', 'params']
>>> float(f.evaluate({"E": 1.0, "A": 4.0, "alpha": 0.5, "params": 16.0}, np))
2.0
"""

from __future__ import annotations

import ast
import math
import operator
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ._validation import did_you_mean, fmt_value
from .errors import ScaleFitError

__all__ = ["FUNCTIONS", "Expression", "filter_rows", "parse"]

#: Longest expression accepted (characters) and deepest nesting: bounds the work a string can ask.
MAX_LENGTH = 2000
MAX_DEPTH = 64

#: Functions a formula may call: name -> (arity, attribute of the array namespace).
FUNCTIONS: dict[str, tuple[int, str]] = {
    "exp": (1, "exp"),
    "log": (1, "log"),
    "log10": (1, "log10"),
    "log2": (1, "log2"),
    "sqrt": (1, "sqrt"),
    "abs": (1, "abs"),
    "tanh": (1, "tanh"),
    "sin": (1, "sin"),
    "cos": (1, "cos"),
    "arctan": (1, "arctan"),
    "atan": (1, "arctan"),
    "maximum": (2, "maximum"),
    "minimum": (2, "minimum"),
    "max": (2, "maximum"),
    "min": (2, "minimum"),
}

#: Named constants a formula may use.
CONSTANTS = {"pi": float(np.pi), "e": float(np.e)}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


@dataclass(frozen=True)
class Node:
    """One node of a parsed expression (scalefit's own tree, not Python's)."""

    op: str
    args: tuple[Any, ...] = ()
    src: str = field(default="", compare=False)


@dataclass(frozen=True)
class Expression:
    """A parsed, checked expression.

    Attributes
    ----------
    text : str
        The source text (kept for results and JSON round trips).
    kind : {"formula", "filter"}
        Which grammar it was parsed with.
    tree : Node
        The checked tree.
    names : frozenset of str
        Every variable name the expression reads (inputs and parameters alike).
    """

    text: str
    kind: str
    tree: Node = field(repr=False)
    names: frozenset[str] = frozenset()

    def evaluate(self, env: Mapping[str, Any], xp: Any = np, *, checked: bool = False) -> Any:
        """Evaluate over ``env`` (name -> array or scalar) with array namespace ``xp``.

        Parameters
        ----------
        env : mapping
            Values of every name in :attr:`names`.
        xp : module, default numpy
            ``numpy`` or ``jax.numpy``.
        checked : bool, default False
            Refuse an arithmetic step that turns finite values into a non-finite one (division
            by zero, overflow, no real result), naming the sub-expression and the number of
            values (numpy only; :func:`filter_rows` uses it). Unchecked, such values are ``inf``
            or ``nan``, as numpy and JAX give them.

        Returns
        -------
        array
            The value, broadcast over the inputs.

        Raises
        ------
        ScaleFitError
            When a name is missing, a Python number in ``env`` is beyond float range, or (with
            ``checked``) an arithmetic step fails.
        """
        missing = sorted(self.names - set(env))
        if missing:
            raise ScaleFitError(
                f"expression {_show(self.text)} needs {', '.join(map(repr, missing))}, which "
                "were not given."
            )
        ctx = _Context(self, xp, checked)
        if checked:
            with np.errstate(all="ignore"):
                return ctx.walk(self.tree, env)
        return ctx.walk(self.tree, env)


def parse(text: str, kind: Literal["formula", "filter"] = "formula") -> Expression:
    """Parse ``text`` with the whitelisted grammar.

    Parameters
    ----------
    text : str
        The expression.
    kind : {"formula", "filter"}, default "formula"
        ``filter`` also allows comparisons, ``in``, boolean operators and strings.

    Returns
    -------
    Expression

    Raises
    ------
    ScaleFitError
        On a syntax error, any construct outside the grammar, a literal beyond float range or a
        constant sub-expression that divides by zero, overflows or has no real value — naming it.
    """
    what = "formula" if kind == "formula" else "filter"
    if not isinstance(text, str) or not text.strip():
        raise ScaleFitError(f"the {what} must be a non-empty string. Got {fmt_value(text)}.")
    if len(text) > MAX_LENGTH:
        raise ScaleFitError(
            f"the {what} is longer than {MAX_LENGTH} characters ({len(text)} given)."
        )
    source = text.strip()
    try:
        with warnings.catch_warnings():  # e.g. "invalid decimal literal": the error says enough
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        col = f" at column {exc.offset}" if exc.offset else ""
        raise ScaleFitError(f"the {what} {_show(text)} is not a valid expression{col}.") from None
    except (ValueError, RecursionError, MemoryError):  # null bytes, nesting the parser refuses
        raise ScaleFitError(f"the {what} {_show(text)} is not a valid expression.") from None
    names: set[str] = set()
    node = _Converter(source, kind, names).convert(tree.body, 0)
    return Expression(text=source, kind=kind, tree=node, names=frozenset(names))


def _show(text: str, limit: int = 120) -> str:
    """Quote an expression for a message, cut to ``limit`` characters on one line."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return repr(text)
    return repr(text[: limit - 20] + "...") + f" ({len(text)} characters)"


def _bad(text: str, kind: str, why: str) -> ScaleFitError:
    what = "formula" if kind == "formula" else "filter"
    allowed = (
        "numbers, column or parameter names, + - * / **, and " + ", ".join(sorted(set(FUNCTIONS)))
        if kind == "formula"
        else "column names, numbers, quoted strings, arithmetic, comparisons "
        "(== != < <= > >=), in [...], and/or/not"
    )
    return ScaleFitError(
        f"the {what} {_show(text)} uses {why}, which is not allowed (allowed: {allowed})."
    )


def _fault(text: str, kind: str, why: str, part: str) -> ScaleFitError:
    what = "formula" if kind == "formula" else "filter"
    where = "" if " ".join(part.split()) == " ".join(text.split()) else f" in {_show(part, 80)}"
    return ScaleFitError(f"the {what} {_show(text)} {why}{where}.")


def _literal(value: Any, text: str, kind: str, part: str) -> float:
    """A numeric literal as a float; beyond float range or complex is refused."""
    if isinstance(value, complex):
        raise _fault(text, kind, f"uses the complex number {value!r} (only real numbers)", part)
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        shown = part if len(part) <= 30 else f"{part[:20]}... ({len(part)} characters)"
        raise ScaleFitError(
            f"the {'formula' if kind == 'formula' else 'filter'} {_show(text)} has the literal "
            f"{shown}, which is beyond float range (about ±{_FLOAT_MAX:.3g})."
        )
    mantissa = part.lower().replace("_", "").split("e")[0]
    if out == 0.0 and isinstance(value, float) and any(c in "123456789" for c in mantissa):
        # 1e-400: a non-zero number that Python already read as 0.0
        raise ScaleFitError(
            f"the {'formula' if kind == 'formula' else 'filter'} {_show(text)} has the literal "
            f"{part}, which is below float range (it would be read as 0; smallest about "
            f"{np.finfo(float).smallest_subnormal:.3g})."
        )
    return out


_FLOAT_MAX = float(np.finfo(float).max)


@dataclass
class _Converter:
    """Python's syntax tree -> scalefit's, checking the grammar and folding constants."""

    text: str
    kind: str
    names: set[str]

    def part(self, n: ast.AST) -> str:
        return ast.get_source_segment(self.text, n) or ast.unparse(n)

    def convert(self, n: ast.AST, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise _bad(self.text, self.kind, f"nesting deeper than {MAX_DEPTH}")
        node = self._convert(n, depth)
        if node.op in ("bin", "neg", "pos", "call"):
            node = Node(node.op, node.args, src=self.part(n))
            return self.fold(node)
        return node

    def fold(self, node: Node) -> Node:
        """Replace an arithmetic node whose operands are all constants by its checked value."""
        operands = node.args[1:] if node.op in ("bin", "call") else node.args
        if not all(a.op == "const" for a in operands):
            return node
        values = [a.args[0] for a in operands]
        strings = [v for v in values if isinstance(v, str)]
        if strings:
            raise _bad(self.text, self.kind, f"arithmetic on the string {strings[0]!r}")
        with np.errstate(all="ignore"):
            if node.op == "bin":
                out = _checked_binop(node.args[0], values[0], values[1])
            elif node.op == "call":
                out = float(getattr(np, node.args[0])(*values))
            else:
                out = -values[0] if node.op == "neg" else values[0]
        if isinstance(out, str):
            raise _fault(self.text, self.kind, out, node.src)
        if not math.isfinite(out):
            why = _OVERFLOW if node.op == "bin" else "is infinite (overflow, or log of 0)"
            raise _fault(self.text, self.kind, "has no real value" if out != out else why, node.src)
        return Node("const", (float(out),), src=node.src)

    def _convert(self, n: ast.AST, depth: int) -> Node:
        text, kind = self.text, self.kind
        rec = lambda m: self.convert(m, depth + 1)  # noqa: E731
        if isinstance(n, ast.Constant):
            v = n.value
            if isinstance(v, bool) or v is None:
                raise _bad(text, kind, f"the constant {v!r}")
            if isinstance(v, int | float | complex):
                return Node("const", (_literal(v, text, kind, self.part(n)),))
            if isinstance(v, str) and kind == "filter":
                return Node("const", (v,))
            raise _bad(text, kind, f"the constant {fmt_value(v)}")
        if isinstance(n, ast.Name):
            if n.id in CONSTANTS and kind == "formula":
                return Node("const", (CONSTANTS[n.id],))
            if n.id.startswith("_"):
                raise _bad(text, kind, f"the name {n.id!r} (names may not start with '_')")
            self.names.add(n.id)
            return Node("name", (n.id,))
        if isinstance(n, ast.BinOp) and type(n.op) in _BINOPS:
            return Node("bin", (type(n.op), rec(n.left), rec(n.right)))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub | ast.UAdd):
            return Node("neg" if isinstance(n.op, ast.USub) else "pos", (rec(n.operand),))
        if isinstance(n, ast.Call):
            return self._call(n, rec)
        if kind == "filter":
            if isinstance(n, ast.BoolOp):
                op = "and" if isinstance(n.op, ast.And) else "or"
                return Node(op, tuple(rec(v) for v in n.values))
            if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
                return Node("not", (rec(n.operand),))
            if isinstance(n, ast.Compare):
                return self._compare(n, rec)
        raise _bad(text, kind, _describe(n))

    def _call(self, n: ast.Call, rec) -> Node:
        text, kind = self.text, self.kind
        if not isinstance(n.func, ast.Name):
            raise _bad(text, kind, "a call of something other than a plain function name")
        fname = n.func.id
        if fname not in FUNCTIONS:
            raise _bad(
                text, kind, f"the function {fname!r}{did_you_mean(fname, FUNCTIONS).rstrip('?')}"
            )
        if n.keywords or any(isinstance(a, ast.Starred) for a in n.args):
            raise _bad(text, kind, f"keyword or starred arguments to {fname!r}")
        arity, attr = FUNCTIONS[fname]
        if len(n.args) != arity:
            what = "formula" if kind == "formula" else "filter"
            raise ScaleFitError(
                f"the {what} {_show(text)} calls {fname}() with {len(n.args)} argument(s); it "
                f"takes {arity}."
            )
        return Node("call", (attr, *[rec(a) for a in n.args]))

    def _compare(self, n: ast.Compare, rec) -> Node:
        text, kind = self.text, self.kind
        parts = []
        left = rec(n.left)
        for op, comp in zip(n.ops, n.comparators, strict=True):
            if isinstance(op, ast.In | ast.NotIn):
                if not isinstance(comp, ast.List | ast.Tuple | ast.Set):
                    raise _bad(text, kind, "'in' with something other than a [list] of values")
                vals = tuple(rec(e) for e in comp.elts)
                if any(v.op != "const" for v in vals):
                    raise _bad(text, kind, "'in' with a list that is not all constants")
                right = Node("list", tuple(v.args[0] for v in vals))
                parts.append(Node("in" if isinstance(op, ast.In) else "notin", (left, right)))
            elif type(op) in _CMPOPS:
                right = rec(comp)
                parts.append(Node("cmp", (type(op), left, right)))
            else:
                raise _bad(text, kind, f"the operator {type(op).__name__}")
            left = right
        return parts[0] if len(parts) == 1 else Node("and", tuple(parts))


_OVERFLOW = f"overflows float range (about ±{_FLOAT_MAX:.3g})"


def _checked_binop(op: type, a: float, b: float) -> float | str:
    """``a op b`` on floats, or the words of the fault (division by zero, complex result)."""
    if op is ast.Div and b == 0:
        return "divides by zero"
    if op is ast.Pow:
        if a == 0 and b < 0:
            return "divides by zero (0 to a negative power)"
        if a < 0 and not float(b).is_integer():
            return "has a complex result (a negative number to a fractional power)"
        try:
            return math.pow(a, b)  # floats only: never an exact integer power
        except OverflowError:
            return _OVERFLOW
    return _BINOPS[op](float(a), float(b))


def _describe(n: ast.AST) -> str:
    desc = {
        ast.Attribute: "attribute access ('.')",
        ast.Subscript: "subscripts ('[...]')",
        ast.Lambda: "lambda",
        ast.Compare: "comparisons",
        ast.BoolOp: "'and'/'or'",
        ast.IfExp: "'if ... else'",
    }.get(type(n))
    if isinstance(n, ast.BinOp | ast.UnaryOp):
        desc = f"the operator {type(n.op).__name__}"
    return desc or f"a {type(n).__name__} expression"


@dataclass(frozen=True)
class _Context:
    """One evaluation: the expression (for messages), the namespace, checked or not."""

    expr: Expression
    xp: Any
    checked: bool

    def walk(self, node: Node, env: Mapping[str, Any]) -> Any:
        op, a = node.op, node.args
        if op == "const":
            return a[0]
        if op == "name":
            return self._value(a[0], env[a[0]])
        if op == "bin":
            args = (self.number(self.walk(a[1], env)), self.number(self.walk(a[2], env)))
            return self.check(node, _BINOPS[a[0]](*args), args)
        if op == "neg":
            arg = self.number(self.walk(a[0], env))
            return -arg
        if op == "pos":
            return self.walk(a[0], env)
        if op == "call":
            args = tuple(self.number(self.walk(x, env)) for x in a[1:])
            return self.check(node, getattr(self.xp, a[0])(*args), args)
        if op == "cmp":
            return _CMPOPS[a[0]](self.walk(a[1], env), self.walk(a[2], env))
        if op in ("in", "notin"):
            left = np.asarray(self.walk(a[0], env))
            dtype = object if left.dtype == object else None
            hit = np.isin(left, np.asarray(a[1].args, dtype=dtype))
            return hit if op == "in" else ~hit
        if op in ("and", "or"):
            out = self.walk(a[0], env)
            for x in a[1:]:
                out = (out & self.walk(x, env)) if op == "and" else (out | self.walk(x, env))
            return out
        if op == "not":
            return ~np.asarray(self.walk(a[0], env), dtype=bool)
        raise AssertionError(op)  # pragma: no cover - the parser only builds the ops above

    def _value(self, name: str, value: Any) -> Any:
        # Python numbers as floats: an int would be powered exactly (without bound), and
        # Python's float arithmetic raises where numpy's gives inf or nan.
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                value = float(value)
            except OverflowError:
                raise ScaleFitError(
                    f"expression {_show(self.expr.text)}: the value of {name!r} is beyond float "
                    "range."
                ) from None
            return np.float64(value) if self.xp is np else value
        return value

    def number(self, value: Any) -> Any:
        """Integer and boolean numpy arrays as floats before arithmetic (no wrap-around)."""
        if isinstance(value, np.ndarray | np.generic) and value.dtype.kind in "iub":
            return value.astype(float)
        return value

    def check(self, node: Node, out: Any, args: tuple) -> Any:
        """With ``checked``: refuse non-finite values that came from finite operands."""
        if not self.checked:
            return out
        arr = np.asarray(out)
        if arr.dtype.kind not in "fc":
            return out
        bad = ~np.isfinite(arr)
        if not bad.any():
            return out
        for x in args:
            xa = np.asarray(x)
            if xa.dtype.kind in "fc":
                bad = bad & np.broadcast_to(np.isfinite(xa), bad.shape)
        if bad.any():
            why = (
                "has no real value (e.g. log or sqrt of a negative number, 0/0)"
                if np.isnan(arr[bad]).any()
                else "is infinite (division by zero or overflow beyond float range)"
            )
            rows = f" on {int(bad.sum())} of {bad.size} rows" if bad.ndim else ""
            raise _fault(self.expr.text, self.expr.kind, why + rows, node.src)
        return out


def filter_rows(frame, text: str):
    """Keep the rows of a DataFrame for which the filter expression holds.

    Parameters
    ----------
    frame : pandas.DataFrame
        The table.
    text : str
        A filter in the grammar above, over the table's column names, e.g.
        ``"variant in ['pre_ln', 'lns'] and tokens > 1e6"``.

    Returns
    -------
    pandas.DataFrame
        The matching rows (a copy), index preserved.

    Raises
    ------
    ScaleFitError
        On a grammar error, an unknown column (with a "did you mean"), a column of complex
        numbers, arithmetic that divides by zero, overflows or has no real value on some row, or
        a filter that is not a true/false test.
    """
    expr = parse(text, kind="filter")
    unknown = sorted(expr.names - set(map(str, frame.columns)))
    if unknown:
        raise ScaleFitError(
            f"the filter {_show(expr.text)} names unknown column {unknown[0]!r}."
            f"{did_you_mean(unknown[0], map(str, frame.columns))} "
            f"Columns: {', '.join(map(str, frame.columns))}."
        )
    env = {name: frame[name].to_numpy() for name in expr.names}
    for name, values in env.items():
        if values.dtype.kind == "c":
            raise ScaleFitError(
                f"the filter {_show(expr.text)} reads column {name!r}, which holds complex "
                "numbers; only real numbers and strings can be compared."
            )
    try:
        mask = np.asarray(expr.evaluate(env, np, checked=True))
    except TypeError as exc:
        reason = " ".join(str(exc).split())[:200]
        raise ScaleFitError(
            f"the filter {_show(expr.text)} compares or computes with values of different "
            f"types ({reason})."
        ) from None
    if mask.dtype != bool:
        raise ScaleFitError(
            f'the filter {_show(expr.text)} is not a true/false test (e.g. "depth >= 4").'
        )
    if mask.ndim == 0:
        mask = np.full(len(frame), bool(mask))
    return frame.loc[mask].copy()
