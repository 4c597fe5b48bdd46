"""The building blocks of a declared schema for JSON data, and the checker that walks them.

A schema is a tree of nodes: :class:`Leaf` (a value meeting one of the constraints of
:mod:`scalefit._validation`), :class:`ListOf`, :class:`MapOf`, :class:`Record` (declared fields,
unknown ones refused or kept), :class:`Either` (``null`` or a node), and the per-parameter nodes
:class:`Param` and :class:`ParamName` whose constraints come from a law (the :class:`Ctx`).
:func:`check` walks a parsed value and returns what to build from (a ``null`` that stands for NaN
read back as NaN); the first value that breaks its node is one :class:`ScaleFitError` line::

    r.json: field 'draws[3][1]' must be a float in the range [0, 1e+100] or null. Got 'x' instead.

The declarations of a result file are in :mod:`scalefit.fit.schema`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._validation import Interval, Options, check_field, fmt_value
from ..errors import ScaleFitError

#: Largest magnitude a stored parameter value may have: beyond it a value is damage, not a fit.
ABSURD = 1e100


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


@dataclass
class Ctx:
    """What the checks of per-parameter nodes need: the file and the law's names."""

    where: str
    names: tuple[str, ...] = ()
    kinds: dict[str, str] = field(default_factory=dict)
    pivots: tuple[str, ...] = ()


def got(value: Any) -> str:
    """A value as the message shows it (``null`` as in the file)."""
    return "null" if value is None else fmt_value(value)


def path_of(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def fail(ctx: Ctx, path: str, what: str) -> ScaleFitError:
    return ScaleFitError(f"{ctx.where}: field {path!r} {what}")


def _low(ctx: Ctx, name: str) -> float:
    return 0.0 if ctx.kinds.get(name) in ("coef", "positive", "floor") else -ABSURD


def _param(ctx: Ctx, node: Param, value: Any, path: str, name: str) -> Any:
    low = _low(ctx, name)
    if type(value) is float and low <= value <= ABSURD:  # the common case, fast (NaN fails)
        return value
    cons: tuple = (Interval(float, low, ABSURD),)
    if node.null:
        cons = (*cons, None)
    check_field(ctx.where, path, value, cons)
    return math.nan if value is None else float(value)


def check(ctx: Ctx, node: Any, value: Any, path: str, param: str = "") -> Any:
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
            raise fail(ctx, path, f"must be a list or null. Got {got(value)} instead.")
        if isinstance(inner, Record | MapOf) and not isinstance(value, dict):
            raise fail(ctx, path, f"must be a JSON object or null. Got {got(value)} instead.")
        return check(ctx, inner, value, path, param)
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


def _check_list(ctx: Ctx, node: ListOf, value: Any, path: str, param: str = "") -> list:
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
        raise fail(ctx, path, f"must be {shape}. Got {got(value)} instead.")
    if n is not None and len(value) != n and not (node.empty and not value):
        raise fail(ctx, path, f"must be {shape}. Got a list of {len(value)} instead.")
    if isinstance(node.item, Param) and node.per_param:  # a row of draws: one value per param
        lows = [_low(ctx, name) for name in ctx.names]
        if all(type(v) is float and lo <= v <= ABSURD for v, lo in zip(value, lows, strict=True)):
            return value  # the common case, fast
    out = []
    for i, item in enumerate(value):
        name = ctx.names[i] if node.per_param else param
        out.append(check(ctx, node.item, item, path_of(path, i), name))
    if node.ordered and len(out) == 2:
        lo, hi = (float(v) if _is_number(v) else math.nan for v in out)
        if lo > hi:
            raise fail(ctx, path, f"must be [lo, hi] with lo <= hi. Got {got(value)} instead.")
    return out


def _check_map(ctx: Ctx, node: MapOf, value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise fail(ctx, path, f"must be a JSON object. Got {got(value)} instead.")
    if node.keys is not None:
        allowed = ctx.pivots if node.keys == "pivots" else ctx.names
        keys = tuple(value)
        exact = node.keys.endswith("!")
        if (exact and keys != allowed) or not set(keys) <= set(allowed):
            what = "pivot inputs" if node.keys == "pivots" else "parameters"
            must = "name exactly the" if exact else "name only"
            order = ", in that order" if exact else ""
            raise fail(
                ctx,
                path,
                f"must {must} {what} of the law ({', '.join(allowed) or 'none'}{order}). "
                f"Got {', '.join(map(str, keys)) or 'none'} instead.",
            )
    return {k: check(ctx, node.value, v, path_of(path, k), k) for k, v in value.items()}


def _check_record(ctx: Ctx, node: Record, value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise fail(ctx, path, f"must be a JSON object. Got {got(value)} instead.")
    for key in sorted(node.required):
        if key not in value:
            raise fail(ctx, path_of(path, key), "is missing (every result file has it).")
    out = {}
    for key, item in value.items():
        if key not in node.fields:
            if node.extra == "refuse":
                known = ", ".join(sorted(node.fields)) or "none"
                owner = repr(path) if path else "a result file"
                raise ScaleFitError(
                    f"{ctx.where}: unknown field {path_of(path, key)!r} (the fields of {owner} "
                    f"are: {known})."
                )
            out[key] = item  # an open record's other keys: kept as data, read by nothing
            continue
        sub = node.fields[key]
        out[key] = item if sub is None else check(ctx, sub, item, path_of(path, key))
    return out
