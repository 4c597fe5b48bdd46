"""Large single fits: time and peak memory from 10^3 to 10^6 rows (issue 11, "Scale").

Each size runs in a fresh process with the same thread settings: a synthetic table of the
``decomposed`` law (Liu et al.'s fitted values, 1 % log-normal noise, ``scalefit.fit.synthetic``)
is fitted by ``scalefit.fit`` with its defaults (256 starts). Tables above
``engine.SCREEN_ABOVE`` rows screen the starts on a 4,096-row subsample and polish the best on
every row, in blocks of 1,024 rows, so memory is bounded by a chunk of starts times a block.
Reported: the fit's wall and CPU time (the child's own clock, table simulation excluded), the
process's peak resident memory and that of the same process before fitting, CPU microseconds per
row, and the largest relative error of the recovered exponents.

    nice -n 10 python benchmarks/bench_large_table.py [--sizes 1000,10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

from _harness import header, loadavg, pin_threads, run_fresh


def child(n: int, law: str, n_boot: int) -> None:
    import numpy as np

    import scalefit
    from scalefit.fit.synthetic import simulate_table

    table = simulate_table(law, n=n, seed=1)
    base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), time.process_time()
    res = scalefit.fit(table, law, seed=0, progress=False)
    fit_wall, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"n": n, "fit_wall": fit_wall, "fit_cpu": fit_cpu, "base_mb": base_mb}
    truth = table.attrs["truth"]
    expo = [k for k in truth if k.startswith("a_") or k in ("alpha", "beta")]
    out["max_rel_err_exponents"] = max(abs(res.params[k] / truth[k] - 1) for k in expo)
    out["converged"] = bool(res.converged)
    out["objective"] = float(res.objective)
    if n_boot:
        from scalefit import bootstrap

        t0, c0 = time.perf_counter(), time.process_time()
        boot = bootstrap(res, table, n_boot, seed=0, progress=False)
        out["boot_wall"] = time.perf_counter() - t0
        out["boot_cpu"] = time.process_time() - c0
        out["boot_failed"] = int(boot.diagnostics["boot_failed"])
        out["boot_ci_" + expo[0]] = list(boot.ci[expo[0]])
        out["draws_finite"] = int(np.isfinite(boot.draws).all(axis=1).sum())
    print("RESULT " + json.dumps(out))


def run_sizes(sizes, law: str, n_boot: int, script: str, threads: int) -> list[dict]:
    rows = []
    for n in sizes:
        f = run_fresh(
            [sys.executable, script, "--child", str(n), "--law", law, "--boot", str(n_boot)]
        )
        if f.returncode != 0:
            print(f"n={n}: failed ({f.returncode})\n{f.stderr[-3000:]}")
            break
        line = [ln for ln in f.stdout.splitlines() if ln.startswith("RESULT ")][-1]
        r = json.loads(line[len("RESULT ") :])
        r.update(peak_mb=f.peak_mb, proc_wall=f.wall, proc_cpu=f.cpu, load=loadavg())
        rows.append(r)
        print("  " + json.dumps(r))
        sys.stdout.flush()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--law", default="decomposed")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--boot", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.law, args.boot)
        return
    threads = pin_threads(args.threads)
    header(f"large single fits: {args.law}, fresh process per size", threads)
    rows = run_sizes([int(s) for s in args.sizes.split(",")], args.law, 0, __file__, args.threads)
    print(f"\nload average at end: {loadavg()}")
    print(
        "| rows | fit wall | fit CPU | CPU µs per row | peak memory (before fit) | converged | "
        "max rel. error of exponents |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['n']:,} | {r['fit_wall']:.1f} s | {r['fit_cpu']:.1f} s | "
            f"{1e6 * r['fit_cpu'] / r['n']:.1f} | {r['peak_mb']:.0f} MB ({r['base_mb']:.0f} MB) | "
            f"{'yes' if r['converged'] else 'no'} | {r['max_rel_err_exponents']:.2e} |"
        )


if __name__ == "__main__":
    main()
