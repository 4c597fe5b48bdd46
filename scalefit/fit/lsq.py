"""Least-squares backends behind one small protocol, and the multi-start minimiser.

A *backend* takes a :class:`~scalefit.fit.engine.Problem` and starting points (internal
coordinates) and returns an :class:`Optimum`; :func:`least_squares` then hands the optimum to the
one shared step that builds a result (:func:`scalefit.fit.build.build_result`). The JAX
Levenberg–Marquardt engine (:class:`JaxBackend`) solves every start; the default backend
(:class:`scalefit.fit.varpro.GridBackend`) chooses its starts from a grid; lmfit lives in
:mod:`scalefit.fit.lmfit_method`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from ..core._progress import progress_bar
from ..core.errors import ScaleFitError
from ..laws import Law, sample_starts
from .build import FitSettings, Optimum, build_result
from .data import check_design, inputs_of, weights_of
from .engine import Problem
from .kink import polish_on_kink
from .observation import response
from .result import FitResult

#: Relative objective tolerance within which a start counts as having reached the best optimum.
BEST_RTOL = 1e-9
#: ... plus this many times the problem's rounding floor (``Problem.atol``), for noise-free data.
BEST_ATOL_FLOORS = 10.0
MAX_ITER = 1000
#: The best start is polished to this relative Newton decrement (the batch stops at 1e-12), so
#: parameters with large standard errors are still resolved to many digits.
POLISH_TOL = 1e-18


class Backend(Protocol):
    """A least-squares backend: ``minimize(problem, z0) -> Optimum``."""

    name: str

    def minimize(self, problem: Problem, z0: np.ndarray) -> Optimum:
        """Minimise the problem's objective from the starts ``z0`` (n_starts, n_params)."""
        ...


def solve_many(
    problem: Problem,
    z0: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    progress: bool | None = False,
    desc: str = "fitting",
    tol: float = 1e-12,
    weight_index: np.ndarray | None = None,
):
    """Solve many problems in chunks of :data:`~scalefit.fit.engine.CHUNK` (one compilation).

    Each problem runs until it passes the convergence test or reaches ``MAX_ITER`` iterations;
    finished problems leave their chunk and the next ones take their slots
    (:meth:`~scalefit.fit.engine.Problem.solve_stream`). ``weight_index`` lets many problems
    share rows of ``weights``.

    Returns
    -------
    tuple of ndarray
        ``(z, objective, converged, iterations)``.
    """
    z0 = np.asarray(z0, dtype=float)
    with progress_bar(progress, total=len(z0), desc=desc, unit="fit", leave=False) as bar:
        out = problem.solve_stream(
            z0, weights, weight_index=weight_index, max_iter=MAX_ITER, tol=tol, on_done=bar.update
        )
    return out["z"], out["objective"], out["converged"], out["iterations"]


@dataclass(frozen=True)
class JaxBackend:
    """The vectorised JAX Levenberg–Marquardt engine: every start solved in one batch."""

    name: str = "jax"
    progress: bool | None = None

    def minimize(self, problem: Problem, z0: np.ndarray) -> Optimum:
        """Solve every start; the best finite objective wins."""
        law = problem.law
        # Large tables: every start on a row subsample, then the best polished on every row.
        screen = problem.screening()
        z, obj, conv, iters = solve_many(
            screen or problem, z0, progress=self.progress, desc=f"{law.name} starts"
        )
        finite = np.isfinite(obj)
        if not finite.any():
            raise ScaleFitError(
                f"law {law.name!r}: no start gave a finite objective on this table."
            )
        best = int(np.nanargmin(np.where(finite, obj, np.inf)))
        fbest = float(obj[best])
        at_best = obj <= fbest * (1 + BEST_RTOL) + BEST_ATOL_FLOORS * (screen or problem).atol
        n_best = int(np.sum(at_best))
        if not conv[best] and (at_best & conv).any():
            # another start reached the same objective and passed the test: report that one
            best = int(np.flatnonzero(at_best & conv)[np.argmin(obj[at_best & conv])])
            fbest = float(obj[best])
        # a screened start is solved on every row to the batch tolerance (the extra digits of
        # POLISH_TOL are below the rounding of a sum over so many rows)
        tol = POLISH_TOL if screen is None else 1e-12
        zp, fp, cp, ip = solve_many(problem, z[best][None, :], tol=tol)
        if screen is not None:  # screening objectives are on other rows: the polish decides
            conv[best], fbest = False, np.inf
        polished = bool(np.isfinite(fp[0]) and fp[0] <= fbest)
        if polished:
            z[best], obj[best], conv[best] = zp[0], fp[0], conv[best] or cp[0]
            fbest = float(fp[0])
        on_kink = False
        hinge = problem.law.kink is not None
        if hinge and not conv[best] and np.isfinite(fbest):  # stalled on the law's hinge?
            zk, fk, ok = polish_on_kink(problem, z[best][None, :], np.ones((1, problem.n)))
            on_kink = bool(ok[0] and fk[0] <= fbest)
            if on_kink:
                z[best], obj[best], conv[best], fbest = zk[0], fk[0], True, float(fk[0])
                n_best = _starts_on_kink(problem, z, obj, conv, fbest)
        few = (
            f"only {n_best} of {len(z0)} starts reached the best objective: the optimum may "
            "not be global; try more starts."
        )
        return Optimum(
            z=z[best],
            objective=fbest,
            solver_converged=bool(conv[best]),
            method="jax",
            diagnostics={
                "n_starts": int(len(z0)),
                "n_best": n_best,
                "n_converged": int(conv.sum()),
                "max_iterations": int(iters.max()),
                "polish_iterations": int(ip[0]),
                "screened_on_rows": None if screen is None else int(screen.n),
                "on_kink": on_kink,
            },
            warnings=(few,) if n_best < 2 and len(z0) > 1 else (),
            extras={"z_all": z, "obj_all": obj},
        )


