"""Compute-optimal allocation from a curve-fitted law.

A curve fit gives the loss as a function of the schedule areas ``S1``, ``S2`` (and ``params``).
A run trained for ``T`` steps of a declared schedule family (kind, peak lr, warm-up, decay
fraction, final lr; the length is what the allocation chooses) ends at areas ``S1(T)``,
``S2(T)``, so its final loss is a law of ``(params, tokens)`` with ``T = tokens /
tokens_per_step``. :func:`final_loss_law` builds that law; :func:`allocation` hands it to
:func:`scalefit.allocate.allocate` under ``C = 6 · params · tokens`` and solves every bootstrap
draw of the fit the same way, so the intervals come from refits that resampled whole runs.

:func:`final_areas` gives ``S1(T)`` and ``S2(T)`` in closed form: at whole steps (and, for WSD,
a whole number of decay steps) they equal :func:`scalefit.curves.areas` at the last step of
:meth:`Schedule.sequence`, with the same warm-up convention; between whole steps they are the
same expressions, smooth in ``T``, which the solver needs.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..core.errors import ScaleFitError
from ..core.schedule import MAX_STEPS, MOMENTUM, Schedule, parse_schedule
from ..laws import Law
from .api import tokens_per_step as tokens_per_step_of
from .api import warn_new_rate

if TYPE_CHECKING:
    from ..allocate import Allocation

#: Schedule quantities a curve law may read besides ``params`` and ``tokens``.
SCHEDULE_INPUTS = ("S1", "S2", "lr", "step", "peak_lr")


def final_areas(schedule: Schedule, steps, *, momentum: float = MOMENTUM):
    """Areas ``S1`` and ``S2`` after the last update of ``schedule`` run for ``steps`` updates.

    Parameters
    ----------
    schedule : Schedule
        The schedule family (its own ``steps`` is ignored). A WSD decay must have the linear
        or cosine shape (a ``sqrt`` decay has no closed form here).
    steps : array-like
        Run lengths ``T`` (float; whole numbers give the discrete areas exactly).
    momentum : float
        Decay factor of the annealing momentum, in [0, 1).

    Returns
    -------
    (S1, S2) : tuple of arrays
        NaN where the schedule does not fit in ``T`` steps (no step after warm-up, or a WSD
        decay that reaches into the warm-up).

    Examples
    --------
    >>> s = parse_schedule("wsd:lr=1e-3,steps=100,warmup=10,decay=0.2")
    >>> s1, s2 = final_areas(s, [100.0])
    >>> round(float(s1[0]), 6)
    0.085
    """
    if schedule.kind == "wsd" and schedule.shape == "sqrt":
        raise ScaleFitError(
            f"{schedule}: the final areas have a closed form for a linear or cosine WSD decay "
            "only; give shape=linear or shape=cosine."
        )
    t = np.asarray(steps, dtype=float)
    lam, w = float(momentum), float(schedule.warmup)
    peak, fin = schedule.lr, schedule.final_lr
    n = t - w  # updates after warm-up
    warm = peak * (w + 1) / 2 if w else 0.0
    geo = lambda m: lam * (1 - lam**m) / (1 - lam)  # noqa: E731  sum_{j=1..m} lam**j
    with np.errstate(all="ignore"):
        if schedule.kind == "constant":
            s1, s2 = warm + peak * n, np.zeros_like(n)
            ok = n >= 1
        elif schedule.kind == "linear":  # every update after warm-up drops (peak - fin) / n,
            fed = n - (w == 0)  # the first one only after a warm-up (eta_0 = eta_1 without)
            s1 = warm + n * fin + (peak - fin) * (n - 1) / 2
            s2 = (peak - fin) / n / (1 - lam) * (fed - geo(fed))
            ok = n >= 1
        elif schedule.kind == "cosine":  # update W + 1 at the peak, progress (j - 1) / n
            s1 = warm + n * fin + (peak - fin) * (n + 1) / 2
            s2 = (peak - fin) / 2 * _cosine_drops(np.pi / np.where(n >= 1, n, 1.0), n - 1, lam)
            ok = n >= 1
        else:  # wsd: the decay over the last decay * T updates, after the warm-up
            nd = schedule.decay * t
            s1 = warm + peak * n - (peak - fin) * (nd + 1) / 2  # both shapes sum to (D - 1) / 2
            if schedule.shape == "cosine":
                th = np.pi / np.where(nd >= 1, nd, 1.0)
                s2 = (peak - fin) / 2 * _cosine_drops(th, nd, lam)
            else:
                s2 = (peak - fin) / nd / (1 - lam) * (nd - geo(nd))
            ok = (nd >= 1) & (t - nd >= max(w, 1.0))
    return np.where(ok, s1, np.nan), np.where(ok, s2, np.nan)


def _cosine_drops(theta, m, lam: float):
    """The annealing area of a unit cosine whose last drop is the last update.

    ``sum_i d_i (1 - lam^(m-i+1)) / (1 - lam)``, ``d_i = cos((i-1) theta) - cos(i theta)``,
    ``i = 1 .. m``.
    """
    p = lam * np.exp(-1j * theta)
    tail = np.real((1 - np.exp(1j * theta)) * np.exp(1j * m * theta) * p * (1 - p**m) / (1 - p))
    return (1 - np.cos(m * theta) - tail) / (1 - lam)


def last_lr(schedule: Schedule, steps):
    """Learning rate of the last update of ``schedule`` run for ``steps`` updates (float ``T``)."""
    t = np.asarray(steps, dtype=float)
    if schedule.kind == "constant":
        return np.full_like(t, schedule.lr)
    if schedule.kind != "cosine":
        return np.full_like(t, schedule.final_lr)
    n = np.maximum(t - schedule.warmup, 1.0)
    amp = schedule.lr - schedule.final_lr
    return schedule.final_lr + 0.5 * amp * (1 + np.cos(np.pi * (n - 1) / n))


def family(schedule: str | Schedule, *, where: str = "schedule") -> Schedule:
    """A schedule family (no length): ``"wsd:lr=3e-3,warmup=100,decay=0.2,final_lr=0"``.

    A :class:`Schedule` is taken as it is (its ``steps`` is ignored). Text must leave ``steps``
    out: the allocation chooses the length.
    """
    if isinstance(schedule, Schedule):
        return schedule
    if re.search(r"(^|[:,])\s*steps\s*=", str(schedule)):
        raise ScaleFitError(
            f"{where}: the allocation chooses the run's length; leave 'steps' out of "
            f"{str(schedule)[:80]!r}."
        )
    return parse_schedule(str(schedule), steps=MAX_STEPS, where=where)  # steps ignored


def family_text(schedule: Schedule) -> str:
    """The schedule as text, without its length."""
    return re.sub(r"steps=\d+,?", "", str(schedule)).rstrip(",:")


def check_law(law: Law) -> None:
    """Refuse a law that cannot give a final-loss law of ``(params, tokens)``."""
    inputs = set(law.inputs)
    if "params" not in inputs:
        raise ScaleFitError(
            f"law {law.name!r} has no params term (inputs {', '.join(law.inputs)}): it cannot "
            "trade model size against tokens, so it has no compute-optimal allocation; fit "
            "lr_annealing_params or a formula with params."
        )
    if not inputs & set(SCHEDULE_INPUTS):
        raise ScaleFitError(
            f"law {law.name!r} reads no schedule quantity ({', '.join(SCHEDULE_INPUTS)}); "
            "allocate it with `scalefit allocate` (scalefit.allocate.allocate)."
        )
    other = sorted(inputs - {"params", "tokens", *SCHEDULE_INPUTS})
    if other:
        raise ScaleFitError(
            f"law {law.name!r} reads {', '.join(other)}; an allocation from curves supports "
            f"laws of params, tokens and {', '.join(SCHEDULE_INPUTS)} only."
        )


def final_loss_law(
    law: Law, schedule: str | Schedule, *, tokens_per_step: float, momentum: float = MOMENTUM
) -> Law:
    """The final loss of a run under ``schedule`` as a law of ``params`` and ``tokens``.

    Parameters
    ----------
    law : Law
        A curve law with a ``params`` input (e.g. ``lr_annealing_params``).
    schedule : str or Schedule
        The schedule family of the run to be trained (no length).
    tokens_per_step : float
        Tokens per optimiser update: ``steps = tokens / tokens_per_step``.
    momentum : float
        Decay factor of the annealing area the law was fitted with.

    Returns
    -------
    Law
        Same parameters and expression; inputs ``params, tokens``. Parameters of kind
        ``positive`` are relabelled ``free``: one may sit at its bound 0 (e.g. ``C`` when the
        curves show no annealing) without removing the trade-off, which lives in the power-law
        terms that :func:`scalefit.allocate.allocate` checks.
    """
    check_law(law)
    sched = family(schedule)
    if not (np.isfinite(tokens_per_step) and tokens_per_step > 0):
        raise ScaleFitError(f"tokens_per_step must be a number > 0. Got {tokens_per_step!r}.")
    per, lam, inner = float(tokens_per_step), float(momentum), law.features

    def features(xp, x):
        steps = np.asarray(x["tokens"], dtype=float) / per
        s1, s2 = final_areas(sched, steps, momentum=lam)
        out = {**x, "S1": s1, "S2": s2, "step": steps, "lr": last_lr(sched, steps)}
        out["peak_lr"] = np.full_like(steps, sched.lr)
        return {**out, **(inner(xp, out) if inner is not None else {})}

    params = tuple(
        dataclasses.replace(p, kind="free") if p.kind == "positive" else p for p in law.params
    )
    return dataclasses.replace(
        law,
        name=law.name,
        inputs=("params", "tokens"),
        params=params,
        features=features,
        formula=f"{law.formula}, at the last step of {family_text(sched)}",
        spec=None,
    )


@dataclass(frozen=True)
class CurveAllocation:
    """Result of :func:`allocation` (nothing is printed; :meth:`report` gives the text).

    Attributes
    ----------
    summary : DataFrame
        One row per budget: ``budget``, the point estimate's optimum ``params``, ``tokens``,
        ``steps``, ``tokens_per_param`` and ``loss`` (its final loss), with ``*_lo``/``*_hi``
        from the draws (``params``, ``tokens``, ``steps``: the spread of the optimum over the
        refits; ``loss``: the recommended run's final loss under the refits), ``n_draws`` and
        ``schedule`` (the run to train, its length rounded to whole steps).
    schedule : Schedule
        The schedule family (its ``steps`` is a placeholder; :func:`family_text` prints it).
    tokens_per_step : float
    resample : str
        Where the intervals come from (the resampling unit is the run for a curve bootstrap).
    warnings : list of str
    allocation : Allocation
        The underlying :func:`scalefit.allocate.allocate` result.
    """

    law: str
    ci_prob: float
    summary: pd.DataFrame
    schedule: Schedule
    tokens_per_step: float
    resample: str
    warnings: list[str] = field(default_factory=list)
    allocation: Allocation | None = None

    def report(self) -> str:
        """Text a user can act on: per budget, the model size, tokens and schedule to train."""
        pct = f"{self.ci_prob:.0%}"
        lines = [
            f"compute-optimal allocation from curves: law {self.law}, final loss of a run "
            f"under {family_text(self.schedule)} ({self.tokens_per_step:g} tokens per step), "
            "C = 6 params tokens",
            f"intervals ({pct}): {self.resample}",
        ]
        for _, r in self.summary.iterrows():
            lines += [
                "",
                f"budget {r['budget']:.3g} FLOP: params {r['params']:.3g}{_band(r, 'params')}, "
                f"tokens {r['tokens']:.3g}{_band(r, 'tokens')} = {r['steps']:.0f} steps"
                f"{_band(r, 'steps', '{:.0f}')}, {r['tokens_per_param']:.3g} tokens per param",
                f"  final loss {r['loss']:.4g}{_band(r, 'loss', '{:.4g}')} for that run",
                *(
                    [f"  peak lr eta* {r['peak_lr']:.3g}{_band(r, 'peak_lr')} (the fitted optimum)"]
                    if "peak_lr" in r
                    else []
                ),
                f"  train: {r['params']:.3g} params with {r['schedule']}",
            ]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _band(row, q: str, fmt: str = "{:.3g}") -> str:
    from ..core._validation import interval_text

    lo, hi = row.get(q + "_lo", np.nan), row.get(q + "_hi", np.nan)
    return interval_text(row[q], lo, hi, fmt.format)


def allocation(
    result,
    budgets,
    *,
    schedule: str | Schedule | None = None,
    tokens_per_step: float | None = None,
    curves: pd.DataFrame | None = None,
    ci_prob: float | None = None,
) -> CurveAllocation:
    """Model size and tokens that minimise a run's final loss for each FLOP budget.

    Parameters
    ----------
    result : FitResult
        A curve fit (:func:`scalefit.curves.fit_curves`) of a law with a ``params`` term; its
        bootstrap draws (whole runs resampled) give the intervals.
    budgets : float or array-like
        Training budgets C in FLOPs (``C = 6 · params · tokens``).
    schedule : str or Schedule, optional
        Schedule family of the run to be trained, without ``steps``, e.g.
        ``"wsd:lr=3e-3,warmup=100,decay=0.2"``. Default: the schedule the runs of ``curves``
        share.
    tokens_per_step : float, optional
        Tokens per update. Default: the ``tokens_per_step`` of ``curves`` (or its
        tokens/step ratio).
    curves : DataFrame, optional
        The fitted runs' long curves, for the two defaults above.
    ci_prob : float, optional
        Interval probability (default: the fit's ``ci_prob``).

    Returns
    -------
    CurveAllocation
        For a law with a peak-rate optimum (``lr_optimum``) the run is trained at ``eta*`` of
        its size and tokens: the summary adds ``peak_lr`` (with ``peak_lr_lo``/``_hi``: each
        draw's ``eta*`` at its own optimum) and the schedule's ``lr`` is that rate. Other curve
        laws keep the schedule's rate and warn when it lies outside the fitted curves' rates.
    """
    from ..allocate import allocate

    check_law(result.law)
    sched, per = defaults(curves, schedule, tokens_per_step)
    momentum = float(result.conventions.get("curves", {}).get("momentum", MOMENTUM))
    law = final_loss_law(result.law, sched, tokens_per_step=per, momentum=momentum)
    at_optimum = _has_lr_optimum(result)
    if not at_optimum:
        warn_new_rate(result, sched.lr, "allocation")
    source = _at_optimal_rate(result) if at_optimum else result
    alloc = allocate(source.replace(law=law), budgets, ci_prob=ci_prob)
    rows = []
    for _, r in alloc.summary.iterrows():
        row = {q: r[q] for q in ("budget", "params", "tokens", "loss")}
        row.update(steps=r["tokens"] / per, tokens_per_param=r["tokens"] / r["params"])
        for q in ("params", "tokens"):
            row[f"{q}_lo"] = float(r.get(f"{q}_star_lo", np.nan))
            row[f"{q}_hi"] = float(r.get(f"{q}_star_hi", np.nan))
        row["steps_lo"], row["steps_hi"] = row["tokens_lo"] / per, row["tokens_hi"] / per
        row.update(loss_lo=r["loss_lo"], loss_hi=r["loss_hi"], n_draws=r.get("n_draws", 0))
        steps = int(round(row["steps"])) if np.isfinite(row["steps"]) else None
        # text, not a Schedule: a large budget's run may be longer than scalefit evaluates
        row["schedule"] = (
            re.sub(r"steps=\d+", f"steps={steps}", str(sched), count=1) if steps else ""
        )
        rows.append(row)
    summary = pd.DataFrame(rows)
    if at_optimum:
        summary = _peak_rates(result, summary, alloc)
    notes = [*alloc.warnings, *_extrapolation(result, summary, curves)]
    bad = summary["budget"][~(summary["loss"] > 0)]
    if len(bad):
        notes.append(
            f"at {', '.join(f'{b:.3g}' for b in bad)} FLOP the recommended run's final loss is "
            "not a positive number: the law is used where it does not hold; do not train it."
        )
    return CurveAllocation(
        alloc.law, alloc.ci_prob, summary, sched, per, _resample(result), notes, alloc
    )


def _has_lr_optimum(result) -> bool:
    return "peak_lr" in result.law.inputs and {"k", "e0", "a", "b"} <= set(result.params)


def _at_optimal_rate(result):
    """The fit with ``k = 0`` (point and draws): the final loss of a run at ``eta*(N, D)``.

    With the areas counted per unit of peak rate, the peak rate acts only through
    ``k (log eta - log eta*)^2``, which is 0 at ``eta*``: the size and tokens that minimise
    the loss at the best rate are those of the law without that term.
    """
    names = list(result.params)
    draws = result.draws
    if draws is not None:
        draws = np.array(draws, dtype=float)
        draws[:, names.index("k")] = 0.0
    return result.replace(params={**result.params, "k": 0.0}, draws=draws)


def _peak_rates(result, summary: pd.DataFrame, alloc) -> pd.DataFrame:
    """``peak_lr`` = eta* at each budget's optimum; its interval: each draw's eta* at its own."""
    from ..laws.catalogue import log_lr_star

    out = summary.copy()
    out["peak_lr"] = np.exp(log_lr_star(np, result.params, out["params"], out["tokens"]))
    out["peak_lr_lo"] = out["peak_lr_hi"] = np.nan
    if alloc.draws is not None and result.draws is not None:
        d = np.asarray(result.draws, dtype=float)
        d = d[np.isfinite(d).all(axis=1)]
        p = {k: d[:, i] for i, k in enumerate(result.params)}
        prob = alloc.ci_prob
        for i, budget in enumerate(out["budget"]):
            sol = alloc.draws[np.isclose(alloc.draws["budget"], budget)]
            ok = sol["converged"].to_numpy(bool) & np.isfinite(sol["params"].to_numpy(float))
            sol = sol[ok]
            if len(sol) < 2:
                continue
            j = sol["set"].to_numpy(int)
            pj = {k: v[j] for k, v in p.items()}
            eta = np.exp(log_lr_star(np, pj, sol["params"].to_numpy(), sol["tokens"].to_numpy()))
            lo, hi = np.quantile(eta, [(1 - prob) / 2, (1 + prob) / 2])
            out.loc[out.index[i], ["peak_lr_lo", "peak_lr_hi"]] = [lo, hi]
    out["schedule"] = [
        re.sub(r"lr=[^,]+", f"lr={eta:.3g}", text, count=1) if text else text
        for text, eta in zip(out["schedule"], out["peak_lr"], strict=True)
    ]
    return out


def defaults(
    curves: pd.DataFrame | None,
    schedule: str | Schedule | None,
    tokens_per_step: float | None,
) -> tuple[Schedule, float]:
    """The schedule family and tokens per step: as given, else read from ``curves``."""
    if schedule is not None:
        sched = family(schedule)
    elif curves is None:
        raise ScaleFitError("give the schedule of the run to train (schedule=...) or the curves.")
    else:
        sched = _shared_schedule(curves)
    if tokens_per_step is None:
        if curves is None:
            raise ScaleFitError("give tokens_per_step (tokens per optimiser update) or the curves.")
        tokens_per_step = tokens_per_step_of(curves)
    return sched, float(tokens_per_step)


def _shared_schedule(curves: pd.DataFrame) -> Schedule:
    from .prepare import run_schedule

    found = {}
    for run in curves["run"].unique():
        s = run_schedule(curves, run)
        if s is not None:
            found.setdefault(family_text(s), s)
    if not found:
        raise ScaleFitError(
            "the curves declare no schedule: give the schedule of the run to train, e.g. "
            "'wsd:lr=3e-3,warmup=100,decay=0.2'."
        )
    if len(found) > 1:
        a, b = list(found)[:2]
        raise ScaleFitError(
            f"the runs use different schedules ({a!r}, {b!r}, ...): say which one the run to "
            "train uses."
        )
    return next(iter(found.values()))


def _resample(result) -> str:
    from ..core._validation import spelled

    if result.draws is None or not len(result.draws):
        return f"none: the fit has no bootstrap draws; for intervals, {spelled('bootstrap=B')}"
    n = int(np.isfinite(np.asarray(result.draws, dtype=float)).all(axis=1).sum())  # usable
    cluster = result.conventions.get("cluster")
    if cluster and "curves" in result.conventions:  # fit_curves resamples whole runs
        unit = "run" if cluster == "run" else f"value of {cluster!r} (whole runs)"
        return (
            f"percentiles of the optimum over {n} bootstrap refits; the resampling unit is the "
            f"{unit} (whole curves drawn with replacement)"
        )
    return f"percentiles of the optimum over {n} draws of the fit (not a run bootstrap)"


def _extrapolation(result, summary: pd.DataFrame, curves: pd.DataFrame | None) -> list[str]:
    """One sentence per budget whose optimum leaves the fitted checkpoints' range."""
    rng = dict(result.conventions.get("data_range", {}))
    if curves is not None and "step" in curves.columns:
        rng["steps"] = [float(curves["step"].min()), float(curves["step"].max())]
    out = []
    for _, r in summary.iterrows():
        far = []
        for q, what in (
            ("flops", "budget"),
            ("params", "params"),
            ("tokens", "tokens"),
            ("steps", "steps"),
        ):
            value = r["budget"] if q == "flops" else r[q]
            if q in rng and np.isfinite(value) and not rng[q][0] <= value <= rng[q][1]:
                far.append(f"{what} {value:.3g} outside [{rng[q][0]:.3g}, {rng[q][1]:.3g}]")
        if far:
            out.append(
                f"at {r['budget']:.3g} FLOP the allocation extrapolates beyond the fitted "
                f"checkpoints ({'; '.join(far)}): the law is used where no run measured it."
            )
    return out


def optimal_lr(result, params, tokens, *, ci_prob: float | None = None) -> pd.DataFrame:
    """The optimal peak learning rate ``eta*(params, tokens)`` of an ``lr_optimum`` fit.

    Parameters
    ----------
    result : FitResult
        A curve fit (:func:`scalefit.curves.fit_curves`) of a law with ``e0, a, b``
        (``lr_optimum``); its bootstrap draws (whole runs resampled) give the interval.
    params, tokens : float or array-like
        Model size and training tokens of the run to train (broadcast together).
    ci_prob : float, optional
        Interval probability (default: the fit's ``ci_prob``).

    Returns
    -------
    DataFrame
        ``params, tokens, peak_lr`` and, with draws, ``peak_lr_lo``, ``peak_lr_hi`` (percentiles
        of ``eta*`` over the finite draws) and ``n_draws``.

    Examples
    --------
    >>> optimal_lr(res, 1e9, 2e10)  # doctest: +SKIP
    """
    from ..core._validation import Interval, validate
    from ..laws.catalogue import log_lr_star

    names = list(result.params)
    if not {"e0", "a", "b"} <= set(names) or "peak_lr" not in result.law.inputs:
        raise ScaleFitError(
            f"law {result.law.name!r} has no optimal peak rate (parameters e0, a, b over "
            "peak_lr); fit lr_optimum to curves at several peak rates."
        )
    positive = Interval(float, 0, None, closed="neither", finite=True)
    n, d = np.broadcast_arrays(np.asarray(params, float), np.asarray(tokens, float))
    for what, arr in (("params", n), ("tokens", d)):
        for v in arr.reshape(-1):
            validate("optimal_lr", {what: float(v)}, {what: [positive]})
    n, d = n.reshape(-1), d.reshape(-1)
    out = pd.DataFrame({"params": n, "tokens": d})
    out["peak_lr"] = np.exp(log_lr_star(np, result.params, n, d))
    draws = None if result.draws is None else np.asarray(result.draws, dtype=float)
    if draws is not None and len(draws):
        draws = draws[np.isfinite(draws).all(axis=1)]
        p = {k: draws[:, i, None] for i, k in enumerate(names)}
        sims = np.exp(log_lr_star(np, p, n[None, :], d[None, :]))  # (draws, points)
        prob = result.ci_prob if ci_prob is None else float(ci_prob)
        lo, hi = np.quantile(sims, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
        out = out.assign(peak_lr_lo=lo, peak_lr_hi=hi, n_draws=len(draws))
    return out


def optimal_lr_text(result, params: float, tokens: float) -> str:
    """One report line: ``eta*`` at ``params`` and ``tokens`` with its interval."""
    from ..core._validation import interval_text

    r = optimal_lr(result, params, tokens).iloc[0]
    band = interval_text(r["peak_lr"], r.get("peak_lr_lo", np.nan), r.get("peak_lr_hi", np.nan))
    where = "run bootstrap" if result.conventions.get("cluster") else "draws"
    note = f" ({result.ci_prob:.0%}, {where})" if "peak_lr_lo" in r else " (no interval)"
    return (
        f"optimal peak lr eta* at {params:.3g} params, {tokens:.3g} tokens: "
        f"{r['peak_lr']:.3g}{band}{note}; eta* = {result.params['e0']:.3g} "
        f"(N/1e8)^{result.params['a']:.3f} (D/1e10)^{result.params['b']:.3f}"
    )
