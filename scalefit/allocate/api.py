"""``allocate``: compute-optimal and practical allocations with uncertainty from draws."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..core._readonly import ReadOnlyMappings
from ..core._validation import Interval, constraints, spelled, validate
from ..core.accounting import flops_text
from ..core.errors import NoRecommendationWarning, ScaleFitError
from ..laws import Law, get_law
from . import misfit
from .misfit import Calibration
from .practical import Constraints, best_widths, candidates, depth_grid, evaluate, rank
from .solve import solve
from .space import Accounting, Space

QUANTITIES = ("depth", "width", "tokens", "params", "loss")


@dataclass
class Source:
    """A law with its point estimate and (optionally) draws, all in raw units."""

    law: Law
    point: dict[str, float]
    draws: dict[str, np.ndarray] | None
    prob: float
    not_identified: tuple[str, ...] = ()


def resolve(
    source: Any,
    params: dict | None = None,
    law_options: dict | None = None,
    ci_prob: float | None = None,
) -> Source:
    """Turn a FitResult, a law name or a :class:`Law` (with ``params``) into a :class:`Source`.

    Draws with a non-finite value are dropped (failed bootstrap resamples are NaN rows).
    """
    from ..fit import FitResult

    if isinstance(source, FitResult):
        if params is not None:
            raise ScaleFitError("pass either a FitResult or params, not both.")
        law = source.law
        point = {k: float(v) for k, v in source.params.items()}
        try:
            _check_allocatable(law, point)
        except ScaleFitError as exc:
            failed = source.diagnostics.get("checks_failed") or []
            if source.converged or not failed:
                raise
            raise ScaleFitError(
                f"the {law.name!r} fit did not converge ({'; '.join(failed)}), so it has no "
                f"allocation: {exc}"
            ) from None
        draws = None
        if source.draws is not None and len(source.draws):
            d = np.asarray(source.draws, dtype=float)
            d = d[np.all(np.isfinite(d), axis=1)]
            if not len(d):
                raise ScaleFitError(
                    f"the {law.name!r} result has {len(source.draws)} draws and none is usable "
                    "(all failed); re-run the bootstrap or pass use_draws=False."
                )
            draws = {k: d[:, i] for i, k in enumerate(source.params)}
        ci_prob = source.ci_prob if ci_prob is None else ci_prob
        unknown = tuple(source.not_identified)
    else:
        law = get_law(source, **(law_options or {}))
        if params is None:
            raise ScaleFitError(
                f"law {law.name!r}: give parameter values "
                f"({spelled('params=...', '--params k=v,...')})."
            )
        missing = sorted(set(law.param_names) - set(params))
        extra = sorted(set(params) - set(law.param_names))
        if missing or extra:
            raise ScaleFitError(
                f"law {law.name!r} takes parameters {', '.join(law.param_names)}"
                f"; missing {missing}, unknown {extra}."
            )
        point = {k: float(params[k]) for k in law.param_names}
        bad = [k for k, v in point.items() if not np.isfinite(v)]
        if bad:
            raise ScaleFitError(f"law {law.name!r}: parameter(s) {bad} must be finite numbers.")
        _check_allocatable(law, point)
        draws, ci_prob = None, 0.95 if ci_prob is None else ci_prob
        unknown = ()
    validate("allocate", locals(), {"ci_prob": [Interval(float, 0, 1, closed="neither")]})
    return Source(law, point, draws, float(ci_prob), unknown)


def _check_allocatable(law, point: dict[str, float]) -> None:
    """Refuse parameter values under which no compute-optimal allocation exists.

    Coefficients, positive scales and floors must be positive, and every exponent positive: with
    a non-positive exponent the loss does not fall as that resource grows, so there is nothing to
    trade off and any "optimum" would sit at an arbitrary bound.
    """
    for p in law.params:
        v = point[p.name]
        if p.kind == "floor" and v == 0:  # a floor that ran to its bound: allowed, no trade-off
            continue
        if p.kind in ("coef", "positive", "floor", "exponent") and not v > 0:
            raise ScaleFitError(
                f"law {law.name!r}: parameter {p.name!r} must be positive to allocate compute "
                f"(a {p.kind}). Got {float(v)!r}."
            )


def check_budgets(budgets, where: str = "allocate") -> np.ndarray:
    """Budgets as a 1-D float array; each must be a finite positive number of FLOPs."""
    b = np.atleast_1d(np.asarray(budgets, dtype=float))
    if b.ndim != 1 or b.size == 0 or not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise ScaleFitError(
            f"The 'budgets' parameter of {where} must be finite positive FLOP counts. "
            f"Got {budgets!r} instead."
        )
    return b


@dataclass(frozen=True)
class Allocation(ReadOnlyMappings):
    """Result of :func:`allocate` (all tables are DataFrames; nothing is printed).

    Attributes
    ----------
    summary : DataFrame
        One row per budget: the recommended practical shape (``depth, width, tokens, params,
        loss`` with ``loss_lo/loss_hi`` under the draws; with draws the shape minimising the
        expected loss, with ``expected_loss``, ``regret_mean``, ``regret_p95``; see
        :func:`scalefit.allocate.practical.rank`), the set of practical shapes
        within ``eps`` (``set_*``), ``flat``, the continuous optimum (``*_star``) with intervals
        from the draws (``*_star_lo``, ``*_star_hi``, ``*_star_median``).
    continuous : DataFrame
        The continuous solution of the point estimate per budget (see :func:`solve`).
    draws : DataFrame or None
        The continuous solution of every draw at every budget.
    shapes : dict of float -> DataFrame
        Ranked practical candidates per budget (shape laws only).
    warnings : list of str
        What the caller should know before using the numbers (one sentence each).
    not_identified : tuple of str
        Parameters the fit does not pin down (:attr:`scalefit.FitResult.not_identified`); when
        any is named, no shape is ``recommended``.

    Notes
    -----
    Two columns of :attr:`summary` say whether a row's shape is a recommendation (shape laws):
    ``boundary`` is True when the optimum sits on the edge of the searched depths (the point
    estimate's continuous optimum on a depth bound, or the best practical shape at ``min_depth``
    or ``max_depth`` with more than ``(1 - ci_prob) / 2`` of the draws' optima on that bound), so
    the law would go past the edge and the shape there is an artefact of the search, not an
    optimum (``boundary_share``: the share of draws whose optimum sits on a depth bound);
    ``recommended`` is True only for a shape that is neither flat, nor on a boundary, nor from
    a fit with a parameter in :attr:`not_identified`, nor outside the fitted table: ``beyond_data``
    names a depth or width outside the range the fit saw (empty when inside, or for a law given
    by its parameters).
    """

    law: str
    kind: str
    budgets: np.ndarray
    accounting: Accounting
    constraints: Constraints
    eps: float
    ci_prob: float
    summary: pd.DataFrame
    continuous: pd.DataFrame
    draws: pd.DataFrame | None = None
    shapes: dict[float, pd.DataFrame] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    not_identified: tuple[str, ...] = ()
    interval: str = ""
    calibration: Calibration | None = None

    def alternatives(self, budget: float, *, within: str = "interval") -> pd.DataFrame:
        """Practical shapes whose loss lies within the best one's interval (or ``"eps"``)."""
        frame = self.shapes[float(budget)]
        return frame[frame["within_interval" if within == "interval" else "within_eps"]]


def allocate(
    source: Any,
    budgets,
    *,
    params: dict | None = None,
    law_options: dict | None = None,
    accounting: Accounting | None = None,
    head_dim: int = 64,
    min_depth: int = 1,
    max_depth: int | None = None,
    aspect_max: float | None = None,
    eps: float = 1e-3,
    ci_prob: float | None = None,
    use_draws: bool = True,
    draw_sets: bool | None = None,
    interval: str = "calibrated",
) -> Allocation:
    """Compute-optimal allocation of FLOP budgets under a fitted (or given) law.

    Parameters
    ----------
    source : FitResult, str or Law
        A fit result (its draws give the intervals), or a law name/object with ``params``.
    budgets : float or array-like
        Training budgets C in FLOPs (``C = 6 · params · tokens``).
    params : dict, optional
        Parameter values when ``source`` is a law (used exactly as given, never rounded).
    law_options : dict, optional
        Options of a named law (e.g. ``{"form": "power"}``).
    accounting : Accounting, optional
        Parameter accounting for shape laws (default: :func:`default_accounting`).
    head_dim, min_depth, max_depth, aspect_max
        Constraints on practical shapes (depth bounds also bound the continuous search).
    eps : float
        Loss tolerance (nats) defining the near-optimal set and flat-optimum reporting.
    ci_prob : float, optional
        Interval probability (default: the result's ``ci_prob``, else 0.95).
    use_draws : bool
        Use the result's draws for intervals.
    draw_sets : bool, optional
        Compute the near-optimal depth set of every draw (default: only when the point
        estimate's optimum is flat, where the plateau's ends are what the draws describe).
    interval : {"calibrated", "draws"}, default "calibrated"
        What the ``*_star`` intervals include. ``"calibrated"``: the draws' spread plus the law's
        misfit in ``N*`` (:mod:`scalefit.allocate.misfit`: measured out of sample on public
        IsoFLOP sweeps, growing with the distance past the fit's largest training compute), carried
        to tokens at the same budget and to depth and width along the law's own frontier; where
        it cannot be applied (a law with given parameters, a fit without compute) the draws alone,
        and :attr:`Allocation.interval` says why. ``"draws"``: the draws alone (the parameters'
        uncertainty, not the law's error). Either way :attr:`Allocation.interval` names it.

    Returns
    -------
    Allocation

    Warns
    -----
    NoRecommendationWarning
        Once, when a law of depth and width gets no recommended shape at any budget (boundary
        solutions, a parameter the fit does not pin down, a flat optimum): its ``summary`` then
        holds the searched shapes, not an answer.

    Examples
    --------
    >>> a = allocate("chinchilla", [5.76e23], params=dict(
    ...     E=1.69, A=406.4, B=410.7, alpha=0.3392, beta=0.2849))
    >>> round(float(a.summary["params"].iloc[0]) / 1e9, 1)
    40.3
    """
    src = resolve(source, params, law_options, ci_prob)
    budgets = check_budgets(budgets)
    validate("allocate", {"interval": interval}, constraints("interval"))
    cons = Constraints(head_dim, min_depth, max_depth, aspect_max)
    space = Space.of(src.law, accounting)
    validate("allocate", {"eps": eps}, {"eps": [Interval(float, 0, None, closed="neither")]})
    depth_range = (float(cons.min_depth), float(cons.max_depth or 1e4))
    cont, draws = _optima(space, src, budgets, depth_range, eps, use_draws, draw_sets)
    frames = _practical(space, src, cont, draws, budgets, cons, eps, depth_range)
    rows, shapes = [], {}
    for i, c in enumerate(budgets):
        row = {"budget": c}
        if space.kind == "shape":
            frame = frames[i]
            shapes[float(c)] = frame
            row.update(_practical_row(frame, bool(cont["flat"].iloc[i])))
            row.update(_boundary(cont, draws, i, len(budgets), row["depth"], cons, src.prob))
        else:
            row.update({q: cont[q].iloc[i] for q in ("tokens", "params", "loss")})
            row.update(depth=np.nan, width=np.nan, loss_lo=np.nan, loss_hi=np.nan, flat=False)
            row.update(boundary=False, boundary_share=np.nan)
            if draws is not None and np.isfinite(row["params"]):
                _loss_band(space, src, row, c)
        row.update(_star(cont.iloc[i], draws, i, len(budgets), src.prob))
        if row.get("flat"):  # the row describes the optimal set: N*, T*, L* (depth/width empty)
            row.update({q: row[f"{q}_star"] for q in ("tokens", "params", "loss")})
            row.update(
                loss_lo=row.get("loss_star_lo", np.nan),
                loss_hi=row.get("loss_star_hi", np.nan),
                expected_loss=np.nan,
                regret_mean=np.nan,
                regret_p95=np.nan,
            )
        row["recommended"] = bool(
            space.kind == "shape"
            and not row.get("flat")
            and not row["boundary"]
            and not src.not_identified
            and np.isfinite(row.get("depth", np.nan))
        )
        rows.append(row)
    notes = _mark_beyond_data(rows, source)
    alloc = Allocation(
        src.law.name,
        space.kind,
        budgets,
        space.accounting,
        cons,
        eps,
        src.prob,
        pd.DataFrame(rows),
        cont,
        draws,
        shapes=shapes,
        not_identified=src.not_identified,
    )
    alloc = _with_interval(alloc, space, src, source, interval, depth_range, eps)
    alloc = dataclasses.replace(alloc, warnings=_warnings(alloc) + notes)
    _warn_if_nothing_recommended(alloc)
    return alloc


def _mark_beyond_data(rows: list[dict], source: Any) -> list[str]:
    """Name, in ``beyond_data``, a best shape whose depth or width the fitted table never had.

    Such a shape extrapolates the law in shape, not only in size, so it is not ``recommended``.
    Returns one warning per budget whose tokens per parameter leave the fitted rows' range (an
    extrapolation said, not refused). A law given by parameters has no range to compare with.
    """
    from ..fit import FitResult

    rng = source.conventions.get("data_range", {}) if isinstance(source, FitResult) else {}
    for row in rows:
        out = []
        for q in ("depth", "width"):
            v = row.get(q, np.nan)
            if (
                q in rng
                and np.isfinite(v)
                and not rng[q][0] * (1 - 1e-9) <= v <= rng[q][1] * (1 + 1e-9)
            ):
                out.append(f"{q} {v:g} outside the fitted {rng[q][0]:g}-{rng[q][1]:g}")
        row["beyond_data"] = "; ".join(out)
        row["recommended"] = bool(row.get("recommended")) and not out
    notes = []
    for row in rows if "tokens_per_param" in rng else ():
        lo, hi = rng["tokens_per_param"]
        ratio = row.get("tokens", np.nan) / row.get("params", np.nan)
        if np.isfinite(ratio) and not lo * (1 - 1e-9) <= ratio <= hi * (1 + 1e-9):
            notes.append(
                f"at {flops_text(row['budget'])} FLOP the optimum trains {ratio:.3g} tokens per "
                f"parameter, outside the fitted rows' {lo:.3g}-{hi:.3g}: the law is extrapolated "
                f"in tokens per parameter there."
            )
    return notes


def _warn_if_nothing_recommended(alloc: Allocation) -> None:
    """One :class:`NoRecommendationWarning` when a shape law recommends no shape at any budget."""
    if alloc.kind == "shape" and not alloc.summary["recommended"].any():
        import warnings

        why = " ".join(alloc.warnings) or "see the 'recommended' and 'boundary' columns."
        msg = f"allocate recommends no shape at any budget: {why}"
        warnings.warn(msg, NoRecommendationWarning, stacklevel=3)


def _with_interval(alloc, space, src, source, interval, depth_range, eps) -> Allocation:
    """Widen the ``*_star`` intervals by the law's misfit (``interval="calibrated"``)."""
    from ..fit import FitResult

    pct = f"{100 * src.prob:g}%"
    draws = (
        "" if alloc.draws is None else f"over {int(alloc.draws['set'].max()) + 1} draws of the fit"
    )
    if interval == "draws":
        text = (
            f"{pct} {draws}: the parameters' uncertainty only, not the law's misfit"
            if draws
            else ""
        )
        return dataclasses.replace(alloc, interval=text or "none (no draws)")
    if isinstance(source, FitResult):
        cal, c_max, why = misfit.for_fit(source.conventions)
    else:
        cal, c_max, why = None, np.nan, "a law with given parameters has no training compute"
    if cal is None:
        base = f"{pct} {draws}" if draws else "none (no draws)"
        return dataclasses.replace(alloc, interval=f"{base}; not calibrated: {why}")
    summary = misfit.widen(
        alloc.summary, cal, c_max, src.prob, _elasticity(space, src, alloc, depth_range, eps)
    )
    for side in ("lo", "hi"):  # the searched depths bound the optimum, widened or not
        if f"depth_star_{side}" in summary:
            summary[f"depth_star_{side}"] = summary[f"depth_star_{side}"].clip(*depth_range)
    text = (
        f"{pct} calibrated: {draws + ' plus ' if draws else ''}the law's misfit in N*, "
        f"{cal.describe()}; carried to tokens at the same budget"
        + (" and to depth and width along the law's own frontier" if space.kind == "shape" else "")
        + f"; loss intervals: {'the draws' if draws else 'none'}"
    )
    return dataclasses.replace(alloc, summary=summary, interval=text, calibration=cal)


def _elasticity(space, src, alloc, depth_range, eps) -> dict[str, np.ndarray]:
    """Elasticities d ln q* / d ln N* along the point estimate's frontier, per budget."""
    one = {k: np.array([v]) for k, v in src.point.items()}
    step = 0.25
    sides = [
        solve(space, one, alloc.budgets * np.exp(s), depth_range=depth_range, eps=eps, sets=False)
        for s in (-step, step)
    ]
    dn = np.log(sides[1]["params"].to_numpy(float) / sides[0]["params"].to_numpy(float))
    out = {"params": np.ones(len(alloc.budgets)), "tokens": np.ones(len(alloc.budgets))}
    for q in ("depth", "width"):
        if q in sides[0]:
            dq = np.log(sides[1][q].to_numpy(float) / sides[0][q].to_numpy(float))
            with np.errstate(divide="ignore", invalid="ignore"):
                out[q] = np.nan_to_num(dq / dn, nan=1.0)
    return out


def _optima(space, src, budgets, depth_range, eps, use_draws, draw_sets) -> tuple:
    """The continuous optimum of the point estimate and (with draws) of every draw."""
    one = {k: np.array([v]) for k, v in src.point.items()}
    cont = solve(space, one, budgets, depth_range=depth_range, eps=eps, sets=True)
    if not use_draws or src.draws is None:
        return cont, None
    hint = np.log(np.stack([_finite_or(cont, c) for c in _coords(space)], axis=1))
    if draw_sets is None:  # per-draw sets only feed the summary when the optimum is flat
        draw_sets = bool(cont["flat"].any()) if "flat" in cont else False
    return cont, solve(
        space, src.draws, budgets, depth_range=depth_range, eps=eps, sets=draw_sets, hint=hint
    )


def _coords(space: Space) -> tuple[str, ...]:
    return ("depth", "params") if space.kind == "shape" else ("params",)


def _finite_or(cont: pd.DataFrame, col: str) -> np.ndarray:
    """Column of the continuous solution usable as a start (flat rows: the set's upper end)."""
    v = cont[col].to_numpy(dtype=float)
    if col == "depth" and "flat_depth_hi" in cont:
        v = np.where(np.isfinite(v), v, cont["flat_depth_hi"].to_numpy(dtype=float))
    return np.where(np.isfinite(v) & (v > 0), v, 1.0)


def _practical(space, src, cont, draws, budgets, cons, eps, depth_range) -> list[pd.DataFrame]:
    """Ranked practical candidates per budget (shape laws; empty list otherwise)."""
    if space.kind != "shape":
        return []
    cols = [c for c in ("depth_hi", "depth", "flat_depth_hi") if c in cont]
    top = cont[cols].max(axis=1, skipna=True).to_numpy(dtype=float)
    caps = np.where(np.isfinite(top), 1.5 * top + 2, depth_range[1])
    n = cont["params"].to_numpy(dtype=float)
    y_hint = np.where(
        np.isfinite(n), np.log(np.where(np.isfinite(n), n, 1.0)), 0.5 * np.log(budgets / 120.0)
    )
    lo, hi = space.box(budgets, depth_range)
    depths = [depth_grid(cap, cons) for cap in caps]
    widths = best_widths(space, src.point, budgets, depths, y_hint, (lo[:, 1], hi[:, 1]))
    floors = [None] * len(budgets)
    if draws is not None:  # each draw's own continuous optimum (rows: draw-major, then budget)
        loss = draws["loss"].to_numpy(dtype=float)
        floors = [loss[i :: len(budgets)] for i in range(len(budgets))]
    return [
        rank(space, candidates(space, src.point, c, d, w, cons), src.draws, src.prob, eps, f)
        for c, d, w, f in zip(budgets, depths, widths, floors, strict=True)
    ]


def _practical_row(frame: pd.DataFrame, flat: bool) -> dict:
    best = frame.iloc[0]
    near = frame[frame["within_eps"]]
    row = {q: best[q] for q in ("depth", "width", "tokens", "params", "loss")}
    row.update(
        loss_lo=best["loss_lo"],
        loss_hi=best["loss_hi"],
        expected_loss=best["expected_loss"],
        regret_mean=best["regret_mean"],
        regret_p95=best["regret_p95"],
        flat=flat,
        set_depth_lo=near["depth"].min(),
        set_depth_hi=near["depth"].max(),
        set_width_lo=near["width"].min(),
        set_width_hi=near["width"].max(),
        n_within_eps=len(near),
        n_within_interval=int(frame["within_interval"].sum()),
    )
    if flat:  # the law does not pick a depth: report the set, not a point
        row.update(depth=np.nan, width=np.nan)
    return row


def _boundary(cont, draws, i: int, n_bud: int, depth: float, cons: Constraints, prob) -> dict:
    """Whether budget ``i``'s optimum sits on the edge of the searched depths (see Allocation).

    A practical shape at ``min_depth`` (or ``max_depth``) counts when the point estimate's
    continuous optimum is on the bound, or when more than the interval's tail of draws is.
    """
    on_bound = bool(cont["depth_at_bound"].iloc[i]) if "depth_at_bound" in cont else False
    edges = [cons.min_depth] + ([cons.max_depth] if cons.max_depth else [])
    at_edge = bool(np.isfinite(depth) and any(int(depth) == int(e) for e in edges))
    share = np.nan
    if draws is not None and "depth_at_bound" in draws:
        share = float(draws["depth_at_bound"].to_numpy(dtype=bool)[i::n_bud].mean())
    flat = bool(cont["flat"].iloc[i]) if "flat" in cont else False
    draws_on_bound = bool(np.isfinite(share) and share > (1 - prob) / 2)
    boundary = (on_bound or (at_edge and draws_on_bound)) and not flat
    return {"boundary": boundary, "boundary_share": share}


def _loss_band(space, src, row, budget) -> None:
    vals = evaluate(space, src.draws, pd.DataFrame([row])[["params", "tokens"]])[:, 0]
    lo, hi = np.nanquantile(vals, [(1 - src.prob) / 2, (1 + src.prob) / 2])
    row.update(loss_lo=lo, loss_hi=hi)


def _star(cont_row, draws, i, n_bud, prob) -> dict:
    """Continuous optimum of the point estimate, with medians and intervals from draws."""
    out = {}
    flat_names = {"flat_depth_hi": "depth_max_opt", "flat_width_lo": "width_at_depth_max_opt"}
    cols = [q for q in QUANTITIES if q in cont_row] + [q for q in flat_names if q in cont_row]
    for q in cols:
        name = flat_names.get(q, f"{q}_star")
        out[name] = cont_row[q]
        if draws is not None and q in draws:
            v = draws[q].to_numpy(dtype=float)[i::n_bud]
            v = v[np.isfinite(v)]
            qs = np.quantile(v, [(1 - prob) / 2, 0.5, (1 + prob) / 2]) if len(v) else [np.nan] * 3
            out[f"{name}_lo"], out[f"{name}_median"], out[f"{name}_hi"] = qs
    if "flat_depth_lo" in cont_row:
        out["depth_min_opt"] = cont_row["flat_depth_lo"]
    if draws is not None:
        sub = draws.iloc[i::n_bud]
        out["n_draws"] = len(sub)
        out["n_unbounded"] = int(sub["unbounded"].sum())
    return out


def _warnings(alloc: Allocation) -> list[str]:
    """What the caller should know before using the numbers (one sentence each)."""
    out: list[str] = []
    cont = alloc.continuous
    if cont["unbounded"].any():
        bad = alloc.budgets[cont["unbounded"].to_numpy()]
        side = int(cont.loc[cont["unbounded"], "unbounded_side"].iloc[0])
        more = "params and fewer tokens" if side > 0 else "tokens and fewer params"
        out.append(
            f"under the point estimate the loss keeps falling with ever more {more} (tokens per "
            f"parameter outside [1e-3, 1e7]): the fitted law has no usable compute-optimal "
            f"split at {', '.join(f'{b:g}' for b in bad)} FLOP; check its exponents and their "
            f"intervals."
        )
    if alloc.draws is not None and alloc.draws["unbounded"].any():
        share = float(alloc.draws["unbounded"].mean())
        out.append(
            f"{share:.1%} of (draw, budget) pairs have no interior optimum "
            f"(e.g. draws with a non-positive exponent); intervals exclude them."
        )
    if "flat" in cont and cont["flat"].any():
        out.append(
            "the optimum is flat in depth at some budgets: every depth in the "
            "reported range reaches the same loss; the law does not choose one."
        )
    s = alloc.summary
    if "boundary" in s and s["boundary"].any():
        c = alloc.constraints
        edges = f"depth {c.min_depth}" + (f" or {c.max_depth}" if c.max_depth else "")
        bad = ", ".join(flops_text(b) for b in alloc.budgets[s["boundary"].to_numpy(dtype=bool)])
        out.append(
            f"boundary solution at {bad} FLOP: the optimum sits on the edge of the searched "
            f"depths ({edges}), so the law would go past it; the shape there is not an optimum "
            f"and is not recommended."
        )
    if "beyond_data" in s and s["beyond_data"].astype(bool).any():
        hit = s["beyond_data"].astype(bool).to_numpy()
        bad = ", ".join(flops_text(b) for b in alloc.budgets[hit])
        out.append(
            f"at {bad} FLOP the best shape lies outside the fitted table "
            f"({s.loc[hit, 'beyond_data'].iloc[0]}): the law is extrapolated in shape there, so "
            f"it is not recommended; max_depth (--max-depth) keeps the search inside the data."
        )
    if alloc.not_identified:
        out.append(
            f"the fit does not pin down {', '.join(alloc.not_identified)}: no shape is "
            f"recommended; the intervals show how far the optimum moves over the draws."
        )
    return out