#: Stalled starts within this relative distance of the best objective are certified on their
#: kink too (:func:`_starts_on_kink`) before the starts that reached the best are counted.
KINK_NEAR = 1e-3


def _starts_on_kink(problem: Problem, z, obj, conv, fbest: float) -> int:
    """How many starts reach ``fbest`` once the stalled ones near it are certified (in place).

    Starts that stall on the same kink as the best stop at objectives a few 1e-6 apart, so
    without this the count says one start reached the best (a false "try more starts").
    """
    near = np.flatnonzero(~conv & np.isfinite(obj) & (obj <= fbest * (1 + KINK_NEAR)))
    zk, fk, ok = polish_on_kink(problem, z[near], np.ones((len(near), problem.n)))
    z[near[ok]], obj[near[ok]], conv[near[ok]] = zk[ok], fk[ok], True
    return int(np.sum(conv & (obj <= fbest * (1 + BEST_RTOL) + BEST_ATOL_FLOORS * problem.atol)))


def starts_for(
    law: Law, y: np.ndarray, refs: Mapping[str, float], n: int, seed: int, x0=None
) -> np.ndarray:
    """Starting points in internal coordinates: ``x0``, the law's start points, then random.

    Raises
    ------
    ScaleFitError
        When ``x0`` misses a parameter or names one the law does not have.
    """
    include = [law.to_internal(sp, refs) for sp in law.start_points]
    if x0 is not None:
        missing = set(law.param_names) - set(x0)
        extra = set(x0) - set(law.param_names)
        if missing or extra:
            raise ScaleFitError(
                f"The 'x0' parameter of fit must give every parameter of {law.name!r} "
                f"({', '.join(law.param_names)}); missing {sorted(missing)}, unknown "
                f"{sorted(extra)}."
            )
        include.insert(0, law.to_internal(x0, refs))
    scale = np.abs(y) if np.all(y > 0) else np.abs(y) + 1.0
    return sample_starts(law, max(n, len(include)), scale, seed=seed, include=include)


def make_problem(tab: pd.DataFrame, law: Law, settings: FitSettings) -> Problem:
    """The engine problem for a table under the settings (inputs, response and weights checked)."""
    x = inputs_of(tab, law)
    where = tab.attrs.get("scalefit", {}).get("source", "<table>")
    y = tab["loss"].to_numpy(dtype=float)
    response(y, settings.residuals, where=where)
    w = weights_of(tab, settings.weight_column)
    check_design(tab, law, y, w)
    return Problem(
        law, x, y, loss=settings.loss, delta=settings.delta, residuals=settings.residuals, weights=w
    )


def least_squares(
    tab: pd.DataFrame,
    law: Law,
    settings: FitSettings,
    *,
    backend: Backend | None = None,
    problem: Problem | None = None,
) -> FitResult:
    """Fit ``law`` to ``tab`` with a backend and build the result (no bootstrap, no hold-out).

    Parameters
    ----------
    tab : DataFrame
        A validated table.
    law : Law
        The law.
    settings : FitSettings
        Loss, residual scale, weights, starts, seed and the rest.
    backend : Backend, optional
        Default: :class:`JaxBackend`.
    problem : Problem, optional
        A ready problem for this table and settings (skips rebuilding it).

    Returns
    -------
    FitResult
    """
    backend = backend or JaxBackend()
    problem = problem or make_problem(tab, law, settings)
    y = tab["loss"].to_numpy(dtype=float)
    z0 = starts_for(law, y, problem.refs, settings.starts, settings.seed, settings.x0)
    optimum = backend.minimize(problem, z0)
    return build_result(problem, tab, optimum, settings)
