"""The lmfit backend: lmfit's least squares, judged by scalefit's own convergence checks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.errors import ScaleFitError
from .build import Optimum
from .engine import Problem
from .observation import residual

#: lmfit runs from the first this-many starts (the law's published starts and ``x0`` first).
N_LMFIT_STARTS = 16


@dataclass(frozen=True)
class LmfitBackend:
    """lmfit (scipy ``least_squares``) from up to ``N_LMFIT_STARTS`` starts.

    Parameters are handed to lmfit in the same reference-pinned internal coordinates the JAX
    engine uses (names suffixed ``_int``). The best start's point is re-checked with exact
    derivatives by the shared result step; ``result.extras["lmfit"]`` holds lmfit's
    ``MinimizerResult`` and ``["lmfit_report"]`` its report.
    """

    name: str = "lmfit"
    n_starts: int = N_LMFIT_STARTS

    def minimize(self, problem: Problem, z0: np.ndarray) -> Optimum:
        """Run lmfit from each start; keep the lowest objective."""
        import lmfit

        law, loss = problem.law, problem.loss
        if loss == "lad":
            raise ScaleFitError(
                "The 'loss' parameter of fit must be 'mse' or 'huber' with method='lmfit'. "
                "Got 'lad' instead."
            )
        names = law.param_names
        xv = law.variables(np, problem.inputs)
        obs = problem.observed
        sw = None if problem.weights is None else np.sqrt(problem.weights)

        def resid(params: lmfit.Parameters) -> np.ndarray:
            z = np.array([params[f"{n}_int"].value for n in names])
            pub = law.to_public(z, problem.refs)
            with np.errstate(all="ignore"):
                r = residual(np, obs, law.expr(np, pub, xv), problem.residuals)
            r = r if sw is None else sw * r
            return np.where(np.isfinite(r), r, 1e3)

        best = None
        starts = np.asarray(z0)[: self.n_starts]
        for start in starts:
            params = lmfit.Parameters()
            for n, v in zip(names, start, strict=True):
                params.add(f"{n}_int", value=float(v))
            kws = {"loss": "huber", "f_scale": problem.delta} if loss == "huber" else {}
            out = lmfit.minimize(
                resid,
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
        loc = problem.local(z)
        g, h = loc["grad"], loc["gn"]
        dec = float(abs(g @ np.linalg.lstsq(h, g, rcond=None)[0]) / 2)
        ok = bool(out.success) and dec <= 1e-10 * max(f, 1e-300)
        stop = (
            f"lmfit stopped with remaining Newton decrement {dec:.3g} (objective {f:.6g}): "
            "not at a converged optimum."
        )
        return Optimum(
            z=z,
            objective=float(f),
            solver_converged=ok,
            method="lmfit",
            diagnostics={
                "n_starts": int(len(starts)),
                "lmfit_nfev": int(out.nfev),
                "newton_decrement": dec,
                "lmfit_success": bool(out.success),
            },
            warnings=() if ok else (stop,),
            extras={
                "lmfit": out,
                "lmfit_params": out.params,
                "lmfit_report": lmfit.fit_report(out),
            },
        )
