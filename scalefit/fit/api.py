"""The public least-squares entry point :func:`fit`: validate, fit, then refine.

``fit`` validates its keyword arguments once, from the constraints the option vocabulary
declares (:data:`scalefit.core._validation.VOCABULARY`), and passes them down whole: it picks a
backend, runs :func:`scalefit.fit.lsq.least_squares`, and applies the requested refinements —
each a function that returns a new result: :func:`scalefit.fit.bootstrap.bootstrap` and the
hold-out check of :mod:`scalefit.fit.holdout`.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from ..core._validation import VOCABULARY, IsType, constraints, validate
from ..core.errors import ConvergenceWarning, ScaleFitError
from ..laws import Law, get_law
from .bootstrap import bootstrap as run_bootstrap
from .build import FitSettings
from .data import as_table, names_read, resolve_weights
from .device import fit_device, on_device
from .holdout import holdout_check
from .lmfit_method import N_LMFIT_STARTS, LmfitBackend
from .lsq import least_squares
from .result import FitResult
from .split import n_holdout
from .varpro import GridBackend, VarproBackend

METHODS = ("jax", "lmfit", "varpro")


def _backend(opts):
    """The backend that finds the optimum (see :data:`METHODS`)."""
    if opts.method == "lmfit":
        return LmfitBackend()
    return (VarproBackend if opts.method == "varpro" else GridBackend)(progress=opts.progress)


def _settings(opts, weight_column: str | None, weights_label: str) -> FitSettings:
    """The solver's settings, with the weights resolved on the table."""
    starts = int(opts.starts)
    return FitSettings(
        loss=opts.loss,
        delta=float(opts.delta),
        residuals=opts.residuals,
        weight_column=weight_column,
        weights_label=weights_label,
        starts=min(starts, N_LMFIT_STARTS) if opts.method == "lmfit" else starts,
        seed=int(opts.seed),
        ci_prob=float(opts.ci_prob),
        ci_method=opts.ci_method,
        x0=opts.x0,
    )


def _law(opts, tab) -> Law:
    if opts.formula is not None:
        if opts.law is not None:
            raise ScaleFitError("pass either a law or a formula to fit, not both.")
        return Law.from_formula(opts.formula, columns=[str(c) for c in tab.columns])
    if opts.law is None:
        raise ScaleFitError("fit needs a law (a name or a Law) or a formula.")
    return get_law(opts.law, **dict(opts.law_options or {}))


def _prepare(table, opts) -> tuple[Any, Law, FitSettings]:
    """The checked table (weights resolved), the law and the solver's settings."""
    keep = names_read(opts.law, opts.formula)
    positive = opts.residuals == "log"
    tab = as_table(table, opts.drop_highest, positive_loss=positive, keep=keep)
    law = _law(opts, tab)
    tab, weight_column, weights_label = resolve_weights(tab, opts.weights)
    if opts.holdout is not None:  # before the full fit: the one message of the split
        n_holdout(len(tab), law, opts.holdout, who="fit")
    return tab, law, _settings(opts, weight_column, weights_label)


def _refine(res: FitResult, tab, law: Law, settings: FitSettings, backend, opts):
    """The requested refinements of the optimum, each returning a new result."""
    if opts.bootstrap:
        keys = ("boot_starts", "cluster", "seed", "ci_prob", "ci_method", "progress")
        res = run_bootstrap(res, tab, opts.bootstrap, **{k: getattr(opts, k) for k in keys})
    if opts.holdout is not None:
        res = res.replace(
            holdout=holdout_check(
                tab,
                law,
                opts.holdout,
                settings,
                backend=backend,
                bootstrap=min(opts.bootstrap, 200) or 200,
                progress=opts.progress,
                predictive=opts.predictive,
            )
        )
    return res


