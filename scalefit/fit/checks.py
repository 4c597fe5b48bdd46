"""Local checks at an optimum: a "converged" that cannot be fooled, and identifiability.

A start counts as converged only at a local minimum of the objective in the parameters' own
coordinates:

1. the solver's Newton-decrement test passed (small gradient);
2. the full Hessian (central differences of the exact gradient, so it carries the second-order
   term the Gauss–Newton matrix lacks) is positive definite, judged after scaling to unit
   diagonal, in internal coordinates *and* in public (unscaled) coordinates — a negative
   eigenvalue is a saddle or a maximum along some direction;
3. no parameter sits where it has no effect on the model (a plateau: its column of the residual
   Jacobian is zero relative to the others, e.g. a rate so large that an exponential term is
   constant), unless it is a positive parameter that ran to zero in log coordinates (a boundary
   optimum, reported as not identified).

Parameters on a plateau, at such a boundary, or carrying a direction of the Hessian that the data
barely constrain are listed as *not identified*; their asymptotic standard errors mean nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from ..laws import Law
from .engine import LAD_DELTA, Problem
from .kink import hinge_normals

CORR_WARN = 0.99
COND_WARN = 1e12
#: A parameter whose relative sensitivity (``|theta| * ||d r / d theta||``, or ``||d r/d theta||``
#: at ``theta = 0``) is below this fraction of the largest one has no effect on the model.
PLATEAU_RTOL = 1e-9
#: Smallest eigenvalue of the unit-diagonal Hessian below ``-NEG_TOL`` is a saddle (the
#: difference Hessian is accurate to about 1e-9 relative; real saddles sit far below this).
NEG_TOL = 1e-6
#: Eigenvalues of the unit-diagonal Hessian below this are flat directions (not identified).
FLAT_TOL = 1e-12
#: A parameter is part of a flat direction when its weight in that eigenvector exceeds this.
FLAT_WEIGHT = 0.1
#: LAD: a residual this small sits at the kink of ``|r|`` (the solver smooths ``|r|`` over
#: ``LAD_DELTA``, so interpolated rows come out at about ``LAD_DELTA`` or below).
KINK_TOL = 100 * LAD_DELTA
#: LAD: the subgradient condition holds when the best subgradient's component for each parameter
#: is below this fraction of ``sum_i w_i |d r_i / d z_j|`` (the size of that component's terms).
SUBGRAD_RTOL = 1e-6
#: Step (internal coordinates) of the central differences behind the residual Jacobian.
JAC_STEP = 1e-6
#: Step along the kink-preserving directions for the Lagrangian's Hessian.
LAGR_STEP = 1e-3
#: LAD: a kink row whose multiplier is within this of +-1 may leave the kink along the
#: critical cone (on the side of its sign).
S_TOL = 1e-6
#: LAD: steps (internal coordinates) at which the true objective is probed along the critical
#: cone's directions of non-positive curvature.
PROBE_STEPS = (1e-3, 1e-2)
#: LAD: log coordinates, below ``log`` of the smallest observed loss, to which a parameter at a
#: zero boundary (more than 25 below) is raised when probing the objective's sign as it leaves 0.
BOUNDARY_PROBES = (16.0, 12.0, 8.0)
#: Huber: the bread of the sandwich must rest on at least ``max(HUBER_ROWS_PER_PARAM * P,
#: HUBER_MIN_ROWS)`` effective rows (Kish's ``(sum s)^2 / sum s^2`` of the rows' smoothed slopes
#: ``s``, :func:`huber_slopes`; for the plain indicator it is the count of rows inside
#: ``delta``); with fewer, no standard error is given ("n/a: bootstrap"). Measured on simulated
#: Chinchilla IsoFLOP designs (tests/fit/test_huber_stderr.py): the indicator bread needs about
#: 5 P rows inside ``delta`` (95 % intervals covered 78-86 % with 5-14 inside, 90-94 % with
#: 13-35), the kernel bread covered E, alpha and beta in 98-100 % of fits down to 15 rows
#: (10-15 effective), so the floor is set at the least data seen to work.
HUBER_ROWS_PER_PARAM = 2
HUBER_MIN_ROWS = 10
#: Huber: a positive parameter (a floor, coefficient or scale, fitted in log coordinates) whose
#: normal interval ``value +- HUBER_Z * stderr`` reaches zero gets no standard error: its
#: sampling distribution is then far from normal on its own scale (skewed, like a log-normal
#: of log-scale spread above 0.5, where the linear standard error understates the spread).
HUBER_Z = 1.959963984540054


@dataclass(frozen=True)
class LocalCheck:
    """What the local checks found at one point."""

    ok: bool
    reasons: tuple[str, ...]
    not_identified: tuple[str, ...]
    warnings: tuple[str, ...]
    stderr: dict[str, float]
    corr: np.ndarray
    cond: float
    grad_max: float
    info: dict = field(default_factory=dict)
    #: Log-coordinate parameters that ran to their lower bound 0 (at bound).
    at_zero: tuple[str, ...] = ()
    #: Parameters without an asymptotic standard error (NaN) and why: "use the bootstrap".
    stderr_na: dict[str, str] = field(default_factory=dict)


def _unit_diag(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = np.sqrt(np.abs(np.diag(h)))
    d = np.where(d > 0, d, 1.0)
    return h / np.outer(d, d), d


def _eig(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not np.all(np.isfinite(h)):
        n = len(h)
        return np.full(n, np.nan), np.eye(n)
    s, _ = _unit_diag((h + h.T) / 2)
    return np.linalg.eigh(s)


#: Parameter kinds fitted in log coordinates (positive by construction).
POSITIVE_KINDS = ("floor", "positive", "coef")


def _boundary(law: Law, z: np.ndarray, scale: float) -> list[int]:
    """Positive parameters that ran to zero in log coordinates."""
    return [i for i, p in enumerate(law.params) if p.kind in POSITIVE_KINDS and z[i] < scale - 25.0]


def _residuals_at(problem: Problem, zs: np.ndarray) -> np.ndarray:
    """Residuals (unweighted) at each row of ``zs``, in batches of the compiled chunk."""
    return problem.solve_chunks(zs, keys=("resid",), max_iter=0)["resid"][:, : problem.n]


def jacobian(problem: Problem, z: np.ndarray) -> np.ndarray:
    """Jacobian ``d r / d z`` (rows, P) of the unweighted residuals, by central differences."""
    p = len(z)
    step = JAC_STEP * np.maximum(1.0, np.abs(z))
    shifts = np.concatenate([np.diag(step), -np.diag(step)])
    r = _residuals_at(problem, z[None, :] + shifts)
    return ((r[:p] - r[p:]) / (2.0 * step[:, None])).T


def _row_weights(problem: Problem) -> np.ndarray:
    return np.ones(problem.n) if problem.weights is None else np.asarray(problem.weights)


def _design_inverse(jac: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``(J' W J)^-1`` (NaN when singular): the design's least-squares covariance shape."""
    try:
        return np.linalg.inv(jac.T @ (w[:, None] * jac))
    except np.linalg.LinAlgError:
        p = jac.shape[1]
        return np.full((p, p), np.nan)


