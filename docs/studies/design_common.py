"""The protocol shared by the design studies (``design_study.py``, ``design_study_decomposed.py``).

A study names its law, how it finds log N* at the target budget, its pilot and grid runs; this
module runs the rest the same way for every law: truths drawn from a bootstrap fit, simulated
losses with resampled residual noise, a pilot fit, the grid and designed runs scored by the
Fisher-information sd of the refitted log N*(target), the compute share at which the designed
runs match the grid, optional Monte Carlo refits, and the results table (written atomically after
every truth, so a long run keeps what it has done).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from scalefit import fit
from scalefit.allocate.api import resolve
from scalefit.allocate.space import Space
from scalefit.core._io import atomic_write_csv
from scalefit.core.accounting import training_flops
from scalefit.design import default_candidates, next_runs

TARGET, R = 1e24, 1e21
#: Candidate sets. "free": the default candidates (run budgets R'/1000 … R'/2, sizes over 2
#: decades around N*). "grid range": sizes over the grid's 1.5 decades and no run below the
#: pilot's smallest budget (1e18), so the design cannot buy information from tiny, far
#: off-optimal runs where a law is least trusted.
VARIANTS = {"free": (2.0, 0.0), "grid range": (1.5, 1e18)}
#: Relative slack of the candidate floor: a run at the floor's own budget is not below it.
FLOOR_TOL = 1e-6
#: Finite-difference step of the Jacobian of log loss in the (partly log) parameter coordinates.
JAC_STEP = 1e-5


@dataclass(frozen=True)
class Study:
    """What differs between the design studies.

    ``law`` is the law object (``fit_law`` what :func:`scalefit.fit` is given: a registry name or
    the object); ``log_nstar(params)`` gives log N* at :data:`TARGET`; ``log_names`` are the
    parameters perturbed in log coordinates for the Fisher information, ``grad_step`` the
    finite-difference step of log N* there, ``pinv`` whether the information matrix is
    pseudo-inverted (else solved); ``keep`` the run columns a simulated run carries;
    ``columns`` what is recorded per compute share (``sd``, ``flops``, ``pred_sd``).
    """

    name: str
    law: object
    fit_law: object
    log_nstar: Callable[[dict], float]
    fractions: tuple[float, ...]
    log_names: tuple[str, ...]
    grad_step: float
    pinv: bool
    keep: tuple[str, ...]
    pilot_bootstrap: int
    mc_starts: int
    columns: tuple[str, ...] = ("sd",)

    @property
    def names(self) -> tuple[str, ...]:
        """The law's parameter names, in the order of its bootstrap draws."""
        return tuple(self.law.param_names)


def compute_ratio(fracs, sds, target_sd) -> float:
    """Smallest compute share whose designed sd reaches ``target_sd`` (log-log interpolation)."""
    order = np.argsort(fracs)
    f, s = np.asarray(fracs)[order], np.asarray(sds)[order]
    if s[-1] > target_sd:
        return float("inf")
    if s[0] <= target_sd:
        return float(f[0])
    i = int(np.flatnonzero(s <= target_sd)[0])
    lf = np.interp(np.log(target_sd), np.log([s[i], s[i - 1]]), np.log([f[i], f[i - 1]]))
    return float(np.exp(lf))


def residual_noise(result, table: pd.DataFrame) -> tuple[np.ndarray, float]:
    """Median-centred log-loss residuals of ``result`` on ``table`` and their robust sd."""
    resid = np.log(table["loss"].to_numpy()) - np.log(result.predict(table))
    resid = resid - np.median(resid)
    return resid, float(1.4826 * np.median(np.abs(resid)))


def pick_truths(result, n: int, rng) -> np.ndarray:
    """``n`` of the finite bootstrap draws of ``result``, picked without replacement."""
    draws = result.draws[np.all(np.isfinite(result.draws), axis=1)]
    return draws[rng.choice(len(draws), n, replace=False)]


