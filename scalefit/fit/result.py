"""The result of a fit: values, uncertainty, diagnostics, conventions; JSON round-trip."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._io import atomic_write_json
from ..errors import ScaleFitError
from ..laws import Law, get_law

SCHEMA_VERSION = 1


@dataclass
class FitResult:
    """Everything a fit produced.

    Attributes
    ----------
    law : str
        Registry name of the law; ``law_options`` rebuilds it with :func:`scalefit.laws.get_law`.
    params : dict
        Best-fit (least squares) or posterior-median (Bayes) values in raw units.
    method : str
        ``"jax"`` (vectorised Levenberg–Marquardt), ``"lmfit"`` or ``"bayes"``.
    objective : float
        Summed loss on log-loss residuals at the optimum.
    converged : bool
        The optimum passed the convergence test (and every check below it).
    metrics : dict
        ``r2`` and ``rmse`` on the loss scale, ``rmse_log``, ``mean_rel_err``, ``max_rel_err``.
    stderr : dict
        Asymptotic standard errors (raw units; delta method from internal coordinates).
    corr : list of list
        Correlation matrix of the internal (reference-pinned) coordinates, in parameter order.
    ci : dict
        ``name -> (lo, hi)`` intervals (bootstrap or posterior) at ``ci_prob``.
    draws : ndarray or None
        Bootstrap or posterior draws, shape (n_draws, n_params), raw units.
    warnings : list of str
        Identifiability and convergence warnings.
    conventions : dict
        Everything needed to reproduce the fit (loss, delta, outlier rule, token derivation, starts,
        seed, reference points, software versions).
    diagnostics : dict
        Method-specific diagnostics (starts reaching the best objective, bootstrap failures,
        R-hat/ESS for Bayes, ...).
    holdout : dict or None
        Held-out validation results when requested.
    """

    law: str
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
    warnings: list[str] = field(default_factory=list)
    conventions: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    holdout: dict[str, Any] | None = None
    law_options: dict[str, Any] = field(default_factory=dict)
    internal: list[float] = field(default_factory=list)
    refs: dict[str, float] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ access
    def get_law(self) -> Law:
        """The :class:`~scalefit.laws.Law` this result belongs to."""
        return get_law(self.law, **self.law_options)

    @property
    def n_boot(self) -> int:
        """Number of draws kept (bootstrap resamples or posterior samples)."""
        return 0 if self.draws is None else int(len(self.draws))

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
            Inputs by canonical column name.
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
        law = self.get_law()
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
            sigma = float(self.metrics.get("rmse_log", 0.0))
            rng = np.random.default_rng(int(self.conventions.get("seed", 0)) + 7)
            sims = sims * np.exp(rng.normal(0.0, sigma, sims.shape))
        lo, hi = np.nanquantile(sims, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
        return pd.DataFrame({"loss": mean, "lo": lo, "hi": hi})

    # ------------------------------------------------------------------ presentation
    def summary(self) -> pd.DataFrame:
        """One row per parameter: value, standard error and interval (raw units)."""
        rows = []
        for name, value in self.params.items():
            lo, hi = self.ci.get(name, (np.nan, np.nan))
            rows.append(
                {
                    "param": name,
                    "value": value,
                    "stderr": self.stderr.get(name, np.nan),
                    "ci_lo": lo,
                    "ci_hi": hi,
                }
            )
        return pd.DataFrame(rows).set_index("param")

    def report(self) -> str:
        """A readable text report of the fit."""
        law = self.get_law()
        conv = self.conventions
        lines = [
            f"law        {self.law}: {law.formula}",
            f"method     {self.method}, loss {conv.get('loss', '?')}"
            + (f" (delta {conv['delta']:g})" if conv.get("loss") == "huber" else "")
            + f", {self.n_rows} rows, objective {self.objective:.10g}",
            f"converged  {'yes' if self.converged else 'NO'}"
            + (
                f"; {self.diagnostics['n_best']}/{self.diagnostics['n_starts']} starts reached "
                f"the best objective"
                if "n_best" in self.diagnostics
                else ""
            ),
            "metrics    " + ", ".join(f"{k} {v:.4g}" for k, v in self.metrics.items()),
        ]
        if conv.get("outlier_rule") and conv["outlier_rule"] != "none":
            lines.append(f"outliers   {conv['outlier_rule']}")
        if conv.get("derived"):
            lines.append(f"derived    {'; '.join(conv['derived'])}")
        tab = self.summary()
        pct = f"{100 * self.ci_prob:g}%"
        header = f"\n{'param':<10}{'value':>14}{'stderr':>12}"
        header += f"{pct + ' lo':>14}{pct + ' hi':>14}" if self.ci else ""
        lines.append(header)
        for name, row in tab.iterrows():
            line = f"{name:<10}{row['value']:>14.6g}{row['stderr']:>12.3g}"
            if self.ci:
                line += f"{row['ci_lo']:>14.6g}{row['ci_hi']:>14.6g}"
            lines.append(line)
        if self.diagnostics.get("n_boot"):
            d = self.diagnostics
            lines.append(
                f"\nbootstrap  {d['n_boot']} resamples ({d.get('resample', 'rows')}), "
                f"{d.get('boot_failed', 0)} not converged, interval "
                f"{conv.get('ci_method', 'percentile')}"
            )
        if self.holdout:
            h = self.holdout
            lines.append(
                f"holdout    trained on the lowest-compute {h['n_train']} rows, tested on "
                f"{h['n_test']}: MAE(log loss) {h['mae_log']:.4g}, max rel err "
                f"{h['max_rel_err']:.3%}, {100 * h['band_prob']:g}% interval coverage "
                f"{h['coverage']:.0%}"
            )
        for w in self.warnings:
            lines.append(f"warning    {w}")
        return "\n".join(lines)

    def plot(self, table, *, ax=None):
        """Data against fit and residuals; see :func:`scalefit.plot.fit.plot_fit`."""
        from ..plot.fit import plot_fit

        return plot_fit(self, table, ax=ax)

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dictionary (includes the draws)."""
        out = asdict(self)
        out.pop("extras")
        out["draws"] = None if self.draws is None else np.asarray(self.draws).tolist()
        out["ci"] = {k: [float(v[0]), float(v[1])] for k, v in self.ci.items()}
        out["n_boot"] = self.n_boot
        out["schema_version"] = SCHEMA_VERSION
        return out

    def save(self, path: str | os.PathLike) -> Path:
        """Write the result as JSON (atomically)."""
        return atomic_write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FitResult:
        """Rebuild a result from :meth:`to_dict` output."""
        data = dict(data)
        data.pop("schema_version", None)
        data.pop("n_boot", None)
        if data.get("draws") is not None:
            data["draws"] = np.asarray(data["draws"], dtype=float)
        data["ci"] = {k: (v[0], v[1]) for k, v in data.get("ci", {}).items()}
        names = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - names
        if unknown:
            raise ScaleFitError(f"result JSON has unknown field(s): {sorted(unknown)}.")
        return cls(**data)

    @classmethod
    def load(cls, path: str | os.PathLike) -> FitResult:
        """Read a result written by :meth:`save`."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError as exc:
            raise ScaleFitError(f"{path}: no such result file.") from exc
        except json.JSONDecodeError as exc:
            raise ScaleFitError(f"{path}: not a JSON result file ({exc}).") from exc
        if not isinstance(data, dict) or "law" not in data or "params" not in data:
            raise ScaleFitError(f"{path}: not a scalefit result (no 'law'/'params').")
        data = {k: (float("nan") if v is None and k == "objective" else v) for k, v in data.items()}
        return cls.from_dict(data)
