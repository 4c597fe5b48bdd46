"""Oracle replays of the ladder loop: scalefit.plan and next_runs against the full grid and others.

Each public grid is an *oracle*: the loop may only "run" points the grid holds, and learns their
recorded loss. Protocol (seeded, one command):

1. Hold out the grid's top budget with at least six runs (its runs score the decision); the
   target budget is that budget. The budgets below it are the *pool*. The *seed* set is the
   pool's smallest budgets (at least two budgets and eight runs): a lab's first rungs.
2. Loop: fit the Chinchilla law (least squares, ``BOOT`` bootstrap resamples, ``STARTS`` starts),
   recommend N* at the target with ``scalefit.allocate`` (its calibrated interval: the draws plus
   the law's measured misfit), choose up to ``k`` runs from what is left of the pool, add their
   recorded losses, refit; until the pool is empty, so every arm ends on the full pool. ``k`` is
   a tenth of the pool (at least 4).
3. Arms: ``total`` and ``per_flop`` (``scalefit.design.next_runs`` with that ``criterion`` for
   log N*, the remaining pool as candidates, each step's compute at most what was spent so far:
   the ladder at most doubles its compute per step); ``random`` (``SEEDS`` random orders, point
   fits); ``chinchilla`` (the ``chinchilla`` package's seeding policy, ``Chinchilla.seed``:
   log-uniform draws in compute and tokens per parameter over the pool's ranges, each snapped to
   the nearest unused pool run; ``SEEDS`` seeds; skipped if the package is not installed);
   ``plan`` (``scalefit.plan`` itself, in a temporary folder, with the pool as its candidates:
   ``ask`` / ``tell`` with the oracle's losses until its stopping rule holds or the pool is
   spent; its first round is its own choice of as many runs as the seed set, see
   :func:`replay_plan`).
4. Regret of a recommendation: the held-out loss of the run nearest (in log params) to the
   recommended size minus the held-out budget's best loss (``regret``); and the same on a
   parabola in log params through the held-out runs (``regret_smooth``). The *fixed grid* is
   the fit on the whole pool. An arm *reaches* it at the first step whose regret is at most
   the fixed grid's (``share_to_fixed``: compute spent by then, seed included, over the pool's
   compute) and *stays* from the step after which it never rises above it (``share_stays``).
   Stopping rule scored: the draws' 95 % interval of N* within a factor ``STOP_RATIO``.
5. Gemstones (width x depth x tokens checkpoints): every 5th checkpoint of each model below
   ``GEM_TARGET / 2``; budgets are the checkpoints' ``6·N·T`` binned per quarter decade; the
   held-out budget is ``GEM_TARGET``, where each model whose run spans it has its loss
   interpolated in log tokens. A point costs its own ``6·N·T`` (earlier checkpoints of the same
   run are not counted as free).
6. Simulated ladder: the Chinchilla law with Hoffmann et al.'s parameters on an IsoFLOP grid
   shaped like Hoffmann's (9 budgets 6e18-3e21, 12 sizes over 1.5 decades), with the median
   residual sd and the median cubic misfit (log-loss residual against ``log10(N/N*)``) of the
   full-pool fits of the eight public IsoFLOP sweeps (``plan_replay_misfit.csv``); its held-out
   budget is scored on the noiseless law with the misfit.

Run (1-3 minutes on 2 cores; the package root must be importable, e.g. ``PYTHONPATH=.``)::

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
from scalefit.allocate.api import resolve
from scalefit.allocate.space import Space
from scalefit.core._io import atomic_write_csv
from scalefit.core.accounting import training_flops
from scalefit.core.errors import ScaleFitError
from scalefit.design import next_runs

BOOT, STARTS, SEEDS, PROB = 40, 16, 3, 0.95
#: Hoffmann et al.'s fitted Chinchilla law (the simulated ladder's truth).
HOFFMANN = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
GEM_TARGET = 1e21
#: The stopping rule scored: the 95 % interval of N* spans at most this factor (hi / lo).
STOP_RATIO = 1.5
LABELS = {
    "per_flop": "next_runs (per FLOP)",
    "total": "next_runs (total)",
    "random": "random order (3 seeds)",
    "chinchilla": "chinchilla package's seeding (3 seeds)",
    "plan": "scalefit.plan (ask / tell; dot: its rule stops it)",
}


def _fit(rows: pd.DataFrame, boot: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(
            rows[["params", "tokens", "loss", "flops"]],
            "chinchilla",
            bootstrap=boot,
            starts=STARTS,
            seed=0,
            progress=False,
        )


def _decision(res, target: float) -> dict:
    """Recommended N* at ``target``, its calibrated and draws-only intervals (NaN without draws)."""
    from scalefit import allocate

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            row = allocate(res, [target]).summary.iloc[0]
    except ScaleFitError:  # a fit that did not converge recommends nothing
        return {"nstar": np.nan}
    out = {"nstar": float(row["params_star"])}
    if "params_star_lo" in row:
        out.update(
            lo=row["params_star_lo"],
            hi=row["params_star_hi"],
            lo_draws=row["params_star_lo_draws"],
            hi_draws=row["params_star_hi_draws"],
        )
    return out


def _regret(held: pd.DataFrame, nstar: float) -> tuple[float, float]:
    """Regret of the held-out run nearest to ``nstar``; and on a parabola through the held-out."""
    if not np.isfinite(nstar):
        return np.nan, np.nan
    x = np.log(held["params"].to_numpy())
    i = int(np.argmin(np.abs(x - np.log(nstar))))
    c = np.polyfit(x, held["score"].to_numpy(), 2)
    smooth = c[0] * (np.log(nstar) + c[1] / (2 * c[0])) ** 2 if c[0] > 0 else np.nan
    return float(held["score"].iloc[i] - held["score"].min()), float(smooth)


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
    grid = {
        "E": np.linspace(1, 2, 3),
        "A": np.linspace(1, 10, 3),
        "B": np.linspace(1, 10, 3),
        "alpha": np.linspace(0.2, 0.5, 3),
        "beta": np.linspace(0.2, 0.5, 3),
    }
    return Chinchilla(
        folder, param_grid=grid, seed_ranges=ranges, model_search_config=None, log_level=50
    )


def replay(name, pool, held, target, arm, seed, seed_mask) -> list[dict]:
    """One arm on one oracle: a row per round."""
    if arm == "plan":
        return replay_plan(name, pool, held, target, seed_mask)
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
        dec = _decision(res, target)
        regret, smooth = _regret(held, dec["nstar"])
        rows.append(
            dict(
                grid=name,
                arm=arm,
                seed=seed,
                round=rnd,
                runs=len(seen),
                share=float(seen["flops"].sum()) / total,
                **dec,
                regret=regret,
                regret_smooth=smooth,
                best=float(held["params"].iloc[int(np.argmin(held["score"]))]),
                note="",
            )
        )
        if not left.any():
            return rows
        pick, note = _choose(arm, res, pool, left, k, target, rng, cc)
        rows[-1]["note"] = note
        left[pick] = False
        rnd += 1


def replay_plan(name, pool, held, target, seed_mask) -> list[dict]:
    """The ``plan`` arm: ``scalefit.plan`` on the pool, ask / tell until it stops (a row per tell).

    The first ``ask`` asks for as many runs as the seed set holds (the plan chooses them itself:
    without a fit it spreads them over the cheapest candidates); later asks take ``k`` runs. The
    plan fits with its own settings (``BOOT`` resamples, the fit's default starts) and stops by
    its own rule (draws' ``hi / lo`` of N* at most ``STOP_RATIO``) or when the pool is spent.
    """
    import scalefit

    k = max(4, len(pool) // 10)
    total = float(pool["flops"].sum())
    key = {(p, t): i for i, (p, t) in enumerate(pool[["params", "tokens"]].to_numpy())}
    rows = []
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = scalefit.plan(
            target, tmp, candidates=pool[["params", "tokens"]], n_boot=BOOT, stop_width=STOP_RATIO
        )
        asked = p.ask(int(seed_mask.sum()))
        while not asked.empty:
            idx = [key[(a, b)] for a, b in asked[["params", "tokens"]].to_numpy()]
            p.tell(asked[["run_id"]].assign(loss=pool["loss"].to_numpy()[idx]))
            d = p.decisions[-1]
            nstar = d["params"] if d.get("params") is not None else np.nan
            regret, smooth = _regret(held, nstar)
            rows.append(
                dict(
                    grid=name,
                    arm="plan",
                    seed=0,
                    round=len(rows),
                    runs=len(p.results),
                    share=p.flops_spent / total,
                    nstar=nstar,
                    lo=d.get("params_lo"),
                    hi=d.get("params_hi"),
                    ratio=d.get("ratio"),
                    regret=regret,
                    regret_smooth=smooth,
                    best=float(held["params"].iloc[int(np.argmin(held["score"]))]),
                    note="",
                    inside=d.get("inside"),
                    outside_said=any("outside its own interval" in n for n in d["notes"]),
                    plan_notes="; ".join(d["notes"]),
                    stop=p.stop_reason() or "",
                )
            )
            asked = p.ask(k)
            if not asked.empty and asked.attrs["choice"] != "next_runs on the last fit":
                rows[-1]["note"] = asked.attrs["choice"]  # how the next runs were chosen
    return rows


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
    for _, r in g.groupby("run"):
        lt, fl = np.log(r["tokens"].to_numpy()), r["flops"].to_numpy()
        if fl.min() < GEM_TARGET < fl.max():
            t = GEM_TARGET / (6 * r["params"].iloc[0])
            held.append(
                {
                    "params": r["params"].iloc[0],
                    "tokens": t,
                    "score": np.interp(np.log(t), lt, r["loss"].to_numpy()),
                }
            )
    held = pd.DataFrame(held)
    sub = (
        g[g["flops"] < GEM_TARGET / 2].groupby("run", group_keys=False).apply(lambda r: r.iloc[::5])
    )
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
        pred = np.asarray(
            src.law.evaluate(src.point, {k: pool[k].to_numpy() for k in ("params", "tokens")})
        )
        r = np.log(pool["loss"].to_numpy()) - np.log(pred)
        from scalefit.allocate.solve import solve

        one = {k: np.array([v]) for k, v in src.point.items()}
        ns = solve(Space.of(src.law, None), one, np.sort(pool["budget"].unique()), sets=False)
        nmap = dict(zip(np.sort(pool["budget"].unique()), ns["params"], strict=True))
        x = np.log10(pool["params"].to_numpy() / pool["budget"].map(nmap).to_numpy())
        c = np.polyfit(x, r, 3)
        coefs.append(c)
        rows.append(
            {"grid": name, "rmse_log": float(np.std(r)), "misfit_c3": c[0], "misfit_c2": c[1]}
        )
    frame = pd.DataFrame(rows)
    return float(frame["rmse_log"].median()), np.median(coefs, axis=0), frame


def _reach(r: pd.DataFrame, col: str, target: float) -> tuple[float, float]:
    """Compute share of the first round at or below ``target``, and of the round from which on
    every later round stays there (NaN if never)."""
    ok = (r[col] <= target + 1e-12).to_numpy()
    stays = np.flip(np.cumprod(np.flip(ok))).astype(bool)
    share = r["share"].to_numpy()
    return (
        float(share[ok][0]) if ok.any() else np.nan,
        float(share[stays][0]) if stays.any() else np.nan,
    )


def summarise(rounds: pd.DataFrame, fixed: dict) -> pd.DataFrame:
    """Per grid and arm (random and chinchilla: median over seeds)."""
    rows = []
    for (g, arm, seed), r in rounds.groupby(["grid", "arm", "seed"]):
        first, stays = _reach(r, "regret", fixed[g][0])
        first_s = _reach(r, "regret_smooth", fixed[g][1])[0]
        ratio = (r["hi_draws"] / r["lo_draws"]).fillna(r["ratio"])
        stop = r[ratio <= STOP_RATIO]
        cal = r.dropna(subset=["lo"])
        out = ~cal["nstar"].between(cal["lo"], cal["hi"])
        rows.append(
            dict(
                grid=g,
                arm=arm,
                seed=seed,
                fixed_regret=fixed[g][0],
                fixed_smooth=fixed[g][1],
                seed_share=float(r["share"].iloc[0]),
                share_to_fixed=first,
                share_stays=stays,
                smooth_to_fixed=first_s,
                seed_reaches=bool(r["regret"].iloc[0] <= fixed[g][0] + 1e-12),
                stop_share=float(stop["share"].iloc[0]) if len(stop) else np.nan,
                stop_regret=float(stop["regret"].iloc[0]) if len(stop) else np.nan,
                best_in_interval=float(cal["best"].between(cal["lo"], cal["hi"]).mean()),
                rec_outside=int(out.sum()),
                rec_outside_unsaid=int((out & ~cal["outside_said"].eq(True)).sum())
                if arm == "plan"
                else np.nan,
                no_decision=int(r["nstar"].isna().sum()),
                final_share=float(r["share"].iloc[-1]),
                final_regret=float(r["regret"].iloc[-1]),
                fallbacks=int(r["note"].str.len().gt(0).sum()),
                rounds=len(r),
            )
        )
    s = pd.DataFrame(rows).drop(columns="seed")
    how = {c: "median" for c in s.columns if c not in ("grid", "arm")}
    how.update(seed_reaches="all", rec_outside="sum", fallbacks="sum", rounds="max")
    how.update(no_decision="sum")
    return s.groupby(["grid", "arm"], as_index=False).agg(how)


def plot(rounds: pd.DataFrame, fixed: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grids = list(dict.fromkeys(rounds["grid"]))
    fig, axes = plt.subplots(
        2,
        (len(grids) + 1) // 2,
        figsize=(3.3 * ((len(grids) + 1) // 2), 6.2),
        sharex=True,
        squeeze=False,
    )
    colours = {"per_flop": "C0", "total": "C1", "random": "0.6", "chinchilla": "C3", "plan": "C2"}
    for ax, g in zip(axes.ravel(), grids, strict=False):
        for (arm, seed), r in rounds[rounds["grid"] == g].groupby(["arm", "seed"]):
            ax.step(
                100 * r["share"],
                r["regret"],
                where="post",
                color=colours[arm],
                lw=2.0 if arm == "plan" else 1.2,
                alpha=0.5 if arm == "random" else 1.0,
                label=LABELS[arm] if seed == 0 else None,
            )
            if arm == "plan" and r["stop"].iloc[-1] == "interval":  # where its rule stopped it
                ax.plot(100 * r["share"].iloc[-1], r["regret"].iloc[-1], "o", color="C2", ms=5)
        ax.axhline(fixed[g][0], color="k", ls=":", lw=1, label="fixed grid")
        ax.set_xscale("log")
        ax.set_title(" ".join(g.split("__")[:2]), fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("compute spent (% of the full grid's)")
    for ax in axes[:, 0]:
        ax.set_ylabel("regret (loss above the\nheld-out budget's best run)", fontsize=8)
    for ax in axes.ravel()[len(grids) :]:
        ax.axis("off")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="lower center", ncol=6, fontsize=8)
    fig.suptitle(
        "Oracle replays of the ladder loop on public grids: regret of the recommended size "
        "against compute spent (Chinchilla law, least squares)"
    )
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("docs/studies/results"))
    ap.add_argument("--img", type=Path, default=Path("docs/img"))
    ap.add_argument("--grids", nargs="*", default=None, help="only these oracles")
    ap.add_argument("--arms", nargs="*", default=[*LABELS])
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
        fixed[name] = _regret(held, _decision(_fit(pool, 0), target)["nstar"])
        for arm in a.arms:
            for seed in range(SEEDS if arm in ("random", "chinchilla") else 1):
                rounds += replay(name, pool, held, target, arm, seed, seed_mask)
        frame = pd.DataFrame(rounds)
        atomic_write_csv(a.out / "plan_replay_rounds.csv", frame)
        print(f"{name}: done at {time.time() - t0:.0f} s", flush=True)
    summary = summarise(frame, fixed)
    atomic_write_csv(a.out / "plan_replay.csv", summary)
    plot(frame, fixed, a.img / "plan_replay.png")
    table = summary.pivot(index="grid", columns="arm", values=["share_to_fixed", "share_stays"])
    first = summary.groupby("grid")[["fixed_regret", "fixed_smooth", "seed_reaches"]].first()
    print(first.to_string())
    with pd.option_context("display.width", 200):
        print(table.round(3).to_string())
        cols = ["share_to_fixed", "share_stays", "final_share", "final_regret", "stop_share"]
        cols += ["rec_outside", "rec_outside_unsaid", "no_decision", "rounds"]
        print(summary[summary["arm"] == "plan"].set_index("grid")[cols].round(4).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