def fisher_sd(study: Study, truth: dict, runs: pd.DataFrame, sigma: float) -> float:
    """Asymptotic sd of the refitted log N*(target) at the truth (delta method, Fisher info).

    ``sd² = gᵀ (JᵀJ/σ²)⁻¹ g`` with J the Jacobian of log loss in the law's parameters and g the
    gradient of log N*, both by central differences in the study's coordinates.
    """
    names, law = study.names, study.law
    x = {k: runs[k].to_numpy(float) for k in law.inputs}
    is_log = [k in study.log_names for k in names]
    z0 = np.array(
        [np.log(truth[k]) if lg else truth[k] for k, lg in zip(names, is_log, strict=True)]
    )

    def params(z):
        return {k: np.exp(v) if lg else v for k, v, lg in zip(names, z, is_log, strict=True)}

    def shifted(i, h):
        zp, zm = z0.copy(), z0.copy()
        zp[i] += h
        zm[i] -= h
        return params(zp), params(zm)

    jac, grad = np.zeros((len(runs), len(names))), np.zeros(len(names))
    for i in range(len(names)):
        pp, pm = shifted(i, JAC_STEP)
        jac[:, i] = (np.log(law.evaluate(pp, x)) - np.log(law.evaluate(pm, x))) / (2 * JAC_STEP)
        pp, pm = shifted(i, study.grad_step)
        grad[i] = (study.log_nstar(pp) - study.log_nstar(pm)) / (2 * study.grad_step)
    info = jac.T @ jac / sigma**2
    if study.pinv:
        return float(np.sqrt(grad @ np.linalg.pinv(info) @ grad))
    return float(np.sqrt(grad @ np.linalg.solve(info, grad)))


def simulate(study: Study, truth: dict, runs: pd.DataFrame, resid, rng) -> pd.DataFrame:
    """Losses of ``runs`` under the truth with resampled residual noise."""
    out = runs[list(study.keep)].copy()
    loss = np.asarray(study.law.evaluate(truth, {k: out[k] for k in study.law.inputs}), float)
    out["loss"] = loss * np.exp(rng.choice(resid, len(out), replace=True))
    out["flops"] = training_flops(out["params"], out["tokens"])
    return out


def mc_sd(study: Study, truth, pilot, runs, resid, n_rep: int, rng) -> float:
    """Empirical sd of log N*(target) over least-squares refits of simulated pilot + runs."""
    vals = []
    for _ in range(n_rep):
        data = pd.concat(
            [simulate(study, truth, pilot, resid, rng), simulate(study, truth, runs, resid, rng)]
        )
        res = fit(data, study.fit_law, starts=study.mc_starts, seed=0, progress=False)
        if res.converged:
            vals.append(study.log_nstar(res.params))
    return float(np.std(vals, ddof=1)) if len(vals) >= 5 else float("nan")


def designed(study: Study, pilot_fit, pilot, truth, sigma, sd_grid) -> tuple[dict, dict]:
    """Designed runs per candidate set and compute share: the row's columns, runs at share 1."""
    row, designs = {}, {}
    for label, (span, floor) in VARIANTS.items():
        sds = []
        for f in study.fractions:
            src = resolve(pilot_fit)
            cand = default_candidates(src, Space.of(src.law), f * R, span=span)
            # Runs *at* the floor's budget stay in (tokens are rounded down, so 6·N·T sits a
            # hair below its budget; an exact comparison dropped them by the last digits of N*).
            cand = cand[cand["flops"] >= floor * (1 - FLOOR_TOL)]
            if cand.empty:
                sds.append(np.inf)
                continue
            d_res = next_runs(pilot_fit, TARGET, f * R, k=12, noise=sigma, candidates=cand)
            sds.append(fisher_sd(study, truth, pd.concat([pilot, d_res.runs]), sigma))
            values = {"sd": sds[-1], "flops": d_res.total_flops, "pred_sd": d_res.sd_after}
            row.update({f"{c}_{label}_{f:g}": values[c] for c in study.columns})
            if f == 1.0:
                designs[label] = d_res.runs
        row[f"ratio_{label}"] = compute_ratio(study.fractions, sds, sd_grid)
    return row, designs


