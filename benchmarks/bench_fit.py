"""Fitting speed: scalefit's vectorised JAX solver against a plain loop of scipy least_squares.

Same law (decomposed), same 203 rows (Liu et al.'s Chinchilla table), same starting points, same
reference-pinned coordinates, both run to convergence. Three works, each timed on its own:

1. the global fit from 256 starts (``scalefit.fit``; the reference gets the same 256 starts);
2. a bootstrap: ``--boot`` resamples x (the fit's optimum as warm start + 7 random starts), the
   best kept (scalefit: one ``solve_many`` over all problems, resamples sharing their counts);
3. the same resamples from the warm start alone.

Each way runs in a **fresh process** (so scalefit's times include JAX start-up, tracing and
compilation or loading the compiled program, as a CLI call sees them), under the same pinned
thread settings (``--threads``, default 1: BLAS, OpenMP, XLA), alternating ``--repeats`` times:
``scalefit-cold`` (an empty compile cache each time), ``scalefit-warm`` (the cache left by one
warm-up run before the repeats) and ``scipy``. The medians of wall and CPU seconds (the child's
own ``time.process_time`` around each work) are reported with their min-max and the load
average; on a shared machine the CPU-time ratio is the figure to trust.

With ``--before DIR`` (a copy of an older ``scalefit`` package tree, e.g. from ``git archive
<commit> scalefit | tar -x -C DIR``) two more ways, ``before-cold`` and ``before-warm``, run the
same works with that tree first on ``PYTHONPATH``, alternating with the others, so old and new
code are compared under the same load (each ratio is printed for both trees).

    SCALEFIT_DATA_DIR=../shared/data nice -n 10 python benchmarks/bench_fit.py \
        --boot 1000 --repeats 3 [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _harness import header, loadavg, pin_threads, run_fresh

WORKS = (
    "global fit, 256 starts",
    "bootstrap x (warm + 7 starts), best kept",
    "bootstrap, warm only",
)
WAYS = ("scalefit-cold", "scalefit-warm", "scipy")
#: The older tree's ways (``--before``): the child runs as the scalefit way of the same cache.
BEFORE = {"before-cold": "scalefit-cold", "before-warm": "scalefit-warm"}


def scipy_loop(law, table, refs, z0s, weights=None, index=None):
    """Plain reference: one scipy least_squares call per start (and per resample)."""
    import numpy as np
    from scipy.optimize import least_squares

    x = law.variables(np, {k: table[k].to_numpy(float) for k in law.inputs})
    logy = np.log(table["loss"].to_numpy(float))
    best = []
    for i, z0 in enumerate(z0s):
        sw = None if weights is None else np.sqrt(weights[i if index is None else index[i]])

        def resid(z, sw=sw):
            with np.errstate(all="ignore"):
                r = logy - np.log(law.expr(np, law.to_public(z, refs), x))
            r = np.where(np.isfinite(r), r, 1e3)
            return r if sw is None else r * sw

        out = least_squares(resid, z0, method="lm", xtol=1e-12, ftol=1e-12, gtol=1e-12)
        best.append(2 * out.cost)
    return np.asarray(best)


def _timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}


def child(way: str, n_boot: int, shared: Path) -> dict:
    """One way's three works in this (fresh) process; returns timings and objectives."""
    import numpy as np

    import scalefit
    from scalefit.fit.bootstrap import resample_groups
    from scalefit.fit.lsq import starts_for
    from scalefit.laws import get_law, sample_starts

    table = scalefit.datasets.load("chinchilla", drop_highest=40)
    law = get_law("decomposed")
    y = table["loss"].to_numpy(float)
    refs = law.references({k: table[k].to_numpy(float) for k in law.inputs})
    rng = np.random.default_rng([0, 1])
    (_, w), *_ = resample_groups(table, n_boot, cluster=None, rng=rng, group=n_boot)
    index = np.repeat(np.arange(n_boot), 8)
    times, out = {}, {}
    if way == "scipy":
        warm_z = np.asarray(json.loads((shared / "warm.json").read_text())["internal"])
        z0 = starts_for(law, y, refs, 256, 0)
        obj, times[WORKS[0]] = _timed(lambda: scipy_loop(law, table, refs, z0))
        out["global_objective"] = float(np.nanmin(obj))
    else:
        from scalefit.fit.engine import Problem
        from scalefit.fit.lsq import solve_many

        res, times[WORKS[0]] = _timed(
            lambda: scalefit.fit(table, law, starts=256, seed=0, progress=False)
        )
        out["global_objective"] = float(res.objective)
        warm_z = np.asarray(res.internal, dtype=float)
        out["internal"] = warm_z.tolist()
    rand = sample_starts(law, n_boot * 7, y, seed=99).reshape(n_boot, 7, -1)
    starts = np.concatenate([np.broadcast_to(warm_z, (n_boot, 1, len(warm_z))), rand], 1)
    starts = starts.reshape(-1, len(warm_z))
    warm = np.broadcast_to(warm_z, (n_boot, len(warm_z)))
    if way == "scipy":
        obj, times[WORKS[1]] = _timed(lambda: scipy_loop(law, table, refs, starts, w, index))
        best = np.nanmin(obj.reshape(n_boot, 8), axis=1)
        _, times[WORKS[2]] = _timed(lambda: scipy_loop(law, table, refs, warm, w))
    else:
        prob = Problem(
            law, {k: table[k].to_numpy(float) for k in law.inputs}, y, loss="mse", delta=1e-3
        )
        (_, obj, conv, _), times[WORKS[1]] = _timed(
            lambda: solve_many(prob, starts, w, weight_index=index)
        )
        best = np.nanmin(np.where(conv, obj, np.inf).reshape(n_boot, 8), axis=1)
        _, times[WORKS[2]] = _timed(lambda: solve_many(prob, warm, w))
    out["boot_best"] = best.tolist()
    return {"way": way, "times": times, **out}


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--boot", type=int, default=200, help="bootstrap resamples (docs: 1000)")
    ap.add_argument("--repeats", type=int, default=3, help="alternating repeats of each way")
    ap.add_argument("--threads", type=int, default=1, help="BLAS/XLA threads for both ways")
    ap.add_argument("--before", help="folder holding an older scalefit package to compare")
    ap.add_argument("--child", choices=WAYS, help=argparse.SUPPRESS)
    ap.add_argument("--shared", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.boot, Path(args.shared))))
        return
    threads = pin_threads(args.threads)
    header("fitting: scalefit's JAX solver vs a plain scipy least_squares loop", threads)
    print(f"decomposed on Chinchilla's 203 rows; {args.boot} resamples; {args.repeats} repeats")
    shared = Path(tempfile.mkdtemp(prefix="bench-fit-"))
    warm_cache = shared / "warm-cache"
    base = [sys.executable, __file__, "--boot", str(args.boot), "--shared", str(shared)]
    ways = WAYS
    if args.before:
        before = str(Path(args.before).resolve())
        if not (Path(before) / "scalefit" / "__init__.py").exists():
            sys.exit(f"--before {args.before}: no scalefit package in that folder")
        ways = (*WAYS, *BEFORE)
        print(f"before: {before} (first on PYTHONPATH for {', '.join(BEFORE)})")

    def run(way: str) -> dict:
        child_way = BEFORE.get(way, way)
        cache = warm_cache if child_way == "scalefit-warm" else Path(tempfile.mkdtemp(dir=shared))
        env = {"SCALEFIT_JAX_CACHE": str(cache)}
        if way in BEFORE:
            env["PYTHONPATH"] = before
        f = run_fresh([*base, "--child", child_way], env=env)
        if f.returncode != 0:
            raise RuntimeError(f"{way} failed ({f.returncode}):\n{f.stderr[-3000:]}")
        if child_way == "scalefit-cold":
            shutil.rmtree(cache, ignore_errors=True)
        out = json.loads(f.stdout.strip().splitlines()[-1])
        out["process"] = {"wall": f.wall, "cpu": f.cpu, "peak_mb": f.peak_mb}
        return out

    try:
        first = run("scalefit-warm")  # fills the warm cache; its optimum seeds the reference
        (shared / "warm.json").write_text(json.dumps({"internal": first["internal"]}))
        t = first["times"][WORKS[0]]
        print(f"warm-up (fills the cache): global fit {t['wall']:.2f} s wall, {t['cpu']:.2f} CPU-s")
        if args.before:  # the older tree's programs in the same warm cache (their keys differ)
            run("before-warm")
        runs: dict[str, list[dict]] = {way: [] for way in ways}
        for r in range(args.repeats):
            for way in ways if r % 2 == 0 else tuple(reversed(ways)):
                out = run(way)
                runs[way].append(out)
                tt = " | ".join(
                    f"{t['wall']:.2f} s / {t['cpu']:.2f} CPU-s" for t in out["times"].values()
                )
                print(f"  repeat {r}: {way:13s} {tt}  (load {loadavg()})", flush=True)
    finally:
        shutil.rmtree(shared, ignore_errors=True)

    print(f"\nmedians (min-max) of {args.repeats} fresh-process repeats, seconds:")
    print(f"{'work':<42}{'clock':>6}  " + "".join(f"{w:>24}" for w in ways))
    for work in WORKS:
        for clock in ("wall", "cpu"):
            cells = "".join(f"{_fmt([o['times'][work][clock] for o in runs[w]]):>24}" for w in ways)
            print(f"{work:<42}{clock:>6}  {cells}")
    print("\nspeed-up = scipy / scalefit (ratio of medians; min-max over repeat pairs):")
    for tree in ("scalefit", "before") if args.before else ("scalefit",):
        for work in WORKS:
            for cache in ("cold", "warm"):
                parts = []
                for clock in ("wall", "cpu"):
                    ref = [o["times"][work][clock] for o in runs["scipy"]]
                    ours = [o["times"][work][clock] for o in runs[f"{tree}-{cache}"]]
                    pair = [a / b for a, b in zip(ref, ours, strict=True)]
                    med = statistics.median(ref) / statistics.median(ours)
                    parts.append(f"{clock} {med:.1f}x ({min(pair):.1f}-{max(pair):.1f})")
                print(f"  {tree:<8} {work:<42} {cache}: " + ", ".join(parts))
    import numpy as np

    ours_obj = runs["scalefit-warm"][0]["global_objective"]
    sp_obj = runs["scipy"][0]["global_objective"]
    ours_best = np.asarray(runs["scalefit-warm"][0]["boot_best"])
    sp_best = np.asarray(runs["scipy"][0]["boot_best"])
    worse = int(np.sum(ours_best > sp_best * (1 + 1e-7)))
    print(f"best objective: scalefit {ours_obj:.12g}, scipy {sp_obj:.12g}")
    print(f"resamples where scipy found a lower optimum than scalefit: {worse} of {args.boot}")
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
