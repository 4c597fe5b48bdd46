"""Bootstrap at scale: 200 resamples from 10^3 to 2·10^5 rows, time and peak memory.

Each size runs in a fresh process with the same thread settings: a synthetic table of the law
(``scalefit.fit.synthetic.simulate_table``, as in ``bench_large_table.py``) is fitted with
``scalefit.fit`` defaults, then ``scalefit.bootstrap(res, table, B)`` runs with its defaults (the
warm start plus 7 random starts per resample, best converged solution kept). Tables above
``engine.SCREEN_ABOVE`` rows screen the random starts on a 4,096-row subsample of each resample
and solve the warm start on every row, polishing a screened start on every row only when it lies
in another basin and is not clearly worse (``--no-screen`` solves every start on every row).
Memory is O(rows + resamples). Reported: the bootstrap's wall and CPU time, CPU microseconds per
row and resample, the marginal CPU microseconds per added row and resample between consecutive
sizes on the same path (the per-resample constant of the screened starts cancels in it), the
process's peak resident memory, failed resamples and how many resamples needed a polish on every
row.

By default each child uses the user's compile cache, so once the programs of a size have been
compiled (by an earlier run) the figures exclude compilation. ``--cold`` gives every size's child
an empty compile cache of its own, so its bootstrap time includes compiling its solver programs
(what the first bootstrap on a table of that size costs). The output says which it was.

    nice -n 10 python benchmarks/bench_bootstrap_scaling.py [--sizes 1000,10000,50000,200000]
        [--boot 200] [--ci-method percentile|bca] [--no-screen] [--cold]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time

from _harness import header, loadavg, pin_threads, run_fresh


def child(n: int, law: str, n_boot: int, ci_method: str, screen: bool) -> None:
    import scalefit
    from scalefit.fit.synthetic import simulate_table

    table = simulate_table(law, n=n, seed=1)
    res = scalefit.fit(table, law, seed=0, progress=False)
    base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), time.process_time()
    boot = scalefit.bootstrap(
        res, table, n_boot, seed=0, ci_method=ci_method, screen=screen, progress=False
    )
    d = boot.diagnostics
    out = {
        "n": n,
        "boot_wall": time.perf_counter() - t0,
        "boot_cpu": time.process_time() - c0,
        "base_mb": base_mb,
        "boot_failed": int(d["boot_failed"]),
        "boot_polished": int(d["boot_polished"]),
        "screened_on_rows": d["boot_screened_on_rows"],
        "bca_jackknife": d["bca_jackknife"],
        "converged": bool(res.converged),
    }
    print("RESULT " + json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,50000,200000")
    ap.add_argument("--law", default="decomposed")
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ci-method", default="percentile", choices=["percentile", "bca"])
    ap.add_argument("--no-screen", action="store_true", help="solve every start on every row")
    ap.add_argument(
        "--cold", action="store_true", help="an empty compile cache for every size's child"
    )
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    screen = not args.no_screen
    if args.child:
        child(args.child, args.law, args.boot, args.ci_method, screen)
        return
    threads = pin_threads(args.threads)
    header(
        f"bootstrap scaling: {args.law}, {args.boot} resamples, ci_method={args.ci_method}, "
        f"screen={screen}, fresh process per size",
        threads,
    )
    print(
        "compile cache: "
        + (
            "an empty one per size (--cold): times include compiling the solver programs"
            if args.cold
            else f"the user's ({os.environ.get('SCALEFIT_JAX_CACHE') or 'default'}): times "
            "exclude compilation once a size's programs are cached"
        )
    )
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        cmd = [sys.executable, __file__, "--child", str(n), "--law", args.law]
        cmd += ["--boot", str(args.boot), "--ci-method", args.ci_method]
        cmd += ["--no-screen"] if args.no_screen else []
        cache = tempfile.mkdtemp(prefix="scalefit-boot-cache-") if args.cold else None
        try:
            f = run_fresh(cmd, env={"SCALEFIT_JAX_CACHE": cache} if cache else None)
        finally:
            if cache:
                shutil.rmtree(cache, ignore_errors=True)
        if f.returncode != 0:
            print(f"n={n}: failed ({f.returncode})\n{f.stderr[-3000:]}")
            break
        line = [ln for ln in f.stdout.splitlines() if ln.startswith("RESULT ")][-1]
        r = json.loads(line[len("RESULT ") :])
        r.update(peak_mb=f.peak_mb, load=loadavg())
        rows.append(r)
        print("  " + json.dumps(r))
        sys.stdout.flush()
    print(f"\nload average at end: {loadavg()}")
    # The marginal cost compares a size with the previous one on the same path (both screened or
    # both not): the CPU seconds the added rows cost, per added row and resample. A per-resample
    # constant (the screened starts) cancels in it, so it shows whether the work that grows with
    # the rows stays linear (no cache cliff) where the plain per-row figure mostly shows that
    # constant being spread over more rows.
    print(
        "| rows | bootstrap wall | bootstrap CPU | CPU µs per row per resample | marginal CPU µs "
        "per added row per resample | peak memory | failed resamples | polished on every row |"
    )
    print("|---|---|---|---|---|---|---|---|")
    prev = None
    for r in rows:
        per = 1e6 * r["boot_cpu"] / (r["n"] * args.boot)
        marginal = "—"
        if prev is not None and bool(prev["screened_on_rows"]) == bool(r["screened_on_rows"]):
            added = (r["n"] - prev["n"]) * args.boot
            marginal = f"{1e6 * (r['boot_cpu'] - prev['boot_cpu']) / added:.2f}"
        polished = f"{r['boot_polished']}" if r["screened_on_rows"] else "(not screened)"
        print(
            f"| {r['n']:,} | {r['boot_wall']:.1f} s | {r['boot_cpu']:.1f} s | {per:.2f} | "
            f"{marginal} | {r['peak_mb']:.0f} MB | {r['boot_failed']} | {polished} |"
        )
        prev = r


if __name__ == "__main__":
    main()
