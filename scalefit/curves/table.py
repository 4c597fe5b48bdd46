"""The long curve format and its validation.

One row per checkpoint: ``run`` (a name), ``step`` (optimiser updates done when the loss was
measured) and/or ``tokens``, ``loss``, optionally ``lr`` (the learning rate of update ``step``),
and per-run constants ``params``, ``width``, ``depth``, ``schedule`` (a schedule string, see
:func:`scalefit.core.schedule.parse_schedule`) and ``tokens_per_step``. Every problem is one
line naming the source, the run and the row (1-based, as in the file).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..core._validation import fmt_value, spelled
from ..core.errors import ScaleFitError

#: Per-checkpoint numeric columns.
POINT_COLUMNS = ("step", "tokens", "loss", "lr")
#: Columns that must hold one value per run.
RUN_COLUMNS = ("params", "width", "depth", "schedule", "tokens_per_step")
#: Largest step accepted: the largest whole number a float holds exactly (steps are counted in
#: floats; a larger one is a corrupt or hostile file, not a run).
MAX_STEP = 2**53
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


def _rename_map(frame: pd.DataFrame, columns: Mapping[str, str] | None, where: str) -> dict:
    """``{file column: canonical name}`` from ``columns`` and the built-in aliases."""
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
    return rename


def validate_curves(
    frame: pd.DataFrame,
    *,
    source: str = "<DataFrame>",
    columns: Mapping[str, str] | None = None,
    run: str | None = None,
    run_columns: Sequence[str] | None = None,
    schedule: str | None = None,
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
    run_columns : sequence of str, optional
        Columns of the file whose values together name a run (e.g. ``("model",
        "total_steps", "peak_lr")``): the run is their values joined by ``/``, in this order.
        For a file without a ``run`` column whose runs are told apart by several settings.
    schedule : str, optional
        A schedule template whose ``{column}`` fields name per-run columns of the file (e.g.
        ``"cosine:lr={peak_lr},steps={total_steps},warmup=50,final_lr_ratio=0.1"``,
        :func:`scalefit.core.schedule.template_fields`): fills each run's ``schedule``
        column. Each field must hold one number per run.

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
    raw = frame.reset_index(drop=True)
    if run_columns is not None:
        raw = _with_run_id(raw, run_columns, columns, run, source)
    rename = _rename_map(raw, columns, source)
    tab = raw.rename(columns=rename)
    if "run" not in tab.columns:
        if run is None:
            raise ScaleFitError(
                f"{source}: no 'run' column; name the run of each row, or give a file of one "
                f"run its name: {spelled('run=NAME')}. Columns: {', '.join(map(str, tab.columns))}."
            )
        tab["run"] = run
    if "loss" not in tab.columns:
        raise ScaleFitError(f"{source}: no 'loss' column; columns: {list(tab.columns)}.")
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
    if schedule is not None:
        tab = _with_schedules(tab, schedule, rename, source)
    _check_per_run(tab, source)
    if "schedule" in tab.columns:  # read once here: a bad or overlong schedule is refused early
        from ..core.schedule import parse_schedule

        for run, text in tab.groupby("run", sort=False)["schedule"].first().dropna().items():
            parse_schedule(str(text), steps=1, where=f"{source}: run {run!r}")  # length aside
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


def _with_run_id(raw, run_columns, columns, run, source: str) -> pd.DataFrame:
    """``raw`` with a ``run`` column joined from ``run_columns`` (file names, in order)."""
    cols = [run_columns] if isinstance(run_columns, str) else list(run_columns)
    if not cols or not all(isinstance(c, str) and c for c in cols):
        raise ScaleFitError(
            f"{source}: run_columns must name one column or more. Got {run_columns!r} instead."
        )
    taken = "run" in raw.columns or "run" in dict(columns or {}).values()
    if taken or run is not None:
        raise ScaleFitError(
            f"{source}: run_columns builds the run name; the file already has a 'run' column "
            "(or one mapped to it) or a run= name was given. Use one of them."
        )
    for col in cols:
        if col not in raw.columns:
            raise ScaleFitError(
                f"{source}: run column {col!r} is not in the file; columns: "
                f"{', '.join(map(str, raw.columns))}."
            )
        empty = raw[col].isna() | (raw[col].astype(str).str.strip() == "")
        if empty.any():
            i = int(np.flatnonzero(empty)[0])
            raise ScaleFitError(f"{source}: row {i + 1}, run column {col!r}: an empty value.")
    parts = [raw[c].map(_id_text) for c in cols]
    out = raw.copy()
    out["run"] = parts[0].str.cat(parts[1:], sep="/") if len(parts) > 1 else parts[0]
    return out


def _id_text(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _with_schedules(tab: pd.DataFrame, template: str, rename: dict, source: str) -> pd.DataFrame:
    """Fill each run's ``schedule`` from a template whose fields name per-run columns."""
    from ..core.schedule import fill_template, template_fields

    where = f"{source}: schedule template"
    if "schedule" in tab.columns:
        raise ScaleFitError(f"{where}: the file has a 'schedule' column already; use one.")
    fields = template_fields(template, where=where)
    cols = {f: rename.get(f, f) for f in fields}
    for field, col in cols.items():
        if col not in tab.columns:
            raise ScaleFitError(
                f"{where}: field {{{field}}} names no column; columns: "
                f"{', '.join(map(str, tab.columns))}."
            )
        tab[col] = _numeric(tab, col, source) if col not in POINT_COLUMNS else tab[col]
    _check_per_run(tab, source, columns=list(dict.fromkeys(cols.values())))
    texts = {}
    for run, part in tab.groupby("run", sort=False):
        values = {f: float(part[c].iloc[0]) for f, c in cols.items()}
        last = int(part["step"].max()) if "step" in part.columns else None
        sched = fill_template(template, values, steps=last, where=f"{source}: run {run!r}")
        texts[run] = str(sched)
    tab["schedule"] = tab["run"].map(texts)
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
    if col == "step":
        bad = (values != np.round(values)) | (values > MAX_STEP)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ScaleFitError(
                f"{source}: run {tab['run'].iloc[i]!r}, row {i + 1}, column 'step': expected a "
                f"whole number of at most 2**53, got {fmt_value(raw.iloc[i])}."
            )
    return pd.Series(values, index=tab.index)


def _check_per_run(tab: pd.DataFrame, source: str, columns=RUN_COLUMNS) -> None:
    for col in columns:
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
