"""Ordering a table's rows by compute and splitting off the highest-compute ones for hold-out."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._validation import Interval, validate
from ..errors import ScaleFitError
from ..laws import Law


def compute_key(tab: pd.DataFrame, law: Law) -> tuple[str, np.ndarray]:
    """The column used to order rows by compute: ``flops``, else the product of the inputs."""
    if "flops" in tab.columns:
        return "flops", tab["flops"].to_numpy(float)
    prod = np.ones(len(tab))
    for col in law.inputs:
        prod = prod * tab[col].to_numpy(float)
    return "*".join(law.inputs), prod


def split_by_compute(tab: pd.DataFrame, law: Law, fraction: float, *, who: str = "fit"):
    """Split rows into the lowest-compute ``1 - fraction`` (train) and the rest (test).

    Returns
    -------
    tuple
        ``(train, test, split_by, threshold)``: two DataFrames (train keeps ``tab.attrs``), the
        ordering column and the compute value of the first test row.
    """
    validate(who, {"holdout": fraction}, {"holdout": [Interval(float, 0, 1, closed="neither")]})
    key, values = compute_key(tab, law)
    n_test = max(1, math.ceil(fraction * len(tab)))
    order = np.argsort(values, kind="stable")
    train = tab.iloc[order[:-n_test]].reset_index(drop=True)
    test = tab.iloc[order[-n_test:]].reset_index(drop=True)
    if len(train) <= len(law.params):
        raise ScaleFitError(
            f"holdout {fraction} leaves {len(train)} training rows, fewer than "
            f"the law's {len(law.params)} parameters + 1."
        )
    train.attrs = dict(tab.attrs)
    return train, test, key, float(values[order[-n_test]])
