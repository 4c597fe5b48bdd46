"""Fit schedule-aware laws to curves and predict from them.

:func:`fit_curves` turns prepared curves into a loss table and calls :func:`scalefit.fit`; its
bootstrap resamples whole runs (``cluster="run"``), never single checkpoints: the checkpoints
of one run share its noise, so resampling them as if independent gives intervals that are too
narrow. With ``bayes=True`` the Bayesian fit gives each run a random offset of log loss
(``group="run"``) for the same reason. :func:`forecast` predicts a run's loss along any
schedule and length.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from ..core._validation import Interval, Options, spelled, validate
from ..core.errors import ConvergenceWarning, ScaleFitError
from ..core.schedule import MOMENTUM, Schedule, parse_schedule
from ..laws import Law, get_law
from .multipower import segments_of, with_quadrature
from .prepare import schedule_frame


def curve_table(prepared: pd.DataFrame) -> pd.DataFrame:
    """The loss table a fit reads: one row per prepared checkpoint (validated by read_table)."""
    from ..core.table import read_table

    drop = [c for c in ("schedule",) if c in prepared.columns]
    tab = read_table(prepared.drop(columns=drop).reset_index(drop=True))
    meta = prepared.attrs.get("scalefit_curves", {})
    tab.attrs["scalefit"] = {**tab.attrs["scalefit"], "source": meta.get("source", "<curves>")}
    tab.attrs["scalefit_curves"] = dict(meta)
    return tab


def fit_curves(
    prepared: pd.DataFrame,
    law: str | Law | None = "lr_annealing",
    *,
    formula: str | None = None,
    bootstrap: int | None = None,
    seed: int = 0,
    starts: int = 64,
    bayes: bool = False,
    cluster: str = "run",
    errors: str = "ar1",
    **options: Any,
):
    """Fit a schedule-aware law (or a formula over S1, S2, lr, step, tokens, params) to curves.

    Parameters
    ----------
    prepared : DataFrame
        Output of :func:`scalefit.curves.prepare`.
    law : str or Law, default "lr_annealing"
        A registered law (``lr_annealing``, ``lr_annealing_params``, ``multi_power``, ...) or
        a Law. The multi-power law's quadrature columns are added here, from the learning-rate
        histories that :func:`scalefit.curves.prepare` keeps.
    formula : str, optional
        Instead of ``law``: a formula, e.g. ``"L0 + A*S1**(-alpha) - C*S2"``.
    bootstrap : int, optional
        Bootstrap resamples of whole runs (needs two runs or more). Default
        :data:`RUN_BOOTSTRAP` (200) when the curves have two runs (clusters) or more, else
        none. The intervals (``ci``) are the percentiles of the refits and the standard errors
        their standard deviations. ``0`` computes none: the standard errors and intervals are
        then "n/a" (NaN), never the row-level sandwich, which treats the autocorrelated
        checkpoints of a run as independent evidence and is too narrow.
    cluster : str, default "run"
        Column whose values are resampled together. Each value must hold whole runs: name a
        column shared by a main run and its cooldown branches (e.g. the model), since
        branches forked from one run share its stable phase and are not independent of it.
    seed, starts : int
        As in :func:`scalefit.fit` (``starts`` is not used with ``bayes``).
    bayes : bool, default False
        Fit by :func:`scalefit.fit.bayes.fit_bayes` with ``group=cluster``: the checkpoints
        of each run (of each cluster) share a random offset of log loss (needs two or more). A floor
        parameter without a given prior gets ``log floor ~ Normal(log min loss, 0.5)`` (the
        annealing term takes the loss below the floor, which the default prior excludes).
    errors : {"ar1", "independent"}, default "ar1"
        With ``bayes``: the error model within each run. ``"ar1"``: the residuals of
        consecutive checkpoints of a run follow an AR(1) process with correlation ``rho``
        per median checkpoint spacing (``rho ** (gap / spacing)`` for other gaps), ``rho ~
        Uniform(0, 1)``, besides the offset per run; ``"independent"``: only the offset.
    **options
        Passed to :func:`scalefit.fit` (``loss``, ``residuals``, ``ci_prob``, ...) or, with
        ``bayes``, to ``fit_bayes`` (``chains``, ``draws``, ...; ``group`` is ``cluster``).

    Returns
    -------
    FitResult
        ``conventions["curves"]`` records the checkpoint rules and that runs were resampled;
        ``conventions["stderr"]`` says where the standard errors come from.
    """
    from ..fit import fit

    if "group" in options:
        raise ScaleFitError(
            "fit_curves groups checkpoints by run (or by cluster=COLUMN); it takes no 'group'."
        )
    if formula is None and law is not None:
        law = get_law(law)
        prepared = with_quadrature(prepared, law)
    tab = curve_table(prepared)
    _check_cluster(tab, cluster)
    _check_rates(tab, law if formula is None else None)
    if bayes:
        options = {**options, "group": cluster, "errors": errors}
        return _fit_curves_bayes(prepared, tab, law, formula, bootstrap, seed, options)
    validate("fit_curves", {"bootstrap": bootstrap}, {"bootstrap": [Interval(int, 0, None), None]})
    n_groups = int(tab[cluster].nunique())
    if bootstrap is None:
        bootstrap = RUN_BOOTSTRAP if n_groups >= 2 else 0
    elif bootstrap and n_groups < 2:
        what = "runs" if cluster == "run" else f"values of {cluster!r}"
        raise ScaleFitError(
            f"bootstrap intervals resample whole runs and need at least 2 {what}; the curves "
            f"have {n_groups}. Checkpoints of one run are not independent, so they are not "
            f"resampled. Fit without intervals, {spelled('bootstrap=0')}, or fit two runs "
            "or more."
        )
    res = fit(
        tab,
        None if formula is not None else law,
        formula=formula,
        bootstrap=bootstrap,
        cluster=cluster if bootstrap else None,
        seed=seed,
        starts=starts,
        **options,
    )
    resampled = "runs" if cluster == "run" else f"runs grouped by {cluster!r}"
    return _run_level_stderr(
        _recorded(res, prepared, tab, resampled if bootstrap else "none"), n_groups
    )


def _recorded(res, prepared: pd.DataFrame, tab: pd.DataFrame, resample: str):
    """``res`` with ``conventions["curves"]``: the checkpoint rules, counts and resampling."""
    meta = {**prepared.attrs.get("scalefit_curves", {}), "runs": int(tab["run"].nunique())}
    meta.update(checkpoints=len(tab), resample=resample, peak_lr=peak_rates(tab))
    return res.replace(conventions={**res.conventions, "curves": meta})


def constant_lr_law() -> Law:
    """``L = L0 + A * S1**(-alpha)``: the law that curves at a constant learning rate identify.

    Without a decay the annealing area ``S2`` is 0 at every checkpoint, so ``lr_annealing``'s
    term ``C * S2`` leaves no footprint and ``C`` is not identified; this is that law without
    it, written as a formula (so a result saves and loads like any formula fit).

    Returns
    -------
    Law
        Named ``"lr_constant"``; ``L0`` in [0, 10] like ``lr_annealing``'s floor.

    Examples
    --------
    >>> constant_lr_law().inputs, constant_lr_law().param_names
    (('S1',), ('A', 'L0', 'alpha'))
    """
    return Law.from_formula(
        "L0 + A*S1**(-alpha)",
        name="lr_constant",
        inputs=("S1",),
        kinds={"L0": "positive", "A": "positive", "alpha": "exponent"},
        bounds={"L0": (0.0, 10.0)},
        starts={"alpha": (0.1, 1.0)},
    )


def momentum_profile(
    curves: pd.DataFrame,
    momenta=(0.99, 0.995, 0.999, 0.9995),
    law: str | Law = "lr_annealing",
    *,
    seed: int = 0,
    starts: int = 16,
    **prepare_options: Any,
) -> pd.DataFrame:
    """Refit a law on ``S2`` over a grid of annealing momenta ``lambda`` (a profile in ``lambda``).

    ``S2`` is built with a fixed ``lambda`` (our default 0.999, not a value fitted by Tissue
    et al.), and ``C`` is per unit of that ``S2``: it changes many-fold across the grid. The
    objective, on the same checkpoints for every ``lambda``, says which the curves prefer.

    Parameters
    ----------
    curves : DataFrame
        Long curves (:func:`scalefit.curves.read_curves`), not yet prepared.
    momenta : sequence of float
        The grid, each in [0, 1).
    law : str or Law, default "lr_annealing"
        A law that reads ``S2``.
    seed, starts : int
        As in :func:`fit_curves` (no bootstrap: a profile compares fits, not intervals).
    **prepare_options
        Passed to :func:`scalefit.curves.prepare` (``schedule``, ``early``, ...).

    Returns
    -------
    DataFrame
        One row per ``lambda``: ``momentum``, ``objective``, ``converged`` and the parameters.
    """
    from .prepare import prepare

    grid = list(np.atleast_1d(momenta))
    if not grid:
        raise ScaleFitError("momentum_profile: give at least one momentum.")
    each = {"momenta": [Interval(float, 0, 1, closed="left")]}
    for lam in grid:
        validate("momentum_profile", {"momenta": lam}, each)
    rows = []
    for lam in map(float, grid):
        prepared = prepare(curves, momentum=lam, **prepare_options)
        res = fit_curves(prepared, law, bootstrap=0, seed=seed, starts=starts, progress=False)
        rows.append({"momentum": lam, "objective": res.objective, "converged": res.converged})
        rows[-1].update(res.params)
    return pd.DataFrame(rows)


#: Default number of run-bootstrap resamples of :func:`fit_curves`.
RUN_BOOTSTRAP = 200


def _run_level_stderr(res, n_groups: int):
    """Standard errors from the run bootstrap's draws, or NaN without them (never the sandwich).

    The sandwich of least squares counts every checkpoint as independent evidence; the
    checkpoints of one run are autocorrelated, so it is too small.
    """
    names = list(res.params)
    if res.draws is None:
        stderr = dict.fromkeys(names, float("nan"))
        source = (
            f"n/a: intervals need a run bootstrap, {spelled('bootstrap=B')}"
            if n_groups >= 2
            else "n/a: one run; a run bootstrap needs two or more (the checkpoints of one run "
            "are not independent, so they are not resampled)"
        )
    else:
        draws = np.asarray(res.draws, dtype=float)
        ok = np.isfinite(draws).all(axis=1)
        spread = draws[ok].std(axis=0, ddof=1) if ok.sum() > 1 else np.full(len(names), np.nan)
        stderr = {n: float(v) for n, v in zip(names, spread, strict=True)}
        source = "standard deviation of the run-bootstrap refits"
    return res.replace(stderr=stderr, conventions={**res.conventions, "stderr": source})


def _check_cluster(tab: pd.DataFrame, cluster: str) -> None:
    """``cluster`` is a column of the curves whose every value holds whole runs."""
    if not isinstance(cluster, str) or cluster not in tab.columns:
        raise ScaleFitError(
            f"fit_curves: cluster {cluster!r} is not a column of the curves; columns: "
            f"{', '.join(map(str, tab.columns))}."
        )
    if tab[cluster].isna().any():
        raise ScaleFitError(f"fit_curves: cluster column {cluster!r} has missing values.")
    split = tab.groupby("run", sort=False)[cluster].nunique()
    if (split > 1).any():
        run = split.index[split > 1][0]
        raise ScaleFitError(
            f"fit_curves: run {run!r} has several values of cluster column {cluster!r}; a "
            "cluster must hold whole runs."
        )


def peak_rates(tab: pd.DataFrame) -> list[float]:
    """The distinct peak learning rates of the curves (``peak_lr`` of :func:`prepare`)."""
    if "peak_lr" not in tab.columns:
        return []
    return sorted({float(f"{v:.6g}") for v in tab["peak_lr"].to_numpy(float)})


def _check_rates(tab: pd.DataFrame, law) -> None:
    """Refuse a law with a peak-rate optimum on curves of a single peak rate."""
    if not isinstance(law, Law) or "peak_lr" not in law.inputs:
        return
    rates = peak_rates(tab)
    if len(rates) < 2:
        raise ScaleFitError(
            f"law {law.name!r} fits an optimal peak learning rate, but the curves have one peak "
            f"rate ({', '.join(f'{r:g}' for r in rates) or 'none'}): the optimum is not "
            "identified. Fit curves at two peak rates or more (three or more pin its "
            "curvature), or fit lr_annealing_params."
        )


def _fit_curves_bayes(prepared, tab, law, formula, bootstrap, seed, options):
    """:func:`fit_curves` with ``bayes=True``: a Bayesian fit with a random offset per run."""
    from ..fit.bayes import fit_bayes

    if bootstrap:
        raise ScaleFitError("fit_curves: pass bootstrap or bayes=True, not both.")
    errors = options.pop("errors")
    validate("fit_curves", {"errors": errors}, {"errors": [Options({"ar1", "independent"})]})
    if errors == "ar1":
        options["ar1"] = ("run", "step" if "step" in tab.columns else "tokens")
    if formula is not None:
        law = Law.from_formula(formula, columns=[str(c) for c in tab.columns])
    law = law if isinstance(law, Law) else get_law(law, **dict(options.pop("law_options", {})))
    # the annealing term takes the loss below the law's floor, so the default floor prior
    # (below the smallest loss) would exclude it: a wide prior around the smallest loss instead
    priors = dict(options.pop("priors", None) or {})
    for p in law.params:
        if p.kind == "floor" and p.prior is None and p.name not in priors:
            priors[p.name] = {
                "dist": "normal",
                "loc": float(np.log(tab["loss"].min())),
                "scale": 0.5,
            }
    res = fit_bayes(tab, law, seed=seed, priors=priors, **options)
    per = "run" if options["group"] == "run" else f"value of {options['group']!r}"
    within = ", AR(1) errors within each run" if errors == "ar1" else ""
    return _recorded(res, prepared, tab, f"none (Bayes, offset per {per}{within})")


def forecast(
    result,
    schedule: str | Schedule,
    *,
    steps=None,
    momentum: float | None = None,
    bands: bool = True,
    tokens_per_step: float | None = None,
    **columns: Any,
) -> pd.DataFrame:
    """Predicted loss along ``schedule`` (another schedule or length than the fitted runs').

    Parameters
    ----------
    result : FitResult
        A fit of a schedule-aware law or formula.
    schedule : str or Schedule
        The schedule, e.g. ``"wsd:lr=3e-3,steps=20000,warmup=200,decay=0.2"``.
    steps : array-like, optional
        Steps to predict (default: 50 evenly spaced, ending at the last step).
    momentum : float, optional
        Decay factor of the annealing area (default: the one the fit used).
    bands : bool, default True
        Add ``lo``/``hi`` from the bootstrap or posterior draws when the result has them; for
        a Bayesian fit with an offset per run (``bayes=True``) the band is that of a new run
        (a fresh offset per draw, :func:`scalefit.fit.bayes.predictive_draws`).
    tokens_per_step : float, optional
        Tokens per optimiser update, for a law or formula that reads ``tokens``
        (``tokens = step * tokens_per_step``).
    **columns
        Other inputs of the law, e.g. ``params=1.2e8``.

    Returns
    -------
    DataFrame
        ``step, lr, S1, S2`` (+ ``columns``, + the multi-power law's quadrature columns for
        that law), ``loss`` and, with draws, ``lo`` and ``hi``.
    """
    sched = parse_schedule(schedule) if isinstance(schedule, str) else schedule
    if momentum is None:
        momentum = float(result.conventions.get("curves", {}).get("momentum", MOMENTUM))
    positive = Interval(float, 0, None, closed="neither", finite=True)
    given = {**columns, "tokens_per_step": tokens_per_step}
    validate("forecast", given, {k: [positive, None] for k in given})  # e.g. params=nan
    if steps is None:
        steps = np.unique(np.round(np.linspace(1, sched.steps, 50)).astype(int))
    if "peak_lr" in result.law.inputs:
        columns.setdefault("peak_lr", sched.lr)
    warn_new_rate(result, float(columns.get("peak_lr", sched.lr)), "forecast")
    frame = schedule_frame(
        sched, steps=steps, momentum=momentum, segments=segments_of(result.law), **columns
    )
    if tokens_per_step is not None:
        frame["tokens"] = frame["step"] * float(tokens_per_step)
    missing = [i for i in result.law.inputs if i not in frame.columns]
    if missing:
        raise ScaleFitError(
            f"forecast: law {result.law.name!r} needs {', '.join(missing)}; pass them as "
            "keyword arguments (e.g. params=1.2e8)."
        )
    if bands and result.draws is not None and result.conventions.get("group"):
        from ..fit.bayes import predictive_draws

        sims = predictive_draws(result, frame, noise=False, group=True)
        prob = result.ci_prob
        lo, hi = np.quantile(sims, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
        out = frame.assign(loss=result.predict(frame), lo=lo, hi=hi)
    elif bands and result.draws is not None:
        out = pd.concat([frame, result.predict(frame, bands=True)], axis=1)
    else:
        out = frame.assign(loss=result.predict(frame))
    _warn_untrusted(result, out)
    return out


def warn_new_rate(result, lr: float, what: str) -> None:
    """Warn when ``lr`` lies outside the peak rates of the curves ``result`` was fitted to."""
    seen = result.conventions.get("curves", {}).get("peak_lr") or []
    if not seen or seen[0] * (1 - 1e-6) <= lr <= seen[-1] * (1 + 1e-6):
        return
    fix = (
        "fit curves at several peak rates with lr_optimum"
        if len(seen) == 1 or "peak_lr" not in result.law.inputs
        else "treat it as an extrapolation of eta*"
    )
    warnings.warn(
        f"{what} at peak learning rate {lr:g}, outside the fitted curves' peak rates "
        f"({', '.join(f'{r:g}' for r in seen)}): the law has not seen that rate; {fix}.",
        UserWarning,
        stacklevel=3,
    )


#: Start of the warning :func:`forecast` gives for a fit that did not converge (the CLI's report
#: says so already and filters it by this text).
UNCONVERGED = "forecast from a fit that did not converge"


def _warn_untrusted(result, out: pd.DataFrame) -> None:
    """Warn when forecast losses cannot be used: the fit did not converge, or a loss is not > 0."""
    if not result.converged:
        warnings.warn(
            f"{UNCONVERGED}: its losses may mean nothing (the fit's report says why).",
            ConvergenceWarning,
            stacklevel=3,
        )
    loss = out["loss"].to_numpy(float)
    bad = ~(np.isfinite(loss) & (loss > 0))
    if bad.any():
        steps = ", ".join(str(int(s)) for s in out["step"].to_numpy()[bad][:3])
        more = " ..." if bad.sum() > 3 else ""
        warnings.warn(
            f"forecast: the fitted law gives a loss that is not a positive number at step "
            f"{steps}{more}; do not use those values.",
            ConvergenceWarning,
            stacklevel=3,
        )


def tokens_per_step(curves: pd.DataFrame, where: str = "the curves") -> float:
    """Tokens per optimiser update: the ``tokens_per_step`` column, else ``tokens / step``."""
    if "tokens_per_step" in curves.columns:
        per = curves["tokens_per_step"].dropna().to_numpy(float)
    elif {"tokens", "step"} <= set(curves.columns):
        ok = curves["step"] > 0
        per = (curves.loc[ok, "tokens"] / curves.loc[ok, "step"]).to_numpy(float)
    else:
        per = np.array([])
    if not len(per):
        raise ScaleFitError(
            f"{where}: no tokens per step (a 'tokens_per_step' column, or 'tokens' and 'step'); "
            "give tokens_per_step."
        )
    if not (np.allclose(per, per[0], rtol=1e-6) and per[0] > 0):
        raise ScaleFitError(
            f"{where}: tokens per step is not constant ({per.min():g} to {per.max():g}); give "
            "tokens_per_step."
        )
    return float(per[0])


def final_losses(
    result, curves: pd.DataFrame, *, schedule: str | Schedule | None = None
) -> pd.DataFrame:
    """Each run's predicted loss at the end of its declared schedule, beside the last logged loss.

    Use it for "the final loss of a run from its first part": fit on the first part of the
    curves (:func:`truncate`), then ask for each run's end.

    Parameters
    ----------
    result : FitResult
        A curve fit.
    curves : DataFrame
        The (full or truncated) long curves; each run needs a declared schedule.
    schedule : str or Schedule, optional
        Schedule for runs without one.

    Returns
    -------
    DataFrame
        ``run, final_step, predicted`` (+ ``lo``, ``hi`` with draws) and ``observed_last_step``,
        ``observed_last_loss``.
    """
    from .prepare import run_schedule

    rows = []
    for run, part in curves.groupby("run", sort=False):
        sched = run_schedule(curves, run, schedule)
        if sched is None:
            raise ScaleFitError(f"run {run!r}: final_losses needs the run's declared schedule.")
        extra = {
            c: float(part[c].iloc[0])
            for c in result.law.inputs
            if c in ("params", "width", "depth")
        }
        per = tokens_per_step(part, f"run {run!r}") if "tokens" in result.law.inputs else None
        pred = forecast(result, sched, steps=[sched.steps], tokens_per_step=per, **extra).iloc[-1]
        row = {"run": run, "final_step": sched.steps, "predicted": float(pred["loss"])}
        if "lo" in pred:
            row.update(lo=float(pred["lo"]), hi=float(pred["hi"]))
        key = "step" if "step" in part.columns else "tokens"
        row.update(
            observed_last_step=float(part[key].iloc[-1]),
            observed_last_loss=float(part["loss"].iloc[-1]),
        )
        rows.append(row)
    return pd.DataFrame(rows)


def truncate(curves: pd.DataFrame, fraction: float) -> pd.DataFrame:
    """Keep each run's checkpoints up to ``fraction`` of its last step (its first part)."""
    validate("truncate", locals(), {"fraction": [Interval(float, 0, 1, closed="right")]})
    key = "step" if "step" in curves.columns else "tokens"
    last = curves.groupby("run")[key].transform("max")
    out = curves[curves[key] <= fraction * last].reset_index(drop=True)
    out.attrs = dict(curves.attrs)
    return out