def one_truth(study: Study, t_i: int, truth: dict, pilot_runs, grid_runs, noise, rng, args):
    """One truth's row: pilot fit, grid and designed sds, Monte Carlo refits if asked."""
    resid, sigma = noise
    pilot = simulate(study, truth, pilot_runs, resid, rng)
    boot, seed = study.pilot_bootstrap, args.seed + t_i
    pf = fit(pilot, study.fit_law, bootstrap=boot, seed=seed, progress=False)
    grid = grid_runs(pf)
    sd_grid = fisher_sd(study, truth, pd.concat([pilot, grid]), sigma)
    row = {"truth": t_i, **truth, "sd_pilot": fisher_sd(study, truth, pilot, sigma)}
    row.update(sd_grid=sd_grid, grid_flops=float(grid["flops"].sum()))
    cols, designs = designed(study, pf, pilot, truth, sigma, sd_grid)
    row.update(cols)
    if t_i < args.mc_truths:
        for label, runs in [("grid", grid), *designs.items()]:
            row[f"mc_sd_{label}"] = mc_sd(study, truth, pilot, runs, resid, args.mc, rng)
    print(
        f"truth {t_i}: sd grid {sd_grid:.4f}, designed at full compute "
        f"{row['sd_free_1']:.4f} (free) {row['sd_grid range_1']:.4f} (grid range), compute "
        f"ratio {row['ratio_free']:.4f} (free) {row['ratio_grid range']:.4f} (grid range)",
        flush=True,
    )
    return row


def parse_args(doc: str, *, mc_truths: int, mc: int) -> argparse.Namespace:
    """The studies' command line (defaults of the Monte Carlo check differ per study)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--truths", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--mc-truths", type=int, default=mc_truths, help="truths checked by Monte Carlo"
    )
    ap.add_argument("--mc", type=int, default=mc, help="refits per Monte Carlo check")
    ap.add_argument("--out", default="docs/studies/results")
    return ap.parse_args()


def run(study: Study, base, table, pilot_runs, grid_runs, args, rng) -> pd.DataFrame:
    """Every truth in turn; the table is written to ``args.out/<study.name>.csv`` after each.

    ``rng`` picks the truths; each truth then simulates from its own stream (seeded by
    ``(args.seed, truth index)``), so a change in one truth's design (e.g. the number of runs a
    Monte Carlo check simulates) cannot change the simulated pilots of the truths after it.
    """
    noise = residual_noise(base, table)
    rows = []
    for t_i, d in enumerate(pick_truths(base, args.truths, rng)):
        truth = dict(zip(study.names, d, strict=True))
        t_rng = np.random.default_rng([args.seed, t_i])
        rows.append(one_truth(study, t_i, truth, pilot_runs, grid_runs, noise, t_rng, args))
        atomic_write_csv(Path(args.out) / f"{study.name}.csv", pd.DataFrame(rows))
    frame = pd.DataFrame(rows)
    summarise(frame, noise[1], study.fractions)
    return frame


def _quantile(values: pd.Series, q: float) -> float:
    """Linear-interpolated quantile where ``inf`` (never matches the grid) counts as the largest.

    pandas gives NaN when the interpolation reaches an ``inf``; here that quantile is ``inf``.
    """
    v = values.to_numpy(float)
    big = np.where(np.isinf(v), 1e300, v)
    out = float(np.quantile(big, q))
    return float("inf") if out > 1e299 else out


def summarise(frame: pd.DataFrame, sigma: float, fractions) -> None:
    """Print the medians over truths, the compute shares and the Monte Carlo check."""
    print(f"noise sd (robust, from the residuals) {sigma:.4f}; {len(frame)} truths")
    print(f"median sd of log N*(1e24): pilot {frame['sd_pilot'].median():.4f}, grid "
          f"{frame['sd_grid'].median():.4f}, designed at the same compute "
          f"{frame['sd_free_1'].median():.4f} (free), "
          f"{frame['sd_grid range_1'].median():.4f} (grid range)")  # fmt: skip
    for label in VARIANTS:
        r = frame[f"ratio_{label}"]
        print(f"{label}: compute share for the designed runs to match the grid: median "
              f"{_quantile(r, 0.5):.4f}, quartiles {_quantile(r, 0.25):.4f}-"
              f"{_quantile(r, 0.75):.4f}, "
              f"truths at <= 0.5: {int((r <= 0.5).sum())} of {len(r)} (floor of the fractions "
              f"tried: {min(fractions)})")  # fmt: skip
    if "mc_sd_grid" in frame:
        cols = ["truth", "mc_sd_grid", "sd_grid", "mc_sd_free", "sd_free_1"]
        cols += ["mc_sd_grid range", "sd_grid range_1"]
        print("Monte Carlo refits (sd of the refitted log N* over replicates) vs Fisher sd:")
        print(frame.dropna(subset=["mc_sd_grid"])[cols].to_string(index=False))
