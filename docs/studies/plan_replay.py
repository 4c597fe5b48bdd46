"""Oracle replays of the ladder loop: runs chosen by the decision against the fixed grid and random order.

Each public grid is an *oracle*: the loop may only "run" points the grid holds, and learns their
recorded loss. Protocol (seeded, one command):

1. Hold out the grid's top budget with at least six runs (its runs score the decision); the
   target budget is that budget. The budgets below it are the *pool*. The *seed* set is the pool's smallest budgets (at least two budgets and
   eight runs): a lab's first rungs.
2. Loop: fit the Chinchilla law (least squares, ``BOOT`` bootstrap resamples), recommend N* at the
   target (the point fit's compute-optimal size; its interval is the bootstrap percentile interval
   of log N*), choose ``k`` runs from what is left of the pool, add their losses, refit; until the
   pool is empty. ``k`` is a tenth of the pool (at least 4), so every arm ends on the full pool.
3. Arms: ``per_flop`` and ``total`` (``scalefit.design.next_runs`` with that ``criterion``, the
   remaining pool as candidates), ``random`` (``SEEDS`` random orders, point fits), and
   ``chinchilla`` (the ``chinchilla`` package's policy: seed draws from its ``Chinchilla.seed``,
   log-uniform in compute and tokens per parameter over the pool's ranges, snapped to the nearest
   unused pool run; skipped with a note if the package is not installed).
4. Regret of a recommendation: the held-out loss of the run nearest (in log params) to the
   recommended size minus the held-out budget's best loss. The *fixed grid* is the fit on the
   whole pool; an arm *reaches* it at the first round whose regret is at most the fixed grid's
   final regret, and its compute share is the compute spent by then (seed included) over the
   pool's compute.
5. Gemstones (width x depth x tokens checkpoints): every 5th checkpoint of each model; budgets are
   the checkpoints' ``6·N·T`` binned per quarter decade; the held-out budget is 1e21 FLOPs, where
   each model's loss is interpolated in log tokens between its two nearest checkpoints (models
   whose run spans it). A point's cost is its own ``6·N·T`` (a run's earlier checkpoints are
   not counted as free).
6. Simulated ladder: the Chinchilla law with Hoffmann et al.'s parameters on an IsoFLOP grid
   shaped like Hoffmann's (9 budgets 6e18-3e21, 12 sizes over 1.5 decades), plus the median
   residual sd and the median cubic misfit (log loss residual against ``log10(N/N*)`` per budget)
   of the fixed-grid fits of the public IsoFLOP sweeps; the held-out budget is scored on the
   noiseless law with the misfit.

Run (about 10 minutes on 2 cores)::

    nice -n 10 python docs/studies/plan_replay.py --out docs/studies/results --img docs/img
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from scalefit import datasets, fit
from scalefit._io import atomic_write_csv
from scalefit.accounting import training_flops
from scalefit.allocate.api import resolve
from scalefit.allocate.space import Space
from scalefit.design import next_runs
from scalefit.design.core import quantity_draws
from scalefit.errors import ScaleFitError

BOOT, STARTS, SEEDS, PROB = 40, 16, 3, 0.95
#: Hoffmann et al.'s fitted Chinchilla law (the simulated ladder's truth).
HOFFMANN = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
GEM_TARGET = 1e21


def _fit(rows: pd.DataFrame, boot: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(
            rows[["params", "tokens", "loss"]], "chinchilla", bootstrap=boot, starts=STARTS,
            seed=0, progress=False,
        )


def _decision(res, target: float) -> tuple[float, float, float]:
    """Recommended N* at ``target`` and the percentile interval of the draws (NaN without)."""
    src = resolve(res)
    space = Space.of(src.law, None)
    if src.draws is None:
        one = {k: np.array([v]) for k, v in src.point.items()}
        from scalefit.allocate.solve import solve

        return float(solve(space, one, [target], sets=False).iloc[0]["params"]), np.nan, np.nan
    value, q, _ = quantity_draws(src, space, target, "log_params")
    q = q[np.isfinite(q)]
    lo, hi = np.quantile(q, [(1 - PROB) / 2, (1 + PROB) / 2]) if len(q) >= 20 else (np.nan,) * 2
    return float(np.exp(value)), float(np.exp(lo)), float(np.exp(hi))


def _regret(held: pd.DataFrame, nstar: float) -> float:
    if not np.isfinite(nstar):
        return np.nan
    i = int(np.argmin(np.abs(np.log(held["params"].to_numpy()) - np.log(nstar))))
    return float(held["score"].iloc[i] - held["score"].min())


def _choose(arm, res, pool, left, k, target, rng, cc):
    """Indices into ``pool`` (from the ``left`` mask) the arm runs next, and a note."""
    idx = np.flatnonzero(left)
    if len(idx) <= k:
        return idx, ""
    if arm == "random":
        return rng.choice(idx, k, replace=False), ""
    if arm == "chinchilla":
        return _chinchilla_pick(cc, pool, idx, k), ""
    cand = pool.iloc[idx][["params", "tokens"]]
    spent = float(pool["flops"].to_numpy()[~left].sum())
    budget = max(spent, float(pool["flops"].to_numpy()[idx].min()))  # a round at most doubles
    try:
        d = next_runs(res, target, budget * (1 + 1e-9), candidates=cand, k=k, criterion=arm)
    except ScaleFitError as e:  # too few converged draws: cheapest runs first, said in the notes
        return idx[np.argsort(pool["flops"].to_numpy()[idx])[:k]], f"fallback: {e}"
    key = pool.iloc[idx][["params", "tokens"]].to_numpy()
    out = []
    for p, t in d.runs[["params", "tokens"]].to_numpy():
        j = np.flatnonzero((np.isclose(key[:, 0], p)) & np.isclose(key[:, 1], t))
        j = [i for i in idx[j] if i not in out]
        out.append(j[0])
    return np.array(out), ""


def _chinchilla_pick(cc, pool, idx, k):
    """The chinchilla package's seed draws, snapped to the nearest unused pool run."""
    x = np.column_stack([np.log(pool["flops"]), np.log(pool["tokens"] / pool["params"])])
    out: list[int] = []
    for _ in range(k):
        (n, d), _ = cc.seed()
        p = np.array([np.log(6 * n * d), np.log(d / n)])
        free = [i for i in idx if i not in out]
        out.append(free[int(np.argmin(((x[free] - p) ** 2).sum(axis=1)))])
    return np.array(out)


