"""Simulation study: designed runs (``scalefit.design.next_runs``) against a standard IsoFLOP grid.

Protocol (seeded, one script):

1. Fit the Chinchilla law to Epoch AI's replication of Hoffmann et al.'s data (``chinchilla_epoch``,
   their rule: drop the 5 highest losses, Huber δ = 1e-3) with 200 bootstrap resamples. The
   *truths* are ``--truths`` bootstrap draws picked at random (seeded); the *noise* of a simulated
   run is a residual of that fit on log loss, resampled.
2. Per truth, a pilot sweep is simulated: three budgets (1e18, 3e18, 1e19 FLOPs), five sizes each
   over 1.5 decades around 20 tokens per parameter. The pilot is fitted (least squares, 200
   bootstrap resamples): this is what a lab knows before planning.
3. Target: log N* at 1e24 FLOPs. Runs compute R = 1e21 FLOPs.
   * **grid**: a standard IsoFLOP grid of the same total compute: budgets b, 3b, 10b with
     b = R/56, four sizes each over 1.5 decades centred on the pilot's estimate of N*(budget).
   * **designed**: ``next_runs(pilot, 1e24, f·R, k=12)`` for f in ``FRACTIONS``.
4. Score: the asymptotic sd of the refitted log N*(1e24) at the truth, from the Fisher
   information of all runs (pilot + new): ``sd² = gᵀ (JᵀJ/σ²)⁻¹ g`` with J the Jacobian of log
   loss in the law's parameters and g the gradient of log N*; σ the residual sd. The smallest
   compute share f at which the designed runs reach the grid's sd (interpolated in log f) is the
   truth's compute ratio; the study reports its median over truths.

Run::

    nice -n 10 python docs/studies/design_study.py --truths 20 --out docs/studies/results
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from scalefit import datasets, fit
from scalefit._io import atomic_write_csv
from scalefit.accounting import training_flops
from scalefit.allocate.api import resolve
from scalefit.allocate.closed_form import chinchilla_optimum
from scalefit.allocate.space import Space
from scalefit.design import default_candidates, isoflop_grid, next_runs
from scalefit.laws import get_law

TARGET, R = 1e24, 1e21
FRACTIONS = (1.0, 0.5, 0.3, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002)
#: Candidate sets. "free": the default candidates (run budgets R'/1000 … R'/2, sizes over 2
#: decades around N*). "grid range": sizes over the grid's 1.5 decades and no run below the
#: pilot's smallest budget (1e18), so the design cannot buy information from tiny, far
#: off-optimal runs where a law is least trusted.
VARIANTS = {"free": (2.0, 0.0), "grid range": (1.5, 1e18)}
PILOT_BUDGETS = (1e18, 3e18, 1e19)
NAMES = ("E", "A", "B", "alpha", "beta")
LAW = get_law("chinchilla")


def log_nstar(p: dict) -> float:
    """log N* at the target budget (closed form)."""
    n, _ = chinchilla_optimum(p["E"], p["A"], p["B"], p["alpha"], p["beta"], TARGET)
    return float(np.log(n))


def fisher_sd(truth: dict, runs: pd.DataFrame, sigma: float) -> float:
    """Asymptotic sd of the refitted log N*(target) at the truth (delta method, Fisher info)."""
    x = {"params": runs["params"].to_numpy(float), "tokens": runs["tokens"].to_numpy(float)}
    base = np.array([truth[k] for k in NAMES])

    # coordinates: log E, log A, log B, alpha, beta (step sizes relative to the scale)
    def to_p(z):
        return {
            "E": np.exp(z[0]),
            "A": np.exp(z[1]),
            "B": np.exp(z[2]),
            "alpha": z[3],
            "beta": z[4],
        }

    z0 = np.array([np.log(base[0]), np.log(base[1]), np.log(base[2]), base[3], base[4]])
    jac, grad = np.zeros((len(runs), 5)), np.zeros(5)
    for i in range(5):
        h = 1e-5
        zp, zm = z0.copy(), z0.copy()
        zp[i] += h
        zm[i] -= h
        fp = np.log(LAW.evaluate(to_p(zp), x))
        fm = np.log(LAW.evaluate(to_p(zm), x))
        jac[:, i] = (fp - fm) / (2 * h)
        grad[i] = (log_nstar(to_p(zp)) - log_nstar(to_p(zm))) / (2 * h)
    info = jac.T @ jac / sigma**2
    return float(np.sqrt(grad @ np.linalg.solve(info, grad)))


def simulate(truth: dict, runs: pd.DataFrame, resid: np.ndarray, rng) -> pd.DataFrame:
    """Losses of ``runs`` under the truth with resampled residual noise."""
    loss = LAW.evaluate(truth, {"params": runs["params"], "tokens": runs["tokens"]})
    noise = rng.choice(resid, len(runs), replace=True)
    out = runs[["params", "tokens"]].copy()
    out["loss"] = np.asarray(loss) * np.exp(noise)
    out["flops"] = training_flops(out["params"], out["tokens"])
    return out


def mc_sd(truth, pilot, runs, resid, n_rep, rng) -> float:
    """Empirical sd of log N*(target) over refits of simulated pilot + new runs."""
    vals = []
    for _ in range(n_rep):
        data = pd.concat([simulate(truth, pilot, resid, rng), simulate(truth, runs, resid, rng)])
        res = fit(data, "chinchilla", starts=32, seed=0, progress=False)
        if res.converged:
            vals.append(log_nstar(res.params))
    return float(np.std(vals, ddof=1)) if len(vals) >= 5 else float("nan")


def pilot_runs() -> pd.DataFrame:
    """Three budgets, five sizes over 1.5 decades around 20 tokens per parameter."""
    budgets = np.asarray(PILOT_BUDGETS)
    centre = np.sqrt(budgets / 120.0)  # N with T = 20 N and C = 6 N T
    return isoflop_grid(centre, budgets, n_sizes=5, span=1.5)


def grid_runs(pilot_fit) -> pd.DataFrame:
    """Budgets b, 3b, 10b (b = R/56), four sizes over 1.5 decades around the pilot's N*."""
    b = R / 56.0
    budgets = np.array([b, 3 * b, 10 * b])
    p = pilot_fit.params
    centre, _ = chinchilla_optimum(p["E"], p["A"], p["B"], p["alpha"], p["beta"], budgets)
    return isoflop_grid(centre, budgets, n_sizes=4, span=1.5)


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


