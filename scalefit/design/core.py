"""``next_runs``: the runs that most shrink the uncertainty of a recommendation at a budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ..core._validation import Interval, Options, spelled, validate
from ..core.accounting import training_flops
from ..core.errors import ScaleFitError
from . import _update

QUANTITIES = ("log_params", "log_tokens", "log_depth", "log_width", "loss")
#: How the greedy search ranks runs: the better at the end of ``budget_for_runs`` of the gain and
#: gain-per-FLOP orderings, or the expected variance drop per FLOP of each run alone.
CRITERIA = ("total", "per_flop")
RUN_COLUMNS = ["depth", "width", "params", "tokens", "flops"]


@dataclass(frozen=True)
class DesignResult:
    """Result of :func:`next_runs`.

    Attributes
    ----------
    runs : DataFrame
        The chosen runs in the order chosen: ``depth, width, params, tokens, flops`` (depth and
        width are NaN for laws without shape), ``gain`` (drop in the variance of the quantity
        when the run was added) and ``sd_after`` (its standard deviation after the runs so far).
    candidates : DataFrame
        Every candidate with ``gain_alone`` (variance drop if it were the only new run).
    quantity : str
        What the design targets (e.g. ``log_params`` = log N* at ``target_budget``).
    value, sd_before, sd_after : float
        Point estimate of the quantity and its standard deviation before and after the runs
        (linearised update of the draws; see :mod:`scalefit.design._update`).
    criterion : str
        How the greedy search ranked the runs (``"total"`` or ``"per_flop"``).
    """

    runs: pd.DataFrame
    candidates: pd.DataFrame
    quantity: str
    target_budget: float
    budget_for_runs: float
    value: float
    sd_before: float
    sd_after: float
    ci_prob: float
    noise_sd: float
    n_draws: int
    search: str
    law: str
    criterion: str = "total"

    @property
    def total_flops(self) -> float:
        """Compute of all chosen runs (``sum 6·N·T``)."""
        return float(self.runs["flops"].sum())

    def interval(self, which: str = "after") -> tuple[float, float]:
        """Interval of the quantity (``exp`` of a log quantity) before or after the runs."""
        sd = self.sd_after if which == "after" else self.sd_before
        z = stats.norm.ppf((1 + self.ci_prob) / 2)
        lo, hi = self.value - z * sd, self.value + z * sd
        return (float(np.exp(lo)), float(np.exp(hi))) if self.quantity != "loss" else (lo, hi)

    def report(self) -> str:
        """A short text report."""
        name = self.quantity.replace("log_", "")
        pct = f"{100 * self.ci_prob:g}%"
        b, a = self.interval("before"), self.interval("after")
        return "\n".join(
            [
                f"design for {name} at {self.target_budget:.3g} FLOPs ({self.law}, "
                f"{self.n_draws} draws, noise sd {self.noise_sd:.3g} on log loss, {self.search})",
                f"{len(self.runs)} runs, {self.total_flops:.3g} FLOPs "
                f"of {self.budget_for_runs:.3g}",
                f"{pct} interval before [{b[0]:.4g}, {b[1]:.4g}] (sd {self.sd_before:.4g})",
                f"{pct} interval after  [{a[0]:.4g}, {a[1]:.4g}] (sd {self.sd_after:.4g})",
            ]
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dictionary."""
        return {
            "quantity": self.quantity,
            "target_budget": self.target_budget,
            "budget_for_runs": self.budget_for_runs,
            "total_flops": self.total_flops,
            "value": self.value,
            "sd_before": self.sd_before,
            "sd_after": self.sd_after,
            "interval_before": list(self.interval("before")),
            "interval_after": list(self.interval("after")),
            "prob": self.ci_prob,
            "noise_sd": self.noise_sd,
            "n_draws": self.n_draws,
            "search": self.search,
            "criterion": self.criterion,
            "law": self.law,
            "runs": self.runs.to_dict(orient="records"),
        }


def quantity_draws(src, space, budget: float, quantity: str) -> tuple[float, np.ndarray, dict]:
    """The quantity at the target budget for the point estimate and every draw."""
    from ..allocate.solve import solve

    if quantity in ("log_depth", "log_width") and space.kind != "shape":
        raise ScaleFitError(
            f"The 'quantity' parameter of next_runs must be one of 'log_params', 'log_tokens', "
            f"'loss' for law {src.law.name!r} (it has no depth/width). Got {quantity!r} instead."
        )
    one = {k: np.array([v]) for k, v in src.point.items()}
    point = solve(space, one, [budget], sets=False).iloc[0]
    draws = solve(space, src.draws, [budget], sets=False)
    c = quantity.removeprefix("log_")  # the solver's column
    val = draws[c].to_numpy(float)
    q = val if quantity == "loss" else np.log(val)
    pv = float(point[c]) if quantity == "loss" else float(np.log(point[c]))
    return pv, q, point.to_dict()


