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

Examples
--------
>>> import numpy as np
>>> from scalefit.expr import parse
>>> f = parse("E + A / params**alpha")
>>> sorted(f.names)
['A', 'E', 'alpha', 'params']
>>> float(f.evaluate({"E": 1.0, "A": 4.0, "alpha": 0.5, "params": 16.0}, np))
2.0
"""

from __future__ import annotations

import ast
import operator
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ._validation import did_you_mean
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
_SYMBOL = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}


@dataclass(frozen=True)
class Node:
    """One node of a parsed expression (scalefit's own tree, not Python's)."""

    op: str
    args: tuple[Any, ...] = ()


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

    def evaluate(self, env: Mapping[str, Any], xp: Any = np) -> Any:
        """Evaluate over ``env`` (name -> array or scalar) with array namespace ``xp``.

        Parameters
        ----------
        env : mapping
            Values of every name in :attr:`names`.
        xp : module, default numpy
            ``numpy`` or ``jax.numpy``.

        Returns
        -------
        array
            The value, broadcast over the inputs.
        """
        missing = sorted(self.names - set(env))
        if missing:
            raise ScaleFitError(
                f"expression {self.text!r} needs {', '.join(map(repr, missing))}, which "
                "were not given."
            )
        return _eval(self.tree, env, xp)


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
        On a syntax error or any construct outside the grammar, naming it.
    """
    what = "formula" if kind == "formula" else "filter"
    if not isinstance(text, str) or not text.strip():
        raise ScaleFitError(f"the {what} must be a non-empty string. Got {text!r}.")
    if len(text) > MAX_LENGTH:
        raise ScaleFitError(f"the {what} is longer than {MAX_LENGTH} characters.")
    try:
        with warnings.catch_warnings():  # e.g. "invalid decimal literal": the error says enough
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        col = f" at column {exc.offset}" if exc.offset else ""
        raise ScaleFitError(f"the {what} {text!r} is not a valid expression{col}.") from None
    names: set[str] = set()
    node = _convert(tree.body, kind, names, text, 0)
    return Expression(text=text.strip(), kind=kind, tree=node, names=frozenset(names))


def _bad(text: str, kind: str, why: str) -> ScaleFitError:
    what = "formula" if kind == "formula" else "filter"
    allowed = (
        "numbers, column or parameter names, + - * / **, and " + ", ".join(sorted(set(FUNCTIONS)))
        if kind == "formula"
        else "column names, numbers, quoted strings, arithmetic, comparisons "
        "(== != < <= > >=), in [...], and/or/not"
    )
    return ScaleFitError(
        f"the {what} {text!r} uses {why}, which is not allowed (allowed: {allowed})."
    )


def _convert(n: ast.AST, kind: str, names: set[str], text: str, depth: int) -> Node:
    if depth > MAX_DEPTH:
        raise _bad(text, kind, f"nesting deeper than {MAX_DEPTH}")
    rec = lambda m: _convert(m, kind, names, text, depth + 1)  # noqa: E731
    if isinstance(n, ast.Constant):
        v = n.value
        if isinstance(v, bool) or v is None:
            raise _bad(text, kind, f"the constant {v!r}")
        if isinstance(v, int | float):
            return Node("const", (float(v),))
        if isinstance(v, str) and kind == "filter":
            return Node("const", (v,))
        raise _bad(text, kind, f"the constant {v!r}")
    if isinstance(n, ast.Name):
        if n.id in CONSTANTS and kind == "formula":
            return Node("const", (CONSTANTS[n.id],))
        if n.id.startswith("_"):
            raise _bad(text, kind, f"the name {n.id!r} (names may not start with '_')")
        names.add(n.id)
        return Node("name", (n.id,))
    if isinstance(n, ast.BinOp) and type(n.op) in _BINOPS:
        return Node("bin", (type(n.op), rec(n.left), rec(n.right)))
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub | ast.UAdd):
        return Node("neg" if isinstance(n.op, ast.USub) else "pos", (rec(n.operand),))
    if isinstance(n, ast.Call):
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
            raise ScaleFitError(
                f"{fname}() takes {arity} argument(s) but {len(n.args)} were given in {text!r}."
            )
        return Node("call", (attr, *[rec(a) for a in n.args]))
    if kind == "filter":
        if isinstance(n, ast.BoolOp):
            op = "and" if isinstance(n.op, ast.And) else "or"
            return Node(op, tuple(rec(v) for v in n.values))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return Node("not", (rec(n.operand),))
        if isinstance(n, ast.Compare):
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
    desc = {
        ast.Attribute: "attribute access ('.')",
        ast.Subscript: "subscripts ('[...]')",
        ast.Lambda: "lambda",
        ast.Compare: "comparisons",
        ast.BoolOp: "'and'/'or'",
        ast.IfExp: "'if ... else'",
    }.get(type(n))
    if isinstance(n, ast.BinOp):
        desc = f"the operator {type(n.op).__name__}"
    if isinstance(n, ast.UnaryOp):
        desc = f"the operator {type(n.op).__name__}"
    raise _bad(text, kind, desc or f"a {type(n).__name__} expression")


def _eval(node: Node, env: Mapping[str, Any], xp: Any) -> Any:
    op, a = node.op, node.args
    if op == "const":
        return a[0]
    if op == "name":
        return env[a[0]]
    if op == "bin":
        return _BINOPS[a[0]](_eval(a[1], env, xp), _eval(a[2], env, xp))
    if op == "neg":
        return -_eval(a[0], env, xp)
    if op == "pos":
        return _eval(a[0], env, xp)
    if op == "call":
        return getattr(xp, a[0])(*[_eval(x, env, xp) for x in a[1:]])
    if op == "cmp":
        return _CMPOPS[a[0]](_eval(a[1], env, xp), _eval(a[2], env, xp))
    if op in ("in", "notin"):
        left = np.asarray(_eval(a[0], env, xp))
        hit = np.isin(left, np.asarray(a[1].args, dtype=object if left.dtype == object else None))
        return hit if op == "in" else ~hit
    if op == "and":
        out = _eval(a[0], env, xp)
        for x in a[1:]:
            out = out & _eval(x, env, xp)
        return out
    if op == "or":
        out = _eval(a[0], env, xp)
        for x in a[1:]:
            out = out | _eval(x, env, xp)
        return out
    if op == "not":
        return ~np.asarray(_eval(a[0], env, xp), dtype=bool)
    raise AssertionError(op)  # pragma: no cover - the parser only builds the ops above


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
        On a grammar error, an unknown column (with a "did you mean") or a filter that is not a
        true/false test.
    """
    expr = parse(text, kind="filter")
    unknown = sorted(expr.names - set(map(str, frame.columns)))
    if unknown:
        raise ScaleFitError(
            f"the filter {expr.text!r} names unknown column {unknown[0]!r}."
            f"{did_you_mean(unknown[0], map(str, frame.columns))} "
            f"Columns: {', '.join(map(str, frame.columns))}."
        )
    env = {name: frame[name].to_numpy() for name in expr.names}
    try:
        with np.errstate(all="ignore"):
            mask = np.asarray(expr.evaluate(env, np))
    except TypeError as exc:
        raise ScaleFitError(
            f"the filter {expr.text!r} compares values of different types ({exc})."
        ) from None
    if mask.dtype != bool:
        raise ScaleFitError(
            f'the filter {expr.text!r} is not a true/false test (e.g. "depth >= 4").'
        )
    if mask.ndim == 0:
        mask = np.full(len(frame), bool(mask))
    return frame.loc[mask].copy()