def fit(
    table,
    law: str | Law | None = None,
    *,
    formula: str | None = None,
    loss: str = "mse",
    delta: float = 1e-3,
    residuals: str = "log",
    weights: Any = None,
    starts: int = 256,
    seed: int = 0,
    method: str = "jax",
    bootstrap: int = 0,
    boot_starts: int = 7,
    cluster: str | None = None,
    ci_prob: float = 0.95,
    ci_method: str = "percentile",
    holdout: float | None = None,
    predictive: str = "law",
    drop_highest: int = 0,
    law_options: Mapping[str, Any] | None = None,
    x0: Mapping[str, float] | None = None,
    progress: bool | None = None,
) -> FitResult:
    """Fit a scaling law to a loss table by robust least squares.

    The objective is ``sum_i w_i rho(r_i)`` (summed, not averaged) with residuals
    ``r = log y - log f(x)`` (``residuals="log"``) or ``r = y - f(x)`` (``"linear"``), ``rho`` the
    squared error (``mse``), Huber with threshold ``delta`` (``huber``) or absolute error
    (``lad``), and ``w`` optional per-row weights. Gradients are exact (JAX, float64). For a law
    with linear parameters, the best cells of a grid over the others (the linear ones solved
    exactly in each cell) start a vectorised Levenberg–Marquardt loop on all parameters; the
    ``starts`` random starting points (plus the law's start points and ``x0``) are solved too
    when fewer than half of the first ones reach the best point, and for other laws. The best is
    checked to be a true local minimum (:mod:`scalefit.fit.checks`) before it is called
    converged.

    Parameters
    ----------
    table : DataFrame, path or dataset name
        The loss table (validated with :func:`scalefit.read_table`).
    law : str or Law, optional
        Law name (see :func:`scalefit.laws.list_laws`) or a :class:`~scalefit.laws.Law`.
    formula : str, optional
        Instead of ``law``: a formula such as ``"E + A/params**alpha"`` (see
        :meth:`scalefit.Law.from_formula`); any numeric column of the table may be an input.
    loss : {"mse", "huber", "lad"}, default "mse"
        Robust loss on the residuals.
    delta : float, default 1e-3
        Huber threshold in residual units (Epoch AI's choice on log loss).
    residuals : {"log", "linear"}, default "log"
        Residual scale (see :mod:`scalefit.fit.observation`).
    weights : str or array-like, optional
        Per-row weights: a column name or one non-negative number per row.
    starts : int, default 256
        Number of random starts (when the grid is not enough, see above).
    seed : int, default 0
        Seed for starts and resamples (recorded in the result).
    method : {"jax", "lmfit", "varpro"}, default "jax"
        Backend. ``lmfit`` runs lmfit's least squares from the first 16 starts and attaches
        lmfit's ``Parameters`` and report to ``result.extras``. ``varpro`` solves the law's
        linear parameters exactly at every start's other parameters (variable projection,
        :mod:`scalefit.fit.varpro`) and hands every projected start to the ``jax`` solver,
        which polishes and certifies the best on all parameters.
    bootstrap : int, default 0
        Number of bootstrap resamples (see :func:`scalefit.bootstrap`).
    boot_starts : int, default 7
        Random starts per resample, besides the warm start from the full-data optimum.
    cluster : str, optional
        Resample whole groups of rows sharing this column's value instead of single rows.
    ci_prob : float, default 0.95
        Interval probability.
    ci_method : {"percentile", "bca"}, default "percentile"
        Bootstrap interval type.
    holdout : float, optional
        Also fit on the lowest-compute ``1 - holdout`` fraction and test on the rest.
    predictive : {"law", "calibrated"}, default "law"
        Which predictive scores the ``holdout`` rows: the bootstrap draws with normal noise of
        the training RMSE, or the calibrated predictive (per-model random effect, discrepancy
        growing beyond the data, Student-t tails; :mod:`scalefit.fit.discrepancy`),
        reported with the law's own coverage beside it. Off by default: it did not win on every
        held-out case (``docs/extrapolation.md``).
    drop_highest : int, default 0
        Outlier rule applied when ``table`` is a path or dataset name.
    law_options : mapping, optional
        Options for a named law (e.g. ``{"form": "power"}`` for ``critical_depth``).
    x0 : mapping, optional
        An extra starting point in public units (e.g. published values).
    progress : bool, optional
        Show progress bars (default: when stderr is a terminal).

    Returns
    -------
    FitResult

    Examples
    --------
    A table simulated from Chinchilla's law (200 rows, 1 % noise, ``alpha`` = 0.34):

    >>> import scalefit
    >>> from scalefit.fit.synthetic import simulate_table
    >>> table = simulate_table("chinchilla", seed=0)
    >>> res = scalefit.fit(table, "chinchilla", seed=0)
    >>> round(res.params["alpha"], 2), res.not_identified, res.converged
    (0.33, (), True)

    A formula over any columns, here an exact ``3/steps**0.5 + 1.5``:

    >>> import numpy as np
    >>> import pandas as pd
    >>> steps = np.arange(1.0, 200.0)
    >>> curve = pd.DataFrame({"steps": steps, "loss": 3.0 / steps**0.5 + 1.5})
    >>> res = scalefit.fit(curve, formula="c/steps**a + L0", residuals="linear")
    >>> {name: round(value, 3) for name, value in sorted(res.params.items())}
    {'L0': 1.5, 'a': 0.5, 'c': 3.0}
    """
    opts = SimpleNamespace(**{k: v for k, v in locals().items() if k != "table"})  # every keyword
    validate("fit", {**vars(opts), "law": "" if law is None else law}, _CONSTRAINTS)
    tab, law_obj, settings = _prepare(table, opts)
    backend = _backend(opts)
    with on_device(fit_device(len(tab), settings.starts)):  # small fits: the CPU (fit.device)
        res = least_squares(tab, law_obj, settings, backend=backend)
        res = _refine(res, tab, law_obj, settings, backend, opts)
    for w in res.warnings:
        warnings.warn(w, ConvergenceWarning, stacklevel=2)
    return res


#: The options of :func:`fit` declared in :data:`scalefit.core._validation.VOCABULARY` (which the
#: command line is generated from too); ``law`` and ``weights`` take more in Python (a Law, an
#: array) and are checked below and by :func:`~scalefit.fit.data.resolve_weights`.
OPTIONS = tuple(
    n for n in inspect.signature(fit).parameters if n in VOCABULARY and n not in ("law", "weights")
)
_CONSTRAINTS = {
    **constraints(*OPTIONS),
    "law": [IsType(str, "a law name"), IsType(Law, "a Law")],
    "law_options": [None, IsType(Mapping, "a mapping")],
    "formula": [None, IsType(str, "a formula string")],
    "x0": [None, IsType(Mapping, "a mapping of parameter values")],
}
