"""Sweep specifications: a TOML file with ``[sweep]``, ``[fixed]`` and ``[grid]`` tables → runs."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core._io import read_toml
from ..core._validation import IsType, Matches, validate, validate_mapping
from ..core.errors import ScaleFitError

_SECTIONS = ("sweep", "fixed", "grid")


@dataclass(frozen=True)
class Run:
    """One point of a sweep.

    Attributes
    ----------
    config : dict
        The ``[fixed]`` settings merged with one grid point.
    run_id : str
        Readable, stable identifier: the grid values followed by a short hash of the sorted-JSON
        config, so the same configuration always gets the same id.
    """

    config: dict
    run_id: str


@dataclass
class SweepSpec:
    """A parsed sweep: a name, a task reference, constant settings and a grid.

    Parameters
    ----------
    name : str
        Sweep name (used in messages and as a default output folder name).
    task : str
        A registered task name (``"toy"``, ``"train"``) or ``"package.module:function"``.
    fixed : dict
        Settings shared by every run.
    grid : dict
        Lists whose cartesian product gives the runs (order of keys is kept).
    source : str
        Where the spec came from (a path or ``"<dict>"``), used in error messages.

    Examples
    --------
    >>> spec = SweepSpec("demo", "toy", {"steps": 10}, {"seed": [0, 1]})
    >>> [r.config["seed"] for r in spec.runs()]
    [0, 1]
    """

    name: str
    task: str
    fixed: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)
    source: str = "<dict>"

    def __post_init__(self) -> None:
        _validate(self)

    def runs(self) -> list[Run]:
        """Return every run (fixed settings + one grid point) in a stable order."""
        keys = list(self.grid)
        out = []
        for values in itertools.product(*(self.grid[k] for k in keys)):
            point = dict(zip(keys, values, strict=True))
            config = {**self.fixed, **point}
            out.append(Run(config=config, run_id=make_run_id(config, point)))
        return out

    def to_dict(self) -> dict:
        """Return the spec as a TOML-shaped dict (``sweep``, ``fixed``, ``grid``)."""
        return {
            "sweep": {"name": self.name, "task": self.task},
            "fixed": dict(self.fixed),
            "grid": dict(self.grid),
        }


def make_run_id(config: dict, point: dict | None = None) -> str:
    """Stable run id: readable grid values plus a 10-hex-digit hash of the sorted-JSON config.

    Parameters
    ----------
    config : dict
        The full configuration of the run (JSON-serialisable).
    point : dict, optional
        The grid values to show in the readable prefix (default: none, hash only).

    Returns
    -------
    str
        e.g. ``"teacher_mode=tied_seed=0-3f2a9c1b7e"``.
    """
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha1(blob.encode("utf-8")).hexdigest()[:10]
    parts = []
    for key, value in (point or {}).items():
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        parts.append(f"{key}={text}")
    prefix = "_".join(parts)
    safe = "".join(c if (c.isalnum() or c in "=._-") else "-" for c in prefix)[:80]
    return f"{safe}-{digest}" if safe else digest


def load_spec(path: str | os.PathLike) -> SweepSpec:
    """Read a sweep specification from a TOML file.

    Parameters
    ----------
    path : path-like
        TOML file with a ``[sweep]`` table (``name``, ``task``), an optional ``[fixed]`` table and
        a ``[grid]`` table of non-empty lists.

    Returns
    -------
    SweepSpec

    Raises
    ------
    ScaleFitError
        If the file is missing or not valid TOML, or has unknown sections/keys, an empty or
        non-list grid entry, or a key in both ``[fixed]`` and ``[grid]``.
    """
    path = Path(path)
    if not os.path.lexists(path):
        raise ScaleFitError(f"{path}: sweep spec not found (expected a TOML file).")
    data = read_toml(path, what="sweep spec")  # a regular file of bounded size, or one line
    return spec_from_dict(data, source=str(path))


def spec_from_dict(data: dict, *, source: str = "<dict>") -> SweepSpec:
    """Build a :class:`SweepSpec` from a TOML-shaped dict (see :func:`load_spec`)."""
    tables = {section: [IsType(dict, "a table")] for section in _SECTIONS}
    validate_mapping(f"sweep spec {source}", data, tables, required=["sweep"])
    sweep = data["sweep"]
    keys = {**SWEEP_KEYS, "description": [IsType(str, "a string")]}
    validate_mapping(f"[sweep] in {source}", sweep, keys, required=["name", "task"])
    return SweepSpec(  # checks name and task against SWEEP_KEYS
        name=sweep["name"],
        task=sweep["task"],
        fixed=dict(data.get("fixed", {})),
        grid=dict(data.get("grid", {})),
        source=source,
    )


#: The declared constraints of the [sweep] table's keys.
SWEEP_KEYS = {
    "name": [
        Matches(
            r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]{0,99}",
            "a plain folder name (letters, digits, '.', '_', '-'; no '/' or '..')",
        )
    ],
    "task": [Matches(r"(?s).+", "a non-empty string")],
}


def _validate(spec: SweepSpec) -> None:
    src = spec.source
    validate(f"[sweep] in {src}", {"name": spec.name, "task": spec.task}, SWEEP_KEYS, noun="key")
    if not isinstance(spec.fixed, dict):
        raise ScaleFitError(f"{src}: [fixed] must be a table.")
    if not isinstance(spec.grid, dict) or not spec.grid:
        raise ScaleFitError(f"{src}: [grid] must be a non-empty table of lists.")
    for key, values in spec.grid.items():
        if not isinstance(values, list):
            raise ScaleFitError(
                f"{src}: [grid] key '{key}' must be a list of values, got {values!r}."
            )
        if not values:
            raise ScaleFitError(f"{src}: [grid] key '{key}' is an empty list; give ≥ 1 value.")
        if len({json.dumps(v, sort_keys=True, default=str) for v in values}) != len(values):
            raise ScaleFitError(f"{src}: [grid] key '{key}' repeats a value: {values!r}.")
    both = sorted(set(spec.fixed) & set(spec.grid))
    if both:
        raise ScaleFitError(f"{src}: key(s) {both} appear in both [fixed] and [grid].")
    for section, table in (("fixed", spec.fixed), ("grid", spec.grid)):
        for key, value in table.items():
            _check_json(src, section, key, value)


def _check_json(src: str, section: str, key: str, value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ScaleFitError(f"{src}: [{section}] key '{key}' must be finite, got {value!r}.")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_json(src, section, f"{key}.{k}", v)
    elif isinstance(value, list):
        for v in value:
            _check_json(src, section, key, v)
    elif not isinstance(value, str | int | float | bool):
        raise ScaleFitError(
            f"{src}: [{section}] key '{key}' has unsupported value {value!r} "
            "(expected strings, numbers, booleans, lists or tables)."
        )