def _log_pred(law, draws: dict, cand: pd.DataFrame) -> np.ndarray:
    x = {k: cand[k].to_numpy(float)[None, :] for k in law.inputs}
    p = {k: np.asarray(v)[:, None] for k, v in draws.items()}
    with np.errstate(all="ignore"):
        return np.log(np.asarray(law.evaluate(p, x), dtype=float))


def _check_candidates(cand: pd.DataFrame, space) -> pd.DataFrame:
    cand = cand.copy()
    law = space.law
    if space.kind == "shape" and "params" not in cand and {"depth", "width"} <= set(cand):
        cand["params"] = space.accounting.params(cand["depth"], cand["width"], exact=True)
    missing = sorted((set(law.inputs) | {"params", "tokens"}) - set(cand.columns))
    if missing:
        raise ScaleFitError(
            f"The 'candidates' parameter of next_runs must have columns {sorted(law.inputs)} "
            f"(and params). Missing {missing}."
        )
    for col in ("depth", "width"):
        if col not in cand:
            cand[col] = np.nan
    cand["flops"] = training_flops(cand["params"], cand["tokens"])
    vals = cand[["params", "tokens", "flops"]].to_numpy(float)
    if not np.all(np.isfinite(vals) & (vals > 0)):
        raise ScaleFitError("next_runs: candidate params and tokens must be finite and positive.")
    return cand.reset_index(drop=True)


