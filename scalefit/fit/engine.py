"""Vectorised robust least squares in JAX (float64, scoped to scalefit's own calls).

One compiled solver serves every fit: a batch of problems, each a starting point plus a vector of
row weights (all ones for multi-start, multinomial counts for a bootstrap resample, a zero for a
jackknife row), is solved in one ``vmap``-ed Levenberg–Marquardt loop. Robust losses (Huber, LAD)
are handled by iteratively reweighted Gauss–Newton steps whose gradient is the exact gradient of
the summed robust objective; a step is accepted only if it lowers that objective.

Convergence is declared when the Gauss–Newton (Newton-decrement) estimate of the remaining decrease,
``g^T H^{-1} g``, is below ``tol`` relative to the objective; a problem that hits ``max_iter`` or
whose damping explodes is reported as not converged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np

from ..core._validation import Options, validate
from ..laws.base import Law
from . import _programs
from .observation import RESIDUALS, residual, response

LOSSES = ("mse", "huber", "lad")
#: LAD is solved as Huber with this tiny delta (a smooth stand-in for |r| with the same optimum
#: to within delta).
LAD_DELTA = 1e-7
#: Absolute floor of the convergence test, as a multiple of the rounding floor of the objective:
#: ``n * (ROUNDING * eps * max|observed|)**2`` (each residual carries a rounding error of a few
#: ``eps * |observed|``, so no point can be told apart below that). Matters only for (nearly)
#: noise-free data.
ROUNDING = 8.0
#: Smallest diagonal of the Gauss–Newton matrix used for scaling, relative to the largest (only a
#: parameter with no effect at all sits below it).
DIAG_FLOOR = 1e-30


def jax_modules():
    """``(jax, jax.numpy)``, imported on first use (``import scalefit`` does not load JAX).

    JAX's settings are left as they are: scalefit's own computations run in :func:`float64` (a
    scoped ``jax.enable_x64``), never with float64 turned on for the whole process.
    """
    import jax
    import jax.numpy as jnp

    return jax, jnp


def float64():
    """A context manager in which JAX computes in float64 (JAX's scoped ``jax.enable_x64``).

    Every JAX call of the solver (moving the table to the device, tracing, compiling, calling
    the program) runs inside it; outside, the user's setting (float32 by default) holds. It is
    per thread, so a helper thread that calls JAX opens its own.
    """
    import jax

    return jax.enable_x64(True)


def law_key(law: Law) -> str:
    """A string that identifies the law's function in this process (the in-memory program key)."""
    if law.spec is not None:  # a formula law: its text, inputs and parameters define the function
        fn = {k: law.spec[k] for k in ("formula", "inputs")}
        fn["params"] = [(p.name, p.kind) for p in law.params]
        return "spec|" + json.dumps(fn, sort_keys=True)
    try:
        opts = json.dumps(law.options, sort_keys=True)
    except TypeError:
        opts = repr(law.options)
    return f"{law.name}|{opts}|{id(law.expr) if not law.options else ''}"


_CACHE: dict[tuple, object] = {}

#: Every batch is padded to this many problems, so each (law, loss) compiles exactly once. Small
#: chunks keep a slow-converging start from holding many finished ones in the vectorised loop
#: (measured in benchmarks/bench_fit.py: 32 beat 16, 64, 128 and 256).
CHUNK = 32
#: Tables with more rows than this screen their starts on a random subsample of
#: :data:`SCREEN_ROWS` rows (:meth:`Problem.screening`); the best start is then polished on every
#: row, so a large fit costs one full-table solve instead of one per start.
SCREEN_ABOVE = 8192
SCREEN_ROWS = 4096
#: Iterations a chunk runs between retiring finished problems and refilling their slots
#: (:meth:`Problem.solve_stream`).
SEGMENT = 16


def robust_rho(xp, loss: str, delta: float):
    """``(rho, psi, weight)``: the robust loss, its derivative and IRLS weight (one definition).

    ``rho(r)`` is summed over rows by the callers. ``mse``: ``r**2``, ``2 r`` and ``2``.
    ``huber`` (threshold ``d = delta``) and ``lad`` (Huber with ``d =`` :data:`LAD_DELTA`,
    scaled by ``1 / d``): ``scale * rho_Huber(r)``, ``scale * clip(r, -d, d)``, and ``scale``
    inside the threshold, ``scale * d / |r|`` outside.
    """
    if loss == "mse":
        return (lambda r: r**2), (lambda r: 2.0 * r), (lambda r: 2.0 * xp.ones_like(r))
    d = LAD_DELTA if loss == "lad" else float(delta)
    scale = 1.0 / d if loss == "lad" else 1.0

    def rho(r):
        a = xp.abs(r)
        return scale * xp.where(a <= d, 0.5 * r**2, d * (a - 0.5 * d))

    def psi(r):
        return scale * xp.clip(r, -d, d)

    def weight(r):
        return scale * xp.where(xp.abs(r) <= d, 1.0, d / xp.maximum(xp.abs(r), 1e-300))

    return rho, psi, weight


#: Laws with at most this many parameters solve their small linear systems with a Cholesky
#: factorisation written in ``jnp`` (both systems of a step in one short loop, no LAPACK custom
#: call in the program); larger ones use ``jnp.linalg.solve``.
CHOLESKY_MAX = 16


def _cholesky(jnp, a, b):
    """Lower Cholesky factor ``L`` of a small symmetric positive-definite matrix, and ``L^{-1} b``.

    A ``fori_loop`` over the columns, each one matrix-vector product; the forward substitution
    rides in the same loop (row ``j`` of ``L`` is complete once column ``j`` is), so a solve
    costs two short loops, not three. A loop rather than an
    unrolled sequence keeps the compiled program small (unrolled, the solver took 1.1-1.4 CPU-s
    longer to compile and its cached executable was 23 % larger, for the same solve time within
    noise). A pivot that rounding pushes below ``eps * a_jj`` (a matrix singular to working
    precision) is floored there, so the solve stays finite like a pivoted LU would.
    """
    import jax

    p = a.shape[-1]
    idx = jnp.arange(p)
    eps = float(jnp.finfo(a.dtype).eps)

    def body(j, state):
        chol, y = state
        v = a[:, j] - chol @ chol[j]
        ljj = jnp.sqrt(jnp.maximum(v[j], eps * a[j, j]))
        col = jnp.where(idx > j, v / ljj, jnp.where(idx == j, ljj, 0.0))
        chol = chol.at[:, j].set(col)
        # columns after j are still zero, so row j times y is the forward-substitution sum
        return chol, y.at[j].set((b[j] - chol[j] @ y) / ljj)

    return jax.lax.fori_loop(0, p, body, (jnp.zeros_like(a), jnp.zeros_like(b)))


def _backward(jnp, chol, c):
    """``L^{-T} c``."""
    import jax

    p = c.shape[-1]

    def body(k, x):
        i = p - 1 - k
        return x.at[i].set((c[i] - chol[:, i] @ x) / chol[i, i])

    return jax.lax.fori_loop(0, p, body, jnp.zeros_like(c))


def damped_step(jnp, h, ridge_step, ridge_dec, g):
    """The Levenberg–Marquardt step and the Newton decrement from one batched factorisation.

    Returns ``s = -(h + diag(ridge_step))^{-1} g`` and ``g^T (h + diag(ridge_dec))^{-1} g``
    for a small symmetric positive semi-definite ``h`` (P x P) and positive ridges (P,). Both
    matrices are factorised together by a Cholesky loop in ``jnp`` for
    ``P <= CHOLESKY_MAX`` (no LAPACK call in the program); larger ones use ``jnp.linalg.solve``.
    """
    a_step = h + jnp.diag(ridge_step)
    a_dec = h + jnp.diag(ridge_dec)
    if h.shape[-1] > CHOLESKY_MAX:
        return jnp.linalg.solve(a_step, -g), jnp.abs(g @ jnp.linalg.solve(a_dec, g))
    import jax

    chol, y = jax.vmap(lambda a, b: _cholesky(jnp, a, b))(
        jnp.stack([a_step, a_dec]), jnp.stack([-g, g])
    )
    return _backward(jnp, chol[0], y[0]), y[1] @ y[1]


#: Prefix of the keys under which the solver program keeps the logarithm of each input column.
_LOG = "log\x00"


def _with_logs(jnp, x):
    """``x`` plus the logarithm of every floating-point input column, computed once per call.

    Outside the iteration loop (the loop reuses them; see :class:`_InputLogs`).
    """
    out = dict(x)
    for k, v in x.items():
        if jnp.ndim(v) >= 1 and jnp.issubdtype(v.dtype, jnp.floating):
            out[_LOG + k] = jnp.log(v)
    return out


class _InputLogs:
    """An array namespace that answers ``log(column)`` from logs computed once per call.

    Laws write powers as ``exp(-a log x)``; inside the vectorised solver XLA recomputed ``log x``
    in every iteration and for every start (measured on the decomposed law, 32 starts x 224
    rows: 30 % of the objective-and-Jacobian time). ``log`` of an array that *is* one of the
    input columns (the same object) returns the precomputed value; anything else goes to ``xp``.
    """

    def __init__(self, xp, pairs):
        self._xp = xp
        self._pairs = pairs

    def __getattr__(self, name):
        return getattr(self._xp, name)

    def log(self, a, *args, **kwargs):
        """``xp.log(a)``, from the precomputed table when ``a`` is an input column."""
        if not args and not kwargs:
            for column, logs in self._pairs:
                if a is column:
                    return logs
        return self._xp.log(a, *args, **kwargs)


def _row_sum(fn, w, x, logy):
    """``fn(w, x, logy)`` summed over blocks of rows (one call for small tables).

    Large tables are cut into blocks of ``_programs.BLOCK`` rows and the per-block sums
    accumulated in a scan, so memory is bounded by a block per start, not by the table.
    """
    jax, jnp = jax_modules()
    n = logy.shape[0]
    nb = _programs.n_blocks(n)
    if nb == 1:
        return fn(w, x, logy)
    rows = {k: v for k, v in x.items() if jnp.ndim(v) >= 1 and v.shape[0] == n}
    const = {k: v for k, v in x.items() if k not in rows}

    def split(a):
        return a.reshape((nb, n // nb) + a.shape[1:])

    def body(acc, blk):
        wb, xb, yb = blk
        out = fn(wb, {**const, **xb}, yb)
        return jax.tree_util.tree_map(jnp.add, acc, out), None

    first = fn(split(w)[0], {**const, **{k: split(v)[0] for k, v in rows.items()}}, split(logy)[0])
    rest = (split(w)[1:], {k: split(v)[1:] for k, v in rows.items()}, split(logy)[1:])
    acc, _ = jax.lax.scan(body, first, rest)
    return acc


def lm_solve(evaluate, z0, lam0, nu0, max_iter, tol, atol):
    """Levenberg–Marquardt iterations for one problem; ``(z, f, lam, nu, it, done, dec)``.

    ``evaluate(z) -> (f, g, h)``: objective (``inf`` when not finite), gradient and
    Gauss–Newton matrix. A trial point's evaluation also gives the next iteration's gradient
    and matrix, so an iteration evaluates the residuals once. Stops when the Newton decrement is
    below ``tol * f + atol``, when the damping explodes, or after ``max_iter`` iterations.
    """
    jax, jnp = jax_modules()
    f0, g0, h0 = evaluate(z0)

    def step(state):
        z, f, lam, nu, it, done, dec, g, h = state
        # Marquardt scaling by the diagonal, and regularisation relative to each diagonal entry,
        # so the step is invariant to the units of every parameter (a parameter of scale 1e-7
        # beside one of scale 1 is not frozen by an absolute ridge).
        diag = jnp.maximum(jnp.diag(h), DIAG_FLOOR * jnp.max(jnp.abs(jnp.diag(h))) + 1e-300)
        # step and Newton decrement (predicted remaining decrease at the current point)
        s, quad = damped_step(jnp, h, (lam + 1e-14) * diag, 1e-12 * diag, g)
        z_new = z + s
        f_new, g_new, h_new = evaluate(z_new)
        ok = (f_new <= f) & jnp.all(jnp.isfinite(z_new))
        dec_now = quad / 2.0
        small = dec_now <= tol * jnp.maximum(f, 1e-300) + atol
        stuck = lam > 1e16
        # Nielsen's damping update from the gain ratio of actual to predicted decrease.
        pred = -(g @ s) - 0.5 * (s @ (h @ s))
        gain = (f - f_new) / jnp.maximum(pred, 1e-300)
        factor = jnp.maximum(1.0 / 3.0, 1.0 - (2.0 * gain - 1.0) ** 3)
        move = ok & ~done
        z, f, g, h = jax.tree_util.tree_map(
            lambda new, old: jnp.where(move, new, old), (z_new, f_new, g_new, h_new), (z, f, g, h)
        )
        lam = jnp.where(ok, jnp.maximum(lam * factor, 1e-15), lam * nu)
        nu = jnp.where(ok, 2.0, nu * 2.0)
        return z, f, lam, nu, it + 1, done | small | stuck, dec_now, g, h

    def cond(state):
        return (~state[5]) & (state[4] < max_iter)

    done0 = ~jnp.isfinite(f0)
    init = (z0, f0, lam0, nu0, jnp.asarray(0), done0, jnp.asarray(jnp.inf), g0, h0)
    return jax.lax.while_loop(cond, step, init)[:7]


class _Objective:
    """A law's robust objective on one table, for one start (traced under the solver's ``vmap``).

    ``x`` holds the input columns and their logarithms (:func:`_with_logs`), ``w`` the row
    weights, ``logy`` the response on the residual scale; sums over rows run block by block on
    large tables (:func:`_row_sum`).
    """

    def __init__(self, law: Law, loss: str, delta: float, residuals: str):
        self.jax, self.jnp = jax_modules()
        self.law, self.loss, self.residuals = law, loss, residuals
        self.rho, self.psi, self.weight = robust_rho(self.jnp, loss, delta)

    def resid(self, z, x, logy, refs):
        """Residuals of every row at the internal point ``z``."""
        jnp = self.jnp
        p = self.law.to_public(z, refs, xp=jnp)
        inputs = {k: v for k, v in x.items() if not k.startswith(_LOG)}
        pairs = [(inputs[k[len(_LOG) :]], v) for k, v in x.items() if k.startswith(_LOG)]
        xp = _InputLogs(jnp, pairs) if pairs else jnp
        return residual(jnp, logy, self.law.expr(xp, p, inputs), self.residuals)

    def _terms(self, z, w, x, logy, refs):
        """Residuals, their Jacobian (rows, P), the gradient and the IRLS Gauss–Newton matrix."""
        r = self.resid(z, x, logy, refs)
        jac = self.jax.jacfwd(self.resid)(z, x, logy, refs)  # (rows, P)
        u = w * self.weight(r)
        return r, jac, jac.T @ (u * r), jac.T @ (u[:, None] * jac)

    def value_and_newton(self, z, w, x, logy, refs):
        """Objective (``inf`` when not finite), gradient and Gauss–Newton matrix at ``z``."""
        jnp = self.jnp

        def block(wb, xb, yb):  # all three from one evaluation of the residuals
            r, _, g, h = self._terms(z, wb, xb, yb, refs)
            return jnp.sum(wb * self.rho(r)), g, h

        val, g, h = _row_sum(block, w, x, logy)
        return jnp.where(jnp.isfinite(val), val, jnp.inf), g, h

    def local(self, z, w, x, logy, refs):
        """``(grad, gn, meat, tpub, resid)`` at ``z``: what standard errors need."""
        jax, jnp = self.jax, self.jnp

        def block(wb, xb, yb):
            r, jac, g, h = self._terms(z, wb, xb, yb, refs)
            # the sandwich's middle keeps the halved scale for mse (rho'/2 = r exactly), like the
            # halved Gauss-Newton matrix that checks._covariance uses for mse
            psi = 0.5 * self.psi(r) if self.loss == "mse" else self.psi(r)
            return g, h, jac.T @ ((wb * psi**2)[:, None] * jac)

        def public(zz):
            return jnp.stack(list(self.law.to_public(zz, refs, xp=jnp).values()))

        g, h, meat = _row_sum(block, w, x, logy)
        return g, h, meat, jax.jacfwd(public)(z), self.resid(z, x, logy, refs)


def _build(law: Law, loss: str, delta: float, residuals: str):
    """The batched solver for a law, loss and residual scale (jitted; compiled per shapes)."""
    jax, jnp = jax_modules()
    objective = _Objective(law, loss, delta, residuals)

    def solve_one(z0, lam0, nu0, max_iter, w, x, logy, refs, tol, atol, want_local):
        x = _with_logs(jnp, x)

        def evaluate(z):
            return objective.value_and_newton(z, w, x, logy, refs)

        z, f, lam, nu, it, done, dec = lm_solve(evaluate, z0, lam0, nu0, max_iter, tol, atol)
        conv = jnp.isfinite(f) & (dec <= tol * jnp.maximum(f, 1e-300) + atol)

        # Local quantities at the solution (for standard errors), from the same compilation, only
        # when asked for (``want_local`` is one flag for the whole batch, so this stays a branch
        # under ``vmap``): a streamed solve calls the program many times and uses none of them.
        def local(z):
            return objective.local(z, w, x, logy, refs)

        def no_local(z):
            return jax.tree_util.tree_map(
                lambda a: jnp.zeros(a.shape, a.dtype), jax.eval_shape(local, z)
            )

        g, h, meat, tpub, r = jax.lax.cond(want_local, local, no_local, z)
        return {
            "z": z,
            "objective": f,
            "decrement": dec,
            "iterations": it,
            "converged": conv,
            "done": done,
            "lam": lam,
            "nu": nu,
            "grad": g,
            "gn": h,
            "meat": meat,
            "tpub": tpub,
            "resid": r,
        }

    return jax.jit(jax.vmap(solve_one, in_axes=(0, 0, 0, 0, 0, None, None, None, None, None, None)))


def _compiled(law: Law, loss: str, delta: float, residuals: str, args: tuple):
    """The batched solver program at the shapes of ``args``.

    Held in memory per process, and serialised to the user cache when the law has a stable
    identity (see :mod:`scalefit.fit._programs`), so a later process skips tracing too.
    """
    import jax

    sig = _programs.shape_key(args)
    x64 = bool(jax.config.jax_enable_x64)
    from .device import forced_platform

    where = forced_platform()  # a program for the CPU is not one for the default device
    key = ("program", "solve", law_key(law), loss, float(delta), residuals, sig, x64, where)
    if key in _CACHE:
        return _CACHE[key]
    bkey = (law_key(law), loss, float(delta), residuals)  # one jitted solver for every shape
    base = _CACHE[bkey] = _CACHE.get(bkey) or _build(law, loss, delta, residuals)
    ident = _programs.law_identity(law)
    disk = (
        None if ident is None else "|".join(["solve", ident, loss, repr(float(delta)), residuals])
    )
    fn = _programs.cached_program(base, disk, args)
    if fn is base:  # compiled in memory only: still through the compile cache on its first call
        fn = _programs.first_call_cached(base)
    _CACHE[key] = fn
    return fn


def _pad_rows(values, n: int, pad: int):
    """Repeat the last row ``pad`` times (padding rows carry weight zero in every sum)."""
    a = np.asarray(values)
    if pad == 0 or a.ndim == 0 or a.shape[0] != n:
        return a
    return np.concatenate([a, np.repeat(a[-1:], pad, axis=0)])


class Problem:
    """A law, a table's inputs and losses, and a loss function, ready for batched solving.

    Rows are padded (with weight zero) to a bucket of similar table sizes
    (:func:`scalefit.fit._programs.bucket`), so tables of similar length share one compiled
    program; results never include the padding (``n`` is the table's own row count).

    Parameters
    ----------
    law : Law
        The law to fit.
    x : mapping
        Input columns (numpy arrays of length n).
    y : ndarray
        Observed losses (length n).
    loss : {"mse", "huber", "lad"}
        Robust loss on the residuals, summed over rows.
    delta : float
        Huber threshold (units of the residuals).
    refs : mapping, optional
        Log reference points of the pivot variables; by default computed from ``x``.
    residuals : {"log", "linear"}, default "log"
        Residual scale (see :mod:`scalefit.fit.observation`).
    weights : ndarray, optional
        Non-negative per-row weights multiplying each row's term of the objective (every solve
        multiplies its own batch weights by them).
    """

    def __init__(
        self,
        law: Law,
        x: Mapping[str, np.ndarray],
        y: np.ndarray,
        *,
        loss: str,
        delta: float,
        refs: Mapping[str, float] | None = None,
        residuals: str = "log",
        weights: np.ndarray | None = None,
    ):
        if residuals not in RESIDUALS:
            validate("Problem", {"residuals": residuals}, {"residuals": [Options(set(RESIDUALS))]})
        self.law, self.loss, self.delta = law, loss, float(delta)
        self.residuals = residuals
        self.n = len(y)
        #: Rows the compiled program sees (``n`` plus zero-weight padding).
        self.n_padded = _programs.bucket(self.n)
        pad = self.n_padded - self.n
        raw = {k: np.asarray(x[k], dtype=float) for k in law.inputs}
        self.refs = dict(refs) if refs is not None else law.references(raw)
        #: Raw input columns (numpy) and the response on the residual scale (numpy).
        self.inputs = raw
        self._y = np.asarray(y, dtype=float)
        self.observed = response(self._y, residuals)
        eps = float(np.finfo(float).eps)
        self.atol = max(
            self.n * (ROUNDING * eps * float(np.max(np.abs(self.observed)))) ** 2, 1e-300
        )
        jax, _ = jax_modules()
        with float64():  # device arrays in float64 (the calls below run in the same scope)
            self._x = {
                k: jax.device_put(_pad_rows(v, self.n, pad))
                for k, v in law.variables(np, raw).items()
            }
            self._logy = jax.device_put(_pad_rows(self.observed, self.n, pad))
            self._refs = {k: jax.device_put(v) for k, v in self.refs.items()}
        self.weights = None if weights is None else np.asarray(weights, dtype=float)

    #: For a problem made by :meth:`subset`, the indices of its rows in the parent problem.
    rows: np.ndarray | None = None

    def chunk_for(self, k: int) -> int:
        """Problems per compiled call for ``k`` problems.

        ``CHUNK`` for tables that fit in a block; for larger tables the next power of two, so a
        lone polish on a large table is not padded to ``CHUNK`` copies.
        """
        if self.n_padded <= _programs.BLOCKED_ABOVE:
            return CHUNK
        return min(CHUNK, 1 << max(int(k) - 1, 0).bit_length())

    def subset(self, rows: np.ndarray | None = None, law: Law | None = None) -> Problem:
        """The same problem on some of its rows (default all), with the same reference points.

        Used to screen many starts on a subsample of a large table before polishing the best
        on every row; ``law`` replaces the law (the same law with some parameters held fixed,
        :meth:`~scalefit.laws.Law.fixing`, for a refit on a constraint's bound).
        """
        keep = slice(None) if rows is None else np.asarray(rows)
        sub = Problem(
            law or self.law,
            {k: v[keep] for k, v in self.inputs.items()},
            self._y[keep],
            loss=self.loss,
            delta=self.delta,
            refs=self.refs,
            residuals=self.residuals,
            weights=None if self.weights is None else self.weights[keep],
        )
        sub.rows = None if rows is None else keep
        return sub

    def screening(self, seed: int = 0) -> Problem | None:
        """A random subsample of :data:`SCREEN_ROWS` rows for screening starts.

        None for a table small enough to screen on every row (at most :data:`SCREEN_ABOVE`).
        """
        if self.n <= SCREEN_ABOVE:
            return None
        rng = np.random.default_rng([seed, 2])
        return self.subset(np.sort(rng.choice(self.n, size=SCREEN_ROWS, replace=False)))

    def solve_raw(
        self,
        z0: np.ndarray,
        weights: np.ndarray | None = None,
        *,
        max_iter: int | np.ndarray = 1000,
        tol: float = 1e-12,
        lam0: np.ndarray | None = None,
        nu0: np.ndarray | None = None,
        chunk: int | None = None,
        local: bool = True,
    ) -> dict[str, np.ndarray]:
        """Solve up to ``CHUNK`` problems (padded to a fixed chunk); returns every solver output.

        Row weights are ``(k, n)`` (or None for ones); the padding rows get weight zero.
        ``max_iter`` may differ per problem; ``lam0``/``nu0`` continue a problem's damping state
        from an earlier call (default: a fresh start). ``chunk`` fixes the compiled batch size
        (default :meth:`chunk_for`). With ``local=False`` the local quantities at the end point
        (``grad``, ``gn``, ``meat``, ``tpub``, ``resid``) are not computed and come back as
        zeros (the same compiled program, a branch skipped).
        """
        z0 = np.atleast_2d(np.asarray(z0, dtype=float))
        k = len(z0)
        if k > CHUNK:
            raise ValueError(f"at most {CHUNK} problems per call; got {k}.")
        chunk = self.chunk_for(k) if chunk is None else max(int(chunk), k)
        w = np.ones((k, self.n)) if weights is None else np.atleast_2d(weights)
        if self.weights is not None:
            w = w * self.weights[None, :]
        wp = np.zeros((chunk, self.n_padded))
        wp[:k, : self.n] = w
        wp[k:, : self.n] = w[:1]
        # padding problems start fresh and run no iteration
        its = np.zeros(chunk, dtype=np.int64)
        its[:k] = max_iter
        lam, nu = np.full(chunk, 1e-3), np.full(chunk, 2.0)
        lam[:k] = 1e-3 if lam0 is None else lam0
        nu[:k] = 2.0 if nu0 is None else nu0
        z0 = np.concatenate([z0, np.repeat(z0[:1], chunk - k, axis=0)])
        flags = (np.float64(tol), np.float64(self.atol), np.bool_(local))
        args = (z0, lam, nu, its, wp, self._x, self._logy, self._refs, *flags)
        with float64():
            out = _compiled(self.law, self.loss, self.delta, self.residuals, args)(*args)
            res = {name: np.asarray(v)[:k] for name, v in out.items()}
        res["resid"] = res["resid"][:, : self.n]
        return res

    def solve_stream(
        self,
        z0: np.ndarray,
        weights: np.ndarray | None = None,
        *,
        weight_index: np.ndarray | None = None,
        max_iter: int = 1000,
        tol: float = 1e-12,
        segment: int = SEGMENT,
        on_done=None,
    ) -> dict[str, np.ndarray]:
        """Solve many problems, retiring finished ones and refilling their slots.

        A chunk of ``CHUNK`` problems is advanced ``segment`` iterations at a time (the damping
        state carried over, so each problem follows exactly the path it would follow in one
        uninterrupted run); a problem that stopped (converged, stuck, non-finite) or used its
        ``max_iter`` leaves the chunk and the next problem takes its slot, so a chunk no longer
        runs until its slowest start has finished. Once the last problem has a slot there is
        nothing left to refill, and the chunk runs to the end in one call.

        Parameters
        ----------
        z0 : ndarray
            Starts (m, P).
        weights : ndarray, optional
            Row weights: (m, n), or (g, n) with ``weight_index`` giving each problem's row.
        weight_index : ndarray of int, optional
            Problem ``i`` uses ``weights[weight_index[i]]`` (lets many problems share weights).
        max_iter, tol : int, float
            Iteration budget per problem and relative decrement tolerance.
        segment : int
            Iterations per call between refills.
        on_done : callable, optional
            Called with the number of problems that finished after each call (progress).

        Returns
        -------
        dict
            ``z``, ``objective``, ``converged``, ``iterations`` (one row per problem).
        """
        z0 = np.atleast_2d(np.asarray(z0, dtype=float))
        m = len(z0)
        out = {
            "z": z0.copy(),
            "objective": np.full(m, np.nan),
            "converged": np.zeros(m, dtype=bool),
            "iterations": np.zeros(m, dtype=np.int64),
        }
        cur, lam, nu = z0.copy(), np.full(m, 1e-3), np.full(m, 2.0)
        active: list[int] = []
        nxt = 0
        # one batch size for the whole stream (a draining tail would otherwise compile programs
        # for every smaller size on large tables)
        fixed = {"tol": tol, "chunk": self.chunk_for(min(m, CHUNK)), "local": False}
        while active or nxt < m:
            while len(active) < CHUNK and nxt < m:
                active.append(nxt)
                nxt += 1
            idx = np.asarray(active)
            w = None
            if weights is not None:
                w = weights[idx if weight_index is None else np.asarray(weight_index)[idx]]
            budget = max_iter - out["iterations"][idx]
            if nxt < m:  # problems still wait for a slot: stop after a segment to refill
                budget = np.minimum(segment, budget)
            res = self.solve_raw(cur[idx], w, max_iter=budget, lam0=lam[idx], nu0=nu[idx], **fixed)
            out["iterations"][idx] += res["iterations"]
            cur[idx], lam[idx], nu[idx] = res["z"], res["lam"], res["nu"]
            finished = res["done"] | (out["iterations"][idx] >= max_iter)
            for key in ("z", "objective", "converged"):
                out[key][idx[finished]] = res[key][finished]
            active = [int(i) for i in idx[~finished]]
            if on_done is not None and finished.any():
                on_done(int(finished.sum()))
        return out

    def solve_chunks(self, z0, weights=None, *, keys=None, **kw) -> dict[str, np.ndarray]:
        """:meth:`solve_raw` on any number of problems, ``CHUNK`` at a time, joined.

        ``keys`` limits the outputs kept (default: all); ``kw`` goes to :meth:`solve_raw`.
        """
        z0 = np.atleast_2d(np.asarray(z0, dtype=float))
        parts = [
            self.solve_raw(
                z0[i : i + CHUNK], None if weights is None else weights[i : i + CHUNK], **kw
            )
            for i in range(0, len(z0), CHUNK)
        ]
        return {k: np.concatenate([p[k] for p in parts]) for k in keys or parts[0]}

    def local(self, z: np.ndarray) -> dict[str, np.ndarray]:
        """Local quantities at ``z`` with unit weights (no solver iterations).

        Keys: ``grad``, ``gn`` (IRLS Gauss–Newton matrix), ``meat`` (sandwich middle),
        ``tpub`` (Jacobian of the internal-to-public map), ``resid``, ``objective``.
        """
        out = self.solve_raw(np.asarray(z)[None, :], max_iter=0)
        return {k: v[0] for k, v in out.items()}

    def curvature(self, z: np.ndarray) -> dict[str, np.ndarray]:
        """Full Hessians of the objective at ``z`` (row weights included), and sensitivities.

        The Hessian is the central difference of the *exact* gradient (the compiled solver's own
        gradient, evaluated for all ``2 P`` shifted points in one batch, so no extra compilation),
        each step ``1e-3 sqrt(S / GN_ii)`` (a fixed fraction of the parameter's natural scale);
        unlike the Gauss–Newton matrix it carries the second-order term, so a saddle shows as a
        negative eigenvalue. Public-coordinate quantities follow by the chain
        rule through the Jacobian ``T`` of the internal-to-public map (exact at a stationary
        point).

        Returns
        -------
        dict
            ``h_internal``, ``h_public`` (the parameters' own coordinates), ``gn_public``
            (Gauss–Newton matrix in public coordinates) and ``tpub``.
        """
        z = np.asarray(z, dtype=float)
        p = len(z)
        loc = self.local(z)
        gn, t = loc["gn"], loc["tpub"]
        # Step: 1e-3 of the natural scale sqrt(S / GN_ii), with S floored at the change a
        # 1e-3 relative move of the response would make, so a (nearly) zero-residual fit is not
        # differenced below the rounding noise of its gradient.
        floor = self.n * (1e-3 * float(np.sqrt(np.mean(self.observed**2)))) ** 2
        f = max(float(loc["objective"]), floor, self.atol)
        diag = np.abs(np.diag(gn))
        # a parameter whose Gauss-Newton diagonal is below the solver's DIAG_FLOOR (no effect on
        # the fit, e.g. a floor term that ran to ~1e-38) gets the same small step as one with
        # none at all; its "natural scale" would be astronomically large
        live = diag > DIAG_FLOOR * (float(np.max(diag)) if diag.size else 0.0)
        step = np.where(live, 1e-3 * np.sqrt(f / np.where(live, diag, 1.0)), 1e-6)
        step = np.where(np.isfinite(step) & (step > 0), step, 1e-6)
        shifts = np.concatenate([np.diag(step), -np.diag(step)])
        g = self.solve_chunks(z[None, :] + shifts, keys=("grad",), max_iter=0)["grad"]
        h = (g[:p] - g[p:]) / (2.0 * step[:, None])
        h_int = 0.5 * (h + h.T)
        try:
            tinv = np.linalg.inv(t)
        except np.linalg.LinAlgError:
            tinv = np.linalg.pinv(t)
        return {
            "h_internal": h_int,
            "h_public": tinv.T @ h_int @ tinv,
            "gn_public": tinv.T @ gn @ tinv,
            "tpub": t,
        }

    def objective(self, z: np.ndarray, weights: np.ndarray | None = None) -> float:
        """Summed robust objective at ``z``."""
        w = None if weights is None else np.asarray(weights)[None, :]
        return float(self.solve_raw(np.asarray(z)[None, :], w, max_iter=0)["objective"][0])
