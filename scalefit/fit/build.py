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

from ..core._validation import VOCABULARY
from ..laws.base import outside_range, range_text, sample_starts, validity_reasons
from .checks import check_point
from .engine import Problem
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
    """Validated settings of a least-squares fit (what :func:`scalefit.fit` was asked to do).

    The defaults are the option vocabulary's (:data:`scalefit.core._validation.VOCABULARY`).
    """

    loss: str = VOCABULARY["loss"].default
    delta: float = VOCABULARY["delta"].default
    residuals: str = VOCABULARY["residuals"].default
    weight_column: str | None = None
    weights_label: str = ""
    starts: int = VOCABULARY["starts"].default
    seed: int = VOCABULARY["seed"].default
    ci_prob: float = VOCABULARY["ci_prob"].default
    ci_method: str = VOCABULARY["ci_method"].default
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
    if "params" in out and "tokens" in out:  # tokens per parameter, row by row
        ratio = pd.to_numeric(tab["tokens"], errors="coerce") / pd.to_numeric(
            tab["params"], errors="coerce"
        )
        ratio = ratio[np.isfinite(ratio) & (ratio > 0)]
        if len(ratio):
            out["tokens_per_param"] = [float(ratio.min()), float(ratio.max())]
    return out


def provenance(
    tab: pd.DataFrame,
    law,
    refs,
    settings: FitSettings,
    fit: Mapping[str, Any],
    packages: tuple[str, ...] = ("jax",),
    *,
    group: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``conventions`` every result records: what is needed to reproduce it.

    The law and its options, the residual scale and weights of ``settings``, the fitter's own
    record ``fit`` (loss, starts, seed, sampler ...), the data's provenance (source, rows read,
    outlier rule, derived columns, reference points, fitted range) and the versions of
    ``packages``. Least-squares and Bayesian results are both built here. ``group`` (a
    Bayesian fit with per-group offsets: column, number of groups, model, prior of ``tau``) is
    recorded under ``"group"`` when given.
    """
    from importlib.metadata import version

    meta = tab.attrs.get("scalefit", {})
    return {
        "law": law.name,
        "law_options": dict(law.options),
        "residuals": settings.residuals,
        "weights": settings.weights_label or None,
        "weight_column": settings.weight_column,
        **fit,
        "source": meta.get("source"),
        **({"loss_unit": meta["loss_unit"]} if meta.get("loss_unit") else {}),
        "n_read": meta.get("n_read", len(tab)),
        "outlier_rule": meta.get("outlier_rule", "none"),
        "drop_highest": meta.get("drop_highest", 0),
        "derived": meta.get("derived", []),
        "reference_points": {k: float(np.exp(v)) for k, v in refs.items()},
        "data_range": data_range(tab),
        **{name: version(name) for name in packages},
        **({"group": dict(group)} if group is not None else {}),
    }


def lsq_fields(settings: FitSettings) -> dict[str, Any]:
    """What a least-squares fit records of its settings (see :func:`provenance`)."""
    scale = "log y - log f" if settings.residuals == "log" else "y - f"
    return {
        "loss": settings.loss,
        "delta": float(settings.delta),
        "objective": f"sum over rows of {'w * ' if settings.weights_label else ''}rho({scale})",
        "starts": int(settings.starts),
        "seed": int(settings.seed),
        "ci_method": settings.ci_method,
    }


#: Random starts of each active-set re-solve (besides the clipped point).
HELD_STARTS = 32


def hold_constraints(
    problem: Problem, z: np.ndarray, *, seed: int = 0, starts: int = HELD_STARTS
) -> tuple[Problem, np.ndarray, dict[str, float], Any] | None:
    """The active set for hard-constraint ranges (``Param.range_kind == "constraint"``).

    When the unconstrained optimum ``z`` leaves a constraint range, the parameters outside are
    held at their nearest bound and the rest re-fitted (from the clipped point and ``starts``
    random starts); a parameter the re-fit pushes outside is added, until none is.

    Returns
    -------
    tuple or None
        ``(reduced problem, its optimum z, held values, its Optimum)``, or None when ``z`` is
        inside every constraint range.
    """
    law = problem.law
    pub = {k: float(v) for k, v in law.to_public(z, problem.refs).items()}
    held: dict[str, float] = {}
    for _ in range(len(law.params)):
        theta = np.array([pub[n] for n in law.param_names])
        out = outside_range(law, theta, "constraint")
        new = {
            p.name: float(np.clip(pub[p.name], *p.bounds))
            for i, p in enumerate(law.params)
            if out[i] and p.name not in held
        }
        if not new:
            break
        held.update(new)
        sub = problem.subset(law=law.fixing(held))
        red = sub.law
        inside = {n: float(np.clip(pub[n], *law.param(n).bounds)) for n in red.param_names}
        y = np.abs(problem._y) if np.all(problem._y > 0) else np.abs(problem._y) + 1.0
        z0 = sample_starts(
            red, starts + 1, y, seed=seed + 104729, include=[red.to_internal(inside, sub.refs)]
        )
        opt = _solve_held(sub, z0)
        pub = {**held, **{k: float(v) for k, v in red.to_public(opt.z, sub.refs).items()}}
    if not held:
        return None
    return sub, np.asarray(opt.z, dtype=float), held, opt


def _solve_held(sub: Problem, z0: np.ndarray) -> Optimum:
    """Every start of the reduced problem, then the best polished to a tight tolerance."""
    sol = sub.solve_stream(z0)
    obj = np.where(np.isfinite(sol["objective"]), sol["objective"], np.inf)
    best = int(np.argmin(obj))
    z, f, conv = sol["z"][best], float(obj[best]), bool(sol["converged"][best])
    pol = sub.solve_stream(z[None, :], tol=1e-18)
    if np.isfinite(pol["objective"][0]) and pol["objective"][0] <= f:
        z, f, conv = pol["z"][0], float(pol["objective"][0]), conv or bool(pol["converged"][0])
    return Optimum(z=z, objective=f, solver_converged=conv, method="jax")


def build_result(
    problem: Problem, tab: pd.DataFrame, optimum: Optimum, settings: FitSettings
) -> FitResult:
    """Check the optimum, compute metrics and uncertainty, and assemble the result.

    ``converged`` is true only when the backend's own test passed *and* every local check of
    :func:`scalefit.fit.checks.check_point` holds *and* no parameter lies outside a range its
    law declares a validity condition; otherwise the first warning says which parameter failed
    and why. A parameter whose range is a hard constraint is kept inside by
    :func:`hold_constraints`; one held on its bound (or a log-coordinate parameter that ran to
    0) is listed in ``diagnostics["at_bound"]``, with a NaN standard error.
    """
    law = problem.law
    y = tab["loss"].to_numpy(dtype=float)
    z = np.asarray(optimum.z, dtype=float)
    scale = float(np.log(np.min(np.abs(y[y != 0])))) if np.any(y != 0) else 0.0
    active = hold_constraints(problem, z, seed=settings.seed)
    held: dict[str, float] = {}
    if active is None:
        pub = {k: float(v) for k, v in law.to_public(z, problem.refs).items()}
        check = check_point(problem, z, solver_converged=optimum.solver_converged, scale=scale)
        stderr, corr, stderr_na = check.stderr, check.corr, dict(check.stderr_na)
    else:
        sub, zr, held, opt = active
        red = sub.law
        pub = {**held, **{k: float(v) for k, v in red.to_public(zr, sub.refs).items()}}
        pub = {n: pub[n] for n in law.param_names}
        z = law.to_internal(pub, problem.refs)
        check = check_point(sub, zr, solver_converged=opt.solver_converged, scale=scale)
        stderr = {n: float(check.stderr.get(n, np.nan)) for n in law.param_names}
        idx = [law.param_names.index(n) for n in red.param_names]
        corr = np.full((len(law.params),) * 2, np.nan)
        corr[np.ix_(idx, idx)] = check.corr
        stderr_na = dict(check.stderr_na)
    pred = np.asarray(law.evaluate(pub, tab), dtype=float)
    ranges = validity_reasons(law, pub)
    at_bound = [n for n in law.param_names if n in held or n in check.at_zero]
    reasons = list(check.reasons) + ranges
    warns: list[str] = []
    # a point that passed the first-order test but whose second-order test found descent
    stationary = bool(reasons) and all("a stationary point" in r for r in reasons)
    if reasons:
        head = "stationary, not converged: " if stationary else "not converged: "
        warns.append(head + "; ".join(reasons) + ".")
    for n, v in held.items():
        warns.append(
            f"{n} = {v:.4g} is at the bound of its range {range_text(law.param(n))}, a hard "
            f"constraint of the law {law.name!r}: the unconstrained optimum lies outside "
            "(at bound; no standard error)."
        )
    warns.extend(check.warnings)
    warns.extend(optimum.warnings)
    diagnostics = {
        **optimum.diagnostics,
        "grad_max": check.grad_max,
        "hessian_cond": check.cond,
        "checks_failed": reasons,
        "at_bound": at_bound,
        **({"stationary": True} if stationary else {}),
        **{k: v for k, v in check.info.items() if k.startswith("huber_")},
        **({"stderr_na": stderr_na} if stderr_na else {}),
    }
    return FitResult(
        law=law,
        params=pub,
        method=optimum.method,
        objective=float(optimum.objective if active is None else active[3].objective),
        converged=not reasons,
        n_rows=len(tab),
        metrics=metrics(y, pred),
        stderr=stderr,
        corr=np.round(corr, 6).tolist(),
        ci_prob=settings.ci_prob,
        warnings=tuple(warns),
        internal=np.asarray(z, dtype=float).tolist(),
        refs=dict(problem.refs),
        not_identified=tuple(n for n in check.not_identified if n not in held),
        diagnostics=diagnostics,
        conventions=provenance(tab, law, problem.refs, settings, lsq_fields(settings)),
        extras={"problem": problem, **optimum.extras},
    )
