"""The steps of a plan: choose the next runs, match told rows to asked runs, refit and decide."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from ..core._io import inside
from ..core.accounting import training_flops
from ..core.errors import ConvergenceWarning, ScaleFitError

FIT_FILE = "fit.json"
RUN_COLUMNS = ["depth", "width", "params", "tokens", "flops"]


def _spread(free: pd.DataFrame, k: int) -> list[str]:
    """A first design without a fit: ``k`` runs spread over size and tokens among the cheapest."""
    pool = free.nsmallest(min(len(free), max(2 * k, len(free) // 2)), "flops")
    pool = pool.sort_values(["params", "tokens"])
    idx = np.unique(np.linspace(0, len(pool) - 1, min(k, len(pool))).round().astype(int))
    return pool["run_id"].iloc[idx].tolist()


def choose(p, k: int) -> tuple[list[str], str]:
    """The next runs and how they were chosen.

    :func:`scalefit.design.next_runs` on the last fit, with at most the compute spent so far
    (the ladder at most doubles its compute per step); without a fit that has 20 usable draws,
    or when ``next_runs`` finds no design, a spread over the cheapest candidates (:func:`_spread`).
    """
    from ..design import next_runs

    free = p.free()
    fit = p.last_fit()
    if free.empty:
        return [], "none"
    draws = np.asarray(fit.draws if fit is not None and fit.draws is not None else [], float)
    if draws.ndim != 2 or np.all(np.isfinite(draws), axis=1).sum() < 20:
        why = "no fit yet" if fit is None else "fewer than 20 usable draws"
        return _spread(free, k), f"spread over the cheapest candidates ({why})"
    left = min(p.compute_left(), p.flops_spent)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            d = next_runs(fit, p.settings["target_budget"], left, candidates=free[RUN_COLUMNS], k=k)
        except ScaleFitError as exc:
            return _spread(free, k), f"spread over the cheapest candidates ({exc})"
    keys = ["depth", "width", "params", "tokens"]
    picked = d.runs[keys].merge(free[[*keys, "run_id"]], on=keys, how="left")
    # the fit's own warnings are recorded by tell; what the design says is kept with the choice
    said = dict.fromkeys(
        str(w.message).splitlines()[0]
        for w in caught
        if not issubclass(w.category, ConvergenceWarning)
    )
    how = "next_runs on the last fit" + (f" ({'; '.join(said)})" if said else "")
    return list(dict.fromkeys(picked["run_id"].dropna())), how


def match(p, results: pd.DataFrame) -> list[dict]:
    """Rows of ``results`` matched to asked, untold runs; refuse any other."""
    if "loss" not in results:
        raise ScaleFitError("Plan.tell: the results need a 'loss' column.")
    pending = p.pending
    if "run_id" in results:
        ids = results["run_id"].astype(str)
    else:
        asked = p.runs([a["run_id"] for a in p.asked])
        ids = [_find(asked, r) for _, r in results.iterrows()]
    told = {r["run_id"] for r in p.results}
    out, open_ids = [], set(pending["run_id"])
    for (_, row), rid in zip(results.iterrows(), ids, strict=True):
        if rid not in open_ids:
            what = "was already told" if rid in told else "was not asked for (ask first)"
            raise ScaleFitError(f"Plan.tell: run {_name(row, rid)} {what}.")
        open_ids.discard(rid)
        told.add(rid)
        plan_row = pending.set_index("run_id").loc[rid]
        rec = {"run_id": rid, **{c: _num(row, c, plan_row) for c in RUN_COLUMNS}}
        rec["flops"] = float(training_flops(rec["params"], rec["tokens"]))
        loss = _cell(row, "loss")
        if loss <= 0:
            raise ScaleFitError(
                f"Plan.tell: run {rid!r} has loss {loss:g}; expected a positive loss "
                "(NaN or inf for a diverged run)."
            )
        rec["loss"] = loss if math.isfinite(loss) else None
        out.append(rec)
    return out


def _find(pending: pd.DataFrame, row) -> str | None:
    keys = [c for c in ("depth", "width", "params", "tokens") if c in row.index]
    hit = np.ones(len(pending), bool)
    for c in keys:
        hit &= np.isclose(pending[c].to_numpy(float), _cell(row, c), rtol=1e-9, equal_nan=True)
    return pending["run_id"].iloc[int(np.argmax(hit))] if hit.any() else None


def _cell(row, col: str) -> float:
    try:
        return float(row[col])
    except (TypeError, ValueError):
        raise ScaleFitError(f"Plan.tell: {col} {row[col]!r} is not a number.") from None


def _num(row, col: str, plan_row) -> float | None:
    """A measured value of the row (finite, positive), else (empty) the planned one."""
    v = _cell(row, col) if col in row.index else math.nan
    if math.isnan(v):
        v = float(plan_row[col])
    elif not (math.isfinite(v) and v > 0):
        raise ScaleFitError(f"Plan.tell: {col} {v:g} of a run; expected finite and positive.")
    return v if math.isfinite(v) else None


def _name(row, rid) -> str:
    if rid is not None and "run_id" in row.index:
        return repr(rid)
    return ", ".join(f"{c}={row[c]:g}" for c in ("params", "tokens") if c in row.index)


def decide(p) -> dict:
    """Refit the told runs, allocate the target budget, and return the decision record."""
    from ..allocate import allocate
    from ..fit import fit as fit_law
    from ..laws import get_law

    table = p.table().dropna(subset=["loss"])
    table = table.dropna(axis=1, how="all")
    base = {"runs": len(p.results), "flops_spent": p.flops_spent, "notes": []}
    law = get_law(p.settings["law"])
    if len(table) < len(law.params) + 1:
        base["notes"].append(f"{len(table)} runs with a loss: {len(law.params) + 1} needed to fit")
        return {**base, "params": None}
    path = inside(p.folder, FIT_FILE, what="plan file")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_law(
            table, law=law, bootstrap=p.settings["n_boot"], seed=p.settings["seed"], progress=False
        )
        try:
            row = allocate(fit, [p.settings["target_budget"]]).summary.iloc[0]
        except ScaleFitError as exc:  # a fit with no allocation: no decision this round
            row = None
            base["notes"].append(f"no decision: {exc}")
    base["notes"] += list(dict.fromkeys(str(w.message).splitlines()[0] for w in caught))
    if row is None:
        path.unlink(missing_ok=True)  # the next choice spreads runs instead of trusting this fit
        return {**base, "params": None}
    try:
        fit.save(path)
    except ScaleFitError as exc:  # not kept: the next choice spreads runs instead
        path.unlink(missing_ok=True)
        base["notes"].append(f"this fit is not kept for the next choice: {exc}")
    out = {**base, **_decision(row, fit.converged)}
    if not out["inside"]:
        out["notes"].append("the recommended N* lies outside its own interval")
    return out


def _decision(row, converged: bool) -> dict:
    def num(key):
        v = float(row.get(key, math.nan))
        return v if math.isfinite(v) else None

    lo, hi, n = num("params_star_lo"), num("params_star_hi"), num("params")
    out = {k: num(k) for k in ("params", "depth", "width", "tokens", "loss")}
    out.update(params_lo=lo, params_hi=hi, tokens_lo=num("tokens_star_lo"))
    out.update(tokens_hi=num("tokens_star_hi"), converged=bool(converged))
    # the stopping rule reads the draws' interval: the calibrated one adds the law's misfit,
    # which more runs below the target do not shrink
    d_lo = num("params_star_lo_draws") if "params_star_lo_draws" in row else lo
    d_hi = num("params_star_hi_draws") if "params_star_hi_draws" in row else hi
    out["ratio"] = d_hi / d_lo if d_lo and d_hi else None
    out["inside"] = bool(lo is not None and hi is not None and n is not None and lo <= n <= hi)
    return out
