"""Ordering a table's rows by compute and splitting off the highest-compute ones for hold-out."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..core._validation import Interval, validate
from ..core.accounting import training_compute
from ..core.errors import ScaleFitError
from ..laws import Law


def compute_key(tab: pd.DataFrame, law: Law) -> tuple[str, np.ndarray]:
    """The compute that orders rows (``training_compute``), else the product of the law's inputs.

    :func:`scalefit.core.accounting.training_compute` reads the law's options; without ``tokens``
    the product of the inputs is named by them (``depth``, ``S1_x_S2``).
    """
    found = training_compute(tab, law.options)
    if found is not None:
        return found
    prod = np.prod([tab[col].to_numpy(float) for col in law.inputs], axis=0)
    return "_x_".join(law.inputs), prod


def n_holdout(n_rows: int, law: Law, fraction, *, who: str = "fit", option: str = "holdout"):
    """Rows held out of ``n_rows`` for a share ``fraction``: ``ceil(fraction · n_rows)``, ≥ 1.

    Raises the one message (naming ``who``'s ``option``) for a share that is not a float in
    (0, 1) or leaves no more training rows than the law has parameters.
    """
    validate(who, {option: fraction}, {option: [Interval(float, 0, 1, closed="neither")]})
    n_test = max(1, math.ceil(fraction * n_rows))
    if n_rows - n_test <= len(law.params):
        raise ScaleFitError(
            f"The '{option}' parameter of {who} must leave more training rows than the law's "
            f"{len(law.params)} parameters; {fraction} leaves {n_rows - n_test}."
        )
    return n_test


def split_by_compute(
    tab: pd.DataFrame, law: Law, fraction: float, *, who: str = "fit", option: str = "holdout"
):
    """Split rows into the lowest-compute ``1 - fraction`` (train) and the rest (test).

    Rows are ordered by :func:`compute_key` (stable); :func:`n_holdout` checks the share.

    Returns
    -------
    tuple
        ``(train, test, split_by, threshold)``: two DataFrames (train keeps ``tab.attrs``), the
        name of the ordering compute and the compute value of the first test row.
    """
    n_test = n_holdout(len(tab), law, fraction, who=who, option=option)
    key, values = compute_key(tab, law)
    order = np.argsort(values, kind="stable")
    train = tab.iloc[order[:-n_test]].reset_index(drop=True)
    test = tab.iloc[order[-n_test:]].reset_index(drop=True)
    train.attrs = dict(tab.attrs)
    return train, test, key, float(values[order[-n_test]])
