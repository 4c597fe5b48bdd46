"""The ``method="lmfit"`` path: lmfit's least squares, checked with scalefit's convergence test."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..errors import ScaleFitError
from ..laws import Law
from .engine import Problem
from .result import FitResult

N_LMFIT_STARTS = 16


def fit_lmfit(
    tab: pd.DataFrame,
    law: Law,
    *,
    loss: str,
    delta: float,
    seed: int,
    x0: Mapping[str, float] | None = None,
) -> FitResult:
    """Fit with lmfit (scipy ``least_squares`` under the hood) in internal coordinates.

    Parameters are handed to lmfit in the same reference-pinned coordinates the JAX solver uses
    (names suffixed ``_int``), from the law's published starts, ``x0`` and the
    first ``N_LMFIT_STARTS`` random starts; the best is re-checked with the exact gradient.
    ``result.extras["lmfit"]`` holds lmfit's ``MinimizerResult``, ``["lmfit_report"]`` its
    report.
    """
    import lmfit

    from .lsq import _fit_jax, _starts_for

    if loss == "lad":
        raise ScaleFitError(
            "method='lmfit' supports loss 'mse' and 'huber'; use the default method for 'lad'."
        )
    y = tab["loss"].to_numpy(float)
    problem = Problem(law, tab, y, loss=loss, delta=delta)
    x = {k: tab[k].to_numpy(float) for k in law.inputs}
    xv = law.variables(np, x)
    logy = np.log(y)
    names = law.param_names

    def residual(params: lmfit.Parameters) -> np.ndarray:
        z = np.array([params[f"{n}_int"].value for n in names])
        pub = law.to_public(z, problem.refs)
        with np.errstate(all="ignore"):
            r = logy - np.log(law.expr(np, pub, xv))
        return np.where(np.isfinite(r), r, 1e3)

    z0s = _starts_for(law, y, problem.refs, N_LMFIT_STARTS, seed, x0)
    best = None
    for z0 in z0s:
        params = lmfit.Parameters()
        for n, v in zip(names, z0, strict=True):
            params.add(f"{n}_int", value=float(v))
        kws = {"loss": "huber", "f_scale": delta} if loss == "huber" else {}
        out = lmfit.minimize(
            residual,
            params,
            method="least_squares",
            xtol=1e-15,
            ftol=1e-15,
            gtol=1e-15,
            max_nfev=20000,
            **kws,
        )
        z = np.array([out.params[f"{n}_int"].value for n in names])
        f = problem.objective(z)
        if best is None or f < best[0]:
            best = (f, z, out)
    f, z, out = best
    # Reuse the JAX path's bookkeeping (metrics, standard errors, warnings) at lmfit's optimum,
    # with a single start at that optimum and no further iterations.
    res = _fit_jax(
        tab,
        law,
        loss=loss,
        delta=delta,
        starts=1,
        seed=seed,
        x0=None,
        progress=False,
        problem=problem,
    )
    sol = problem.solve(z[None, :], max_iter=0)
    loc = problem.local(z)
    g, h = loc["grad"], loc["gn"]
    dec = float(abs(g @ np.linalg.lstsq(h, g, rcond=None)[0]) / 2)
    pub = {k: float(v) for k, v in law.to_public(z, problem.refs).items()}
    from .lsq import _metrics, _uncertainty

    stderr, corr, cond, warns, gmax = _uncertainty(problem, z, law, loss, delta)
    res.params, res.internal, res.objective = pub, z.tolist(), float(f)
    res.method = "lmfit"
    res.metrics = _metrics(y, np.asarray(law.evaluate(pub, tab), dtype=float))
    res.stderr, res.corr, res.warnings = stderr, np.round(corr, 6).tolist(), warns
    res.converged = bool(out.success) and dec <= 1e-10 * max(f, 1e-300)
    if not res.converged:
        res.warnings.insert(
            0,
            f"lmfit stopped with remaining Newton decrement {dec:.3g} "
            f"(objective {f:.6g}): not at a converged optimum.",
        )
    res.diagnostics = {
        "n_starts": len(z0s),
        "lmfit_nfev": int(out.nfev),
        "newton_decrement": dec,
        "grad_max": gmax,
        "hessian_cond": cond,
        "lmfit_success": bool(out.success),
        "solver_objective": float(sol.objective[0]),
    }
    res.extras = {
        "lmfit": out,
        "lmfit_params": out.params,
        "lmfit_report": lmfit.fit_report(out),
        "problem": problem,
    }
    return res
