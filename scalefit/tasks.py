"""Downstream task accuracy from a model ladder, in two steps (Bhagia et al. 2024).

Step 1 fits the Chinchilla law ``bpb = E + A / params^alpha + B / tokens^beta`` to the task's
bits-per-byte on the final row of each ladder run, with :func:`scalefit.fit`. Step 2 maps
bits-per-byte to accuracy with a bounded sigmoid, ``acc = a / (1 + exp(-k (bpb - b0))) + c``,
fitted over the rows of the runs (intermediate checkpoints too; as in the paper's scripts,
each run's first 10 % of checkpoints dropped and a 5-checkpoint moving average taken). A
prediction chains the two.
Its interval comes from a bootstrap that resamples whole runs and refits both steps (reruns of
one size and budget are separate runs, so seed variance enters the resamples), widened by the
accuracy spread the reruns show at their final rows. Beside it, a single-step baseline fits the
same composite ``acc = sigmoid(chinchilla(params, tokens))`` directly to the final accuracies.

The input is a long table with ``run``, ``params``, ``tokens`` and, for each task, ``bpb_<task>``
and ``acc_<task>`` (``scalefit.datasets.load("olmo_ladder")`` gives one)::

    from scalefit import datasets, tasks
    ladder = datasets.load("olmo_ladder")
    small = ladder[ladder["size"].isin(["190M", "370M", "760M", "1B"])]
    tasks.predict(small, ladder[ladder["target"]], ["hellaswag"])
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .core._validation import Interval, constraints, validate
from .core.errors import ConvergenceWarning, ScaleFitError
from .fit import FitResult, fit

SIGMOID = ("a", "k", "b0", "c")
_LAW = "chinchilla"


def sigmoid(bpb: Any, a: float, k: float, b0: float, c: float) -> np.ndarray:
    """Step 2: accuracy from bits-per-byte, ``a / (1 + exp(-k (bpb - b0))) + c``.

    Examples
    --------
    >>> float(sigmoid(1.0, a=0.5, k=-10.0, b0=1.0, c=0.25))
    0.5
    """
    z = np.clip(-k * (np.asarray(bpb, float) - b0), -500, 500)
    return a / (1 + np.exp(z)) + c


def _fit_sigmoid(bpb: np.ndarray, acc: np.ndarray, x0: Any = None) -> np.ndarray:
    """Least-squares bounded sigmoid (a, c in [0, 1], k <= 0): best of a start grid, or from x0."""
    from scipy.optimize import least_squares

    lo, hi = float(bpb.min()), float(bpb.max())
    span = max(hi - lo, 1e-6)
    grid = [
        [acc.max() - acc.min(), k / span, lo + frac * span, max(acc.min() - 0.01, 0.0)]
        for frac in (0.25, 0.5, 0.75)
        for k in (-2.0, -8.0, -32.0)
    ]
    best = None
    box = ([0, -1e4, lo - 10 * span, 0], [1, 0, hi + 10 * span, 1])
    for start in grid if x0 is None else [x0]:
        res = least_squares(
            lambda p: sigmoid(bpb, *p) - acc,
            np.clip(start, [1e-6, -1e4, box[0][2], 0], [1, -1e-6, box[1][2], 1]),
            bounds=box,
        )
        if best is None or res.cost < best.cost:
            best = res
    return best.x


def _final(rows: pd.DataFrame) -> pd.DataFrame:
    """The last row (most tokens) of each run."""
    return rows.sort_values(["run", "tokens"]).groupby("run", sort=True).tail(1)


def _checked(table: pd.DataFrame, task: str) -> pd.DataFrame:
    cols = ["run", "params", "tokens", f"bpb_{task}", f"acc_{task}"]
    missing = [c for c in cols if c not in table.columns]
    if missing:
        have = sorted(c[4:] for c in table.columns if c.startswith("acc_"))
        raise ScaleFitError(
            f"The task table lacks column(s) {missing} for task {task!r}; tasks with both "
            f"bpb_ and acc_ columns: {have or 'none'}."
        )
    rows = table[cols].rename(columns={f"bpb_{task}": "bpb", f"acc_{task}": "acc"})
    vals = rows[["params", "tokens", "bpb", "acc"]].to_numpy(float)
    if not np.isfinite(vals).all() or (vals[:, :3] <= 0).any():
        raise ScaleFitError(
            f"params, tokens and bpb_{task} must be finite and positive, acc_{task} finite."
        )
    acc = rows["acc"]
    if ((acc < 0) | (acc > 1)).any():
        raise ScaleFitError(
            f"The 'acc_{task}' column must hold accuracies in [0, 1]. Got values from "
            f"{float(acc.min()):.4g} to {float(acc.max()):.4g} instead."
        )
    n_rungs, n_runs = rows["params"].nunique(), rows["run"].nunique()
    if n_rungs < 2 or n_runs < 6:
        raise ScaleFitError(
            "Task prediction needs at least 2 rungs (model sizes) and 6 runs for the 5-parameter "
            f"step-1 law. Got {n_rungs} rung(s) and {n_runs} run(s) instead."
        )
    return rows.reset_index(drop=True)


def _smoothed(rows: pd.DataFrame, skip: float = 0.1, window: int = 5) -> pd.DataFrame:
    """Step 2's rows as the paper's scripts take them.

    Each run's first ``skip`` of checkpoints dropped, bpb and accuracy a trailing moving average
    over ``window`` checkpoints.
    """
    out = []
    for _, run in rows.sort_values(["run", "tokens"]).groupby("run", sort=True):
        smooth = run[["bpb", "acc"]].rolling(window, min_periods=1).mean()
        out.append(run.assign(bpb=smooth["bpb"], acc=smooth["acc"]).iloc[int(skip * len(run)) :])
    return pd.concat(out, ignore_index=True)


def _seed_sd(final: pd.DataFrame) -> float:
    """Accuracy sd of one run from the final rows of runs sharing (params, tokens) (reruns)."""
    groups = final.groupby([final["params"], (final["tokens"] / final["params"]).round(0)])["acc"]
    sizes = groups.size()
    dof = int((sizes[sizes > 1] - 1).sum())  # pooled: each group of n replicates gives n - 1
    dev = final["acc"] - groups.transform("mean")
    return float(np.sqrt((dev**2).sum() / dof)) if dof else 0.0


@dataclass(frozen=True)
class TaskFit:
    """A two-step task fit: the step-1 law, the step-2 sigmoid, the baseline and the draws.

    Attributes
    ----------
    task : str
        The task (``bpb_<task>`` and ``acc_<task>`` columns).
    step1 : FitResult
        (params, tokens) -> bits-per-byte, fitted on the final row of each run; its convergence
        warnings (a ladder of a few rungs barely separates ``A`` from ``alpha``) are kept in
        ``step1.warnings`` rather than emitted.
    step2 : dict
        The sigmoid's ``a, k, b0, c`` (:func:`sigmoid`), fitted on every row.
    single : dict
        The single-step baseline: the law's parameters and the sigmoid's, fitted jointly to the
        final accuracies.
    draws : ndarray
        Bootstrap draws, shape (n_boot, 5 + 4): step-1 then step-2 parameters.
    seed_sd : float
        Accuracy sd between reruns at their final rows (0 without reruns).
    ci_prob : float
        Interval probability.
    seed : int
        Seed of the bootstrap.
    runs : tuple of str
        The runs fitted.
    """

    task: str
    step1: FitResult
    step2: dict[str, float]
    single: dict[str, float]
    draws: np.ndarray
    seed_sd: float
    ci_prob: float
    seed: int
    runs: tuple[str, ...]

    def predict(self, params: Any, tokens: Any) -> pd.DataFrame:
        """Predicted bits-per-byte and accuracy at ``(params, tokens)``.

        Returns
        -------
        pandas.DataFrame
            ``params, tokens, bpb, acc, acc_lo, acc_hi`` (two-step, with the bootstrap and
            rerun interval) and ``acc_single`` (the single-step baseline).
        """
        x = {"params": np.atleast_1d(np.asarray(params, float))}
        x["tokens"] = np.broadcast_to(np.asarray(tokens, float), x["params"].shape)
        law, names = self.step1.law, list(self.step1.params)
        bpb = np.asarray(law.evaluate(self.step1.params, x), float)
        sims = []
        rng = np.random.default_rng(self.seed + 1)
        for d in self.draws:
            b = np.asarray(law.evaluate(dict(zip(names, d[:5], strict=True)), x), float)
            sims.append(sigmoid(b, *d[5:]) + self.seed_sd * rng.standard_normal(b.shape))
        q = [(1 - self.ci_prob) / 2, (1 + self.ci_prob) / 2]
        lo, hi = np.quantile(np.asarray(sims), q, axis=0) if sims else (np.nan, np.nan)
        single = {k: v for k, v in self.single.items() if k in names}
        acc_single = sigmoid(law.evaluate(single, x), *(self.single[k] for k in SIGMOID))
        return pd.DataFrame(
            {
                **x,
                "bpb": bpb,
                "acc": sigmoid(bpb, **self.step2),
                "acc_lo": lo,
                "acc_hi": hi,
                "acc_single": np.asarray(acc_single, float),
            }
        )


def _single_step(final: pd.DataFrame, step1: FitResult, step2: np.ndarray) -> dict[str, float]:
    """The baseline: sigmoid(law(params, tokens)) fitted jointly to the final accuracies."""
    from scipy.optimize import least_squares

    law, names = step1.law, list(step1.params)
    x = {"params": final["params"].to_numpy(float), "tokens": final["tokens"].to_numpy(float)}
    acc = final["acc"].to_numpy(float)
    p0 = np.log(np.maximum([step1.params[n] for n in names], 1e-12))

    def resid(p):
        inner = law.evaluate(dict(zip(names, np.exp(p[:5]), strict=True)), x)
        return sigmoid(inner, *p[5:]) - acc

    b0 = step2[2]
    res = least_squares(
        resid,
        np.r_[p0, step2],
        bounds=(np.r_[p0 - 5, 0, -1e4, b0 - 10, 0], np.r_[p0 + 5, 1, 0, b0 + 10, 1]),
    )
    return {
        **dict(zip(names, np.exp(res.x[:5]), strict=True)),
        **dict(zip(SIGMOID, res.x[5:], strict=True)),
    }


def fit_task(
    table: pd.DataFrame,
    task: str,
    *,
    bootstrap: int = 100,
    seed: int = 0,
    ci_prob: float = 0.9,
) -> TaskFit:
    """Fit the two steps (and the single-step baseline) for one task.

    Parameters
    ----------
    table : pandas.DataFrame
        Ladder rows: ``run, params, tokens, bpb_<task>, acc_<task>``; every row of each run
        (intermediate checkpoints feed step 2, the last row of each run feeds step 1).
    task : str
        The task name.
    bootstrap : int, default 100
        Resamples of whole runs; both steps are refitted on each.
    seed : int, default 0
        Seed of the resamples (and of the step-1 fits' random starts).
    ci_prob : float, default 0.9
        Interval probability.

    Returns
    -------
    TaskFit

    Raises
    ------
    ScaleFitError
        A task column missing, fewer than 2 rungs or 6 runs, accuracies outside [0, 1].
    """
    rules = {**constraints("ci_prob"), "bootstrap": [Interval(int, 0, None)]}
    validate("fit_task", {"ci_prob": ci_prob, "bootstrap": bootstrap}, rules)
    rows = _checked(table, task)
    final = _final(rows)
    rows = _smoothed(rows)

    def step1(f: pd.DataFrame, **kw) -> FitResult:
        return fit(f[["params", "tokens"]].assign(loss=f["bpb"].to_numpy()), _LAW, **kw)

    with warnings.catch_warnings():  # kept in res1.warnings: a ladder's few rungs often warn
        warnings.simplefilter("ignore", ConvergenceWarning)
        res1 = step1(final, seed=seed)
    res2 = _fit_sigmoid(rows["bpb"].to_numpy(), rows["acc"].to_numpy())
    runs = final["run"].to_numpy()
    by_run = {r: g for r, g in rows.groupby("run")}
    rng = np.random.default_rng(seed)
    draws = []
    with warnings.catch_warnings():  # resamples repeat runs: flat directions are expected there
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.filterwarnings("ignore", r".*duplicate row", UserWarning)  # a run drawn twice
        for i in range(int(bootstrap)):
            pick = rng.choice(runs, size=len(runs))
            if len(set(final.set_index("run").loc[pick, "params"])) < 2:
                continue
            boot = pd.concat([by_run[r] for r in pick], ignore_index=True)
            r1 = step1(
                final.set_index("run").loc[pick].reset_index(),
                starts=8,
                x0=res1.params,
                seed=seed + 1 + i,
            )
            r2 = _fit_sigmoid(boot["bpb"].to_numpy(), boot["acc"].to_numpy(), res2)
            draws.append([*r1.params.values(), *r2])
    return TaskFit(
        task=task,
        step1=res1,
        step2=dict(zip(SIGMOID, map(float, res2), strict=True)),
        single=_single_step(final, res1, res2),
        draws=np.asarray(draws, float).reshape(-1, 9),
        seed_sd=_seed_sd(final),
        ci_prob=ci_prob,
        seed=seed,
        runs=tuple(runs),
    )


def predict(
    train: pd.DataFrame,
    target: pd.DataFrame,
    tasks: list[str] | None = None,
    *,
    bootstrap: int = 100,
    seed: int = 0,
    ci_prob: float = 0.9,
) -> pd.DataFrame:
    """Fit each task on ``train`` and predict the final row of each run of ``target``.

    Parameters
    ----------
    train, target : pandas.DataFrame
        Ladder rows (see :func:`fit_task`); ``target`` needs ``run, params, tokens`` and, to be
        scored, the task's ``bpb_`` and ``acc_`` columns.
    tasks : list of str, optional
        Default: every task with both columns in ``train``.
    bootstrap, seed, ci_prob
        As in :func:`fit_task`.

    Returns
    -------
    pandas.DataFrame
        One row per task and target run: ``task, run, params, tokens, bpb, bpb_pred, acc,
        acc_pred, acc_lo, acc_hi, acc_single, abs_err, abs_err_single, covered, warnings`` (step
        1's, joined by `` | ``), ``n_boot`` (resamples used) and ``seed``.
    """
    if tasks is None:
        tasks = [c[4:] for c in train.columns if c.startswith("acc_") and f"bpb_{c[4:]}" in train]
    out = []
    goal = target.sort_values(["run", "tokens"]).groupby("run").tail(1)
    for task in tasks:
        tf = fit_task(train, task, bootstrap=bootstrap, seed=seed, ci_prob=ci_prob)
        pred = tf.predict(goal["params"], goal["tokens"]).rename(
            columns={"bpb": "bpb_pred", "acc": "acc_pred"}
        )
        pred.insert(0, "run", goal["run"].to_numpy())
        pred.insert(0, "task", task)
        pred["bpb"] = goal.get(f"bpb_{task}", pd.Series(np.nan, goal.index)).to_numpy(float)
        pred["warnings"] = " | ".join(tf.step1.warnings)
        pred["n_boot"], pred["seed"] = len(tf.draws), seed
        pred["acc"] = goal.get(f"acc_{task}", pd.Series(np.nan, goal.index)).to_numpy(float)
        out.append(pred)
    res = pd.concat(out, ignore_index=True)
    res["abs_err"] = (res["acc_pred"] - res["acc"]).abs()
    res["abs_err_single"] = (res["acc_single"] - res["acc"]).abs()
    res["covered"] = (res["acc_lo"] <= res["acc"]) & (res["acc"] <= res["acc_hi"])
    tail = ["warnings", "n_boot", "seed"]
    return res[[c for c in res.columns if c not in tail] + tail]
