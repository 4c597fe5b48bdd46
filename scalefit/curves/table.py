"""The long curve format and its validation.

One row per checkpoint: ``run`` (a name), ``step`` (optimiser updates done when the loss was
measured) and/or ``tokens``, ``loss``, optionally ``lr`` (the learning rate of update ``step``),
and per-run constants ``params``, ``width``, ``depth``, ``schedule`` (a schedule string, see
:func:`scalefit.curves.schedule.parse_schedule`) and ``tokens_per_step``. Every problem is one
line naming the source, the run and the row (1-based, as in the file).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from .._validation import fmt_value
from ..errors import ScaleFitError

#: Per-checkpoint numeric columns.
POINT_COLUMNS = ("step", "tokens", "loss", "lr")
#: Columns that must hold one value per run.
RUN_COLUMNS = ("params", "width", "depth", "schedule", "tokens_per_step")
ALIASES = {
    "run_id": "run",
    "run_name": "run",
    "name": "run",
    "_step": "step",
    "iteration": "step",
    "iter": "step",
    "steps": "step",
    "num_tokens": "tokens",
    "val_loss": "loss",
    "train_loss": "loss",
    "learning_rate": "lr",
    "d_model": "width",
    "n_layers": "depth",
}


def _rename(frame: pd.DataFrame, columns: Mapping[str, str] | None, where: str) -> pd.DataFrame:
    columns = dict(columns or {})
    for src in columns:
        if src not in frame.columns:
            raise ScaleFitError(f"{where}: column {src!r} named in 'columns' is not in the file.")
    rename = dict(columns)
    for col in frame.columns:
        if col in columns:
            continue
        dst = ALIASES.get(str(col).lower(), str(col).lower())
        if dst != col and dst in frame.columns:
            continue  # the canonical column is there already: never swallow it
        if dst in POINT_COLUMNS + RUN_COLUMNS + ("run",) and dst not in columns.values():
            if dst in rename.values():
                other = next(k for k, v in rename.items() if v == dst)
                raise ScaleFitError(
                    f"{where}: columns {other!r} and {col!r} both mean {dst!r}; keep one or "
                    f"map them explicitly (columns={{{col!r}: ...}})."
                )
            rename[col] = dst
    return frame.rename(columns=rename)


def validate_curves(
    frame: pd.DataFrame,
    *,
    source: str = "<DataFrame>",
    columns: Mapping[str, str] | None = None,
    run: str | None = None,
) -> pd.DataFrame:
    """Check and normalise a long curve table.

    Parameters
    ----------
    frame : DataFrame
        Rows of checkpoints (see the module docstring).
    source : str
        File name for messages.
    columns : mapping, optional
        ``{name in file: canonical name}`` applied before the built-in aliases.
    run : str, optional
        Run name for every row when the table has no ``run`` column (one run per file).

    Returns
    -------
    DataFrame
        Sorted by run and step (or tokens), numeric columns as float, ``run`` as str;
        ``attrs["scalefit_curves"]`` records the source.

    Raises
    ------
    ScaleFitError
        For a missing column, a non-numeric, non-finite or negative value, a duplicate
        checkpoint, or a per-run column that changes within a run.
    """
    if not isinstance(frame, pd.DataFrame) or frame.empty:
        raise ScaleFitError(f"{source}: no checkpoints; expected rows of run, step, loss.")
    tab = _rename(frame.copy(), columns, source)
    tab = tab.reset_index(drop=True)
    if "run" not in tab.columns:
        if run is None:
            raise ScaleFitError(
                f"{source}: no 'run' column; name the run of each row (or pass run=... for a "
                f"file of one run). Columns: {', '.join(map(str, tab.columns))}."
            )
        tab["run"] = run
    for need in ("loss",):
        if need not in tab.columns:
            raise ScaleFitError(f"{source}: no {need!r} column; columns: {list(tab.columns)}.")
    if "step" not in tab.columns and "tokens" not in tab.columns:
        raise ScaleFitError(f"{source}: needs a 'step' or a 'tokens' column (or both).")
    runs = tab["run"]
    bad = runs.isna() | (runs.astype(str).str.strip() == "")
    if bad.any():
        raise ScaleFitError(f"{source}: row {int(np.flatnonzero(bad)[0]) + 1}: empty run name.")
    tab["run"] = runs.astype(str).str.strip()
    for col in ("step", "tokens", "loss", "lr", "params", "width", "depth", "tokens_per_step"):
        if col in tab.columns:
            tab[col] = _numeric(tab, col, source)
    _check_per_run(tab, source)
    key = "step" if "step" in tab.columns else "tokens"
    dup = tab.duplicated(["run", key])
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise ScaleFitError(
            f"{source}: run {tab['run'].iloc[i]!r}, row {i + 1}: a second checkpoint at "
            f"{key} {fmt_value(tab[key].iloc[i])}; expected one loss per {key}."
        )
    tab = tab.sort_values(["run", key], kind="stable").reset_index(drop=True)
    tab.attrs["scalefit_curves"] = {"source": source, "key": key}
    return tab


def _numeric(tab: pd.DataFrame, col: str, source: str) -> pd.Series:
    raw = tab[col]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    positive = col in ("loss", "params", "width", "depth", "tokens_per_step")
    for test, what in (
        (np.isnan(values) & raw.notna().to_numpy(), "expected a number"),
        (np.isnan(values), "a missing value"),
        (np.isinf(values), "a non-finite value"),
        (values <= 0 if positive else values < 0, "expected a number > 0" if positive else ">= 0"),
    ):
        if test.any():
            i = int(np.flatnonzero(test)[0])
            if what == ">= 0":
                what = "expected a number >= 0"
            raise ScaleFitError(
                f"{source}: run {tab['run'].iloc[i]!r}, row {i + 1}, column {col!r}: {what}, "
                f"got {fmt_value(raw.iloc[i])}."
            )
    if col == "step" and np.any(values != np.round(values)):
        i = int(np.flatnonzero(values != np.round(values))[0])
        raise ScaleFitError(
            f"{source}: run {tab['run'].iloc[i]!r}, row {i + 1}, column 'step': expected a "
            f"whole number, got {fmt_value(raw.iloc[i])}."
        )
    return pd.Series(values, index=tab.index)


def _check_per_run(tab: pd.DataFrame, source: str) -> None:
    for col in RUN_COLUMNS:
        if col not in tab.columns:
            continue
        first = tab.groupby("run", sort=False)[col].transform("first")
        differs = (tab[col] != first) & ~(tab[col].isna() & first.isna())
        if differs.any():
            i = int(np.flatnonzero(differs)[0])
            raise ScaleFitError(
                f"{source}: run {tab['run'].iloc[i]!r}, row {i + 1}, column {col!r}: "
                f"{fmt_value(tab[col].iloc[i])} differs from the run's first value "
                f"{fmt_value(first.iloc[i])}; expected one value per run."
            )


def run_value(tab: pd.DataFrame, run: str, col: str):
    """The per-run value of ``col`` for ``run`` (``None`` when absent)."""
    if col not in tab.columns:
        return None
    value = tab.loc[tab["run"] == run, col].iloc[0]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
