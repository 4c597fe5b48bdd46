"""Compute-optimal size at budgets nobody has run, with intervals that include the law's misfit.

:func:`recommend` turns an IsoFLOP training table (``params, tokens, loss, budget``) into the
compute-optimal size ``N*`` and tokens ``T* = C / (6 N*)`` at target budgets, with two intervals:

* **parameters only**: ``ln N* ± z·s_param``, ``s_param`` from a bootstrap of runs within each
  budget (the estimator's sampling spread only);
* **calibrated**: ``ln N* ± z·sqrt(s_param² + s_misfit(d)²)`` with
  ``s_misfit(d) = sqrt(s0² + (κ d)²)`` growing with the extrapolation distance
  ``d = ln(C / C_max_train)``. ``(s0, κ)`` come from rolling origins — fit on the budgets up to
  one, score the next two against each scored budget's own parabola vertex — by maximum
  likelihood of ``e ~ N(0, s_param² + s_ref² + s_misfit(d)²)``, ``s_ref`` the vertex's own
  bootstrap spread. Never from the rows the point estimate is fitted to at the same origin.

:func:`rolling_origins` and :func:`fit_calibration` are the two steps of that calibration;
``calibration="own"`` runs them on the training table itself, ``"pooled"`` uses the constants
:data:`POOLED` fitted on the eight public IsoFLOP sweeps (``benchmarks/bench_decision.py``,
final held-out budgets never used).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, stats

from ..allocate.api import check_budgets
from ..allocate.misfit import POOLED, Calibration, pooled
from ..core._validation import Interval, IsType, Options, validate
from ..core.errors import ScaleFitError
from ._estimators import (
    METHODS,
    STACK_PARTS,
    Budget,
    bootstrap,
    estimate,
    groups_of,
    pooled_sigma,
    reference,
)
from ._estimators import usable as _usable

#: Default estimator: chosen on the rolling origins of the public sweeps (``bench_decision.py``).
DEFAULT_METHOD = "average"
#: Fewest scored budgets for ``calibration="own"``.
MIN_OWN = 4
#: Fewest training budgets with a vertex for an estimate (and at each rolling origin).
MIN_TRAIN = 3


@dataclass(frozen=True)
class Decision:
    """Result of :func:`recommend` (nothing printed).

    Attributes
    ----------
    frame : DataFrame
        One row per target budget: ``budget, distance, params, tokens, se_param, se_misfit``,
        ``params_lo{P}, params_hi{P}, tokens_lo{P}, tokens_hi{P}`` for each interval probability
        ``P`` (in %; the calibrated interval where there is one), the same with ``_param`` for the
        parameter-only interval, and ``interval`` (``"calibrated"`` or ``"parameters only"``).
    method : str
        Point estimator.
    calibration : Calibration or None
        The misfit term used; None when the interval is parameters only.
    notes : tuple of str
        Why the calibration is missing, when it is.
    """

    frame: pd.DataFrame
    method: str
    calibration: Calibration | None
    notes: tuple = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dictionary."""
        cal = None if self.calibration is None else self.calibration.to_dict()
        return {
            "method": self.method,
            "calibration": cal,
            "notes": list(self.notes),
            "rows": self.frame.to_dict(orient="records"),
        }


def score_origin(
    train: list[Budget],
    targets: list[Budget],
    methods,
    *,
    sigma_ref: float,
    n_boot: int = 30,
    seed: int = 0,
    stack_weights: dict[str, float] | None = None,
) -> pd.DataFrame:
    """Fit every method on ``train`` and score it at each budget of ``targets``.

    Returns one row per (target, method): ``origin, budget, distance, method, pred, s_param,
    ref, s_ref, err`` (``pred - ref`` in ``ln N``), ``regret`` and ``regret_rel`` (the target's own
    parabola at the prediction, clamped to the sampled sizes, minus its minimum).
    ``stack_weights`` replaces the shipped weights of ``stack`` (see :func:`fit_stack_weights`).
    """
    logc = np.array([g.logc for g in targets])
    sw = stack_weights
    est, laws = estimate(train, logc, methods, seed=seed, stack_weights=sw)
    spread = (
        bootstrap(train, logc, methods, laws, n_boot=n_boot, seed=seed, stack_weights=sw)
        if n_boot
        else {}
    )
    top = max(g.logc for g in train)
    refs = [reference(g, sigma_ref, seed=seed) for g in targets]
    rows = []
    for m in methods:
        for j, (g, ref) in enumerate(zip(targets, refs, strict=True)):
            reg, rel = ref.regret(est[m][j])
            rows.append(
                {
                    "origin": float(np.exp(top)),
                    "budget": float(np.exp(g.logc)),
                    "distance": float(g.logc - top),
                    "method": m,
                    "pred": float(est[m][j]),
                    "s_param": float(spread[m][j]) if m in spread else np.nan,
                    "ref": ref.x,
                    "s_ref": ref.se,
                    "err": float(est[m][j] - ref.x),
                    "regret": reg,
                    "regret_rel": rel,
                }
            )
    return pd.DataFrame(rows)


