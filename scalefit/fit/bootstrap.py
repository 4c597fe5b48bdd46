"""Bootstrap intervals where every resample is a converged fit, solved in vectorised chunks.

:func:`bootstrap` is a function over the JAX engine: it takes a least-squares result and returns a
*new* result with draws and intervals (the input is never modified).

Memory is O(rows + resamples): resample counts are drawn for a group of resamples at a time (the
same random stream as drawing them all at once), each chunk of problems gets its own
``chunk x rows`` weight matrix, and every resample's starts are reduced to its best converged
solution as soon as they are solved. The BCa jackknife builds its leave-one-out weights chunk by
chunk too (never an ``n x n`` matrix).

Large tables (more than :data:`~scalefit.fit.engine.SCREEN_ABOVE` rows) screen the random starts
the way a single fit does: each resample's starts are solved on a fixed random subsample of rows
weighted by the resample's counts there, the warm start is solved on every row, and a screened
start is polished on every row only when it lies in another basin and is not clearly worse on
the subsample (:func:`_screened`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core._progress import progress_bar
from ..core._validation import IsType, constraints, validate
from ..core.errors import ScaleFitError
from ..laws import sample_starts
from ..laws.base import outside_range
from .curve_marks import warn_ungrouped
from .data import as_table, group_codes, inputs_of
from .engine import CHUNK, SCREEN_ABOVE, Problem, robust_rho
from .kink import polish_on_kink
from .lsq import solve_many
from .result import FitResult

CI_METHODS = ("percentile", "bca")
#: Intervals are reported only when at least this share of the resamples converged.
MIN_CONVERGED_SHARE = 0.8


def _problem(res: FitResult, tab: pd.DataFrame) -> Problem:
    prob = res.extras.get("problem")
    if isinstance(prob, Problem) and prob.n == len(tab):
        return prob
    conv = res.conventions
    col = conv.get("weight_column")
    if conv.get("weights") and (col is None or col not in tab.columns):
        raise ScaleFitError(
            "this result was fitted with per-row weights that the given table does not carry; "
            "bootstrap the table the result was fitted on."
        )
    law = res.law
    return Problem(
        law,
        inputs_of(tab, law),
        tab["loss"].to_numpy(float),
        loss=conv.get("loss", "mse"),
        delta=conv.get("delta", 1e-3),
        refs=res.refs,
        residuals=conv.get("residuals", "log"),
        weights=None if col is None else tab[col].to_numpy(float),
    )


#: Resamples whose counts are drawn at once (memory: this many rows of counts).
GROUP = CHUNK


def resample_groups(
    tab: pd.DataFrame,
    n_boot: int,
    *,
    cluster: str | None,
    rng: np.random.Generator,
    group: int = GROUP,
):
    """Yield ``(first, counts)`` for consecutive groups of at most ``group`` resamples.

    Row weights (counts) of resamples of rows, or of clusters of rows; the counts do not depend
    on ``group`` (the same random stream as drawing them all at once).
    """
    n = len(tab)
    codes, g = _clusters(tab, cluster)
    for first in range(0, n_boot, group):
        m = min(group, n_boot - first)
        if cluster is None:
            yield first, rng.multinomial(n, np.full(n, 1.0 / n), size=m).astype(float)
        else:
            counts = rng.multinomial(g, np.full(g, 1.0 / g), size=m).astype(float)
            yield first, counts[:, codes]


def _clusters(tab: pd.DataFrame, cluster: str | None) -> tuple[np.ndarray | None, int]:
    """Cluster codes per row and the number of clusters (validated), or (None, rows)."""
    if cluster is None:
        return None, len(tab)
    codes, labels = group_codes(tab, cluster, owner="bootstrap", name="cluster")
    return codes, len(labels)


def _bca(draws: np.ndarray, theta: np.ndarray, jack: np.ndarray, prob: float) -> np.ndarray:
    """BCa interval per column given draws (B, P), estimate (P,) and jackknife values (n, P)."""
    from scipy import stats

    out = np.empty((draws.shape[1], 2))
    zq = stats.norm.ppf([(1 - prob) / 2, (1 + prob) / 2])
    for j in range(draws.shape[1]):
        d = draws[:, j][np.isfinite(draws[:, j])]
        frac = np.clip(np.mean(d < theta[j]), 1e-6, 1 - 1e-6)
        z0 = stats.norm.ppf(frac)
        dev = jack[:, j].mean() - jack[:, j]
        den = 6.0 * np.sum(dev**2) ** 1.5
        a = np.sum(dev**3) / den if den > 0 else 0.0
        adj = stats.norm.cdf(z0 + (z0 + zq) / (1 - a * (z0 + zq)))
        out[j] = np.quantile(d, np.clip(adj, 0, 1))
    return out


def bootstrap(
    res: FitResult,
    table,
    n_boot: int,
    *,
    boot_starts: int = 7,
    cluster: str | None = None,
    seed: int = 0,
    ci_prob: float = 0.95,
    ci_method: str = "percentile",
    progress: bool | None = None,
    screen: bool = True,
) -> FitResult:
    """A new result with bootstrap draws and intervals added to a least-squares result.

    Each resample (multinomial row counts, or counts of whole clusters) is fitted from the
    full-data optimum plus ``boot_starts`` random starts, and keeps its best converged solution, so
    no resample is left in the wrong basin. All resamples and starts are solved together. The
    residual scale, robust loss and per-row weights of the original fit are kept (a resample's
    weights are its counts times the row weights).

    Parameters
    ----------
    res : FitResult
        A least-squares result on ``table`` (not modified).
    table : DataFrame, path or dataset name
        The table that was fitted.
    n_boot : int
        Number of resamples.
    boot_starts : int, default 7
        Random starts per resample besides the warm start.
    cluster : str, optional
        Column whose groups are resampled whole.
    seed : int, default 0
        Seed for resampling and starts.
    ci_prob : float, default 0.95
        Interval probability.
    ci_method : {"percentile", "bca"}
        Interval type (BCa uses a jackknife of warm-started leave-one-out fits; see
        ``screen`` for large tables).
    progress : bool, optional
        Progress bar (default: when stderr is a terminal).
    screen : bool, default True
        On tables of more than :data:`~scalefit.fit.engine.SCREEN_ABOVE` rows, solve the random
        starts on a row subsample of each resample and polish on every row only a start that
        lies in another basin than the warm start and is not clearly worse there (more than
        4 standard errors above the warm start's objective on the subsample); the warm start is
        always solved on every row, so a resample costs about one full-table solve instead of
        ``1 + boot_starts``. ``diagnostics["boot_polished"]`` counts the resamples that needed a
        polish. On such tables ``ci_method="bca"`` takes its jackknife values from one Newton
        step per left-out row (or cluster) instead of a refit each (n refits would cost n
        full-table solves) when there are more than :data:`JACK_REFITS` of them
        (``diagnostics["bca_jackknife"]``). ``False`` solves every start on every row and
        refits every jackknife value. Tables up to ``SCREEN_ABOVE`` rows are never screened
        (results there do not depend on this setting).

    Returns
    -------
    FitResult
        A copy of ``res`` with ``draws``, ``ci``, ``ci_prob`` and bootstrap diagnostics.

    Examples
    --------
    >>> import scalefit
    >>> from scalefit.fit.synthetic import simulate_table
    >>> table = simulate_table("chinchilla", seed=0)  # alpha = 0.34, 1 % noise
    >>> res = scalefit.fit(table, "chinchilla", seed=0)
    >>> boot = scalefit.bootstrap(res, table, 50, seed=1)
    >>> [round(bound, 2) for bound in boot.ci["alpha"]], boot.ci_prob, res.draws is None
    ([0.32, 0.35], 0.95, True)
    """
    validate("bootstrap", locals(), _CONSTRAINTS)  # the arguments, in their order
    if res.method == "bayes":
        raise ScaleFitError(
            "The 'res' parameter of bootstrap must be a least-squares result. Got a Bayesian "
            "result instead (its posterior draws already give intervals)."
        )
    tab = as_table(table) if not isinstance(table, pd.DataFrame) else table
    if len(tab) != res.n_rows:
        raise ScaleFitError(
            f"The 'table' parameter of bootstrap must be the table the result was fitted on "
            f"({res.n_rows} rows). Got {len(tab)} rows instead."
        )
    problem = _problem(res, tab)
    _clusters(tab, cluster)  # validate the column before any work
    if cluster is None:
        warn_ungrouped(tab, "the row bootstrap", "cluster='run' (--cluster run)")
    fits = _Resamples(problem, res, tab, n_boot, boot_starts, seed, screen)
    fits.solve(tab, cluster, np.random.default_rng([seed, 1]), progress)
    warns = list(res.warnings)
    bounds, one_step = _bounds(res, problem, tab, fits, cluster, ci_prob, ci_method, warns)
    jackknife = None if ci_method != "bca" else ("one-step" if one_step else "refit")
    diagnostics = {
        **res.diagnostics,
        **_boot_diagnostics(res.law, fits, cluster, boot_starts, jackknife),
    }
    conventions = {
        **res.conventions,
        "bootstrap": int(n_boot),
        "boot_starts": int(boot_starts),
        "boot_seed": int(seed),
        "cluster": cluster,
        "ci_method": ci_method,
    }
    unpinned = _spread_warnings(res.law, fits, ci_prob, warns)
    names = res.law.param_names
    _floor_warnings(res.law, bounds, ci_prob, warns)
    return res.replace(
        draws=fits.draws,
        ci={name: (float(bounds[i, 0]), float(bounds[i, 1])) for i, name in enumerate(names)},
        ci_prob=float(ci_prob),
        warnings=tuple(warns),
        diagnostics=diagnostics,
        conventions=conventions,
        not_identified=tuple(dict.fromkeys((*res.not_identified, *unpinned))),
        extras=dict(res.extras),
    )


_CONSTRAINTS = {
    "res": [IsType(FitResult, "a FitResult")],
    **constraints("n_boot", "boot_starts", "cluster", "seed", "ci_prob", "ci_method", "progress"),
    "screen": ["boolean"],
}


class _Resamples:
    """Each resample's best converged solution, solved group by group (:meth:`solve`).

    After solving: ``draws`` (public, NaN unless ``ok``: converged inside every declared range),
    ``good`` (the usable draws), ``converged``, ``ranged``, ``out_share``, ``share`` and the
    correlations ``zc`` (internal coordinates) and ``raw`` of the usable draws.
    """

    def __init__(self, problem: Problem, res: FitResult, tab, n_boot, boot_starts, seed, screen):
        self.law = law = res.law
        self.problem, self.k = problem, 1 + int(boot_starts)
        y = tab["loss"].to_numpy(float)
        scale = np.abs(y) if np.all(y > 0) else np.abs(y) + 1.0
        self.rand = sample_starts(law, n_boot * max(self.k - 1, 1), scale, seed=seed + 7919)
        self.warm = np.asarray(res.internal, dtype=float)
        self.n_par = len(law.params)
        # A resample with no more distinct design points than parameters cannot identify the law:
        # it counts as failed rather than contributing an arbitrary point of a flat valley.
        self.design = pd.factorize(pd.MultiIndex.from_frame(tab[list(law.inputs)]))[0]
        self.degenerate = np.zeros(n_boot, dtype=bool)
        self.zb = np.full((n_boot, self.n_par), np.nan)  # internal coordinates of the best start
        self.best_obj = np.full(n_boot, np.inf)  # its objective; inf: the resample failed
        self.best = np.zeros(n_boot, dtype=int)  # which start won (0: the warm start)
        self.polished = np.zeros(n_boot, dtype=bool)  # a screened start polished on every row
        self.on_kink = np.zeros(n_boot, dtype=bool)  # certified on a kink (_on_kink)
        # Large tables: random starts screened on a row subsample of each resample (_screened).
        self.large = bool(screen) and problem.n > SCREEN_ABOVE
        self.screening = problem.screening(seed) if self.large and self.k > 1 else None

    def solve(self, tab: pd.DataFrame, cluster: str | None, rng, progress: bool | None) -> None:
        """Solve every group of resamples drawn from ``rng`` (see :func:`resample_groups`)."""
        n_boot, k = len(self.best), self.k
        with progress_bar(
            progress, total=n_boot * k, desc="bootstrap", unit="fit", leave=False
        ) as bar:
            for first, counts in resample_groups(tab, n_boot, cluster=cluster, rng=rng):
                self._group(first, counts)
                bar.update(len(counts) * k)
        self._sort()

    def _group(self, first: int, counts: np.ndarray) -> None:
        """Solve one group of resamples (``k`` starts each) and keep each one's best."""
        problem, k, m = self.problem, self.k, len(counts)
        rw = counts if problem.weights is None else counts * problem.weights[None, :]
        for i, row in enumerate(rw):
            self.degenerate[first + i] = len(np.unique(self.design[row > 0])) <= self.n_par
        # the group's problems: (resample, start) pairs sharing their resample's counts
        idx = np.arange(m * k)
        r_loc, j = idx // k, idx % k
        r = first + r_loc
        z0 = np.where(
            (j == 0)[:, None],
            self.warm[None, :],
            self.rand[np.clip(r * (k - 1) + j - 1, 0, len(self.rand) - 1)],
        )
        if self.screening is not None:
            r_loc, j, z, obj, conv, pol = _screened(problem, self.screening, z0, counts, k)
            r = first + r_loc
            self.polished[first : first + m] = pol
        else:
            z, obj, conv, _ = solve_many(problem, z0, counts, weight_index=r_loc, progress=False)
        obj_ok = np.where(conv & np.isfinite(obj) & ~self.degenerate[r], obj, np.inf)
        for q in range(len(r)):
            if j[q] == 0 or obj_ok[q] < self.best_obj[r[q]]:
                self.best_obj[r[q]], self.best[r[q]], self.zb[r[q]] = obj_ok[q], j[q], z[q]
        sl = slice(first, first + m)
        self._on_kink(first, counts, r_loc, j, z, np.where(conv | self.degenerate[r], np.inf, obj))
        _hold_resamples(problem, self.zb[sl], counts, self.best_obj[sl])

    def _on_kink(self, first, counts, r_loc, j, z, stalled) -> None:
        """Keep a resample's stalled start when it is certified a minimum on a kink.

        ``stalled`` holds the objective of each solve that stopped unconverged (inf otherwise);
        each resample's lowest one, when below its best converged objective, is re-solved with
        the kink held (:func:`~scalefit.fit.kink.polish_on_kink`) and replaces it
        when certified. Without this, a hinge law such as ``critical_depth`` loses every
        resample whose optimum puts a row exactly at the critical depth. Only laws that declare
        their hinge (``Law.kink``) are polished: a smooth law's stall is not a kink.
        """
        if self.problem.law.kink is None:
            return
        m = len(counts)
        cand, start = np.full(m, np.inf), np.zeros(m, dtype=int)
        for q in np.flatnonzero(np.isfinite(stalled)):
            if stalled[q] < cand[r_loc[q]]:
                cand[r_loc[q]], start[r_loc[q]] = stalled[q], q
        todo = np.flatnonzero(cand < self.best_obj[first : first + m])
        if not len(todo):
            return
        zk, fk, ok = polish_on_kink(self.problem, z[start[todo]], counts[todo])
        for q, i in enumerate(todo):
            if ok[q] and fk[q] < self.best_obj[first + i]:
                rr = first + i
                self.best_obj[rr], self.best[rr], self.zb[rr] = fk[q], j[start[i]], zk[q]
                self.on_kink[rr] = True

    def _sort(self) -> None:
        """Sort the resamples (failed, converged outside a range, usable); correlate the usable."""
        law = self.law
        ok = np.isfinite(self.best_obj)
        draws = _public(law, self.zb, self.problem.refs)
        # a resample that ends outside a declared range is not a valid fit of the law: failed
        # (validity conditions; a hard constraint was held on its bound by _hold_resamples, so
        # only a held refit that left another constraint range counts here)
        outside = outside_range(law, draws, "validity") | outside_range(law, draws, "constraint")
        self.ranged = ok & outside.any(axis=1)  # converged outside a declared range
        self.converged = ok.copy()
        # per parameter: the share of converged resamples that put it outside its declared range
        self.out_share = outside[ok].mean(axis=0) if ok.any() else np.zeros(self.n_par)
        # resamples that converged outside a range are fits, not failures: they say the data do
        # not pin that parameter (_spread_warnings); the interval uses the ones inside every range
        self.share = float(ok.sum()) / len(ok)  # share of all resamples that converged
        ok &= ~self.ranged
        draws[~ok] = np.nan
        self.ok, self.draws, self.good = ok, draws, draws[ok]
        with np.errstate(all="ignore"):
            zc = np.corrcoef(self.zb[ok].T) if ok.sum() >= 2 else np.zeros((self.n_par,) * 2)
            raw = np.corrcoef(self.good.T) if ok.sum() >= 2 else zc
        self.zc, self.raw = np.clip(np.nan_to_num(zc), -1, 1), np.clip(np.nan_to_num(raw), -1, 1)


def _bounds(res, problem, tab, fits: _Resamples, cluster, ci_prob, ci_method, warns):
    """``(bounds (P, 2), one_step)``: the interval of each parameter (NaN: none), warnings added.

    ``one_step`` says whether a BCa jackknife took one Newton step per left-out unit.
    """
    law, good, n_boot = res.law, fits.good, len(fits.ok)
    one_step = False
    if fits.share < MIN_CONVERGED_SHARE or len(good) < 2:
        # Too few usable resamples (e.g. a 4-row table and a 3-parameter law): their spread
        # says nothing about the parameters' uncertainty, so there is no interval.
        bounds = np.full((len(law.params), 2), np.nan)
        warns.append(
            f"bootstrap interval n/a: only {int(fits.ok.sum())} of {n_boot} resamples converged "
            f"({fits.share:.0%}, below the {MIN_CONVERGED_SHARE:.0%} needed; "
            f"{int(fits.degenerate.sum())} had no more distinct design points than parameters, "
            f"{int(fits.ranged.sum())} left a declared range)."
        )
    elif ci_method == "bca":
        one_step = fits.large and _clusters(tab, cluster)[1] > JACK_REFITS
        jack = (_jackknife_linear if one_step else _jackknife)(problem, res, tab, cluster)
        theta = np.array([res.params[n] for n in law.param_names])
        bounds = _bca(good, theta, jack, ci_prob)
    else:
        bounds = np.quantile(good, [(1 - ci_prob) / 2, (1 + ci_prob) / 2], axis=0).T
    pinned = set(res.diagnostics.get("at_bound", ()))
    for i, name in enumerate(law.param_names):
        lo, hi = bounds[i]
        width = hi - lo
        if np.isfinite(width) and width <= 1e-9 * max(abs(lo), abs(hi)) and name not in pinned:
            # every usable resample gave the same value, yet the fit does not pin the parameter
            # (on a bound): the resamples did not vary the data that decide it
            bounds[i] = np.nan
            warns.append(
                f"bootstrap interval of {name} n/a: all {int(fits.ok.sum())} usable resamples "
                f"gave the same value {lo:.6g} (a zero-width interval for a parameter that is "
                "not pinned on a bound)."
            )
    return bounds, one_step


def _boot_diagnostics(law, fits: _Resamples, cluster, boot_starts, jackknife):
    """The bootstrap's diagnostics (``jackknife``: how BCa took its jackknife values)."""
    iu = np.triu_indices(len(law.params), 1)
    names = law.param_names
    return {
        "n_boot": len(fits.ok),
        "boot_failed": int((~fits.ok).sum()),
        "boot_converged_share": fits.share,
        "boot_out_of_range": int(fits.ranged.sum()),
        "boot_out_of_range_share": {
            name: float(fits.out_share[i]) for i, name in enumerate(names) if fits.out_share[i]
        },
        "boot_degenerate": int(fits.degenerate.sum()),
        "resample": f"clusters of {cluster!r}" if cluster else "rows",
        "boot_starts": int(boot_starts),
        "boot_warm_start_best": float(np.mean(fits.best == 0)),
        "boot_screened_on_rows": None if fits.screening is None else int(fits.screening.n),
        "boot_polished": int(fits.polished.sum()),
        "boot_on_kink": int(fits.on_kink.sum()),
        "bca_jackknife": jackknife,
        "boot_corr_max_internal": float(np.max(np.abs(fits.zc[iu]))) if len(iu[0]) else 0.0,
        "boot_corr_max_raw": float(np.max(np.abs(fits.raw[iu]))) if len(iu[0]) else 0.0,
    }


def _floor_warnings(law, bounds: np.ndarray, ci_prob: float, warns: list[str]) -> None:
    """Say when an irreducible loss's interval reaches 0: the data bound it from above only.

    The resamples stay inside the floor's range, so it is not listed as unidentified (its draws
    carry the trade-off with the other terms into predictions and allocations), but its value
    alone means little: on Gemstones, L0 anywhere in [0, 1] fits almost as well, with the depth
    exponent moving from 0.13 to 0.26.
    """
    from .report import FLOOR_LINE

    for i, p in enumerate(law.params):
        lo, hi = bounds[i]
        if p.kind == "floor" and p.bounds[0] == 0 and np.isfinite(hi) and lo <= 1e-3 * hi:
            warns[:] = [w for w in warns if not (w.startswith(f"{p.name} = ") and FLOOR_LINE in w)]
            warns.append(
                f"{p.name}'s {ci_prob:.0%} interval reaches 0: {FLOOR_LINE} "
                f"({p.name} <= {hi:.3g}), so its value is not identified; the draws carry its "
                f"trade-off with the other terms into predictions and allocations."
            )


def _spread_warnings(law, fits: _Resamples, ci_prob, warns) -> list[str]:
    """Add the warnings on failed, out-of-range and correlated resamples; the unpinned names."""
    ok, n_boot, zc = fits.ok, len(fits.ok), fits.zc
    if (~ok).any() and fits.share >= MIN_CONVERGED_SHARE:
        warns.append(
            f"{int((~fits.converged).sum())} of {n_boot} bootstrap resamples failed "
            f"({int(fits.degenerate.sum())} with no more distinct design points than parameters, "
            f"the rest not converged) and {int(fits.ranged.sum())} converged outside a declared "
            f"range; intervals use the {int(ok.sum())} others ({ok.mean():.0%})."
        )
    unpinned = []  # resamples often outside the declared range: the parameter is not identified
    for i, p in enumerate(law.params):
        if fits.out_share[i] > (1 - ci_prob) / 2:
            unpinned.append(p.name)
            warns.append(
                f"{fits.out_share[i]:.0%} of the converged bootstrap resamples put {p.name} "
                f"outside its declared range [{p.bounds[0]:g}, {p.bounds[1]:g}]: the data do not "
                f"pin {p.name} down (its interval uses the resamples inside the range)."
            )
    for i, j in zip(*np.triu_indices(len(law.params), 1), strict=True):
        if abs(zc[i, j]) > 0.99:
            a, b = law.param_names[i], law.param_names[j]
            warns.append(
                f"bootstrap draws of {a} and {b} correlate at {zc[i, j]:+.3f} "
                f"(reference-pinned coordinates): the data pin down a combination of them "
                f"better than either alone."
            )
    return unpinned


def _hold_resamples(
    problem: Problem, zb: np.ndarray, counts: np.ndarray, best_obj: np.ndarray
) -> None:
    """Hold resamples that left a hard-constraint range on the bound (in place).

    The resample's parameters outside a ``range_kind="constraint"`` range are held at the
    nearest bound and the others refitted from its solution, weighted by its counts (the same
    active set as :func:`scalefit.fit.build.hold_constraints`, one step); a refit that does not
    converge marks the resample failed.
    """
    law = problem.law
    if not any(p.range_kind == "constraint" for p in law.params):
        return
    theta = _public(law, zb, problem.refs)
    out = outside_range(law, theta, "constraint")
    lo, hi = np.array([p.bounds for p in law.params], dtype=float).T
    clipped = np.clip(theta, lo, hi)  # every value moved to its nearest bound
    variants: dict[tuple, list[int]] = {}
    for i in np.flatnonzero(out.any(axis=1) & np.isfinite(best_obj)):
        held = tuple((p.name, float(clipped[i, c])) for c, p in enumerate(law.params) if out[i, c])
        variants.setdefault(held, []).append(int(i))
    for held, rows in variants.items():
        sub = problem.subset(law=law.fixing(dict(held)))
        red = sub.law
        cols = [law.param_names.index(n) for n in red.param_names]
        starts = [dict(zip(red.param_names, clipped[i, cols].tolist(), strict=True)) for i in rows]
        z0 = np.array([red.to_internal(start, sub.refs) for start in starts])
        z, obj, conv, _ = solve_many(sub, z0, counts[rows], progress=False)
        for q, i in enumerate(rows):
            if conv[q] and np.isfinite(obj[q]):
                values = {k: float(v) for k, v in red.to_public(z[q], sub.refs).items()}
                zb[i] = law.to_internal({**dict(held), **values}, problem.refs)
                best_obj[i] = obj[q]
            else:
                best_obj[i] = np.inf


#: Large tables refit every jackknife value (BCa) when they have at most this many rows or
#: clusters; above, each left-out unit is one Newton step from the optimum.
JACK_REFITS = 256
#: A screened random start whose subsample objective exceeds the warm start's by more than this
#: many standard errors (of the sum of per-row differences) is not polished on every row.
SCREEN_Z = 4.0
#: Screened solutions whose internal coordinates all agree within this relative distance lie in
#: one basin.
BASIN_RTOL = 1e-3


def _screened(problem: Problem, screening: Problem, z0: np.ndarray, counts: np.ndarray, k: int):
    """One group of resamples of a large table, with the random starts screened on a subsample.

    ``z0`` holds ``k`` starts per resample (the warm start first), ``counts`` the group's
    resample counts. Every start is solved on the subsample rows (``screening.rows``) weighted by
    the resample's counts there; the warm start is solved on every row. The best screened random
    start that lies outside the warm start's screened basin is polished on every row unless its
    subsample objective is clearly worse: more than :data:`SCREEN_Z` standard errors above the
    warm start's, the standard error taken from the spread of the per-row differences (the
    subsample is a random sample of the resample's rows, so a basin that is better on every row
    is missed with probability below about 3e-5). When the warm start fails on every row, the
    best converged screened start is polished whatever its basin.

    Returns
    -------
    tuple
        ``(resample, start, z, objective, converged, polished)``: one entry per full-row solve
        (every resample's warm start, then the polished starts; ``start`` indexes ``z0`` within
        the resample) and a per-resample flag saying whether a start was polished.
    """
    m = len(counts)
    sub = counts[:, screening.rows]
    zs, fs, cs, _ = solve_many(screening, z0, sub, weight_index=np.repeat(np.arange(m), k))
    zs, fs = zs.reshape(m, k, -1), fs.reshape(m, k)
    ok = cs.reshape(m, k) & np.isfinite(fs)
    zw, fw, cw, _ = solve_many(problem, z0[::k], counts)
    warm_ok = cw & np.isfinite(fw)
    near = np.abs(zs[:, 1:] - zs[:, :1]) <= BASIN_RTOL * (1.0 + np.abs(zs[:, :1]))
    same = near.all(axis=2) & ok[:, :1]
    cand = np.where(ok[:, 1:] & ~(same & warm_ok[:, None]), fs[:, 1:], np.inf)
    c = 1 + np.argmin(cand, axis=1)
    polish = np.isfinite(cand[np.arange(m), c - 1])
    test = np.flatnonzero(polish & warm_ok & ok[:, 0])
    if len(test):
        pts = np.concatenate([zs[test, 0], zs[test, c[test]]])
        resid = screening.solve_chunks(pts, keys=("resid",), max_iter=0)["resid"]
        rho, _, _ = robust_rho(np, screening.loss, screening.delta)
        w = sub[test] if screening.weights is None else sub[test] * screening.weights[None, :]
        d = w * (rho(resid[len(test) :]) - rho(resid[: len(test)]))
        worse = d.sum(axis=1) > SCREEN_Z * np.sqrt(d.shape[1]) * d.std(axis=1)
        polish[test[worse]] = False
    pi = np.flatnonzero(polish)
    zp, fp, cp, _ = solve_many(problem, zs[pi, c[pi]], counts, weight_index=pi)
    return (
        np.concatenate([np.arange(m), pi]),
        np.concatenate([np.zeros(m, dtype=int), c[pi]]),
        np.concatenate([zw, zp]),
        np.concatenate([fw, fp]),
        np.concatenate([cw, cp]),
        polish,
    )


def _jackknife_linear(
    problem: Problem, res: FitResult, tab: pd.DataFrame, cluster: str | None
) -> np.ndarray:
    """Leave-one-out (or leave-one-cluster-out) values from one Newton step each, in raw units.

    For large tables, where a refit per row would cost one full-table solve per row: leaving
    row ``i`` out moves the optimum ``z`` by ``H^-1 g_i`` to first order (``H`` the Hessian of the
    objective at ``z``, ``g_i = w_i rho'(r_i) J_i`` the row's term of the gradient, ``J_i`` its
    residual's gradient, :func:`~scalefit.fit.checks.jacobian`), the infinitesimal jackknife.
    Its BCa acceleration differs from the refitted jackknife's by terms of relative order
    ``1/n``. Time and memory are linear in the rows.
    """
    from .checks import jacobian

    law = res.law
    z = np.asarray(res.internal, dtype=float)
    p = len(z)
    jac = jacobian(problem, z)  # (rows, P)
    psi = robust_rho(np, problem.loss, problem.delta)[1](problem.local(z)["resid"][: problem.n])
    w = np.ones(problem.n) if problem.weights is None else problem.weights
    g = (w * psi)[:, None] * jac
    if cluster is not None:
        codes, n_groups = _clusters(tab, cluster)
        gc = np.zeros((n_groups, p))
        np.add.at(gc, codes, g)
        g = gc
    h = problem.curvature(z)["h_internal"]
    try:
        dz = np.linalg.solve(h, g.T).T
    except np.linalg.LinAlgError:
        dz = g @ np.linalg.pinv(h).T
    return _public(law, z[None, :] + dz, problem.refs)


def _jackknife(
    problem: Problem, res: FitResult, tab: pd.DataFrame, cluster: str | None
) -> np.ndarray:
    """Leave-one-out (or leave-one-cluster-out) refits from the optimum, in raw units."""
    law = res.law
    codes, m = _clusters(tab, cluster)
    codes = np.arange(m) if codes is None else codes  # each row its own unit
    warm = np.asarray(res.internal, dtype=float)
    z = np.empty((m, len(warm)))
    for c in range(0, m, CHUNK):
        leave = np.arange(c, min(c + CHUNK, m))
        # Leave-one-out weights for this chunk only (linear memory in the rows).
        w = (codes[None, :] != leave[:, None]).astype(float)
        z0 = np.repeat(warm[None], len(leave), axis=0)
        z[leave], _, _, _ = solve_many(problem, z0, w, progress=False)
    return _public(law, z, problem.refs)


def _public(law, z: np.ndarray, refs) -> np.ndarray:
    """Public parameter values (B, P) of internal points ``z`` (B, P)."""
    pub = law.to_public(z, refs)
    return np.column_stack([np.asarray(pub[name], dtype=float) for name in law.param_names])
