"""Allocation speed: 100 budgets x 1000 bootstrap draws of the decomposed fit.

Project way: :func:`scalefit.allocate.solve` (grid + projected Newton, numpy, vectorised over
draws and budgets), and the whole :func:`scalefit.allocate.allocate` call (adds the point
estimate's near-optimal sets and the practical shapes scored under every draw).
Reference way: a plain loop, one ``scipy.optimize.minimize`` (L-BFGS-B in log depth, log params,
same box, started at the point estimate's optimum for that budget) per (draw, budget) pair, on a
random subset of pairs, extrapolated to all pairs; the answers are compared on that subset.

Both ways run in this process under the same pinned thread settings (``--threads``, default 1:
BLAS, OpenMP and XLA), printed with the load average; the project's solve and the reference loop
alternate, ``--repeat`` times each, and the medians are compared (an earlier version let the
reference's OpenBLAS threads fight the machine's load and reported ≈ 4,400x).

Run:  SCALEFIT_DATA_DIR=../shared/data python benchmarks/bench_allocate.py
The 1000-draw fit is cached in ~/.cache/scalefit/bench/ (it takes ~30 s to make).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from _harness import alternate, header, loadavg, pin_threads


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
    import numpy as np
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
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--budgets", type=int, default=100)
    ap.add_argument("--reference-pairs", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    threads = pin_threads(args.threads)
    header("allocation: project solve vs a scipy L-BFGS-B loop", threads)
    import numpy as np

    from scalefit.allocate import Space, allocate, solve

    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "scalefit" / "bench"
    res = draws_result(cache / f"decomposed_{args.draws}.json", args.draws)
    d = np.asarray(res.draws)
    d = d[np.all(np.isfinite(d), axis=1)]
    draws = {k: d[:, i] for i, k in enumerate(res.params)}
    budgets = np.logspace(18, 24, args.budgets)
    space = Space.of(res.law)
    n_pairs = len(d) * len(budgets)
    print(f"{len(d)} draws x {len(budgets)} budgets = {n_pairs} allocations")

    point = solve(space, {k: np.array([v]) for k, v in res.params.items()}, budgets, sets=False)
    hint = np.log(point[["depth", "params"]].to_numpy())
    rng = np.random.default_rng(0)
    idx = rng.choice(n_pairs, size=min(args.reference_pairs, n_pairs), replace=False)
    pairs = [(i // len(budgets), i % len(budgets)) for i in idx]
    box = space.box(budgets, (1.0, 1e4))
    out = {}

    def project():
        p = solve(space, {k: np.array([v]) for k, v in res.params.items()}, budgets, sets=False)
        h = np.log(p[["depth", "params"]].to_numpy())
        out["fast"] = solve(space, draws, budgets, sets=False, hint=h)

    def ref_loop():
        out["ref"] = reference(space, draws, budgets, pairs, hint, box)

    project()  # warm-up: first-call imports and caches are not the method's cost
    timing = alternate({"project solve": project, "reference loop": ref_loop}, args.repeat)
    fast, ref = out["fast"], out["ref"]
    t_solve = timing["project solve"].wall_median
    c_solve = timing["project solve"].cpu_median
    t_ref, c_ref = timing["reference loop"].wall_median, timing["reference loop"].cpu_median
    per, per_cpu = t_ref / len(pairs), c_ref / len(pairs)
    print(
        f"project  solve (all {n_pairs} draws x budgets): median {t_solve:.2f} s wall, "
        f"{c_solve:.2f} s CPU (runs {timing['project solve'].spread()})"
    )
    print(
        f"reference scipy L-BFGS-B loop: median {t_ref:.2f} s wall, {c_ref:.2f} s CPU for "
        f"{len(pairs)} pairs = {1e3 * per:.2f} ms/pair (runs {timing['reference loop'].spread()})"
        f" -> {per * n_pairs:.0f} s for all {n_pairs} (extrapolated)"
    )
    print(
        f"speed-up (extrapolated reference / project solve, medians): "
        f"{per * n_pairs / t_solve:.0f}x wall, {per_cpu * n_pairs / c_solve:.0f}x CPU"
    )
    t0 = time.perf_counter()
    allocate(res, budgets, draw_sets=False)
    t_alloc = time.perf_counter() - t0
    print(f"project  allocate() incl. practical shapes under every draw: {t_alloc:.2f} s")
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
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
