"""Read and group a toy sweep's tidy results table (torch-free).

The depth-exponent fit of each group is :func:`scalefit.workflows.toy.fit_depth_exponents`: a
producer never imports the fitter (the layer contracts of ``pyproject.toml``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..core._validation import fmt_value
from ..core.errors import ScaleFitError
from ..core.table import read_csv

#: Columns that always define a group.
GROUP_KEYS = ("teacher_mode", "rho", "temperature", "steps")
#: Columns added to the group when they vary across the table.
OPTIONAL_KEYS = ("loss_kind", "block", "width", "teacher_depth", "batch", "total_steps", "lr")
LOSS_COLUMNS = ("test_loss", "train_loss")
#: The law fitted to each group (its depth exponent's range [0, 5] is a validity condition).
LAW = "depth_power"


def load_results(path: str | os.PathLike) -> pd.DataFrame:
    """Read a toy sweep's tidy table from a sweep folder or a results CSV.

    Parameters
    ----------
    path : path-like
        A sweep output folder (its ``results.csv`` is read, or rebuilt from ``runs/`` when
        missing) or a CSV file with the same columns.

    Raises
    ------
    ScaleFitError
        Missing file or missing columns.
    """
    path = Path(path)
    if path.is_dir():
        csv = path / "results.csv"
        if not csv.is_file():
            from ..sweep import collect_results

            if not list(path.glob("runs/*/result.json")):
                raise ScaleFitError(f"{path}: no results.csv and no finished runs in runs/.")
            return collect_results(path)
        path = csv
    if not path.is_file():
        raise ScaleFitError(f"{path}: no such file or folder.")
    table = read_csv(path)
    need = {"teacher_mode", "rho", "temperature", "depth", "steps", *LOSS_COLUMNS}
    missing = sorted(need - set(table.columns))
    if missing:
        raise ScaleFitError(f"{path}: missing column(s) {missing}; is this a toy sweep table?")
    for col in ("depth", "steps", "temperature", *LOSS_COLUMNS):
        raw = table[col]
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
        bad = ~(np.isfinite(values) & (values > 0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ScaleFitError(
                f"{path}: column {col!r}, row {i + 1}: expected a finite positive number, got "
                f"{fmt_value(raw.iloc[i])}."
            )
    return table


def group_keys(table: pd.DataFrame) -> list[str]:
    """The grouping columns: :data:`GROUP_KEYS` plus optional keys that vary in ``table``."""
    extra = [k for k in OPTIONAL_KEYS if k in table.columns and table[k].nunique() > 1]
    return [*GROUP_KEYS, *extra]
