"""Held-out sizes: fit on the smaller models' curves, predict the larger models' final losses.

:func:`size_holdout` is the protocol of "do curves beat final losses across sizes?": every
curve law named is fitted to every checkpoint of the runs below a size (all their peak rates),
and each held-out run's loss is predicted at the end of its own schedule; the baselines fit
Chinchilla's law to the same training runs' final losses, once with every rate and once with
the best rate per size and length. Every method is scored on the same held-out finals.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..core._validation import Interval, validate
from ..core.errors import ConvergenceWarning, ScaleFitError

#: The curve laws of issue 26 that :func:`size_holdout` fits by default.
CURVE_LAWS = ("lr_annealing", "lr_annealing_params", "multi_power", "multi_power_params")
#: Labels of the two final-loss baselines.
EVERY_RATE = "finals: chinchilla, every rate"
BEST_RATE = "finals: chinchilla, best rate per size"


def run_finals(curves: pd.DataFrame, schedule=None) -> pd.DataFrame:
    """Each run that reached the end of its schedule: its last checkpoint, one row per run.

    Parameters
    ----------
    curves : DataFrame
        Long curves (:func:`scalefit.curves.read_curves`) with ``params`` and ``tokens``.
    schedule : str or Schedule, optional
        Schedule for runs without a declared one.

    Returns
    -------
    DataFrame
        ``run, params, tokens, lr, loss`` (``lr``: the schedule's peak rate) and the other
        columns of the last row; runs that stop before their schedule's last step are left out.
    """
    from .prepare import run_schedule

    missing = [c for c in ("params", "tokens") if c not in curves.columns]
    if missing:
        raise ScaleFitError(f"size_holdout: the curves need column(s) {', '.join(missing)}.")
    last = curves.sort_values("step").groupby("run", sort=False).tail(1)
    rows = []
    for _, row in last.iterrows():
        sched = run_schedule(curves, row["run"], schedule)
        if sched is None:
            raise ScaleFitError(f"run {row['run']!r}: size_holdout needs the run's schedule.")
        if int(row["step"]) >= sched.steps:
            rows.append({**row.to_dict(), "lr": float(sched.lr)})
    return pd.DataFrame(rows).reset_index(drop=True)


def size_holdout(
    curves: pd.DataFrame,
    held_out: float,
    *,
    laws: Sequence[str] = CURVE_LAWS,
    finals: pd.DataFrame | None = None,
    bootstrap: int = 200,
    cluster: str = "run",
    seed: int = 0,
    starts: int = 64,
    **prepare_options: Any,
) -> pd.DataFrame:
    """Predict the final loss of every run of ``params >= held_out`` from the smaller runs.

    Parameters
    ----------
    curves : DataFrame
        Long curves of runs of several sizes (``run, step, loss, params, tokens`` and a
        declared schedule per run), e.g. from :func:`scalefit.curves.read_curves`.
    held_out : float
        Runs with ``params`` at or above this are held out; the curve laws and the baselines
        see only the runs below it.
    laws : sequence of str, default :data:`CURVE_LAWS`
        Curve laws to fit (any registered law that reads ``S1``/``S2``/``params``, e.g. a law
        with a learning-rate optimum).
    finals : DataFrame, optional
        The observed final losses (``run, params, tokens, loss``; one row per run) to score
        and to fit the baselines to, e.g. a validation loss. Default :func:`run_finals`.
    bootstrap : int, default 200
        Resamples of whole runs (of ``cluster`` groups) for every method's 95 % intervals.
    cluster : str, default "run"
        Column of runs resampled together (a main run with its cooldown branches).
    seed, starts : int
        As in :func:`scalefit.curves.fit_curves`.
    **prepare_options
        Passed to :func:`scalefit.curves.prepare` (``early``, ``max_points``, ...).

    Returns
    -------
    DataFrame
        One row per method and held-out run: ``method, run, params, tokens, lr, loss,
        predicted, lo, hi, log_err`` (``ln(predicted / loss)``), ``covered`` (the interval
        holds the loss; NaN without an interval), ``rate_fitted`` (a training run had this
        peak rate) and ``converged``. :func:`holdout_summary` scores it.

    Examples
    --------
    >>> rows = size_holdout(curves, 1e9, laws=["lr_annealing_params"])  # doctest: +SKIP
    >>> holdout_summary(rows)  # doctest: +SKIP
    """
    validate(
        "size_holdout",
        {"held_out": held_out, "bootstrap": bootstrap},
        {
            "held_out": [Interval(float, 0, None, closed="neither")],
            "bootstrap": [Interval(int, 2, None)],
        },
    )
    finals = run_finals(curves) if finals is None else finals
    if finals.empty:
        raise ScaleFitError(
            "size_holdout: no run reaches the last step of its schedule, so there is no final "
            "loss to fit or score; pass finals=DataFrame(run, params, tokens, loss)."
        )
    need = [c for c in ("run", "params", "tokens", "loss") if c not in finals.columns]
    if need or cluster not in {*finals.columns, *curves.columns}:
        missing = ", ".join(need or [cluster])
        raise ScaleFitError(f"size_holdout: the finals (or curves) lack column(s) {missing}.")
    if cluster not in finals.columns:
        finals = finals.merge(curves.groupby("run")[cluster].first(), on="run", how="left")
    test = finals[finals["params"] >= held_out]
    train_runs = set(curves.loc[curves["params"] < held_out, "run"])
    train = finals[finals["run"].isin(train_runs)]
    if test.empty or curves.loc[curves["run"].isin(train_runs), "params"].nunique() < 2:
        raise ScaleFitError(
            f"size_holdout: held_out={held_out:g} must leave two sizes or more to fit and a "
            f"run with a final loss to predict; the curves' sizes run from "
            f"{curves['params'].min():g} to {curves['params'].max():g} "
            f"({curves['params'].nunique()} sizes)."
        )
    best = train.loc[train.groupby(["params", "tokens"])["loss"].idxmin()]
    opts = {"bootstrap": bootstrap, "cluster": cluster, "seed": seed, "starts": starts}
    out = []
    for law in laws:
        fitted = curves[curves["run"].isin(train_runs)]
        held = curves[curves["run"].isin(set(test["run"]))]
        res, pred = _curve_method(fitted, law, held, prepare_options, opts)
        out.append(_scored(f"curves: {law}", res, pred, test))
    for label, rows in ((EVERY_RATE, train), (BEST_RATE, best)):
        res, pred = _finals_method(rows, test, opts)
        out.append(_scored(label, res, pred, test))
    table = pd.concat(out, ignore_index=True)
    table["rate_fitted"] = table["lr"].isin(set(train["lr"])) if "lr" in table else np.nan
    return table


def _quiet(fn, *args, **kwargs):
    """Call ``fn`` without the warnings the table records (``converged``, ``rate_fitted``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.filterwarnings("ignore", message=r".*at peak learning rate .*outside the fitted")
        return fn(*args, **kwargs)


def _curve_method(train_curves, law, held_curves, prepare_options, opts):
    """A curve law fitted to the training runs' checkpoints; each held-out run's end predicted."""
    from .api import final_losses, fit_curves
    from .prepare import prepare

    res = _quiet(fit_curves, prepare(train_curves, **prepare_options), law, progress=False, **opts)
    return res, _quiet(final_losses, res, held_curves)


def _finals_method(rows: pd.DataFrame, test: pd.DataFrame, opts):
    """Chinchilla's law on final losses (runs of a ``cluster`` resampled together)."""
    from ..core.table import read_table
    from ..fit import fit

    cols = ["params", "tokens", "loss", opts["cluster"]]
    table = read_table(rows[cols].reset_index(drop=True))
    res = _quiet(
        fit, table, "chinchilla", bootstrap=opts["bootstrap"], cluster=opts["cluster"],
        seed=opts["seed"], starts=opts["starts"], progress=False,
    )  # fmt: skip
    x = test[["params", "tokens"]].reset_index(drop=True)
    pred = pd.DataFrame({"run": test["run"].to_numpy(), "predicted": res.predict(x)})
    if _bands_hold(res):
        bands = res.predict(x, bands=True)
        pred["lo"], pred["hi"] = np.asarray(bands["lo"]), np.asarray(bands["hi"])
    return res, pred


def _bands_hold(res) -> bool:
    """Whether 80 % of the bootstrap resamples converged (scalefit's rule for an interval)."""
    return res.draws is not None and np.isfinite(np.asarray(res.draws)).all(axis=1).mean() >= 0.8


def _scored(method: str, res, pred: pd.DataFrame, test: pd.DataFrame) -> pd.DataFrame:
    """Predictions beside the observed finals; no interval when < 80 % of resamples converged."""
    keep = [c for c in ("run", "params", "tokens", "lr", "loss") if c in test]
    both = test[keep].merge(
        pred[["run", "predicted", *[c for c in ("lo", "hi") if c in pred]]], on="run"
    )
    if not _bands_hold(res) or "lo" not in both:
        both["lo"] = both["hi"] = np.nan
    both.insert(0, "method", method)
    both["log_err"] = np.log(both["predicted"] / both["loss"])
    inside = (both["lo"] <= both["loss"]) & (both["loss"] <= both["hi"])
    both["covered"] = inside.where(both["lo"].notna(), np.nan).astype(float)
    both["converged"] = bool(res.converged)
    return both


def holdout_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per method: held-out runs, mean |ln error|, mean ln error, intervals holding the loss.

    ``coverage`` counts a run without an interval as not held; ``intervals`` says how many
    runs had one.
    """
    return rows.groupby("method", sort=False).agg(
        runs=("run", "size"),
        mean_abs_log_err=("log_err", lambda e: float(np.abs(e).mean())),
        mean_log_err=("log_err", "mean"),
        coverage=("covered", lambda c: float(np.nan_to_num(c, nan=0.0).mean())),
        intervals=("covered", lambda c: int(c.notna().sum())),
        converged=("converged", "all"),
    )
