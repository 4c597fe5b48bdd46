"""Synthetic loss tables with known truth, for recovery and calibration tests."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..core.accounting import standard_params
from ..laws import Law, get_law
from ..laws.catalogue import HOFFMANN_2022

#: Ground truths used by the recovery and calibration checks (raw units).
TRUTHS: dict[str, dict[str, float]] = {
    "chinchilla": dict(HOFFMANN_2022),
    "decomposed": {
        "c_width": 270.0,
        "a_width": 0.95,
        "c_depth": 6.7,
        "a_depth": 1.3,
        "c_tokens": 530.0,
        "a_tokens": 0.30,
        "L0": 1.75,
    },
    "critical_depth": {
        "A": 400.0,
        "alpha": 0.3,
        "B": 400.0,
        "delta": 0.3,
        "gamma": 2.0,
        "mu": 0.35,
        "kappa": 2.43,
    },
    "critical_depth_power": {
        "A": 400.0,
        "alpha": 0.3,
        "B": 400.0,
        "delta": 0.3,
        "gamma": 2.0,
        "mu": 0.35,
        "c_crit": 0.8,
        "a_crit": 0.44,
    },
    "depth_power": {"c": 2.0, "alpha": 1.0, "L0": 0.5},
}


def design(law: Law, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Random inputs for ``law``: log-uniform over ranges typical of LM grids."""
    cols: dict[str, np.ndarray] = {}
    if "depth" in law.inputs:
        cols["depth"] = np.round(np.exp(rng.uniform(np.log(2), np.log(80), n)))
    if "width" in law.inputs:
        cols["width"] = 64.0 * np.round(np.exp(rng.uniform(np.log(4), np.log(64), n)))
    if "tokens" in law.inputs:
        cols["tokens"] = np.exp(rng.uniform(np.log(1e8), np.log(1e11), n))
    if "params" in law.inputs:
        if {"depth", "width"} <= set(cols):
            cols["params"] = standard_params(cols["depth"], cols["width"], vocab=0)
        else:
            cols["params"] = np.exp(rng.uniform(np.log(1e7), np.log(1e10), n))
    return pd.DataFrame(cols)


def simulate_table(
    law: str | Law,
    truth: Mapping[str, float] | None = None,
    *,
    n: int = 200,
    noise: float = 0.01,
    seed: int = 0,
) -> pd.DataFrame:
    """A table whose losses follow ``law`` at ``truth`` with log-normal noise.

    Parameters
    ----------
    law : str or Law
        The law.
    truth : mapping, optional
        Parameter values (default: :data:`TRUTHS` for built-in laws).
    n : int, default 200
        Rows.
    noise : float, default 0.01
        Standard deviation of the noise on log loss (0.01 = 1 %).
    seed : int, default 0
        Random seed.

    Returns
    -------
    pandas.DataFrame
        Canonical columns including ``loss``; ``attrs["truth"]`` holds the truth.
    """
    law = get_law(law)
    truth = dict(truth if truth is not None else TRUTHS[law.name])
    rng = np.random.default_rng(seed)
    frame = design(law, n, rng)
    mean = np.asarray(law.evaluate(truth, frame), dtype=float)
    frame["loss"] = mean * np.exp(rng.normal(0.0, noise, n))
    frame.attrs["truth"] = truth
    return frame
