"""Benchmark: cold then warm start of `scalefit bayes` in one run (issue 16, item 2).

Runs ``scalefit bayes chinchilla --law decomposed --drop-highest 40`` twice in fresh processes
with the same, initially empty compile cache (``SCALEFIT_JAX_CACHE`` set to a new temporary
folder): the first run is a user's first-ever command (every program traced and compiled), the
second finds the cache the first one filled. For each run it prints the load average before and
after, wall time, CPU time (user + system of the child), peak resident memory, the sampler's own
time (``mcmc_seconds``, compilation included), the chains' quality (smallest bulk ESS, ESS per
second of the whole command, largest R-hat, the number of divergences) and how many CPU devices
the chains were split over (``dev``; the command asks JAX for min(chains, cores); set
``JAX_NUM_CPU_DEVICES=1`` to run all chains on one thread).

Threads are left at their defaults (the command as a user runs it). Targets on a quiet machine:
first run <= 30 s, warm <= 15 s.

With ``--before DIR`` (a copy of an older ``scalefit`` package tree, e.g. from ``git archive
<commit> scalefit | tar -x -C DIR``) the same cold/warm pair also runs on that tree, alternating
with the current one (before cold, after cold, before warm, after warm, each tree its own fresh
cache), so both see the same load.

Usage::

    SCALEFIT_DATA_DIR=../shared/data python benchmarks/bench_bayes_start.py [--repeats 1]
        [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from _harness import header, loadavg, run_fresh

COMMAND = ["bayes", "chinchilla", "--law", "decomposed", "--drop-highest", "40", "--no-progress"]


def one(cache: Path, out: Path, tree: str | None = None) -> dict:
    """One fresh-process run of the command with compile cache ``cache`` (package from ``tree``)."""
    before = loadavg()
    cmd = [sys.executable, "-m", "scalefit", *COMMAND, "--out", str(out)]
    env = {"SCALEFIT_JAX_CACHE": str(cache)}
    data = os.environ.get("SCALEFIT_DATA_DIR")
    if data:
        env["SCALEFIT_DATA_DIR"] = str(Path(data).resolve())
    # ``python -m`` puts the working folder first on sys.path: run an older tree from its folder
    res = run_fresh(cmd, env=env, cwd=tree)
    if res.returncode not in (0, 3):
        raise SystemExit(f"command failed ({res.returncode}):\n{res.stderr}")
    d = json.loads(out.read_text())["diagnostics"]
    return {
        "load_before": before,
        "load_after": loadavg(),
        "wall": res.wall,
        "cpu": res.cpu,
        "peak_mb": res.peak_mb,
        "mcmc_s": d["mcmc_seconds"],
        "mcmc_cpu_s": d.get("mcmc_cpu_seconds", float("nan")),
        "ess": d["ess_bulk_min"],
        "r_hat": d["r_hat_max"],
        "div": d["divergences"],
        "devices": d.get("chain_devices", 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1, help="cold+warm pairs, each a fresh cache")
    ap.add_argument("--before", help="folder holding an older scalefit package to compare")
    args = ap.parse_args()
    trees = {"after": None} if not args.before else {"before": args.before, "after": None}
    header("scalefit bayes: first-ever (empty compile cache) and warm runs")
    print("command: scalefit " + " ".join(COMMAND))
    rows = []
    for r in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="bench-bayes-start-") as tmp:
            for kind in ("cold", "warm"):
                for name, tree in trees.items():
                    cache = Path(tmp) / name / "jax"
                    m = one(cache, Path(tmp) / f"{name}-{kind}.json", tree)
                    rows.append((r, f"{name} {kind}" if args.before else kind, m))
                    print(f"  pair {r} {rows[-1][1]}: {m['wall']:.1f} s wall, {m['cpu']:.1f} s CPU")
                    sys.stdout.flush()
    print(
        f"{'pair':>4} {'run':<12}{'wall s':>8}{'CPU s':>8}{'peak MB':>9}{'mcmc s':>8}"
        f"{'mcmc CPU':>9}{'ESS min':>9}{'ESS/s':>7}{'R-hat':>7}{'div':>5}{'dev':>4}"
        "  load before -> after"
    )
    for r, kind, m in rows:
        print(
            f"{r:>4} {kind:<12}{m['wall']:>8.1f}{m['cpu']:>8.1f}{m['peak_mb']:>9.0f}"
            f"{m['mcmc_s']:>8.1f}{m['mcmc_cpu_s']:>9.1f}{m['ess']:>9.0f}"
            f"{m['ess'] / m['wall']:>7.0f}{m['r_hat']:>7.3f}{m['div']:>5}{m['devices']:>4}"
            f"  {m['load_before']} -> {m['load_after']}"
        )
    print(f"load average (1/5/15 min) at end: {loadavg()}")


if __name__ == "__main__":
    main()