def _chinchilla_seeder(pool, seed: int, folder: str):
    """The ``chinchilla`` package's loop object, seeding over the pool's ranges (None if absent)."""
    try:
        from chinchilla import Chinchilla
    except ImportError:
        return None
    import random

    random.seed(seed)  # Chinchilla.seed draws from the random module
    r = pool["tokens"] / pool["params"]
    ranges = {"C": (pool["flops"].min(), pool["flops"].max()), "N_to_D": (r.min(), r.max())}
    grid = {"E": np.linspace(1, 2, 3), "A": np.linspace(1, 10, 3), "B": np.linspace(1, 10, 3),
            "alpha": np.linspace(0.2, 0.5, 3), "beta": np.linspace(0.2, 0.5, 3)}
    return Chinchilla(folder, param_grid=grid, seed_ranges=ranges, model_search_config=None,
                      log_level=50)


def replay(name, pool, held, target, arm, seed, seed_mask) -> list[dict]:
    """One arm on one oracle: a row per round."""
    rng = np.random.default_rng(seed)
    left = ~seed_mask.copy()
    k = max(4, len(pool) // 10)
    tmp = tempfile.TemporaryDirectory()
    cc = _chinchilla_seeder(pool, seed, tmp.name + "/cc") if arm == "chinchilla" else None
    if arm == "chinchilla" and cc is None:
        return []
    total = float(pool["flops"].sum())
    rows, rnd = [], 0
    while True:
        seen = pool[~left]
        boot = BOOT if arm in ("per_flop", "total") or not left.any() else 0
        res = _fit(seen, boot)
        nstar, lo, hi = _decision(res, target)
        rows.append(dict(grid=name, arm=arm, seed=seed, round=rnd, runs=len(seen),
                         share=float(seen["flops"].sum()) / total, nstar=nstar, lo=lo, hi=hi,
                         regret=_regret(held, nstar), best=float(held["params"].iloc[
                             int(np.argmin(held["score"]))]), note=""))
        if not left.any():
            return rows
        pick, note = _choose(arm, res, pool, left, k, target, rng, cc)
        rows[-1]["note"] = note
        left[pick] = False
        rnd += 1


def oracles(sim_noise=None, sim_misfit=None) -> dict:
    """name -> (pool, held, target budget, seed mask)."""
    out = {}
    for x in datasets.isoflop_experiments().experiment:
        d = datasets.load("isoflops", experiment=x)
        out[x] = _split(d.assign(score=d["loss"]))
    out["gemstones"] = _gemstones()
    if sim_noise is not None:
        out["simulated"] = _split(_simulated(sim_noise, sim_misfit))
    return out


def _split(d: pd.DataFrame):
    d = d.assign(flops=training_flops(d["params"], d["tokens"])).reset_index(drop=True)
    counts = d.groupby("budget").size()
    top = float(counts[counts >= 6].index.max())
    budgets = np.sort(d["budget"].unique())
    held = d[d["budget"] == top].reset_index(drop=True)
    pool = d[d["budget"] < top].reset_index(drop=True)
    m = 2
    while (pool["budget"] <= budgets[m - 1]).sum() < 8:
        m += 1
    return pool, held, top, (pool["budget"] <= budgets[m - 1]).to_numpy()


def _gemstones():
    g = datasets.load("gemstones").sort_values(["run", "tokens"])
    held = []
    for run, r in g.groupby("run"):
        lt, fl = np.log(r["tokens"].to_numpy()), r["flops"].to_numpy()
        if fl.min() < GEM_TARGET < fl.max():
            t = GEM_TARGET / (6 * r["params"].iloc[0])
            held.append({"params": r["params"].iloc[0], "tokens": t,
                         "score": np.interp(np.log(t), lt, r["loss"].to_numpy())})
    held = pd.DataFrame(held)
    sub = g[g["flops"] < GEM_TARGET / 2].groupby("run", group_keys=False).apply(lambda r: r.iloc[::5])
    sub = sub.assign(budget=10 ** (np.round(np.log10(sub["flops"]) * 4) / 4), score=sub["loss"])
    pool = sub[["params", "tokens", "loss", "budget", "flops", "score"]].reset_index(drop=True)
    budgets = np.sort(pool["budget"].unique())
    m = 2
    while (pool["budget"] <= budgets[m - 1]).sum() < 8:
        m += 1
    return pool, held, GEM_TARGET, (pool["budget"] <= budgets[m - 1]).to_numpy()


def _true_loss(n, t, misfit):
    h = HOFFMANN
    law = h["E"] + h["A"] / n ** h["alpha"] + h["B"] / t ** h["beta"]
    nstar = _hoffmann_nstar(6 * n * t)
    return law * np.exp(np.polyval(misfit, np.log10(n / nstar)))


def _hoffmann_nstar(c):
    from scalefit.allocate.closed_form import chinchilla_optimum

    return chinchilla_optimum(*HOFFMANN.values(), np.asarray(c, dtype=float))[0]


def _simulated(noise: float, misfit: np.ndarray, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    budgets = np.geomspace(6e18, 3e21, 9)
    n = (_hoffmann_nstar(budgets)[:, None] * 10 ** np.linspace(-0.75, 0.75, 12)[None, :]).ravel()
    c = np.repeat(budgets, 12)
    t = c / (6 * n)
    true = _true_loss(n, t, misfit)
    loss = true * np.exp(rng.normal(0, noise, len(n)))
    return pd.DataFrame({"params": n, "tokens": t, "budget": c, "loss": loss, "score": true})


def misfit_of_real(orc: dict) -> tuple[float, np.ndarray, pd.DataFrame]:
    """Median residual sd and cubic misfit of the fixed-grid fits on the public IsoFLOP sweeps."""
    rows, coefs = [], []
    for name, (pool, _, _, _) in orc.items():
        if name == "gemstones":
            continue
        res = _fit(pool, 0)
        src = resolve(res)
        pred = np.asarray(src.law.evaluate(src.point, {k: pool[k].to_numpy() for k in ("params", "tokens")}))
        r = np.log(pool["loss"].to_numpy()) - np.log(pred)
        from scalefit.allocate.solve import solve

        one = {k: np.array([v]) for k, v in src.point.items()}
        ns = solve(Space.of(src.law, None), one, np.sort(pool["budget"].unique()), sets=False)
        nmap = dict(zip(np.sort(pool["budget"].unique()), ns["params"], strict=True))
        x = np.log10(pool["params"].to_numpy() / pool["budget"].map(nmap).to_numpy())
        c = np.polyfit(x, r, 3)
        coefs.append(c)
        rows.append({"grid": name, "rmse_log": float(np.std(r)), "misfit_c3": c[0], "misfit_c2": c[1]})
    frame = pd.DataFrame(rows)
    return float(frame["rmse_log"].median()), np.median(coefs, axis=0), frame


def summarise(rounds: pd.DataFrame, fixed: dict) -> pd.DataFrame:
    rows = []
    for (g, arm, seed), r in rounds.groupby(["grid", "arm", "seed"]):
        f = fixed[g]
        hit = r[r["regret"] <= f + 1e-12]
        out = r.dropna(subset=["lo"])
        cover = ((out["best"] >= out["lo"]) & (out["best"] <= out["hi"])).mean() if len(out) else np.nan
        inside = ((out["nstar"] >= out["lo"]) & (out["nstar"] <= out["hi"])).all() if len(out) else True
        rows.append(dict(grid=g, arm=arm, seed=seed, fixed_regret=f, rounds=len(r),
                         share_to_fixed=float(hit["share"].iloc[0]) if len(hit) else np.nan,
                         seed_share=float(r["share"].iloc[0]), best_in_interval=cover,
                         rec_in_interval=bool(inside), fallbacks=int(r["note"].str.len().gt(0).sum())))
    s = pd.DataFrame(rows)
    return s.groupby(["grid", "arm"], as_index=False).agg(
        fixed_regret=("fixed_regret", "first"), seed_share=("seed_share", "first"),
        share_to_fixed=("share_to_fixed", "median"), best_in_interval=("best_in_interval", "mean"),
        rec_in_interval=("rec_in_interval", "all"), fallbacks=("fallbacks", "sum"), rounds=("rounds", "max"))


def plot(rounds: pd.DataFrame, fixed: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grids = list(dict.fromkeys(rounds["grid"]))
    fig, axes = plt.subplots(2, (len(grids) + 1) // 2, figsize=(3.2 * ((len(grids) + 1) // 2), 6.0),
                             sharex=True, squeeze=False)
    colours = {"per_flop": "C0", "total": "C1", "random": "0.6", "chinchilla": "C3"}
    for ax, g in zip(axes.ravel(), grids, strict=False):
        for (arm, seed), r in rounds[rounds["grid"] == g].groupby(["arm", "seed"]):
            ax.step(100 * r["share"], r["regret"], where="post", color=colours[arm], lw=1.2,
                    alpha=0.5 if arm == "random" else 1.0,
                    label=arm.replace("_", " ") if seed == 0 else None)
        ax.axhline(fixed[g], color="k", ls=":", lw=1, label="fixed grid")
        ax.set_xscale("log")
        ax.set_title(g.replace("__", " ")[:34], fontsize=8)
        ax.set_xlabel("compute spent (% of the grid's)")
        ax.set_ylabel("regret at held-out budget (loss)")
    for ax in axes.ravel()[len(grids):]:
        ax.axis("off")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("Oracle replays: regret of the recommended size against compute spent (Chinchilla law, LSQ)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("docs/studies/results"))
    ap.add_argument("--img", type=Path, default=Path("docs/img"))
    ap.add_argument("--grids", nargs="*", default=None, help="only these oracles")
    ap.add_argument("--arms", nargs="*", default=["per_flop", "total", "random", "chinchilla"])
    a = ap.parse_args(argv)
    t0 = time.time()
    orc = oracles()
    noise, misfit, real = misfit_of_real(orc)
    orc = oracles(noise, misfit)
    atomic_write_csv(a.out / "plan_replay_misfit.csv", real)
    print(f"simulated ladder: residual sd {noise:.4f}, cubic misfit {np.round(misfit, 5)}")
    rounds, fixed = [], {}
    for name, (pool, held, target, seed_mask) in orc.items():
        if a.grids and name not in a.grids:
            continue
        fixed[name] = _regret(held, _decision(_fit(pool, 0), target)[0])
        for arm in a.arms:
            for seed in range(SEEDS if arm in ("random", "chinchilla") else 1):
                rounds += replay(name, pool, held, target, arm, seed, seed_mask)
        frame = pd.DataFrame(rounds)
        atomic_write_csv(a.out / "plan_replay_rounds.csv", frame)
        print(f"{name}: done at {time.time() - t0:.0f} s", flush=True)
    summary = summarise(frame, fixed)
    atomic_write_csv(a.out / "plan_replay.csv", summary)
    plot(frame, fixed, a.img / "plan_replay.png")
    with pd.option_context("display.width", 160):
        print(summary.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
