"""Latency as a user feels it: a fresh-process ``scalefit fit`` against the bare interpreter floor.

In one run, alternating, each in a fresh process with the same thread settings:

- ``floor``: ``python -c "import jax, pandas; import jax.numpy as jnp; jnp.ones(1)"`` (what any
  JAX + pandas program pays before doing work);
- ``fit 203``: ``scalefit fit chinchilla --law decomposed --drop-highest 40`` (Liu's 203 rows);
- ``fit 215``: the same with ``--drop-highest 30`` (215 rows: another row count in the same
  bucket, which must reuse the compiled program);
- ``fit gemstones``: ``scalefit fit gemstones --law decomposed`` (the bundled table, no data
  folder needed);
- ``floor, frozen exit``: the floor followed by ``gc.freeze()``, the exit the ``scalefit``
  console script has (``scalefit.cli.run``): Python's finalisation then skips its full garbage
  collections (≈ 0.2 s after importing JAX and pandas). The table gives each command's ratio to
  both floors.

Every ``scalefit`` command runs the package tree this benchmark belongs to (its repository root
first on ``PYTHONPATH``, through the console script's entry, ``scalefit.cli.run``), not whichever
copy is installed. Byte-code caching is on for every command (see ``main``). The benchmark uses its
own empty compile cache (``SCALEFIT_JAX_CACHE`` set to a fresh folder), so the first ``fit 203`` is
a true cold start; it then runs ``fit 215`` once with ``JAX_LOG_COMPILES`` and counts the solver
programs that had to be compiled (a persistent-cache hit is not a compilation), and reports where a
warm fresh process spends its time (tracing, loading compiled programs, imports) from the same log.
Timed repeats all see the warm cache.

With ``--before DIR`` (a copy of an older ``scalefit`` package tree, e.g. from ``git archive
<commit> scalefit | tar -x -C DIR``) a fourth command, ``fit 203 rows (before)``, runs the same fit
with that tree first on ``PYTHONPATH``, alternating with the others, so the old and the new code
are compared under the same load; its programs are put in the same compile cache (their keys
differ) before the timed repeats. With ``--isoflop`` the runs add ``scalefit isoflop
isoflops:misfitting__fineweb_c4__transformer`` (Approach 2's three methods on the Misfitting sweep,
whose profile fit used to take most of a minute), and its ``(before)`` twin with ``--before``.

    SCALEFIT_DATA_DIR=../shared/data nice -n 10 python benchmarks/bench_latency.py [--repeats 3]
        [--before DIR] [--isoflop]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from _harness import alternate_fresh, header, loadavg, pin_threads, run_fresh

FLOOR = "import jax, pandas; import jax.numpy as jnp; jnp.ones(1).block_until_ready()"
#: The floor with the exit ``scalefit``'s console script has (``scalefit.cli.run`` freezes the
#: garbage collector, so the interpreter's exit skips its full collections): a stricter floor,
#: shown beside the issue's one so the share of the gap that exit made is visible.
FLOOR_FROZEN = FLOOR + "; import gc; gc.freeze()"
SOLVER_PROGRAMS = ("solve_one", "curvature")
#: The console script's entry (``run``: the frozen exit) where a tree has one.
ENTRY = "import sys, scalefit.cli as c; sys.exit((getattr(c, 'run', None) or c.main)())"
ROOT = Path(__file__).resolve().parents[1]
ISOFLOP = ["isoflop", "isoflops:misfitting__fineweb_c4__transformer"]


def scalefit_cmd(tree: Path | str, *args: str) -> list[str]:
    """A fresh ``scalefit ARGS`` run of the package in ``tree`` (first on ``PYTHONPATH``)."""
    return ["env", f"PYTHONPATH={tree}", sys.executable, "-c", ENTRY, *args]


def compile_log(stderr: str) -> dict[str, object]:
    """Parse a ``JAX_LOG_COMPILES`` log: tracing time, compilations and cache hits per program."""
    tracing = sum(
        float(s) for s in re.findall(r"Finished tracing \S+ for \S+ in ([0-9.e-]+)", stderr)
    )
    lines = stderr.splitlines()
    compiled, hits, xla = [], [], 0.0
    for i, line in enumerate(lines):
        m = re.match(
            r".*Compiling (?:jit\()?(\w+)\)? with global shapes and types \((.*?)\)\.", line
        )
        if not m:
            continue
        name, shapes = m.group(1), m.group(2)
        hit = False
        for nxt in lines[i + 1 : i + 6]:
            if "Persistent compilation cache hit" in nxt:
                hit = True
            f = re.search(r"Finished XLA compilation of \S+ in ([0-9.e-]+)", nxt)
            if f:
                xla += float(f.group(1))
                break
        (hits if hit else compiled).append((name, shapes.split("), ")[0:2]))
    solver_compiled = [c for c in compiled if c[0] in SOLVER_PROGRAMS]
    return {
        "tracing_s": tracing,
        "xla_s": xla,
        "compiled": compiled,
        "hits": hits,
        "solver_compiled": solver_compiled,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--keep-cache", action="store_true", help="use the user's compile cache")
    ap.add_argument("--before", help="folder holding an older scalefit package to compare")
    ap.add_argument("--isoflop", action="store_true", help="add the Misfitting isoflop command")
    args = ap.parse_args()
    threads = pin_threads(args.threads)
    header("fresh-process latency: scalefit fit vs the bare interpreter floor", threads)
    if not os.environ.get("SCALEFIT_DATA_DIR"):
        sys.exit("set SCALEFIT_DATA_DIR to the folder with chinchilla_depth_width.csv")
    cache = None
    if not args.keep_cache:
        cache = tempfile.mkdtemp(prefix="scalefit-latency-cache-")
        os.environ["SCALEFIT_JAX_CACHE"] = cache
    work = tempfile.mkdtemp(prefix="scalefit-latency-")
    # Every command runs with byte-code caching on, in a folder of its own: an installed package
    # ships .pyc files, and so do jax and pandas here, but a PYTHONDONTWRITEBYTECODE=1 shell
    # (some sandboxes and CI images set it) would make only scalefit's own modules be compiled
    # from source in every process. The warm-up runs below fill the folder for all commands.
    bytecode = os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(Path(work) / "pycache")
    print(
        f"byte-code cache: {os.environ['PYTHONPYCACHEPREFIX']} (PYTHONDONTWRITEBYTECODE "
        f"{'was ' + repr(bytecode) + ', unset for the runs' if bytecode else 'not set'})"
    )
    fit = ["fit", "chinchilla", "--law", "decomposed", "--drop-highest"]
    cmds = {
        "floor": [sys.executable, "-c", FLOOR],
        "floor, frozen exit": [sys.executable, "-c", FLOOR_FROZEN],
        "fit 203 rows": scalefit_cmd(ROOT, *fit, "40"),
        "fit 215 rows": scalefit_cmd(ROOT, *fit, "30"),
        "fit gemstones": scalefit_cmd(ROOT, "fit", "gemstones", "--law", "decomposed"),
    }
    if args.isoflop:
        cmds["isoflop Misfitting"] = scalefit_cmd(ROOT, *ISOFLOP)
    if args.before:
        before = str(Path(args.before).resolve())
        if not (Path(before) / "scalefit" / "__init__.py").exists():
            sys.exit(f"--before {args.before}: no scalefit package in that folder")
        cmds["fit 203 rows (before)"] = scalefit_cmd(before, *fit, "40")
        if args.isoflop:
            cmds["isoflop Misfitting (before)"] = scalefit_cmd(before, *ISOFLOP)
        print(f"before: {before} (first on PYTHONPATH for 'fit 203 rows (before)')")
    try:
        print(f"compile cache: {cache or 'user cache'}")
        # fill the byte-code cache (jax's and pandas' modules too) without touching the compile
        # cache, so the cold run below measures compilation, not byte-code compilation
        run_fresh(cmds["fit 203 rows"], cwd=work, env={"SCALEFIT_JAX_CACHE": "0"})
        run_fresh(cmds["floor"], cwd=work)
        cold = run_fresh(cmds["fit 203 rows"], cwd=work, env={"JAX_LOG_COMPILES": "1"})
        log = compile_log(cold.stderr)
        print(
            f"cold cache, fit 203 rows: {cold.wall:.2f} s wall, {cold.cpu:.2f} s CPU; solver "
            f"programs compiled: {len(log['solver_compiled'])}"
        )
        other = run_fresh(cmds["fit 215 rows"], cwd=work, env={"JAX_LOG_COMPILES": "1"})
        log = compile_log(other.stderr)
        print(
            f"warm cache, first fit of 215 rows after 203: {other.wall:.2f} s wall, "
            f"{other.cpu:.2f} s CPU; solver programs compiled: {len(log['solver_compiled'])} "
            f"{log['solver_compiled'] or ''}; all compilations (incl. small eager ops): "
            f"{len(log['compiled'])}, persistent-cache hits: {len(log['hits'])}"
        )
        warm = run_fresh(cmds["fit 203 rows"], cwd=work, env={"JAX_LOG_COMPILES": "1"})
        log = compile_log(warm.stderr)
        print(
            f"where a warm fresh fit of 203 rows spends time ({warm.wall:.2f} s wall, "
            f"{warm.cpu:.2f} s CPU, with logging on): tracing {log['tracing_s']:.2f} s, "
            f"compiling or loading compiled programs {log['xla_s']:.2f} s, "
            f"solver programs compiled {len(log['solver_compiled'])}"
        )
        imp = run_fresh(
            [
                sys.executable,
                "-c",
                "import time; t=time.perf_counter(); import scalefit.cli; "
                "print(f'{time.perf_counter()-t:.3f}')",
            ],
            cwd=work,
            env={"PYTHONPATH": str(ROOT)},
        )
        if imp.returncode == 0:
            print(f"import scalefit.cli alone: {imp.stdout.strip()} s")
        run_fresh(cmds["floor"], cwd=work)  # warm the OS page cache for the floor too
        run_fresh(cmds["fit gemstones"], cwd=work)  # its own row-count bucket's programs
        if args.before:  # the older tree's byte code and programs, before any timed run
            for _ in range(2):
                warmup = run_fresh(cmds["fit 203 rows (before)"], cwd=work)
                if warmup.returncode != 0:
                    sys.exit(f"--before run failed:\n{warmup.stderr[-2000:]}")
        print(f"\nalternating fresh-process runs ({args.repeats} repeats), warm compile cache:")
        timing, _ = alternate_fresh(cmds, args.repeats, cwd=work)
        f, fz = timing["floor"], timing["floor, frozen exit"]
        print(f"\nload average at end: {loadavg()}")
        print(
            "| command | wall median (runs) | CPU median | ratio to floor (wall) | ratio (CPU) "
            "| ratio to frozen-exit floor (wall) | ratio (CPU) |"
        )
        print("|---|---|---|---|---|---|---|")
        for name, t in timing.items():
            print(
                f"| {name} | {t.wall_median:.2f} s ({t.spread()}) | {t.cpu_median:.2f} s | "
                f"{t.wall_median / f.wall_median:.2f}x | {t.cpu_median / f.cpu_median:.2f}x | "
                f"{t.wall_median / fz.wall_median:.2f}x | {t.cpu_median / fz.cpu_median:.2f}x |"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if cache:
            shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