def main() -> None:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--truths", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mc-truths", type=int, default=2, help="truths checked by Monte Carlo refits")
    ap.add_argument("--mc", type=int, default=20, help="replicates per Monte Carlo check")
    ap.add_argument("--out", default="docs/studies/results")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    base = fit(
        datasets.load("chinchilla_epoch", drop_highest=5),
        "chinchilla",
        loss="huber",
        bootstrap=200,
        seed=args.seed,
        progress=False,
    )
    tab = datasets.load("chinchilla_epoch", drop_highest=5)
    resid = np.log(tab["loss"].to_numpy()) - np.log(base.predict(tab))
    resid = resid - np.median(resid)
    sigma = float(1.4826 * np.median(np.abs(resid)))  # robust sd of the residuals
    draws = base.draws[np.all(np.isfinite(base.draws), axis=1)]
    picks = rng.choice(len(draws), args.truths, replace=False)
    rows, designs = [], {}
    for t_i, d in enumerate(draws[picks]):
        truth = dict(zip(NAMES, d, strict=True))
        pilot = simulate(truth, pilot_runs(), resid, rng)
        pf = fit(pilot, "chinchilla", bootstrap=200, seed=args.seed + t_i, progress=False)
        grid = grid_runs(pf)
        sd_grid = fisher_sd(truth, pd.concat([pilot, grid]), sigma)
        sd_pilot = fisher_sd(truth, pilot, sigma)
        row = {"truth": t_i, **truth, "sd_pilot": sd_pilot, "sd_grid": sd_grid,
               "grid_flops": float(grid["flops"].sum())}  # fmt: skip
        for label, (span, floor) in VARIANTS.items():
            sds = []
            for f in FRACTIONS:
                src = resolve(pf)
                cand = default_candidates(src, Space.of(src.law), f * R, span=span)
                cand = cand[cand["flops"] >= floor]
                if cand.empty:
                    sds.append(np.inf)
                    continue
                d_res = next_runs(pf, TARGET, f * R, k=12, noise=sigma, candidates=cand)
                sds.append(fisher_sd(truth, pd.concat([pilot, d_res.runs]), sigma))
                row[f"sd_{label}_{f:g}"] = sds[-1]
                row[f"flops_{label}_{f:g}"] = d_res.total_flops
                row[f"pred_sd_{label}_{f:g}"] = d_res.sd_after
                if f == 1.0:
                    designs[(t_i, label)] = d_res.runs
            row[f"ratio_{label}"] = compute_ratio(FRACTIONS, sds, sd_grid)
        if t_i < args.mc_truths:
            pairs = [("grid", grid)] + [(lab, designs[(t_i, lab)]) for lab in VARIANTS]
            for label, runs in pairs:
                row[f"mc_sd_{label}"] = mc_sd(truth, pilot, runs, resid, args.mc, rng)
        print(
            f"truth {t_i}: sd grid {sd_grid:.4f}, designed at full compute "
            f"{row['sd_free_1']:.4f} (free) {row['sd_grid range_1']:.4f} (grid range), compute "
            f"ratio {row['ratio_free']:.4f} (free) {row['ratio_grid range']:.4f} (grid range)",
            flush=True,
        )
        rows.append(row)
    frame = pd.DataFrame(rows)
    out = Path(args.out)
    atomic_write_csv(out / "design_study.csv", frame)
    print(f"noise sd (robust, from the residuals) {sigma:.4f}; {len(frame)} truths")
    print(f"median sd of log N*(1e24): pilot {frame['sd_pilot'].median():.4f}, grid "
          f"{frame['sd_grid'].median():.4f}, designed at the same compute "
          f"{frame['sd_free_1'].median():.4f} (free), "
          f"{frame['sd_grid range_1'].median():.4f} (grid range)")  # fmt: skip
    for label in VARIANTS:
        ratio = frame[f"ratio_{label}"]
        print(f"{label}: compute share for the designed runs to match the grid: median "
              f"{ratio.median():.4f}, quartiles {ratio.quantile(0.25):.4f}-"
              f"{ratio.quantile(0.75):.4f}, share of truths at <= 0.5: {(ratio <= 0.5).mean():.2f}"
              f" (floor of the fractions tried: {min(FRACTIONS)})")  # fmt: skip
    if "mc_sd_grid" in frame:
        mc = frame.dropna(subset=["mc_sd_grid"])
        print("Monte Carlo refits (sd of the refitted log N* over replicates) vs Fisher sd:")
        cols = ["truth", "mc_sd_grid", "sd_grid", "mc_sd_free", "sd_free_1"]
        cols += ["mc_sd_grid range", "sd_grid range_1"]
        print(mc[cols].to_string(index=False))


if __name__ == "__main__":
    main()
