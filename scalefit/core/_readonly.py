"""Read-only dicts for the mapping fields of frozen results (``res.params["a"] = 1`` raises).

A ``dict`` subclass rather than :class:`types.MappingProxyType`, so that what reads results as
dicts keeps working unchanged: ``json.dumps``, ``dataclasses.asdict``, pandas, ``isinstance(x,
dict)`` checks, ``copy``/``deepcopy`` and pickling (between processes).
"""

from __future__ import annotations

import dataclasses
from typing import Any


class ReadOnlyDict(dict):
    """A ``dict`` that refuses every change in place; ``dict(d)`` or ``d | {...}`` is a new one."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a result's mapping is read-only; build a new one (dict(d) or d | {...}).")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self):
        return type(self), (dict(self),)


class ReadOnlyMappings:
    """Base of the frozen results: ``__post_init__`` makes each ``dict`` field a ReadOnlyDict.

    A result with its own ``__post_init__`` calls this one last; ``dataclasses.replace`` runs it
    too.
    """

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, dict) and not isinstance(value, ReadOnlyDict):
                object.__setattr__(self, f.name, ReadOnlyDict(value))