def _plateau(theta: np.ndarray, curv: dict, at_zero) -> tuple[np.ndarray, list[int]]:
    """Relative sensitivity of the residuals to each public parameter, and the ones with none."""
    col = np.sqrt(np.clip(np.diag(curv["gn_public"]), 0, None))  # |d r / d theta| (weighted)
    sens = np.where(theta != 0, np.abs(theta), 1.0) * col
    top = float(np.nanmax(sens)) if np.isfinite(sens).any() else 0.0
    return sens, [
        i for i in range(len(theta)) if not sens[i] > PLATEAU_RTOL * top and i not in at_zero
    ]


def _flat_directions(gn: np.ndarray, free: list[int]) -> set[int]:
    """Parameters in flat directions of the exact Gauss-Newton matrix (PSD, no difference noise)."""
    flat: set[int] = set()
    if free:
        ev, vec = _eig(gn[np.ix_(free, free)])
        for k in np.flatnonzero(np.isfinite(ev) & (np.abs(ev) < FLAT_TOL)):
            flat |= {free[j] for j in np.flatnonzero(np.abs(vec[:, k]) > FLAT_WEIGHT)}
    return flat


def _huber_bread(problem: Problem, loc: dict) -> tuple[np.ndarray, float]:
    """Each row's smoothed ``E psi'(r)`` and the kernel bandwidth (rows of weight 0 left out)."""
    rr = np.asarray(loc["resid"])[: problem.n]
    bandwidth = huber_bandwidth(rr[_row_weights(problem) > 0])
    return huber_slopes(rr, problem.delta, bandwidth), bandwidth


