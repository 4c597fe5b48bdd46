"""The table a fit sees: read or pass through, inputs checked, per-row weights resolved."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..core._validation import fmt_value
from ..core.errors import ScaleFitError
from ..core.table import read_table, require_columns
from ..laws import Law

#: Column that carries per-row weights given as an array (so splits and resamples keep them).
WEIGHT_COLUMN = "__weight__"


def as_table(
    table: Any,
    drop_highest: int = 0,
    *,
    positive_loss: bool = True,
    keep: Iterable[str] = (),
) -> pd.DataFrame:
    """A validated table: a dataset name, a path, or a DataFrame (read with ``read_table``).

    ``positive_loss=False`` (linear residuals) accepts a zero or negative loss. ``keep`` names
    the columns the law reads under their own names: no alias renames them, and a table read
    earlier whose alias renamed one (``t`` -> ``tokens``) gets the column back under its name.
    """
    from ..datasets import is_dataset_name, load

    keep = tuple(keep)
    if isinstance(table, str) and is_dataset_name(table):
        return load(table, drop_highest=drop_highest)
    if isinstance(table, pd.DataFrame) and "scalefit" in table.attrs and not drop_highest:
        renamed = table.attrs["scalefit"].get("renamed", {})
        back = {src: table[dst] for src, dst in renamed.items() if src in keep and src not in table}
        return table.assign(**back) if back else table
    return read_table(table, drop_highest=drop_highest, positive_loss=positive_loss, keep=keep)


def names_read(law: Any, formula: str | None) -> tuple[str, ...]:
    """The names a formula mentions, or a law object's inputs (for :func:`as_table`'s ``keep``).

    A formula that does not parse gives no names: building the law reports the error.
    """
    if formula is not None:
        from ..core.expr import parse
        from ..laws.base import _strip_lhs

        try:
            return tuple(sorted(parse(_strip_lhs(formula), kind="formula").names))
        except (ScaleFitError, TypeError):
            return ()
    if isinstance(law, Law):
        return tuple(law.inputs)
    return ()


def inputs_of(tab: pd.DataFrame, law: Law) -> dict[str, np.ndarray]:
    """The law's input columns as float arrays, each checked to be numeric and finite.

    Canonical columns were already checked positive by the table reader; any other numeric
    column (steps, lr, batch_size, ...) may be zero or negative.
    """
    require_columns(tab, law.inputs, f"law {law.name!r}")
    src = tab.attrs.get("scalefit", {}).get("source", "<table>")
    out = {}
    for col in law.inputs:
        values = pd.to_numeric(tab[col], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(values)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ScaleFitError(
                f"{src}: column {col!r}, row {i + 1}: expected a finite number for an input of "
                f"law {law.name!r}, got {fmt_value(tab[col].iloc[i])}."
            )
        out[col] = values
    return out


def resolve_weights(tab: pd.DataFrame, weights: Any) -> tuple[pd.DataFrame, str | None, str]:
    """Attach per-row weights to the table.

    Parameters
    ----------
    tab : DataFrame
        The table.
    weights : None, str or array-like
        ``None`` (every row weighs 1), a column name, or one non-negative number per row.

    Returns
    -------
    tuple
        ``(table, column, label)``: the table (with :data:`WEIGHT_COLUMN` added for an array),
        the column holding the weights (or ``None``) and a label for the conventions.
    """
    if weights is None:
        return tab, None, ""
    if isinstance(weights, str):
        if weights not in tab.columns:
            raise ScaleFitError(
                f"The 'weights' parameter of fit names column {weights!r}, which is not in the "
                f"table; columns: {', '.join(map(str, tab.columns))}."
            )
        values, col, label = tab[weights], weights, f"column {weights!r}"
    else:
        values = np.asarray(weights, dtype=float) if np.ndim(weights) == 1 else None
        if values is None or len(values) != len(tab):
            raise ScaleFitError(
                f"The 'weights' parameter of fit must be a column name or one number per row "
                f"({len(tab)}). Got {fmt_value(weights)} instead."
            )
        col, label = WEIGHT_COLUMN, "array"
    w = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ScaleFitError(
            f"The 'weights' parameter of fit must be finite and non-negative; row {i + 1} has "
            f"{fmt_value(w[i])}."
        )
    if not (w > 0).any():
        raise ScaleFitError("The 'weights' parameter of fit gives every row weight 0.")
    if col == WEIGHT_COLUMN:
        attrs = dict(tab.attrs)
        tab = tab.assign(**{WEIGHT_COLUMN: w})
        tab.attrs = attrs
    return tab, col, label


def weights_of(tab: pd.DataFrame, column: str | None) -> np.ndarray | None:
    """The per-row weights stored in ``column`` (``None`` when unweighted)."""
    return None if column is None else tab[column].to_numpy(dtype=float)


def check_design(tab: pd.DataFrame, law: Law, y: np.ndarray, weights: np.ndarray | None) -> None:
    """Refuse data that cannot identify the law: too few distinct points, a constant response.

    Raises
    ------
    ScaleFitError
        When the (positively weighted) rows have no more distinct input points than the law has
        parameters, or every loss is the same.
    """
    keep = np.ones(len(tab), bool) if weights is None else weights > 0
    n_par = len(law.params)
    if int(keep.sum()) <= n_par:
        raise ScaleFitError(
            f"law {law.name!r} has {n_par} parameters but the table has only "
            f"{int(keep.sum())} rows (with positive weight)."
        )
    sub = tab.loc[keep, list(law.inputs)]
    distinct = len(sub.drop_duplicates())
    if distinct < n_par:
        raise ScaleFitError(
            f"law {law.name!r} has {n_par} parameters but the table has only {distinct} distinct "
            f"input point(s) ({', '.join(law.inputs)}): the data cannot identify the law."
        )
    yk = y[keep]
    if np.ptp(yk) == 0:
        raise ScaleFitError(
            f"every loss in the table is {fmt_value(float(yk[0]))}: a constant response "
            f"identifies none of law {law.name!r}'s parameters."
        )


def group_codes(
    tab: pd.DataFrame,
    column: Any,
    *,
    owner: str,
    name: str,
    fewer_than_rows: bool = False,
    sort: bool = False,
) -> tuple[np.ndarray, list]:
    """Each row's group and the group labels of ``column``: the one grouping check of scalefit.

    Every path that groups rows (the clustered bootstrap, the Bayesian per-group offsets, the
    curves' run clusters) calls this, so a grouping is refused the same way everywhere: a name
    that is not a column, an empty cell (a row without a group: never resampled with another
    group), fewer than two groups.

    Parameters
    ----------
    tab : DataFrame
        The table.
    column : str
        The grouping column.
    owner, name : str
        The function and its keyword (``"bootstrap"``, ``"cluster"``), for the messages.
    fewer_than_rows : bool, default False
        Also require fewer groups than rows (group offsets told apart from the noise).
    sort : bool, default False
        Number the groups in sorted order of their labels (as text) instead of by first row.

    Returns
    -------
    codes : ndarray of int
        The group index of each row.
    labels : list
        The group labels.

    Raises
    ------
    ScaleFitError
        On any of the refusals above, in one line naming the column and the row.
    """
    where = tab.attrs.get("scalefit", {}).get("source", "the table")
    if not isinstance(column, str) or column not in tab.columns:
        raise ScaleFitError(
            f"The {name!r} parameter of {owner} must name a column of {where}; got "
            f"{fmt_value(column)}, columns are {', '.join(map(str, tab.columns))}."
        )
    values = tab[column]
    empty = values.isna().to_numpy() | (values.astype(str).str.strip() == "").to_numpy()
    if empty.any():
        raise ScaleFitError(
            f"{where}: {name} column {column!r} is empty in row {int(np.flatnonzero(empty)[0])}; "
            "every row needs a group."
        )
    codes, labels = pd.factorize(values.astype(str) if sort else values, sort=sort)
    top = len(tab) - 1 if fewer_than_rows else None
    if len(labels) < 2 or (top is not None and len(labels) > top):
        rule = "at least 2 groups" + (
            " and fewer groups than rows (else the group offsets are not told apart from the noise)"
            if top is not None
            else ""
        )
        raise ScaleFitError(
            f"{where}: {name} column {column!r} must have {rule}; it has {len(labels)} group(s) "
            f"in {len(tab)} rows."
        )
    return codes.astype(np.int64), list(labels)
