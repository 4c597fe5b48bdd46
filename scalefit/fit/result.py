"""The result of a fit: an immutable record that carries its law; JSON round-trip.

A :class:`FitResult` holds the :class:`~scalefit.laws.Law` object itself, so every downstream use
(report, predict, plots, bootstrap, allocation) works for registered laws, laws passed as objects
and formula laws alike, with no registry lookup. Results are frozen: a refinement (bootstrap,
hold-out check) returns a new result (:meth:`FitResult.replace`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core._io import _json_safe, atomic_write_text, read_json
from ..core._readonly import ReadOnlyMappings
from ..core._validation import spelled
from ..core.errors import ScaleFitError
from ..laws import Law, get_law, law_to_spec
from .schema import SCHEMA_VERSION


@dataclass(frozen=True)
class FitResult(ReadOnlyMappings):
    """Everything a fit produced (immutable).

    Attributes
    ----------
    law : Law
        The law that was fitted (a registry name passed to the constructor is resolved once).
    params : dict
        Best-fit (least squares) or posterior-median (Bayes) values in raw units.
    method : str
        ``"jax"`` (vectorised Levenberg–Marquardt), ``"varpro"``, ``"lmfit"`` or ``"bayes"``.
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
        boundary optimum, or a bootstrap interval that leaves the parameter's declared range);
        empty when every parameter is identified. The report, :meth:`summary` (``identified``),
        the JSON file and :func:`scalefit.allocate.allocate` (no shape ``recommended``) all read
        this one field.
    extras : dict
        Live objects of this session (solver problem, lmfit output, ArviZ data); not saved.

    Examples
    --------
    >>> import scalefit
    >>> from scalefit.fit.synthetic import simulate_table
    >>> table = simulate_table("chinchilla", seed=0)
    >>> res = scalefit.fit(table, "chinchilla", seed=0)
    >>> res.law.name, res.law_name, res.n_rows
    ('chinchilla', 'chinchilla', 200)
    >>> res2 = scalefit.bootstrap(res, table, 20, seed=1)  # a new result
    >>> res.draws is None, res2.draws.shape
    (True, (20, 5))
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
        super().__post_init__()

    # ------------------------------------------------------------------ access
    @property
    def law_name(self) -> str:
        """Name of the law (``result.law.name``)."""
        return self.law.name

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
        self, x, *, bands: bool = False, ci_prob: float | None = None, noise: bool = False
    ) -> np.ndarray | pd.DataFrame:
        """Predicted loss at new inputs.

        Parameters
        ----------
        x : DataFrame or mapping
            Inputs by column name (the law's inputs).
        bands : bool, default False
            Return a DataFrame with ``loss``, ``lo`` and ``hi`` from the draws (requires draws).
        ci_prob : float, optional
            Band probability (default: the result's ``ci_prob``).
        noise : bool, default False
            Widen the band by the residual scatter (a predictive rather than a mean band).

        Returns
        -------
        ndarray or DataFrame
        """
        from .observation import add_noise, standard_noise

        law = self.law
        mean = np.asarray(law.evaluate(self.params, x), dtype=float)
        if not bands:
            return mean
        if self.draws is None:
            raise ScaleFitError(
                f"predict(bands=True) needs draws: fit with {spelled('bootstrap=B')} or Bayes."
            )
        ci_prob = self.ci_prob if ci_prob is None else ci_prob
        d = np.asarray(self.draws)
        pd_draws = {k: d[:, i][:, None] for i, k in enumerate(self.params)}
        sims = np.asarray(law.evaluate(pd_draws, x), dtype=float)
        if noise:
            residuals = self.conventions.get("residuals", "log")
            key = "rmse_log" if residuals == "log" else "rmse"
            sigma = float(self.metrics.get(key, 0.0))
            rng = np.random.default_rng(int(self.conventions.get("seed", 0) or 0) + 7)
            sims = add_noise(sims, sigma * standard_noise(rng, None, sims.shape), residuals)
        lo, hi = np.nanquantile(sims, [(1 - ci_prob) / 2, (1 + ci_prob) / 2], axis=0)
        return pd.DataFrame({"loss": mean, "lo": lo, "hi": hi})

    # ------------------------------------------------------------------ presentation
    def summary(self) -> pd.DataFrame:
        """One row per parameter: value, standard error, interval and whether it is identified.

        ``identified`` is False for every parameter in :attr:`not_identified`, whose standard
        error is NaN; its interval, when there is one, says how far the draws wander, not where
        the parameter is. ``stderr_note`` says why a standard error is not given ("n/a:
        bootstrap: ..." for LAD, and for Huber where the sandwich cannot be trusted); empty
        otherwise.
        """
        na = self.diagnostics.get("stderr_na", {})
        if self.conventions.get("loss") == "lad":
            na = {
                n: "no asymptotic standard errors for LAD; use the bootstrap" for n in self.params
            }
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
                    "stderr_note": f"n/a: bootstrap: {na[name]}" if name in na else "",
                }
            )
        return pd.DataFrame(rows).set_index("param")

    def report(self) -> str:
        """A readable text report of the fit."""
        from .report import format_report

        return format_report(self)

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
            value = getattr(self, f.name)
            out[f.name] = dict(value) if isinstance(value, dict) else value
        out["warnings"] = list(self.warnings)
        out["not_identified"] = list(self.not_identified)
        out["draws"] = None if self.draws is None else np.asarray(self.draws).tolist()
        out["ci"] = {k: [float(v[0]), float(v[1])] for k, v in self.ci.items()}
        out["n_boot"] = self.n_boot
        return out

    def save(self, path: str | os.PathLike) -> Path:
        """Write the result as JSON (atomically).

        Fails before writing, in one line, if the law cannot be written or :meth:`load` would
        refuse the file (e.g. an unconverged fit whose coefficient ran past the range a result
        file may hold), so a saved result always loads.
        """
        from .schema import check_result

        # the text load will read (NaN and inf written as null), checked before it is written
        text = json.dumps(_json_safe(self.to_dict()), indent=2, allow_nan=False) + "\n"
        check_result(json.loads(text), where=f"{path} (not written)")
        return atomic_write_text(path, text)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "result JSON") -> FitResult:
        """Rebuild a result from :meth:`to_dict` output, checked against the declared schema.

        Every field is checked (:func:`scalefit.fit.schema.check_result`) before any object is
        built; an unknown ``schema_version`` is refused.

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
        from .schema import check_result

        law, f = check_result(data, where=where)
        names = (x.name for x in dataclasses.fields(cls))
        kept = {k: f[k] for k in names if k not in ("law", "extras")}
        draws = f["draws"]
        if draws is not None:  # (n_draws, n_params), also when there are none
            kept["draws"] = np.array(draws, dtype=float).reshape(len(draws), len(law.param_names))
        return cls(law=law, **kept)

    @classmethod
    def load(cls, path: str | os.PathLike) -> FitResult:
        """Read a result written by :meth:`save` (JSON only: loading never executes anything).

        The file must be a regular file of at most :data:`MAX_RESULT_BYTES`, with bounded
        nesting and integers (:func:`scalefit.core._io.read_json`), and pass the declared schema of
        :mod:`scalefit.fit.schema` before any object is built from it.

        Raises
        ------
        ScaleFitError
            One line naming the file and the field, e.g. ``"r.json: field 'n_rows' must be an
            int >= 1. Got 'abc' instead."``.
        """
        data = read_json(path, what="scalefit result file", max_bytes=MAX_RESULT_BYTES)
        return cls.from_dict(data, where=str(path))


#: Largest result file read (a million bootstrap draws of five parameters is about 100 MB).
MAX_RESULT_BYTES = 256 << 20