def hall_sheather(n: int, alpha: float = 0.05) -> float:
    """Hall and Sheather's (1988) bandwidth, in probability units, for the median's sparsity.

    ``n^(-1/3) z_(1-alpha/2)^(2/3) (1.5 phi(0)^2)^(1/3)`` (the ``tau = 0.5`` case of
    ``quantreg::bandwidth.rq(hs = TRUE)``); about 0.195 at ``n = 123``.
    """
    return float(
        n ** (-1 / 3)
        * _NORM.inv_cdf(1 - alpha / 2) ** (2 / 3)
        * (1.5 * _NORM.pdf(0) ** 2) ** (1 / 3)
    )


def huber_bandwidth(r: np.ndarray) -> float:
    """Kernel bandwidth (units of the residuals) for the Huber sandwich's bread.

    Koenker's rule for the kernel (Powell) sandwich of quantile regression (``quantreg``'s
    ``summary.rq(se = "ker")``): the Hall–Sheather probability bandwidth ``h``
    (:func:`hall_sheather`) carried to the residual scale as ``(Phi^-1(0.5 + h) -
    Phi^-1(0.5 - h)) * min(sd, IQR / 1.34)`` of the residuals. 0 when they have no spread.
    """
    r = np.asarray(r, dtype=float)
    if len(r) < 2:
        return 0.0
    h = min(hall_sheather(len(r)), 0.49)
    q75, q25 = np.percentile(r, [75, 25])
    spread = min(float(np.std(r, ddof=1)), float(q75 - q25) / 1.34)
    return float((_NORM.inv_cdf(0.5 + h) - _NORM.inv_cdf(0.5 - h)) * max(spread, 0.0))


def huber_slopes(r: np.ndarray, delta: float, bandwidth: float) -> np.ndarray:
    """Each row's estimate of ``E psi'(r) = P(|r| <= delta)`` for the Huber sandwich's bread.

    The indicator ``1{|r| <= delta}`` smoothed by a Gaussian kernel of standard deviation
    ``bandwidth``: ``Phi((delta - r) / h) - Phi((-delta - r) / h)``. At ``h = 0`` it is the
    indicator itself (the textbook bread); when ``delta`` is far below ``h`` it is ``2 delta``
    times Powell's kernel density at ``r``, so a Huber fit that behaves like LAD gets LAD's
    asymptotic covariance instead of one resting on the few rows that happen to fall inside
    ``delta``.
    """
    r = np.asarray(r, dtype=float)
    if bandwidth <= 0:
        return (np.abs(r) <= delta).astype(float)
    return _ncdf((delta - r) / bandwidth) - _ncdf((-delta - r) / bandwidth)


#: The standard normal (stdlib: the fit path imports no scipy.stats).
_NORM = NormalDist()
_ERF = np.frompyfunc(math.erf, 1, 1)


def _ncdf(x: np.ndarray) -> np.ndarray:
    """Standard normal CDF of an array."""
    return 0.5 * (1.0 + _ERF(np.asarray(x, dtype=float) / math.sqrt(2.0)).astype(float))


def _covariance(
    problem: Problem, loc: dict, loss: str, jac: np.ndarray | None, slopes: np.ndarray | None
) -> np.ndarray:
    h, meat, r = loc["gn"], loc["meat"], loc["resid"]
    w = problem.weights
    n_eff = float(len(r) if w is None else np.count_nonzero(w))
    p = len(h)
    if loss == "lad":  # no asymptotic theory implemented: the bootstrap gives the uncertainty
        return np.full((p, p), np.nan)
    if loss == "huber":
        # the sandwich's bread is the expected Hessian of the objective: J' diag(w E psi'(r)) J,
        # E psi'(r) = P(|r| <= delta) estimated by the smoothed indicator (huber_slopes), not by
        # the IRLS weights min(1, delta/|r|) of the solver
        h = jac.T @ ((slopes * _row_weights(problem))[:, None] * jac)
    try:
        hinv = np.linalg.inv(h / 2.0 if loss == "mse" else h)
    except np.linalg.LinAlgError:
        return np.full((p, p), np.nan)
    if loss == "mse":
        rw = r**2 if w is None else w * r**2
        return float(np.sum(rw) / max(n_eff - p, 1)) * hinv
    return hinv @ (meat * n_eff / max(n_eff - p, 1)) @ hinv


