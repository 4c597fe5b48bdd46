"""The one shared step that turns a backend's optimum into a :class:`FitResult`.

Metrics, uncertainty, convergence and identifiability checks (:mod:`scalefit.fit.checks`),
warnings and conventions are computed here and nowhere else, whichever backend found the point.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .checks import check_point
from .engine import Problem, jax_version
from .observation import metrics
from .result import FitResult


@dataclass(frozen=True)
class Optimum:
    """What a backend returns: the best point and how it was reached."""

    z: np.ndarray
    objective: float
    solver_converged: bool
    method: str
    diagnostics: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FitSettings:
    """Validated settings of a least-squares fit (what :func:`scalefit.fit` was asked to do)."""

    loss: str = "mse"
    delta: float = 1e-3
    residuals: str = "log"
    weight_column: str | None = None
    weights_label: str = ""
    starts: int = 256
    seed: int = 0
    ci_prob: float = 0.95
    ci_method: str = "percentile"
    x0: Mapping[str, float] | None = None


#: Columns whose fitted range is recorded (``conventions["data_range"]``): figures mark it.
RANGE_COLUMNS = ("params", "tokens", "flops", "width", "depth")


def data_range(tab: pd.DataFrame) -> dict[str, list[float]]:
    """``{column: [min, max]}`` of the canonical size columns the table has (finite, positive)."""
    out = {}
    for col in RANGE_COLUMNS:
        if col in tab.columns:
            values = pd.to_numeric(tab[col], errors="coerce").to_numpy(dtype=float)
            values = values[np.isfinite(values) & (values > 0)]
            if values.size:
                out[col] = [float(values.min()), float(values.max())]
    return out


def conventions(tab: pd.DataFrame, law, settings: FitSettings, refs) -> dict[str, Any]:
    """What is needed to reproduce a fit: loss, scale, weights, starts, seed, data provenance."""
    meta = tab.attrs.get("scalefit", {})
    scale = "log y - log f" if settings.residuals == "log" else "y - f"
    return {
        "law": law.name,
        "law_options": dict(law.options),
        "loss": settings.loss,
        "delta": float(settings.delta),
        "residuals": settings.residuals,
        "weights": settings.weights_label or None,
        "weight_column": settings.weight_column,
        "objective": f"sum over rows of {'w * ' if settings.weights_label else ''}rho({scale})",
        "starts": int(settings.starts),
        "seed": int(settings.seed),
        "ci_method": settings.ci_method,
        "source": meta.get("source"),
        "n_read": meta.get("n_read", len(tab)),
        "outlier_rule": meta.get("outlier_rule", "none"),
        "drop_highest": meta.get("drop_highest", 0),
        "derived": meta.get("derived", []),
        "reference_points": {k: float(np.exp(v)) for k, v in refs.items()},
        "data_range": data_range(tab),
        "jax": jax_version(),
    }


def build_result(
    problem: Problem, tab: pd.DataFrame, optimum: Optimum, settings: FitSettings
) -> FitResult:
    """Check the optimum, compute metrics and uncertainty, and assemble the result.

    ``converged`` is true only when the backend's own test passed *and* every local check of
    :func:`scalefit.fit.checks.check_point` holds; otherwise the first warning says which
    parameter failed and why.
    """
    law = problem.law
    y = tab["loss"].to_numpy(dtype=float)
    z = np.asarray(optimum.z, dtype=float)
    pub = {k: float(v) for k, v in law.to_public(z, problem.refs).items()}
    pred = np.asarray(law.evaluate(pub, tab), dtype=float)
    scale = float(np.log(np.min(np.abs(y[y != 0])))) if np.any(y != 0) else 0.0
    check = check_point(problem, z, solver_converged=optimum.solver_converged, scale=scale)
    warns: list[str] = []
    if not check.ok:
        warns.append("not converged: " + "; ".join(check.reasons) + ".")
    warns.extend(check.warnings)
    warns.extend(optimum.warnings)
    diagnostics = {
        **optimum.diagnostics,
        "grad_max": check.grad_max,
        "hessian_cond": check.cond,
        "checks_failed": list(check.reasons),
    }
    return FitResult(
        law=law,
        params=pub,
        method=optimum.method,
        objective=float(optimum.objective),
        converged=bool(check.ok),
        n_rows=len(tab),
        metrics=metrics(y, pred),
        stderr=check.stderr,
        corr=np.round(check.corr, 6).tolist(),
        ci_prob=settings.ci_prob,
        warnings=tuple(warns),
        internal=z.tolist(),
        refs=dict(problem.refs),
        not_identified=check.not_identified,
        diagnostics=diagnostics,
        conventions=conventions(tab, law, settings, problem.refs),
        extras={"problem": problem, **optimum.extras},
    )
