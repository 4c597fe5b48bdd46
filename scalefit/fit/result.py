"""The result of a fit: an immutable record that carries its law; JSON round-trip.

A :class:`FitResult` holds the :class:`~scalefit.laws.Law` object itself, so every downstream use
(report, predict, plots, bootstrap, allocation) works for registered laws, laws passed as objects
and formula laws alike, with no registry lookup. Results are frozen: a refinement (bootstrap,
hold-out check) returns a new result (:meth:`FitResult.replace`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._io import atomic_write_json
from .._validation import fmt_value
from ..errors import ScaleFitError
from ..laws import Law, get_law, law_from_spec, law_to_spec

SCHEMA_VERSION = 2


@dataclass(frozen=True)
class FitResult:
    """Everything a fit produced (immutable).

    Attributes
    ----------
    law : Law
        The law that was fitted (a registry name passed to the constructor is resolved once).
    params : dict
        Best-fit (least squares) or posterior-median (Bayes) values in raw units.
    method : str
        ``"jax"`` (vectorised Levenberg–Marquardt), ``"lmfit"`` or ``"bayes"``.
    objective : float
        Summed (weighted) robust loss on the residuals at the optimum.
    converged : bool
        The optimum passed every convergence check (see :mod:`scalefit.fit.checks`).
    n_rows : int
        Number of rows fitted.
    metrics : dict
        ``r2`` and ``rmse`` on the loss scale, ``rmse_log``, ``mean_rel_err``, ``max_rel_err``.
    stderr : dict
        Asymptotic standard errors (raw units; delta method from internal coordinates). Entries of
        parameters in :attr:`not_identified` are not meaningful (the report says so).
    corr : list of list
        Correlation matrix of the internal (reference-pinned) coordinates, in parameter order;
        every entry lies in [-1, 1].
    ci : dict
        ``name -> (lo, hi)`` intervals (bootstrap or posterior) at ``ci_prob``.
    ci_prob : float
        Probability of the intervals in ``ci``.
    draws : ndarray or None
        Bootstrap or posterior draws, shape (n_draws, n_params), raw units, read-only. Failed
        bootstrap resamples are rows of NaN.
    warnings : tuple of str
        Identifiability and convergence warnings.
    conventions : dict
        Everything needed to reproduce the fit (loss, residual scale, weights, outlier rule, token
        derivation, starts, seed, reference points, software versions).
    diagnostics : dict
        Method-specific diagnostics (starts reaching the best objective, bootstrap failures,
        R-hat/ESS for Bayes, ...).
    holdout : dict or None
        Held-out validation results when requested.
    internal : list of float
        The optimum in the solver's internal coordinates.
    refs : dict
        Log reference points of the pivot variables.
    not_identified : tuple of str
        Parameters the data do not pin down (zero curvature, a flat direction of the Hessian, a
        boundary optimum); empty when every parameter is identified.
    extras : dict
        Live objects of this session (solver problem, lmfit output, ArviZ data); not saved.

    Examples
    --------
    >>> import scalefit
    >>> res = scalefit.fit("depth_delusion", "chinchilla", starts=32)  # doctest: +SKIP
    >>> res.law.name, res.law_name  # doctest: +SKIP
    ('chinchilla', 'chinchilla')
    >>> res2 = scalefit.bootstrap(res, "depth_delusion", 200)  # a new result  # doctest: +SKIP
    """

    law: Law
    params: dict[str, float]
    method: str
    objective: float
    converged: bool
    n_rows: int
    metrics: dict[str, float]
    stderr: dict[str, float] = field(default_factory=dict)
    corr: list[list[float]] = field(default_factory=list)
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    ci_prob: float = 0.95
    draws: np.ndarray | None = None
    warnings: tuple[str, ...] = ()
    conventions: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    holdout: dict[str, Any] | None = None
    internal: list[float] = field(default_factory=list)
    refs: dict[str, float] = field(default_factory=dict)
    not_identified: tuple[str, ...] = ()
    extras: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    law_options: InitVar[Mapping[str, Any] | None] = None

    def __post_init__(self, law_options: Mapping[str, Any] | None) -> None:
        law = self.law
        if not isinstance(law, Law):
            law = get_law(law, **dict(law_options or {}))
        set_ = object.__setattr__
        set_(self, "law", law)
        set_(self, "params", {k: float(v) for k, v in self.params.items()})
        set_(self, "warnings", tuple(self.warnings))
        set_(self, "not_identified", tuple(self.not_identified))
        set_(self, "ci", {k: (float(v[0]), float(v[1])) for k, v in self.ci.items()})
        if self.draws is not None:
            d = np.array(self.draws, dtype=float)
            d.setflags(write=False)
            set_(self, "draws", d)

    # ------------------------------------------------------------------ access
    @property
    def law_name(self) -> str:
        """Name of the law (``result.law.name``)."""
        return self.law.name

    @property
    def law_spec(self) -> dict[str, Any] | None:
        """JSON-able description of the law, or ``None`` for a law that cannot be serialised."""
        try:
            return law_to_spec(self.law)
        except ScaleFitError:
            return None

    def get_law(self) -> Law:
        """The :class:`~scalefit.laws.Law` of this result (same as :attr:`law`)."""
        return self.law

    def replace(self, **changes: Any) -> FitResult:
        """A new result with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    @property
    def n_boot(self) -> int:
        """Number of draws kept (bootstrap resamples or posterior samples)."""
        return 0 if self.draws is None else int(len(self.draws))

    @property
    def identified(self) -> bool:
        """Whether every parameter is identified (:attr:`not_identified` is empty)."""
        return not self.not_identified

    def draws_frame(self) -> pd.DataFrame:
        """Draws as a DataFrame with one column per parameter (empty if there are none)."""
        names = list(self.params)
        if self.draws is None:
            return pd.DataFrame(columns=names)
        return pd.DataFrame(np.asarray(self.draws), columns=names)

    def predict(
        self, x, *, bands: bool = False, prob: float | None = None, noise: bool = False
    ) -> np.ndarray | pd.DataFrame:
        """Predicted loss at new inputs.

        Parameters
        ----------
        x : DataFrame or mapping
            Inputs by column name (the law's inputs).
        bands : bool, default False
            Return a DataFrame with ``loss``, ``lo`` and ``hi`` from the draws (requires draws).
        prob : float, optional
            Band probability (default: the result's ``ci_prob``).
        noise : bool, default False
            Widen the band by the residual scatter (a predictive rather than a mean band).

        Returns
        -------
        ndarray or DataFrame
        """
        from .observation import add_noise

        law = self.law
        mean = np.asarray(law.evaluate(self.params, x), dtype=float)
        if not bands:
            return mean
        if self.draws is None:
            raise ScaleFitError("predict(bands=True) needs draws: fit with bootstrap=B or Bayes.")
        prob = self.ci_prob if prob is None else prob
        d = np.asarray(self.draws)
        pd_draws = {k: d[:, i][:, None] for i, k in enumerate(self.params)}
        sims = np.asarray(law.evaluate(pd_draws, x), dtype=float)
        if noise:
            residuals = self.conventions.get("residuals", "log")
            key = "rmse_log" if residuals == "log" else "rmse"
            sigma = float(self.metrics.get(key, 0.0))
            rng = np.random.default_rng(int(self.conventions.get("seed", 0) or 0) + 7)
            sims = add_noise(sims, rng.normal(0.0, sigma, sims.shape), residuals)
        lo, hi = np.nanquantile(sims, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
        return pd.DataFrame({"loss": mean, "lo": lo, "hi": hi})

    # ------------------------------------------------------------------ presentation
    def summary(self) -> pd.DataFrame:
        """One row per parameter: value, standard error, interval and whether it is identified.

        The standard error of a parameter in :attr:`not_identified` is NaN.
        """
        rows = []
        for name, value in self.params.items():
            lo, hi = self.ci.get(name, (np.nan, np.nan))
            ident = name not in self.not_identified
            rows.append(
                {
                    "param": name,
                    "value": value,
                    "stderr": self.stderr.get(name, np.nan) if ident else np.nan,
                    "ci_lo": lo,
                    "ci_hi": hi,
                    "identified": ident,
                }
            )
        return pd.DataFrame(rows).set_index("param")

    def report(self) -> str:
        """A readable text report of the fit."""
        from .report import format_report

        return format_report(self)

    def plot(self, table, *, ax=None):
        """Data against fit and residuals; see :func:`scalefit.plot.fit.plot_fit`."""
        from ..plot.fit import plot_fit

        return plot_fit(self, table, ax=ax)

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dictionary (includes the draws and the law's spec).

        Raises
        ------
        ScaleFitError
            When the law is a Python object that cannot be written (see
            :func:`scalefit.laws.law_to_spec`).
        """
        spec = law_to_spec(self.law)
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "law": self.law.name,
            "law_spec": spec,
        }
        for f in dataclasses.fields(self):
            if f.name in ("law", "extras"):
                continue
            out[f.name] = getattr(self, f.name)
        out["warnings"] = list(self.warnings)
        out["not_identified"] = list(self.not_identified)
        out["draws"] = None if self.draws is None else np.asarray(self.draws).tolist()
        out["ci"] = {k: [float(v[0]), float(v[1])] for k, v in self.ci.items()}
        out["n_boot"] = self.n_boot
        return out

    def save(self, path: str | os.PathLike) -> Path:
        """Write the result as JSON (atomically); fails before writing if the law cannot be."""
        return atomic_write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "result JSON") -> FitResult:
        """Rebuild a result from :meth:`to_dict` output, validating every field that matters.

        Parameters
        ----------
        data : mapping
            Parsed JSON.
        where : str
            What the data is, for error messages (e.g. the file name).

        Raises
        ------
        ScaleFitError
            One line naming the field and what was expected.
        """
        return _from_dict(cls, data, where)

    @classmethod
    def load(cls, path: str | os.PathLike) -> FitResult:
        """Read a result written by :meth:`save` (JSON only: loading never executes anything)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError as exc:
            raise ScaleFitError(f"{path}: no such result file.") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ScaleFitError(f"{path}: not a JSON result file ({exc}).") from exc
        return _from_dict(cls, data, str(path))


# ---------------------------------------------------------------------- loading and validation
_LIST_FIELDS = ("warnings", "not_identified")


def _finite(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScaleFitError(f"{where}: {key} must be a finite number. Got {fmt_value(value)}.")
    if not math.isfinite(float(value)):
        raise ScaleFitError(f"{where}: {key} must be a finite number. Got {fmt_value(value)}.")
    return float(value)


def _law_of(data: Mapping[str, Any], where: str) -> Law:
    spec = data.get("law_spec")
    if spec is not None:
        return law_from_spec(spec, where=where)
    name = data.get("law")
    if not isinstance(name, str):
        raise ScaleFitError(f"{where}: 'law' must be a law name. Got {fmt_value(name)}.")
    opts = data.get("law_options") or {}
    if not isinstance(opts, Mapping):
        raise ScaleFitError(f"{where}: 'law_options' must be a mapping. Got {fmt_value(opts)}.")
    try:
        return get_law(name, **opts)
    except ScaleFitError as exc:
        raise ScaleFitError(f"{where}: {exc}") from exc


def _draws(value: Any, n_params: int, where: str) -> np.ndarray | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(r, list) for r in value):
        raise ScaleFitError(f"{where}: 'draws' must be a list of rows. Got {fmt_value(value)}.")
    for i, row in enumerate(value):
        if len(row) != n_params:
            raise ScaleFitError(
                f"{where}: 'draws' must have {n_params} columns (one per parameter); row {i} "
                f"has {len(row)}."
            )
        for v in row:
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int | float) or math.isinf(v):
                raise ScaleFitError(
                    f"{where}: 'draws' row {i} must hold numbers (null for a failed resample). "
                    f"Got {fmt_value(v)}."
                )
    arr = np.array([[np.nan if v is None else v for v in r] for r in value], dtype=float)
    return arr.reshape(len(value), n_params)


#: Largest magnitude a stored parameter may have: beyond it a value is damage, not a fit.
_ABSURD = 1e100


def _check_support(law: Law, values: Mapping[str, float], where: str) -> None:
    """Positive kinds must not be negative and no value may be absurdly large.

    Zero is allowed: a fitted floor or coefficient that ran to its lower bound underflows to 0
    (the fit itself reports that parameter as not identified).
    """
    for p in law.params:
        v = values[p.name]
        if p.kind in ("coef", "positive", "floor") and v < 0:
            raise ScaleFitError(
                f"{where}: parameter {p.name!r} of law {law.name!r} must be positive "
                f"(a {p.kind}). Got {fmt_value(v)}."
            )
        if abs(v) > _ABSURD:
            raise ScaleFitError(
                f"{where}: parameter {p.name!r} = {fmt_value(v)} is beyond any fitted value "
                f"(|value| > {_ABSURD:g}); the file is damaged."
            )


def _corr(value: Any, n: int, where: str) -> list[list[float]]:
    """A square correlation matrix with entries in [-1, 1] (null for undefined entries)."""
    if not value:
        return []
    ok = isinstance(value, list) and len(value) == n
    ok = ok and all(isinstance(r, list) and len(r) == n for r in value)
    if not ok:
        raise ScaleFitError(f"{where}: 'corr' must be a {n} x {n} matrix (one row per parameter).")
    out = []
    for row in value:
        vals = []
        for v in row:
            if v is None:
                vals.append(float("nan"))
                continue
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise ScaleFitError(f"{where}: 'corr' must hold numbers. Got {fmt_value(v)}.")
            if not (math.isnan(v) or -1.0 - 1e-9 <= v <= 1.0 + 1e-9):
                raise ScaleFitError(
                    f"{where}: 'corr' entries are correlations in [-1, 1]. Got {fmt_value(v)}."
                )
            vals.append(float(v))
        out.append(vals)
    return out


def _from_dict(cls, data: Any, where: str) -> FitResult:
    if not isinstance(data, Mapping) or "law" not in data or "params" not in data:
        raise ScaleFitError(f"{where}: not a scalefit result (no 'law'/'params').")
    law = _law_of(data, where)
    params = data["params"]
    if not isinstance(params, Mapping):
        raise ScaleFitError(f"{where}: 'params' must be a mapping. Got {fmt_value(params)}.")
    names = law.param_names
    if set(params) != set(names):
        raise ScaleFitError(
            f"{where}: 'params' must name the parameters of law {law.name!r} "
            f"({', '.join(names)}). Got {', '.join(map(str, params)) or 'none'}."
        )
    values = {k: _finite(where, f"parameter {k!r}", params[k]) for k in names}
    _check_support(law, values, where)
    if data.get("law_spec") is not None and data["law"] != law.name:
        raise ScaleFitError(
            f"{where}: 'law' says {fmt_value(data['law'])} but 'law_spec' describes law "
            f"{law.name!r}; the file was edited or is damaged."
        )
    kwargs: dict[str, Any] = {"law": law, "params": values}
    fields = {f.name for f in dataclasses.fields(cls)} - {"law", "params", "extras"}
    known = fields | {"law", "params", "law_spec", "law_options", "schema_version", "n_boot"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ScaleFitError(f"{where}: unknown field(s) {unknown}.")
    for key in fields:
        if key in data:
            kwargs[key] = data[key]
    kwargs["draws"] = _draws(data.get("draws"), len(names), where)
    if kwargs["draws"] is not None and len(kwargs["draws"]):
        if not np.any(np.all(np.isfinite(kwargs["draws"]), axis=1)):
            raise ScaleFitError(
                f"{where}: 'draws' has {len(kwargs['draws'])} rows and none is usable "
                "(every row holds a null/NaN); re-run the bootstrap or drop 'draws'."
            )
    kwargs["corr"] = _corr(kwargs.get("corr"), len(names), where)
    obj = kwargs.get("objective")
    kwargs["objective"] = float("nan") if obj is None else float(obj)
    for key in ("method",):
        if not isinstance(kwargs.get(key), str):
            raise ScaleFitError(
                f"{where}: {key!r} must be a string. Got {fmt_value(kwargs.get(key))}."
            )
    if not isinstance(kwargs.get("converged"), bool):
        raise ScaleFitError(
            f"{where}: 'converged' must be true or false. Got {fmt_value(kwargs.get('converged'))}."
        )
    for key in _LIST_FIELDS:
        kwargs[key] = tuple(kwargs.get(key) or ())
    ci = kwargs.get("ci") or {}
    if not isinstance(ci, Mapping) or any(
        not isinstance(v, list | tuple) or len(v) != 2 for v in ci.values()
    ):
        raise ScaleFitError(f"{where}: 'ci' must map parameters to [lo, hi]. Got {fmt_value(ci)}.")
    kwargs["ci"] = {
        k: (float("nan") if v[0] is None else v[0], float("nan") if v[1] is None else v[1])
        for k, v in ci.items()
    }
    kwargs["stderr"] = {
        k: float("nan") if v is None else float(v) for k, v in (kwargs.get("stderr") or {}).items()
    }
    return cls(**kwargs)