def _corr(cov: np.ndarray) -> np.ndarray:
    sd = np.sqrt(np.clip(np.diag(cov), 0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / np.outer(sd, sd)
    corr = np.clip(corr, -1.0, 1.0)  # rounding can push |corr| a hair above 1
    np.fill_diagonal(corr, np.where(sd > 0, 1.0, np.nan))
    return corr


def free_of(names, at_zero, plateau) -> list[int]:
    """Indices of the parameters that are neither at a zero boundary nor on a plateau."""
    return [i for i in range(len(names)) if i not in at_zero and i not in plateau]


def _lad_certificate(
    problem: Problem, z: np.ndarray, loc: dict, jac: np.ndarray, free: list[int], at_zero, scale
) -> list[str]:
    """First- and second-order optimality of ``F(z) = sum_i w_i |r_i(z)|`` (failures listed).

    First order: ``0`` is a subgradient, i.e. some ``s_i`` in ``[-1, 1]`` for the rows at the
    kink (``|r_i| <= KINK_TOL``) make ``sum_smooth w_i sign(r_i) grad r_i +
    sum_kink w_i s_i grad r_i`` vanish (a bounded least-squares problem). Second order
    (:func:`_lad_second_order`) on the critical cone, where the first-order change of ``F``
    vanishes, and the sign of ``F``'s change as each parameter at a zero boundary leaves it
    (:func:`_lad_boundary_signs`). A failure there is a *stationary point*, not a minimum.
    """
    from scipy.optimize import lsq_linear

    names = problem.law.param_names
    if not free:
        return []
    z = np.asarray(z, dtype=float)
    r = np.asarray(loc["resid"])[: problem.n]
    w = _row_weights(problem)
    live = w > 0
    kink = live & (np.abs(r) <= KINK_TOL)
    smooth = live & ~kink
    jf = jac[:, free]
    if not np.all(np.isfinite(jf)) or not np.all(np.isfinite(r)):
        return ["the residual Jacobian is not finite"]
    g = jf[smooth].T @ (w[smooth] * np.sign(r[smooth]))
    size = np.abs(jf[live]).T @ w[live]
    size = np.where(size > 0, size, 1.0)
    a = jf[kink].T * w[kink][None, :]
    s = lsq_linear(a, -g, bounds=(-1.0, 1.0), method="bvls").x if kink.any() else np.zeros(0)
    rel = np.abs(a @ s + g) / size
    if not np.all(rel <= SUBGRAD_RTOL):
        lead = free[int(np.argmax(rel))]
        return [
            f"the LAD subgradient condition fails (no subgradient vanishes: relative gap "
            f"{float(np.max(rel)):.3g} along {names[lead]}, {int(kink.sum())} rows at the kink): "
            "not a minimum of sum |r|"
        ]
    c = np.zeros(problem.n)
    c[smooth] = w[smooth] * np.sign(r[smooth])
    c[kink] = w[kink] * s
    # F(z) lies within about 2 sum_kink w |r| of the kinks' own value (the solver smooths |r|):
    # twice that, plus rounding, is the least decrease of F that a probe counts
    f0 = float(w[live] @ np.abs(r[live]))
    tol = 4.0 * float(w[kink] @ np.abs(r[kink])) + 1e-10 * f0 + 1e-300
    probe = _Probe(problem, z, w, f0, tol)
    second = _lad_second_order(probe, jf[kink], s, c, free)
    return second + _lad_boundary_signs(probe, at_zero, scale)


@dataclass(frozen=True)
class _Probe:
    """The true LAD objective ``sum w |r|`` at points near ``z``, against ``F(z)``."""

    problem: Problem
    z: np.ndarray
    w: np.ndarray
    f0: float
    tol: float

    def drop(self, zs: np.ndarray) -> float:
        """The largest decrease of ``F`` from ``F(z)`` among the points ``zs`` (rows)."""
        f = np.abs(_residuals_at(self.problem, zs)) @ self.w
        f = np.where(np.isfinite(f), f, np.inf)
        return float(self.f0 - np.min(f))


def _lad_second_order(probe: _Probe, a_kink: np.ndarray, s: np.ndarray, c, free) -> list[str]:
    """Second-order test of the LAD objective on its critical cone at a first-order point.

    Along a direction ``d`` the first-order change of ``F`` is ``sum_kink w_i (|a_i d| -
    s_i a_i d) >= 0`` (``a_i`` the kink rows' gradients): it vanishes on the *critical cone*,
    where rows with ``|s_i| < 1`` stay at the kink (``a_i d = 0``) and rows with ``s_i`` at
    ``+-1`` may leave it on the side of their sign. On that cone ``F`` follows the Lagrangian
    ``sum w_i c_i r_i`` (``c`` the signs and the ``s_i``); its Hessian (differences of the
    residuals) is taken on the cone's span. With no multiplier at ``+-1`` the cone is that span,
    and a negative eigenvalue is a saddle. Every direction the Hessian does not show to be
    strictly positive (eigenvalue below ``NEG_TOL`` after unit-diagonal scaling: a descent or a
    flat direction) is probed on the true objective at ``z +- h v``, ``h`` in
    :data:`PROBE_STEPS`; a decrease beyond the probe's tolerance is a stationary point.
    """
    z, n_free = probe.z, len(free)
    interior = np.abs(s) < 1.0 - S_TOL
    basis = _null_space(a_kink[interior], n_free)
    m = basis.shape[1]
    if m == 0:
        return []
    dirs = np.zeros((m, len(z)))
    dirs[:, free] = basis.T * LAGR_STEP
    pts = [
        z + sj * dirs[j] + sk * dirs[k]
        for j in range(m)
        for k in range(m)
        for sj, sk in ((1, 1), (1, -1), (-1, 1), (-1, -1))
    ]
    vals = (_residuals_at(probe.problem, np.array(pts)) @ c).reshape(m, m, 4)
    hess = (vals[..., 0] - vals[..., 1] - vals[..., 2] + vals[..., 3]) / (4 * LAGR_STEP**2)
    ev, vec = _eig(hess)
    if not np.all(np.isfinite(ev)):
        return ["the LAD Lagrangian's Hessian is not finite"]
    _, scale = _unit_diag((hess + hess.T) / 2)
    low = vec[:, ev < NEG_TOL] / scale[:, None]  # back from unit-diagonal coordinates
    v = np.zeros((low.shape[1], len(z)))
    v[:, free] = (basis @ low).T
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    steps = [sign * h * v for h in PROBE_STEPS for sign in (1, -1)]
    drop = probe.drop(z + np.concatenate(steps)) if len(v) else -np.inf
    if drop > probe.tol:
        return [
            f"the LAD objective decreases by {drop:.3g} (from {probe.f0:.6g}) along a direction "
            f"where its first-order change vanishes ({m}-dimensional critical cone, "
            f"{int(np.sum(~interior))} kink rows with multiplier at +-1): a stationary point, "
            "not a minimum"
        ]
    if ev[0] < -NEG_TOL and interior.all():
        return [
            f"the LAD Lagrangian's Hessian on the {m} kink-preserving directions has a negative "
            f"eigenvalue ({ev[0]:.3g} after unit-diagonal scaling): a saddle, a stationary "
            "point, not a minimum"
        ]
    return []


def _lad_boundary_signs(probe: _Probe, at_zero, scale: float) -> list[str]:
    """KKT sign at zero boundaries: ``F`` must not fall as a parameter at 0 leaves it.

    A positive parameter that ran to 0 in log coordinates has a vanishing internal gradient
    whatever the objective's slope in the parameter itself; its sign is read by probing ``F``
    with the parameter's log coordinate raised to ``scale - k`` (``k`` in
    :data:`BOUNDARY_PROBES`, ``scale`` the log of the smallest observed loss; others held).
    """
    names = probe.problem.law.param_names
    reasons = []
    for j in at_zero:
        pts = np.repeat(probe.z[None, :], len(BOUNDARY_PROBES), axis=0)
        pts[:, j] = np.maximum(probe.z[j], scale - np.asarray(BOUNDARY_PROBES))
        drop = probe.drop(pts)
        if drop > probe.tol:
            reasons.append(
                f"{names[j]} ran to its lower bound 0, but the LAD objective decreases by "
                f"{drop:.3g} as it leaves 0 (the boundary's sign condition fails): a "
                "stationary point, not a minimum"
            )
    return reasons


def _hinge_normals(problem: Problem, z: np.ndarray) -> np.ndarray | None:
    """Unit normals ``(P, k)`` (internal coordinates) of the hinges rows sit on at ``z``."""
    if problem.law.kink is None:
        return None
    w = np.ones((1, problem.n))
    u, _, _, n_on = hinge_normals(problem, np.asarray(z, dtype=float)[None, :], w)
    return u[0, :, : n_on[0]] if n_on[0] else None


def _null_space(rows: np.ndarray, n: int) -> np.ndarray:
    """An orthonormal basis (n, k) of the directions orthogonal to every row of ``rows``."""
    if not len(rows):
        return np.eye(n)
    _, sv, vt = np.linalg.svd(rows, full_matrices=True)
    rank = int(np.sum(sv > 1e-9 * max(float(sv[0]), 1e-300)))
    return vt[rank:].T


def check_point(
    problem: Problem, z: np.ndarray, *, solver_converged: bool, scale: float
) -> LocalCheck:
    """Run every local check at ``z`` and compute the asymptotic uncertainty.

    Parameters
    ----------
    problem : Problem
        The solved problem.
    z : ndarray
        The point, in internal coordinates.
    solver_converged : bool
        Whether the solver's own (gradient) test passed.
    scale : float
        ``log`` of the smallest observed loss (sets the "ran to zero" threshold).

    Returns
    -------
    LocalCheck
    """
    law, loss = problem.law, problem.loss
    names = law.param_names
    loc = problem.local(z)
    curv = problem.curvature(z)
    reasons: list[str] = []
    if not solver_converged:
        reasons.append("the solver's gradient test did not pass (it stopped early)")
    at_zero = _boundary(law, z, scale)
    pub = law.to_public(z, problem.refs)
    theta = np.array([float(pub[n]) for n in names])
    sens, plateau = _plateau(theta, curv, at_zero)
    for i in plateau:
        reasons.append(
            f"{names[i]} = {theta[i]:.4g} has no effect on the model there (zero curvature: "
            "a plateau, not a minimum)"
        )
    free = free_of(names, at_zero, plateau)
    jac = jacobian(problem, np.asarray(z, dtype=float)) if loss != "mse" else None
    if loss == "lad":
        # the Hessian test means nothing at the kink of |r|: certify by the subgradient
        # condition and the second-order condition along the directions that keep the kink
        # residuals at zero
        reasons.extend(_lad_certificate(problem, z, loc, jac, free, at_zero, scale))
    else:
        reasons.extend(_saddle_reasons(curv, free, names, _hinge_normals(problem, z)))
    flat = _flat_directions(loc["gn"], free)
    slopes, bandwidth = _huber_bread(problem, loc) if loss == "huber" else (None, 0.0)
    cov = _covariance(problem, loc, loss, jac, slopes)
    corr = _corr(cov)
    # whether the data separate two parameters is a property of the design: for the robust
    # losses it is judged on J' W J (every row counted, as least squares would), not on the
    # sandwich, whose bread counts only the rows inside delta (Huber) or does not exist (LAD)
    ident = corr if jac is None else _corr(_design_inverse(jac, _row_weights(problem)))
    se = np.sqrt(np.clip(np.diag(loc["tpub"] @ cov @ loc["tpub"].T), 0, None))
    stderr_na: dict[str, str] = {}
    info: dict = {}
    if loss == "huber":
        stderr_na, info = _huber_na(problem, theta, se, slopes, bandwidth)
    nonfinite = (
        set()
        if loss == "lad"
        else {i for i in range(len(names)) if not np.isfinite(se[i]) and names[i] not in stderr_na}
    )
    se = np.where([n in stderr_na for n in names], np.nan, se)
    bad = sorted(set(at_zero) | set(plateau) | flat | nonfinite)
    gn = loc["gn"]
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = gn / np.sqrt(np.outer(np.diag(gn), np.diag(gn)))
    cond = float(np.linalg.cond(scaled)) if np.all(np.isfinite(scaled)) else float("inf")
    warns = _warnings(names, theta, at_zero, ident, cond, flat - set(plateau))
    # declared ranges (validity conditions, hard constraints) are judged by the caller
    # (scalefit.fit.build.build_result), which knows which parameters it held on a bound
    return LocalCheck(
        ok=not reasons,
        reasons=tuple(reasons),
        not_identified=tuple(names[i] for i in bad),
        warnings=tuple(warns),
        stderr=dict(zip(names, se.tolist(), strict=True)),
        corr=corr,
        cond=cond,
        grad_max=float(np.max(np.abs(loc["grad"]))),
        info={"sensitivity": dict(zip(names, sens.tolist(), strict=True)), **info},
        at_zero=tuple(names[i] for i in at_zero),
        stderr_na=stderr_na,
    )


def _huber_na(
    problem: Problem, theta: np.ndarray, se: np.ndarray, slopes: np.ndarray, bandwidth: float
) -> tuple[dict[str, str], dict]:
    """Which Huber standard errors to withhold, and why.

    The rules of :data:`HUBER_MIN_ROWS` (every parameter) and :data:`HUBER_Z` (each positive
    parameter). Returns ``({name: reason}, info)``; ``info`` holds the bandwidth and the
    effective rows.
    """
    law = problem.law
    names = law.param_names
    s = slopes * _row_weights(problem)
    rows = float(np.sum(s) ** 2 / np.sum(s**2)) if np.sum(s**2) > 0 else 0.0
    need = max(HUBER_ROWS_PER_PARAM * len(names), HUBER_MIN_ROWS)
    info = {"huber_bandwidth": bandwidth, "huber_rows": rows}
    if rows < need:
        why = (
            f"the Huber sandwich rests on {rows:.0f} effective rows near the threshold "
            f"(delta {problem.delta:g}, kernel bandwidth {bandwidth:.3g}), fewer than the "
            f"{need} it needs; use the bootstrap"
        )
        return {n: why for n in names}, info
    out = {}
    for i, p in enumerate(law.params):
        if p.kind in POSITIVE_KINDS and np.isfinite(se[i]) and HUBER_Z * se[i] >= abs(theta[i]):
            out[p.name] = (
                f"{p.name} = {theta[i]:.4g} +- 1.96 x {se[i]:.3g} reaches below zero: a positive "
                f"parameter this uncertain has a skewed sampling distribution (relative "
                f"standard error {se[i] / abs(theta[i]):.2f}); use the bootstrap"
            )
    return out, info


def _saddle_reasons(curv: dict, free: list[int], names, normals=None) -> list[str]:
    """Why the exact Hessians (internal, public) on ``free`` show no minimum (a saddle).

    At a point on hinges (``normals`` ``(P, k)``, internal coordinates, from
    :func:`~scalefit.fit.kink.hinge_normals`) the test runs along them only: a difference of
    the gradient across a hinge measures its jump, not a curvature, and the directions across
    were certified by :func:`~scalefit.fit.kink.polish_on_kink` (the objective rises both ways).
    """
    reasons = []
    for label in ("internal", "public") if free else ():
        h = curv[f"h_{label}"][np.ix_(free, free)]
        basis = np.eye(len(free))
        if normals is not None:  # the hinges' normals in these coordinates: T^-T n for public
            n = normals if label == "internal" else np.linalg.lstsq(curv["tpub"].T, normals)[0]
            basis = _null_space(n[free].T, len(free))
        ev, vec = _eig(basis.T @ h @ basis)
        vec = basis @ vec
        if not np.all(np.isfinite(ev)):
            reasons.append(f"the Hessian in {label} coordinates is not finite")
        elif ev[0] < -NEG_TOL:
            lead = free[int(np.argmax(np.abs(vec[:, 0])))]
            reasons.append(
                f"the Hessian in {label} coordinates has a negative eigenvalue ({ev[0]:.3g} "
                f"after unit-diagonal scaling), mostly along {names[lead]}: a saddle, not a "
                "minimum"
            )
    return reasons


def _warnings(names, theta, at_zero, ident, cond: float, flat: set[int]) -> list[str]:
    """Warnings: boundary optima, correlated pairs, ill-conditioning, flat directions."""
    warns = [
        f"{names[i]} = {theta[i]:.3g} ran to its lower bound 0: the data do not support this "
        "term (a boundary optimum; not identified)."
        for i in at_zero
    ]
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            if np.isfinite(ident[i, j]) and abs(ident[i, j]) > CORR_WARN:
                warns.append(
                    f"{names[i]} and {names[j]} are correlated at {ident[i, j]:+.4f} even in "
                    "reference-pinned coordinates: the data barely separate them."
                )
    if cond > COND_WARN:
        warns.append(
            f"ill-conditioned Hessian (scaled condition number {cond:.2e}): some combination of "
            "parameters is not identified by the data."
        )
    if flat:
        warns.append(
            "flat direction of the Hessian: "
            + ", ".join(names[i] for i in sorted(flat))
            + " are not identified (their standard errors mean nothing; use a bootstrap or "
            "posterior interval, or a profile)."
        )
    return warns