def rolling_origins(
    table: pd.DataFrame,
    methods: str | list[str] = DEFAULT_METHOD,
    *,
    horizon: int = 2,
    n_boot: int = 30,
    seed: int = 0,
    stack_weights: dict[str, float] | None = None,
) -> pd.DataFrame:
    """Errors of ``methods`` at rolling origins of one IsoFLOP table.

    With budgets ``b_1 < ... < b_K``: for every ``k`` whose budgets ``<= b_k`` hold at least
    :data:`MIN_TRAIN` budgets with a vertex and with ``b_{k+horizon}`` in the table, fit on the runs
    of budgets ``<= b_k`` and score budgets ``b_{k+1} .. b_{k+horizon}`` (see
    :func:`score_origin`; ``s_ref`` uses the table's pooled parabola noise). Pass only the budgets
    that may inform a choice: hold the final ones out before calling.

    Parameters
    ----------
    table : DataFrame
        ``params, tokens, loss, budget``.
    methods : str or list of str
        Estimators (see :mod:`scalefit.isoflop._estimators`).
    horizon : int, default 2
        Budgets scored past each origin.
    n_boot : int, default 30
        Run-bootstrap resamples for ``s_param`` (0: none).
    seed : int, default 0
        Seed of the resamples.
    stack_weights : dict or None, default None
        Weights of ``stack``'s parts (None: the shipped ones, see :func:`fit_stack_weights`).

    Returns
    -------
    DataFrame
        :func:`score_origin`'s rows for every origin.
    """
    methods = [methods] if isinstance(methods, str) else list(methods)
    for m in methods:
        validate("rolling_origins", {"method": m}, {"method": [Options(set(METHODS))]})
    groups = groups_of(table, "rolling_origins")
    sigma = pooled_sigma(groups)
    frames = []
    for k in range(len(groups) - horizon):
        train = groups[: k + 1]
        if len(_usable(train)) < MIN_TRAIN:
            continue
        frames.append(
            score_origin(
                train,
                groups[k + 1 : k + 1 + horizon],
                methods,
                sigma_ref=sigma,
                n_boot=n_boot,
                seed=seed,
                stack_weights=stack_weights,
            )
        )
    cols = ["origin", "budget", "distance", "method", "pred", "s_param", "ref", "s_ref", "err"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def fit_calibration(
    errors: pd.DataFrame,
    *,
    method: str,
    source: str,
    group: str | None = None,
    floor: bool = True,
) -> Calibration:
    """Maximum-likelihood ``(s0, kappa)`` from rolling-origin errors.

    ``err ~ N(0, s_param² + s_ref² + s0² + (kappa·distance)²)`` over the rows of ``errors`` for
    ``method`` with a reference; with ``group`` (e.g. the experiment) every group carries the same
    total weight. ``floor=False`` fixes ``s0 = 0`` (one parameter, for a table's own few origins).
    """
    e = errors[(errors["method"] == method) & np.isfinite(errors["err"])]
    if len(e) < 2:
        raise ScaleFitError(
            f"fit_calibration: needs at least 2 scored budgets for {method!r}; got {len(e)}."
        )
    err = e["err"].to_numpy(float)
    base = np.nan_to_num(e["s_param"].to_numpy(float)) ** 2
    base += np.nan_to_num(e["s_ref"].to_numpy(float)) ** 2
    d = np.clip(e["distance"].to_numpy(float), 0, None)
    w = np.ones(len(e))
    if group is not None:
        counts = e.groupby(group)[group].transform("size").to_numpy(float)
        w = len(e) / e[group].nunique() / counts

    def nll(u):
        s0 = np.exp(u[0]) if floor else 0.0
        v = base + s0**2 + (np.exp(u[-1]) * d) ** 2 + 1e-12
        return float(np.sum(w * (np.log(v) + err**2 / v)))

    starts = [np.log([0.05, 0.1]), np.log([0.2, 0.02]), np.log([0.01, 0.3])]
    best = min(
        (optimize.minimize(nll, s if floor else s[1:], method="Nelder-Mead") for s in starts),
        key=lambda r: r.fun,
    )
    u = np.clip(best.x, -20, 5)
    s0 = float(np.exp(u[0])) if floor else 0.0
    if group:
        n_origins = int(e.groupby(group)["origin"].nunique().sum())
    else:
        n_origins = int(e["origin"].nunique())
    return Calibration(s0, float(np.exp(u[-1])), n_origins, len(e), source, method)


def fit_stack_weights(
    errors: pd.DataFrame,
    *,
    parts: tuple[str, ...] = STACK_PARTS,
    group: str | None = None,
) -> dict[str, float]:
    """Weights of ``stack``: the convex combination of ``parts`` with the least mean |error|.

    Minimises ``sum_r w_r |sum_i a_i err_{r,i}|`` over ``a_i >= 0``, ``sum_i a_i = 1`` (a linear
    program), ``err`` the rolling-origin ``ln N*`` errors of each part (``pred - ref``) at the
    scored budgets where every part has one; with ``group`` (e.g. the experiment) every group
    carries the same total weight, as in the benchmark's score (mean over sweeps of each sweep's
    mean). Pass only rolling-origin rows: never the budgets the stack will be scored on.

    Parameters
    ----------
    errors : DataFrame
        :func:`rolling_origins` rows (``origin, budget, method, err``, and ``group``).
    parts : tuple of str, default :data:`STACK_PARTS`
        Base estimators.
    group : str or None, default None
        Column whose groups weigh equally.

    Returns
    -------
    dict
        Weight per part (non-negative, summing to 1).
    """
    keys = ["origin", "budget"] + ([group] if group else [])
    sub = errors[errors["method"].isin(parts)]
    wide = sub.pivot_table(index=keys, columns="method", values="err", aggfunc="first")
    missing = [p for p in parts if p not in wide.columns]
    wide = wide.reindex(columns=list(parts)).dropna()
    if missing or len(wide) < len(parts):
        raise ScaleFitError(
            f"fit_stack_weights: needs at least {len(parts)} scored budgets where every part of "
            f"{list(parts)} has an error; got {len(wide)} (missing parts: {missing})."
        )
    e = wide.to_numpy(float)
    w = np.ones(len(e))
    if group:
        g = wide.index.get_level_values(group)
        counts = pd.Series(g).map(pd.Series(g).value_counts()).to_numpy(float)
        w = 1.0 / counts
    w = w / w.sum()
    n, k = e.shape
    # variables: a (k) then t (n); minimise w . t with -t <= e a <= t, sum a = 1, a, t >= 0
    cost = np.concatenate([np.zeros(k), w])
    a_ub = np.block([[e, -np.eye(n)], [-e, -np.eye(n)]])
    a_eq = np.concatenate([np.ones(k), np.zeros(n)])[None, :]
    res = optimize.linprog(
        cost, A_ub=a_ub, b_ub=np.zeros(2 * n), A_eq=a_eq, b_eq=[1.0], bounds=(0, None),
        method="highs",
    )  # fmt: skip
    if not res.success:
        raise ScaleFitError(f"fit_stack_weights: the linear program failed ({res.message}).")
    a = np.clip(res.x[:k], 0.0, None)
    a = a / a.sum()
    return {p: float(v) for p, v in zip(parts, a, strict=True)}


def _calibration(table, method, calibration, n_boot, seed) -> tuple[Calibration | None, str]:
    if calibration is None:
        return None, "no calibration asked for: parameters only"
    if isinstance(calibration, Calibration):
        return calibration, ""
    if calibration == "pooled":
        if method not in POOLED:
            return None, f"no pooled calibration for {method!r}: parameters only"
        return pooled(method), ""
    errors = rolling_origins(table, method, n_boot=n_boot, seed=seed)
    n = int(np.isfinite(errors["err"]).sum()) if len(errors) else 0
    if n < MIN_OWN:
        return None, (
            f"own calibration needs {MIN_OWN} scored budgets at rolling origins; this table gives "
            f"{n} (it needs more budgets): parameters only"
        )
    src = f"own: {errors['origin'].nunique()} rolling origins of this table"
    return fit_calibration(errors, method=method, source=src, floor=False), ""


def recommend(
    table: pd.DataFrame,
    budgets,
    *,
    method: str = DEFAULT_METHOD,
    calibration: str | Calibration | None = "pooled",
    ci_probs: tuple[float, ...] = (0.8, 0.95),
    n_boot: int = 50,
    seed: int = 0,
) -> Decision:
    """Compute-optimal size and tokens at target budgets, with calibrated intervals.

    Parameters
    ----------
    table : DataFrame
        An IsoFLOP design: ``params, tokens, loss`` and ``budget`` (FLOPs) per run; at least
        :data:`MIN_TRAIN` budgets with 4 or more runs of distinct sizes.
    budgets : float or array-like
        Target budgets (FLOPs).
    method : str, default :data:`DEFAULT_METHOD`
        Point estimator: one of ``law_huber, law_mse, law_frontier, law_near, parabola,
        parabola_wls, parabola_recent, anchored, average, average_all, parabola_shared,
        parabola_sharedc,
        slope_prior, stack`` (``stack``: the shipped weights
        :data:`scalefit.allocate.misfit.STACK_WEIGHTS`)
        (see :mod:`scalefit.isoflop._estimators`).
    calibration : {"pooled", "own"}, Calibration or None, default "pooled"
        The misfit term: ``"pooled"`` the constants fitted on the public sweeps (:data:`POOLED`),
        ``"own"`` fitted to this table's own rolling origins (needs :data:`MIN_OWN` scored
        budgets), a :class:`Calibration`, or None (parameters only). When it cannot be computed
        the interval is parameters only, ``frame["interval"]`` says so and ``notes`` says why.
    ci_probs : tuple of float, default (0.8, 0.95)
        Interval probabilities.
    n_boot : int, default 50
        Run-bootstrap resamples (within each budget) for ``s_param``.
    seed : int, default 0
        Seed of the resamples and of the law fits' starts.

    Returns
    -------
    Decision

    Examples
    --------
    >>> from scalefit.isoflop import recommend, synthetic_isoflops
    >>> runs = synthetic_isoflops(seed=0)
    >>> d = recommend(runs, 1e22, method="parabola", n_boot=20)
    >>> list(d.frame["interval"])
    ['calibrated']
    """
    validate(
        "recommend",
        locals(),
        {
            "method": [Options(set(METHODS))],
            "n_boot": [Interval(int, 10, None)],
            "seed": [Interval(int, 0, None)],
            "calibration": [Options({"pooled", "own"}), IsType(Calibration, "a Calibration"), None],
        },
    )
    probs = tuple(float(p) for p in np.atleast_1d(ci_probs))
    if not probs or not all(0 < p < 1 for p in probs):
        raise ScaleFitError(
            f"The 'ci_probs' parameter of recommend must be floats in (0, 1). Got {ci_probs!r}."
        )
    target = check_budgets(budgets, "recommend")
    groups = groups_of(table)
    if len(_usable(groups)) < MIN_TRAIN:
        raise ScaleFitError(
            f"recommend: needs at least {MIN_TRAIN} budgets with 4 or more runs of distinct "
            f"sizes; the table has {len(_usable(groups))}."
        )
    logc = np.log(target)
    est, laws = estimate(groups, logc, [method], seed=seed)
    x = est[method]
    if not np.all(np.isfinite(x)):
        raise ScaleFitError(f"recommend: the {method!r} estimate failed on this table.")
    s_param = bootstrap(groups, logc, [method], laws, n_boot=n_boot, seed=seed)[method]
    cal, note = _calibration(table, method, calibration, n_boot, seed)
    dist = logc - max(g.logc for g in groups)
    return Decision(
        _frame(target, dist, x, s_param, cal, probs), method, cal, (note,) if note else ()
    )


def _frame(target, dist, x, s_param, cal, probs) -> pd.DataFrame:
    from ..core.accounting import tokens_for_budget

    s_mis = cal.s_misfit(dist) if cal is not None else np.full(len(x), np.nan)
    sp = np.nan_to_num(s_param)
    s_tot = np.sqrt(sp**2 + s_mis**2) if cal is not None else sp
    out = pd.DataFrame({"budget": target, "distance": dist, "params": np.exp(x)})
    out["tokens"] = tokens_for_budget(target, out["params"].to_numpy())
    out["se_param"], out["se_misfit"] = s_param, s_mis
    for p in probs:
        z = stats.norm.ppf(0.5 + p / 2)
        tag = f"{100 * p:g}"
        for suffix, s in (("", s_tot), ("_param", sp)):
            lo, hi = np.exp(x - z * s), np.exp(x + z * s)
            out[f"params_lo{tag}{suffix}"], out[f"params_hi{tag}{suffix}"] = lo, hi
            out[f"tokens_lo{tag}{suffix}"] = tokens_for_budget(target, hi)
            out[f"tokens_hi{tag}{suffix}"] = tokens_for_budget(target, lo)
    out["interval"] = "calibrated" if cal is not None else "parameters only"
    return out
