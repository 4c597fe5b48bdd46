"""The public least-squares entry point :func:`fit`: validate, fit, then refine.

``fit`` collects its keyword arguments once into a frozen :class:`FitOptions` (validated from
declared constraints on construction) and passes that object down: it picks a backend, runs
:func:`scalefit.fit.lsq.least_squares`, and applies the requested refinements — each a function
that returns a new result: :func:`scalefit.fit.bootstrap.bootstrap` and the hold-out check of
:mod:`scalefit.fit.holdout`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._validation import IsType, constraints, validate
from ..errors import ConvergenceWarning, ScaleFitError
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

METHODS = ("jax", "lmfit", "varpro")

#: The options of :func:`fit` (declared once in :data:`scalefit._validation.VOCABULARY`, which
#: the command line is generated from too).
OPTIONS = (
    "loss", "delta", "residuals", "starts", "seed", "method", "bootstrap", "boot_starts",
    "cluster", "ci_prob", "ci_method", "holdout", "predictive", "drop_highest", "progress",
)  # fmt: skip
_CONSTRAINTS = {
    **constraints(*OPTIONS),
    "law": [IsType(str, "a law name"), IsType(Law, "a Law")],
    "law_options": [None, IsType(Mapping, "a mapping")],
    "formula": [None, IsType(str, "a formula string")],
    "x0": [None, IsType(Mapping, "a mapping of parameter values")],
}


@dataclass(frozen=True)
class FitOptions:
    """The keyword arguments of :func:`fit`, validated once and passed down whole."""

    law: str | Law | None
    formula: str | None
    loss: str
    delta: float
    residuals: str
    weights: Any
    starts: int
    seed: int
    method: str
    bootstrap: int
    boot_starts: int
    cluster: str | None
    ci_prob: float
    ci_method: str
    holdout: float | None
    predictive: str
    drop_highest: int
    law_options: Mapping[str, Any] | None
    x0: Mapping[str, float] | None
    progress: bool | None

    def __post_init__(self) -> None:
        validate("fit", {**vars(self), "law": "" if self.law is None else self.law}, _CONSTRAINTS)

    def solver(self, weight_column: str | None, weights_label: str) -> FitSettings:
        """The solver's settings, with the weights resolved on the table."""
        starts = int(self.starts)
        return FitSettings(
            loss=self.loss,
            delta=float(self.delta),
            residuals=self.residuals,
            weight_column=weight_column,
            weights_label=weights_label,
            starts=min(starts, N_LMFIT_STARTS) if self.method == "lmfit" else starts,
            seed=int(self.seed),
            ci_prob=float(self.ci_prob),
            ci_method=self.ci_method,
            x0=self.x0,
        )

    def backend(self):
        """The backend that finds the optimum (see :data:`METHODS`)."""
        if self.method == "lmfit":
            return LmfitBackend()
        if self.method == "varpro":
            from .varpro import VarproBackend

            return VarproBackend(progress=self.progress)
        from .varpro import GridBackend

        return GridBackend(progress=self.progress)


def _law(opts: FitOptions, tab) -> Law:
    if opts.formula is not None:
        if opts.law is not None:
            raise ScaleFitError("pass either a law or a formula to fit, not both.")
        return Law.from_formula(opts.formula, columns=[str(c) for c in tab.columns])
    if opts.law is None:
        raise ScaleFitError("fit needs a law (a name or a Law) or a formula.")
    return get_law(opts.law, **dict(opts.law_options or {}))


def _prepare(table, opts: FitOptions) -> tuple[Any, Law, FitSettings]:
    """The checked table (weights resolved), the law and the solver's settings."""
    keep = names_read(opts.law, opts.formula)
    positive = opts.residuals == "log"
    tab = as_table(table, opts.drop_highest, positive_loss=positive, keep=keep)
    law = _law(opts, tab)
    tab, weight_column, weights_label = resolve_weights(tab, opts.weights)
    if opts.holdout is not None:  # before the full fit: the one message of the split
        n_holdout(len(tab), law, opts.holdout, who="fit")
    return tab, law, opts.solver(weight_column, weights_label)


def _refine(res: FitResult, tab, law: Law, settings: FitSettings, backend, opts: FitOptions):
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
        linear parameters exactly (variable projection, :mod:`scalefit.fit.varpro`) and searches
        only the others, then polishes and certifies on all parameters like ``jax``; under log
        residuals it generates the starts of the ``jax`` solve.
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
    opts = FitOptions(**{k: v for k, v in locals().items() if k != "table"})  # every keyword
    tab, law_obj, settings = _prepare(table, opts)
    backend = opts.backend()
    with on_device(fit_device(len(tab), settings.starts)):  # small fits: the CPU (fit.device)
        res = least_squares(tab, law_obj, settings, backend=backend)
        res = _refine(res, tab, law_obj, settings, backend, opts)
    for w in res.warnings:
        warnings.warn(w, ConvergenceWarning, stacklevel=2)
    return res
