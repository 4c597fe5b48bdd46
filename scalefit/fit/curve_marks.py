"""Whether a loss table holds loss curves, and the warning for fitting one as independent rows.

A curve table holds several checkpoints of each training run. After a fit, the residuals of one
run are strongly autocorrelated (they share its data order, seed and noise), so a fit that
treats every checkpoint as independent evidence (the row bootstrap, a Bayesian fit without a
group) gives intervals that are too narrow. :func:`warn_ungrouped` says so, with the fix.

A table is marked as curves by ``attrs["scalefit_curves"]``, which the curve readers
(:func:`scalefit.curves.read_curves` and the others) and :func:`scalefit.curves.prepare` set and
:func:`scalefit.curves.api.curve_table` keeps. A file read back from disk has lost its attrs: a
table with a ``run`` column, a ``step`` (or ``S1``) column and a run with two rows or more is
recognised as curves too.
"""

from __future__ import annotations

import warnings

import pandas as pd

#: The ``DataFrame.attrs`` key that marks a table as loss curves.
CURVES_KEY = "scalefit_curves"


class CurvesWarning(UserWarning):
    """A fit treats the checkpoints of one run as independent rows."""


def is_curve_table(tab: pd.DataFrame) -> bool:
    """Whether ``tab`` holds loss curves: several checkpoints of one run.

    Parameters
    ----------
    tab : DataFrame
        A loss table.

    Returns
    -------
    bool
        True for a table marked by ``attrs["scalefit_curves"]``, or one with a ``run`` column, a
        ``step`` or ``S1`` column and some run holding two rows or more.
    """
    if not isinstance(tab, pd.DataFrame):
        return False
    if CURVES_KEY in tab.attrs:
        return True
    if "run" not in tab.columns or not ({"step", "S1"} & set(tab.columns)):
        return False
    return bool(tab["run"].duplicated().any())


def warn_ungrouped(tab: pd.DataFrame, who: str, fix: str) -> None:
    """Warn (:class:`CurvesWarning`) when ``tab`` holds curves and ``who`` fits rows as independent.

    Parameters
    ----------
    tab : DataFrame
        The table being fitted.
    who : str
        What treats the rows as independent, e.g. ``"fit_bayes without a group"``.
    fix : str
        The argument that groups the rows by run, e.g. ``"group='run'"``.
    """
    if not is_curve_table(tab):
        return
    runs = f" ({tab['run'].nunique()} runs, {len(tab)} checkpoints)" if "run" in tab else ""
    warnings.warn(
        f"{who}: this table holds loss curves{runs}, and checkpoints of one run are not "
        f"independent (their residuals are autocorrelated): the intervals will be too narrow. "
        f"Pass {fix}, or fit with scalefit.curves.fit_curves / `scalefit curves fit`.",
        CurvesWarning,
        stacklevel=3,
    )