def next_runs(
    result: Any,
    target_budget: float,
    budget_for_runs: float,
    *,
    candidates: pd.DataFrame | None = None,
    k: int = 12,
    quantity: str = "log_params",
    noise: float | None = None,
    search: str = "greedy",
    replace: bool = False,
    ci_prob: float | None = None,
    accounting=None,
    criterion: str = "total",
    max_run_flops: float | None = None,
) -> DesignResult:
    """Choose up to ``k`` runs that minimise the expected variance of a recommendation.

    Parameters
    ----------
    result : FitResult
        A fit with draws (bootstrap or posterior); they describe today's uncertainty.
    target_budget : float
        The budget (FLOPs) whose recommendation should become more certain.
    budget_for_runs : float
        Total compute of the new runs: ``sum 6·N·T`` stays within it.
    candidates : DataFrame, optional
        Runs to choose from, with the law's inputs (``params, tokens`` or ``depth, width,
        tokens``); default :func:`default_candidates`.
    k : int, default 12
        Most runs to choose.
    quantity : {"log_params", "log_tokens", "log_depth", "log_width", "loss"}
        What to pin down at the target budget: log N*, log T*, log depth*, log width*, or the
        predicted loss at the optimum.
    noise : float, optional
        Noise sd of a run's log loss (default: the fit's ``rmse_log``).
    search : {"greedy", "exhaustive"}, default "greedy"
        Greedy (ranked by ``criterion``) or every subset of distinct candidates within
        ``budget_for_runs`` that leaves the least variance (small cases only).
    replace : bool, default False
        Allow the same candidate twice (a repeated seed).
    ci_prob : float, optional
        Interval probability (default: the result's).
    accounting : Accounting, optional
        Parameter accounting for shape laws.
    criterion : {"total", "per_flop"}, default "total"
        Greedy ranking. ``"total"``: the better, at the end of ``budget_for_runs``, of the
        orderings by variance drop and by variance drop per FLOP. ``"per_flop"``: the variance
        drop per FLOP (``6·N·T``) of each run. For ``log_params`` both rank by the decision's
        regret: a log-size error ``δ`` at the target costs about ``κ·δ²/2`` of loss (``κ`` the
        IsoFLOP curvature), so the expected regret is ``κ·Var(log N*)/2``. In the oracle replays
        of the ladder loop (docs/studies/plan_replay.md), with each step's ``budget_for_runs``
        the compute spent so far, ``"total"`` reached the full grid's regret with at most the
        compute ``"per_flop"`` needed on 8 of 10 grids (less on 4).
    max_run_flops : float, optional
        Largest compute of one run the hardware allows; larger candidates are dropped.

    Returns
    -------
    DesignResult

    Examples
    --------
    >>> d = next_runs(result, 1e24, 1e21, k=12)  # doctest: +SKIP
    >>> d.runs[["depth", "width", "params", "tokens", "flops", "gain"]]  # doctest: +SKIP
    """
    from ..allocate.api import resolve
    from ..allocate.space import Space

    validate(
        "next_runs",
        locals(),
        {
            "target_budget": [Interval(float, 0, None, closed="neither")],
            "budget_for_runs": [Interval(float, 0, None, closed="neither")],
            "k": [Interval(int, 1, None)],
            "quantity": [Options(set(QUANTITIES))],
            "search": [Options({"greedy", "exhaustive"})],
            "replace": ["boolean"],
            "criterion": [Options(set(CRITERIA))],
            "max_run_flops": [None, Interval(float, 0, None, closed="neither")],
        },
    )
    src = resolve(result, ci_prob=ci_prob)
    if src.draws is None or len(next(iter(src.draws.values()))) < 20:
        raise ScaleFitError(
            "next_runs needs a result with at least 20 draws (fit with bootstrap=200 or Bayes)."
        )
    space = Space.of(src.law, accounting)
    value, q, point = quantity_draws(src, space, float(target_budget), quantity)
    ok = np.isfinite(q)
    if ok.sum() < 20:
        raise ScaleFitError(
            f"next_runs: only {int(ok.sum())} draws have a finite optimum at {target_budget:g}."
        )
    draws = {kk: v[ok] for kk, v in src.draws.items()}
    cap = min(float(budget_for_runs), float(max_run_flops or np.inf))
    cand, h = _usable_candidates(src, space, draws, candidates, cap, max_run_flops)
    sd = _noise(result, noise)
    ens = _update.Ensemble.from_draws(q[ok], h, sd)
    cost = cand["flops"].to_numpy(float)
    if search == "greedy" and criterion == "per_flop":
        chosen, path = _update.greedy(ens, cost, budget_for_runs, k, per_cost=True, replace=replace)
    elif search == "greedy":
        chosen, path = _update.best_greedy(ens, cost, budget_for_runs, k, replace=replace)
    else:
        chosen, _ = _update.exhaustive(ens, cost, budget_for_runs, k)
        path = [ens.variance(chosen[: i + 1]) for i in range(len(chosen))]
    var0 = ens.variance([])
    cand["gain_alone"] = ens.cov[0, 1:] ** 2 / (np.diag(ens.cov)[1:] + ens.noise)
    runs = cand.iloc[chosen][RUN_COLUMNS].reset_index(drop=True)
    prev = np.concatenate([[var0], path[:-1]]) if path else np.array([])
    runs["gain"] = prev - np.asarray(path)
    runs["sd_after"] = np.sqrt(np.clip(path, 0, None))
    return DesignResult(
        runs,
        cand,
        quantity,
        float(target_budget),
        float(budget_for_runs),
        value,
        float(np.sqrt(var0)),
        float(np.sqrt(max(path[-1], 0.0))) if path else float(np.sqrt(var0)),
        float(src.prob),
        sd,
        int(ok.sum()),
        search,
        src.law.name,
        criterion,
    )


def _usable_candidates(src, space, draws, candidates, cap, max_run_flops) -> tuple:
    """Candidates within ``cap`` FLOPs with finite log-loss predictions (draws x candidates)."""
    from .candidates import default_candidates

    if candidates is None:
        cand = default_candidates(src, space, cap)
    else:
        cand = _check_candidates(pd.DataFrame(candidates), space)
    cand = cand[cand["flops"] <= cap * (1 + 1e-12)].reset_index(drop=True)
    if cand.empty:
        what = (
            "budget_for_runs" if max_run_flops is None or max_run_flops > cap else "max_run_flops"
        )
        raise ScaleFitError(f"next_runs: no candidate fits within {what}={cap:g} FLOPs.")
    h = _log_pred(src.law, draws, cand)
    good = np.all(np.isfinite(h), axis=0)
    return cand[good].reset_index(drop=True), h[:, good]


def _noise(result: Any, noise: float | None) -> float:
    if noise is None:
        metrics = getattr(result, "metrics", {}) or {}
        noise = metrics.get("rmse_log")
        if noise is None:
            raise ScaleFitError(
                f"next_runs: give {spelled('noise=...', '--noise SD')} "
                "(the result has no rmse_log)."
            )
    validate("next_runs", {"noise": noise}, {"noise": [Interval(float, 0, None, closed="neither")]})
    return float(noise)
