"""Design study, decomposed law: designed runs against a standard IsoFLOP grid (shapes included).

The same protocol as ``design_study.py`` with truths around Liu et al.'s decomposed law
(``L = c_W/W^a_W + c_l/l^a_l + c_T/T^a_T + L0``):

1. The decomposed law is fitted to Liu's 203 Chinchilla rows (``drop_highest=40``) with 100
   bootstrap resamples; ``--truths`` draws are the truths; a run's noise is a resampled residual.
2. Pilot: the table's own shapes (depth, width, params, tokens) below 3e19 FLOPs (45 rows),
   with losses simulated from the truth; fitted with 100 bootstrap resamples.
3. Target log N*(1e24) (continuous optimum of ``scalefit.allocate``, default accounting).
   Grid: budgets b, 3b, 10b (b = 1e21/56), four sizes over 1.5 decades around the pilot's N*,
   each at the pilot's optimal depth scaled by (N/N*)^(1/3), width a multiple of 8 (exact count).
   Designed: ``next_runs`` with the default shape candidates (free) or confined to the grid's
   range (1.5 decades, no run below 1e18 FLOPs).
4. Score: Fisher-information sd of log N*(1e24) at the truth (log-parameter coordinates).

Run::

    nice -n 10 python docs/studies/design_study_decomposed.py --truths 20 --mc-truths 2 --mc 10 \
        --out docs/studies/results
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from scalefit import datasets, fit
from scalefit._io import atomic_write_csv
from scalefit.accounting import tokens_for_budget, training_flops
from scalefit.allocate.api import resolve
from scalefit.allocate.solve import solve
from scalefit.allocate.space import Space
from scalefit.design import default_candidates, next_runs
from scalefit.laws import get_law

sys.path.insert(0, str(Path(__file__).parent))
from design_study import compute_ratio  # noqa: E402  (same folder)

TARGET, R = 1e24, 1e21
FRACTIONS = (1.0, 0.5, 0.3, 0.2, 0.1, 0.05, 0.02, 0.002)
VARIANTS = {"free": (2.0, 0.0), "grid range": (1.5, 1e18)}
LAW = get_law("decomposed")
SPACE = Space.of(LAW)
NAMES = tuple(LAW.param_names)


def log_nstar(p: dict) -> float:
    """log N* at the target budget (continuous optimum)."""
    one = {k: np.array([float(v)]) for k, v in p.items()}
    return float(np.log(solve(SPACE, one, [TARGET], sets=False)["params"].iloc[0]))


def fisher_sd(truth: dict, runs: pd.DataFrame, sigma: float) -> float:
    """Asymptotic sd of the refitted log N*(target) at the truth (log-parameter coordinates)."""
    x = {k: runs[k].to_numpy(float) for k in LAW.inputs}
    z0 = np.log([truth[k] for k in NAMES])
    jac, grad = np.zeros((len(runs), len(NAMES))), np.zeros(len(NAMES))
    for i in range(len(NAMES)):
        zp, zm = z0.copy(), z0.copy()
        zp[i] += 1e-5
        zm[i] -= 1e-5
        pp, pm = (
            dict(zip(NAMES, np.exp(zp), strict=True)),
            dict(zip(NAMES, np.exp(zm), strict=True)),
        )
        jac[:, i] = (np.log(LAW.evaluate(pp, x)) - np.log(LAW.evaluate(pm, x))) / 2e-5
        zp[i] += 1e-2 - 1e-5
        zm[i] -= 1e-2 - 1e-5
        pp, pm = (
            dict(zip(NAMES, np.exp(zp), strict=True)),
            dict(zip(NAMES, np.exp(zm), strict=True)),
        )
        grad[i] = (log_nstar(pp) - log_nstar(pm)) / 2e-2
    info = jac.T @ jac / sigma**2
    return float(np.sqrt(grad @ np.linalg.pinv(info) @ grad))


def simulate(truth, runs, resid, rng) -> pd.DataFrame:
    """Losses of ``runs`` under the truth with resampled residual noise."""
    out = runs[["depth", "width", "params", "tokens"]].copy()
    loss = np.asarray(LAW.evaluate(truth, {k: out[k] for k in LAW.inputs}), dtype=float)
    out["loss"] = loss * np.exp(rng.choice(resid, len(out), replace=True))
    out["flops"] = training_flops(out["params"], out["tokens"])
    return out


def mc_sd(truth, pilot, runs, resid, n_rep, rng) -> float:
    """Empirical sd of log N*(target) over least-squares refits of simulated pilot + runs."""
    vals = []
    for _ in range(n_rep):
        data = pd.concat([simulate(truth, pilot, resid, rng), simulate(truth, runs, resid, rng)])
        res = fit(data, LAW, starts=64, seed=0, progress=False)
        if res.converged:
            vals.append(log_nstar(res.params))
    return float(np.std(vals, ddof=1)) if len(vals) >= 5 else float("nan")


def grid_runs(pilot_fit) -> pd.DataFrame:
    """Standard grid with shapes around the pilot's optimum (see the module docstring)."""
    b = R / 56.0
    budgets = np.array([b, 3 * b, 10 * b])
    one = {k: np.array([v]) for k, v in pilot_fit.params.items()}
    opt = solve(SPACE, one, budgets, sets=False)
    rows = []
    for c, (_, o) in zip(budgets, opt.iterrows(), strict=True):
        for s in 10.0 ** np.linspace(-0.75, 0.75, 4):
            n = o["params"] * s
            depth = max(1, int(round(o["depth"] * s ** (1 / 3))))
            width = max(8, int(round(float(SPACE.accounting.width(depth, n)) / 8)) * 8)
            p = float(SPACE.accounting.params(depth, width, exact=True))
            rows.append({"depth": depth, "width": width, "params": p, "budget": c})
    frame = pd.DataFrame(rows)
    frame["tokens"] = tokens_for_budget(frame["budget"], frame["params"])
    frame["flops"] = training_flops(frame["params"], frame["tokens"])
    return frame.drop(columns="budget")


