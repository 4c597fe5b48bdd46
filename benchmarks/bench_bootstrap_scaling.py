"""Bootstrap at scale: 200 resamples from 10^3 to 2·10^5 rows, time and peak memory.

Each size runs in a fresh process with the same thread settings (see ``bench_large_table.py``
for the table and the fit): ``scalefit.bootstrap(res, table, 200)`` with its defaults (the warm
start plus 7 random starts per resample, best converged solution kept). Memory is O(rows +
resamples): counts are drawn per group of resamples and each chunk of 32 problems carries only its
own weights. Reported: the bootstrap's wall and CPU time, CPU microseconds per row and resample,
and the process's peak resident memory.

    nice -n 10 python benchmarks/bench_bootstrap_scaling.py [--sizes 1000,10000,50000,200000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _harness import header, loadavg, pin_threads


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,50000,200000")
    ap.add_argument("--law", default="decomposed")
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    threads = pin_threads(args.threads)
    header(f"bootstrap scaling: {args.law}, {args.boot} resamples, fresh process per size", threads)
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_large_table import run_sizes

    script = str(Path(__file__).parent / "bench_large_table.py")
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = run_sizes(sizes, args.law, args.boot, script, args.threads)
    print(f"\nload average at end: {loadavg()}")
    print(
        "| rows | bootstrap wall | bootstrap CPU | CPU µs per row per resample | peak memory | "
        "failed resamples |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        per = 1e6 * r["boot_cpu"] / (r["n"] * args.boot)
        print(
            f"| {r['n']:,} | {r['boot_wall']:.1f} s | {r['boot_cpu']:.1f} s | {per:.2f} | "
            f"{r['peak_mb']:.0f} MB | {r['boot_failed']} |"
        )


if __name__ == "__main__":
    main()
