"""Fitting speed: scalefit's vectorised JAX solver against a plain loop of scipy least_squares.

Same law (decomposed), same 203 rows (Liu et al.'s Chinchilla table), same starting points, same
reference-pinned coordinates, both run to convergence, in one process. JAX compilation is included
in scalefit's times (the first call in a fresh process). Run with a cold compile cache (default: a
fresh temporary folder) or ``--warm-cache`` (the user cache, as a second CLI call would see it).

    SCALEFIT_DATA_DIR=../shared/data python benchmarks/bench_fit.py [--warm-cache] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from _harness import header, loadavg, pin_threads


def scipy_loop(law, table, z0s, weights=None):
    """Plain reference: one scipy least_squares call per start (and per resample)."""
    import numpy as np
    from scipy.optimize import least_squares

    x = law.variables(np, {k: table[k].to_numpy(float) for k in law.inputs})
    logy = np.log(table["loss"].to_numpy(float))
    refs = law.references(table)
    best = []
    for i, z0 in enumerate(z0s):
        sw = None if weights is None else np.sqrt(weights[i])

        def resid(z, sw=sw):
            with np.errstate(all="ignore"):
                r = logy - np.log(law.expr(np, law.to_public(z, refs), x))
            r = np.where(np.isfinite(r), r, 1e3)
            return r if sw is None else r * sw

        out = least_squares(resid, z0, method="lm", xtol=1e-12, ftol=1e-12, gtol=1e-12)
        best.append(2 * out.cost)
    return np.asarray(best)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warm-cache", action="store_true")
    ap.add_argument("--quick", action="store_true", help="fewer resamples (smoke run)")
    ap.add_argument("--threads", type=int, default=1, help="BLAS/XLA threads for both ways")
    args = ap.parse_args()
    threads = pin_threads(args.threads)
    header("fitting: scalefit's JAX solver vs a plain scipy least_squares loop", threads)
    import numpy as np

    if not args.warm_cache:
        os.environ["SCALEFIT_JAX_CACHE"] = tempfile.mkdtemp(prefix="jaxcache-")
    import scalefit
    from scalefit.fit.bootstrap import resample_weights
    from scalefit.fit.engine import Problem
    from scalefit.fit.lsq import solve_many
    from scalefit.laws import get_law, sample_starts

    table = scalefit.datasets.load("chinchilla", drop_highest=40)
    law = get_law("decomposed")
    y = table["loss"].to_numpy(float)
    n_boot = 100 if args.quick else 1000
    rows = []

    # 1. global fit from 256 starts
    t0 = time.perf_counter()
    res = scalefit.fit(table, law, starts=256, seed=0, progress=False)
    t_ours = time.perf_counter() - t0
    z0 = sample_starts(law, 256, y, seed=0)
    t0 = time.perf_counter()
    obj_sp = scipy_loop(law, table, z0)
    t_sp = time.perf_counter() - t0
    rows.append(
        (
            "global fit, 256 starts",
            t_ours,
            t_sp,
            f"best objective ours {res.objective:.12g} / scipy {np.nanmin(obj_sp):.12g}",
        )
    )

    # 2. bootstrap: warm start + 7 random starts per resample, best kept
    prob = Problem(law, table, y, loss="mse", delta=1e-3)
    rng = np.random.default_rng([0, 1])
    w = resample_weights(table, n_boot, cluster=None, rng=rng)
    rand = sample_starts(law, n_boot * 7, y, seed=99).reshape(n_boot, 7, -1)
    starts = np.concatenate([np.broadcast_to(np.asarray(res.internal), (n_boot, 1, 7)), rand], 1)
    t0 = time.perf_counter()
    _, obj, conv, _ = solve_many(prob, starts.reshape(-1, 7), np.repeat(w, 8, axis=0))
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    obj_sp = scipy_loop(law, table, starts.reshape(-1, 7), np.repeat(w, 8, axis=0))
    t_sp = time.perf_counter() - t0
    ours_best = np.nanmin(np.where(conv, obj, np.inf).reshape(n_boot, 8), axis=1)
    sp_best = np.nanmin(obj_sp.reshape(n_boot, 8), axis=1)
    worse = int(np.sum(ours_best > sp_best * (1 + 1e-7)))
    rows.append(
        (
            f"bootstrap {n_boot} x (warm + 7 starts)",
            t_ours,
            t_sp,
            f"resamples where scipy found a lower optimum than ours: {worse}",
        )
    )

    # 3. bootstrap from the warm start alone
    warm = np.broadcast_to(np.asarray(res.internal), (n_boot, 7))
    t0 = time.perf_counter()
    solve_many(prob, warm, w)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    scipy_loop(law, table, warm, w)
    t_sp = time.perf_counter() - t0
    rows.append((f"bootstrap {n_boot}, warm start only", t_ours, t_sp, ""))

    cache = "warm" if args.warm_cache else "cold"
    print(
        f"# bench_fit ({cache} JAX compile cache; python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cores)"
    )
    print(f"{'work':<38}{'scalefit s':>12}{'scipy loop s':>14}{'speed-up':>10}  note")
    for name, a, b, note in rows:
        print(f"{name:<38}{a:>12.2f}{b:>14.2f}{b / a:>9.1f}x  {note}")
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
