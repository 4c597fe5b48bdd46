"""Allocation speed: 100 budgets x 1000 bootstrap draws of the decomposed fit.

Project way: :func:`scalefit.allocate.solve` (grid + projected Newton, numpy, vectorised over
draws and budgets), and the whole :func:`scalefit.allocate.allocate` call (adds the point
estimate's near-optimal sets and the practical shapes scored under every draw).
Reference way: a plain loop, one ``scipy.optimize.minimize`` (L-BFGS-B in log depth, log params,
same box, started at the point estimate's optimum for that budget) per (draw, budget) pair, on a
random subset of pairs, extrapolated to all pairs; the answers are compared on that subset.

Run:  SCALEFIT_DATA_DIR=../shared/data python benchmarks/bench_allocate.py
The 1000-draw fit is cached in ~/.cache/scalefit/bench/ (it takes ~30 s to make).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np


def draws_result(path: Path, n_draws: int):
    from scalefit import fit
    from scalefit.datasets import load
    from scalefit.fit import FitResult

    if path.exists():
        return FitResult.load(path)
    t0 = time.perf_counter()
    res = fit(
        load("chinchilla", drop_highest=40), "decomposed", bootstrap=n_draws, seed=0, progress=False
    )
    print(
        f"fitted decomposed with {n_draws} bootstrap resamples in {time.perf_counter() - t0:.1f} s"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    res.save(path)
    return res


def reference(space, draws, budgets, pairs, hint, box):
    from scipy.optimize import minimize

    law = space.law
    out = []
    for d, b in pairs:
        p = {k: v[d] for k, v in draws.items()}
        c = budgets[b]

        def f(z, p=p, c=c):
            x = space.inputs(np.asarray(z), np.asarray(c))
            return float(law.evaluate(p, {k: x[k] for k in law.inputs}))

        bounds = list(zip(box[0][b], box[1][b], strict=True))
        r = minimize(
            f,
            hint[b],
            method="L-BFGS-B",
            bounds=bounds,
            options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 500},
        )
        out.append((np.exp(r.x[0]), np.exp(r.x[1]), r.fun))
    return np.array(out)


def main():
    from scalefit.allocate import Space, allocate, solve

    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--budgets", type=int, default=100)
    ap.add_argument("--reference-pairs", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "scalefit" / "bench"
    res = draws_result(cache / f"decomposed_{args.draws}.json", args.draws)
    d = np.asarray(res.draws)
    d = d[np.all(np.isfinite(d), axis=1)]
    draws = {k: d[:, i] for i, k in enumerate(res.params)}
    budgets = np.logspace(18, 24, args.budgets)
    space = Space.of(res.get_law())
    n_pairs = len(d) * len(budgets)
    print(f"{len(d)} draws x {len(budgets)} budgets = {n_pairs} allocations")

    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        point = solve(space, {k: np.array([v]) for k, v in res.params.items()}, budgets, sets=False)
        hint = np.log(point[["depth", "params"]].to_numpy())
        fast = solve(space, draws, budgets, sets=False, hint=hint)
        times.append(time.perf_counter() - t0)
    t_solve = min(times)
    print(
        f"project  solve (all draws x budgets):   {t_solve:.2f} s (best of {args.repeat}; "
        f"runs {', '.join(f'{t:.2f}' for t in times)})"
    )
    t0 = time.perf_counter()
    allocate(res, budgets, draw_sets=False)
    t_alloc = time.perf_counter() - t0
    print(f"project  allocate() incl. practical shapes under every draw: {t_alloc:.2f} s")

    rng = np.random.default_rng(0)
    idx = rng.choice(n_pairs, size=min(args.reference_pairs, n_pairs), replace=False)
    pairs = [(i // len(budgets), i % len(budgets)) for i in idx]
    box = space.box(budgets, (1.0, 1e4))
    t0 = time.perf_counter()
    ref = reference(space, draws, budgets, pairs, hint, box)
    t_ref = time.perf_counter() - t0
    per = t_ref / len(pairs)
    print(
        f"reference scipy L-BFGS-B loop: {t_ref:.2f} s for {len(pairs)} pairs = "
        f"{1e3 * per:.2f} ms/pair -> {per * n_pairs:.0f} s for all {n_pairs} (extrapolated)"
    )
    print(f"speed-up (extrapolated reference / project solve): {per * n_pairs / t_solve:.0f}x")
    ours = fast.iloc[idx]
    rel = np.abs(ours["depth"].to_numpy() / ref[:, 0] - 1)
    dl = ours["loss"].to_numpy() - ref[:, 2]
    print(
        f"agreement on the subset: max |depth rel diff| {rel.max():.2e}, "
        f"loss(project) - loss(reference): max {dl.max():.2e}, min {dl.min():.2e}"
    )
    print(
        f"all project solutions converged: {bool(fast['converged'].all())}, "
        f"unbounded: {int(fast['unbounded'].sum())}"
    )


if __name__ == "__main__":
    main()