def main() -> None:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--truths", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mc-truths", type=int, default=0, help="truths checked by Monte Carlo")
    ap.add_argument("--mc", type=int, default=10, help="refits per Monte Carlo check")
    ap.add_argument("--out", default="docs/studies/results")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    tab = datasets.load("chinchilla", drop_highest=40)
    base = fit(tab, LAW, bootstrap=100, seed=args.seed, progress=False)
    resid = np.log(tab["loss"].to_numpy()) - np.log(base.predict(tab))
    resid = resid - np.median(resid)
    sigma = float(1.4826 * np.median(np.abs(resid)))
    draws = base.draws[np.all(np.isfinite(base.draws), axis=1)]
    pilot_shapes = tab[tab["flops"] < 3e19].reset_index(drop=True)
    rows, designs = [], {}
    for t_i, d in enumerate(draws[rng.choice(len(draws), args.truths, replace=False)]):
        truth = dict(zip(NAMES, d, strict=True))
        pilot = simulate(truth, pilot_shapes, resid, rng)
        pf = fit(pilot, LAW, bootstrap=100, seed=args.seed + t_i, progress=False)
        grid = grid_runs(pf)
        sd_grid = fisher_sd(truth, pd.concat([pilot, grid]), sigma)
        row = {"truth": t_i, **truth, "sd_pilot": fisher_sd(truth, pilot, sigma)}
        row.update(sd_grid=sd_grid, grid_flops=float(grid["flops"].sum()))
        for label, (span, floor) in VARIANTS.items():
            sds = []
            for f in FRACTIONS:
                src = resolve(pf)
                cand = default_candidates(src, SPACE, f * R, span=span)
                cand = cand[cand["flops"] >= floor]
                if cand.empty:
                    sds.append(np.inf)
                    continue
                d_res = next_runs(pf, TARGET, f * R, k=12, noise=sigma, candidates=cand)
                sds.append(fisher_sd(truth, pd.concat([pilot, d_res.runs]), sigma))
                row[f"sd_{label}_{f:g}"] = sds[-1]
                if f == 1.0:
                    designs[label] = d_res.runs
            row[f"ratio_{label}"] = compute_ratio(FRACTIONS, sds, sd_grid)
        if t_i < args.mc_truths:
            for label, runs in [("grid", grid)] + [(k, designs[k]) for k in VARIANTS]:
                row[f"mc_sd_{label}"] = mc_sd(truth, pilot, runs, resid, args.mc, rng)
        rows.append(row)
        print(
            f"truth {t_i}: sd grid {sd_grid:.4f}, designed at full compute "
            f"{row['sd_free_1']:.4f} (free) {row['sd_grid range_1']:.4f} (grid range), ratio "
            f"{row['ratio_free']:.4f} (free) {row['ratio_grid range']:.4f} (grid range)",
            flush=True,
        )
        atomic_write_csv(Path(args.out) / "design_study_decomposed.csv", pd.DataFrame(rows))
    frame = pd.DataFrame(rows)
    print(f"noise sd {sigma:.4f}; {len(frame)} truths; median sd of log N*(1e24): pilot "
          f"{frame['sd_pilot'].median():.4f}, grid {frame['sd_grid'].median():.4f}, designed "
          f"{frame['sd_free_1'].median():.4f} (free), {frame['sd_grid range_1'].median():.4f} "
          "(grid range)")  # fmt: skip
    if "mc_sd_grid" in frame:
        cols = ["truth", "mc_sd_grid", "sd_grid", "mc_sd_free", "sd_free_1"]
        cols += ["mc_sd_grid range", "sd_grid range_1"]
        print("Monte Carlo refits vs Fisher sd:")
        print(frame.dropna(subset=["mc_sd_grid"])[cols].to_string(index=False))
    for label in VARIANTS:
        r = frame[f"ratio_{label}"]
        print(f"{label}: compute share to match the grid: median {r.median():.4f}, quartiles "
              f"{r.quantile(0.25):.4f}-{r.quantile(0.75):.4f}, truths <= 0.5: "
              f"{int((r <= 0.5).sum())} of {len(r)}")  # fmt: skip


if __name__ == "__main__":
    main()
