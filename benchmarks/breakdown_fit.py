"""Where a fresh process spends a global fit's time, stage by stage (run with a warm cache).

The fit is ``scalefit.fit(chinchilla[203 rows], "decomposed", starts=N, seed=0)``, the first fit
of a fresh process, as ``benchmarks/bench_fit.py`` times it. Each stage's CPU seconds are taken
around the library's own functions (wrapped by name for this run only): JAX start-up (the
import and one operation, which a first fit pays), the grid over the nonlinear parameters, the
solver's batches (the first call loads the compiled program from the cache), the agreement
check, the certificate (``check_point``: gradient, curvature, identifiability) and the rest of
the result. ``--backend jax`` runs the same fit through the all-starts backend (the default
before the grid; not reachable from ``scalefit.fit``). Medians over ``--repeats`` fresh
processes.

    SCALEFIT_DATA_DIR=../shared/data nice -n 10 python benchmarks/breakdown_fit.py \
        --starts 256,64 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict

from _harness import header, loadavg, pin_threads

#: (module, attribute, stage) wrapped in the child; a stage's time excludes the stages inside it.
WRAPPED = (
    ("scalefit.fit.lsq", "make_problem", "problem and starts"),
    ("scalefit.fit.lsq", "starts_for", "problem and starts"),
    ("scalefit.fit.varpro", "linear_block", "linear-block detection"),
    ("scalefit.fit.varpro", "grid_starts", "grid (324 cells, numpy)"),
    ("scalefit.fit.lsq", "solve_many", "solver batches"),
    ("scalefit.fit.varpro", "_agreeing", "agreement check"),
    ("scalefit.fit.lsq", "build_result", "result assembly"),
    ("scalefit.fit.build", "hold_constraints", "result assembly"),
    ("scalefit.fit.build", "check_point", "certificate (check_point)"),
)


def child(starts: int, backend: str) -> dict:
    """One first fit in this fresh process; CPU seconds per stage."""
    import importlib

    c0 = time.process_time()
    import scalefit
    from scalefit.fit.engine import jax_modules

    table = scalefit.datasets.load("chinchilla", drop_highest=40)
    spent: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    stack: list[list[float]] = []

    def wrap(fn, stage):
        def timed(*a, **k):
            stack.append([time.process_time(), 0.0])
            try:
                return fn(*a, **k)
            finally:
                t0, inner = stack.pop()
                dt = time.process_time() - t0
                spent[stage] += dt - inner
                calls[stage] += 1
                if stack:
                    stack[-1][1] += dt

        return timed

    for mod, name, stage in WRAPPED:
        m = importlib.import_module(mod)
        if hasattr(m, name):  # an older tree (PYTHONPATH) may lack a stage
            setattr(m, name, wrap(getattr(m, name), stage))
    from scalefit.fit.engine import Problem

    raw = Problem.solve_raw
    first = {"done": False}

    def solve_raw(self, *a, **k):  # the first program call loads it from the compile cache
        if first["done"]:
            return raw(self, *a, **k)
        first["done"] = True
        return wrap(raw, "first program call (load)")(self, *a, **k)

    Problem.solve_raw = solve_raw
    t0 = time.process_time()
    jax_modules()
    import jax.numpy as jnp

    jnp.ones(3).block_until_ready()
    spent["JAX start-up"] = time.process_time() - t0
    t0 = time.process_time()
    if backend == "grid":
        res = scalefit.fit(table, "decomposed", starts=starts, seed=0, progress=False)
    else:
        from scalefit.fit.build import FitSettings
        from scalefit.fit.lsq import JaxBackend, least_squares

        law = scalefit.laws.get_law("decomposed")
        settings = FitSettings(starts=starts, seed=0)
        res = least_squares(table, law, settings, backend=JaxBackend(progress=False))
    total = time.process_time() - t0
    spent["other"] = total - sum(v for k, v in spent.items() if k != "JAX start-up")
    spent["fit total (after start-up)"] = total
    spent["process before the fit"] = t0 - c0 - spent["JAX start-up"]
    return {
        "spent": dict(spent),
        "calls": dict(calls),
        "objective": float(res.objective),
        "stage": res.diagnostics.get("grid_stage"),
        "n_best": res.diagnostics.get("n_best"),
        "converged": bool(res.converged),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--starts", default="256,64", help="comma-separated start counts")
    ap.add_argument("--backend", default="grid,jax", help="grid (the default fit) and/or jax")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per case (median)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1])))
        return
    threads = pin_threads(1)
    header("where a fresh process spends the first fit's CPU time", threads)
    cases = [(int(s), b) for b in args.backend.split(",") for s in args.starts.split(",")]
    # warm the compile cache for every case once, then alternate the cases
    for s, b in cases:
        _run(s, b)
    runs: dict[tuple[int, str], list[dict]] = {c: [] for c in cases}
    for r in range(args.repeats):
        for c in cases if r % 2 == 0 else cases[::-1]:
            runs[c].append(_run(*c))
    print(f"load average at end: {loadavg()}")
    print(f"medians of {args.repeats} fresh processes, CPU ms per stage:")
    stages = list(dict.fromkeys(k for out in runs.values() for o in out for k in o["spent"]))
    print(f"{'stage':<32}" + "".join(f"{f'{b} {s}':>14}" for s, b in cases))
    for st in stages:
        cells = [statistics.median(o["spent"].get(st, 0.0) for o in runs[c]) for c in cases]
        print(f"{st:<32}" + "".join(f"{1e3 * v:>14.0f}" for v in cells))
    for c in cases:
        o = runs[c][0]
        print(
            f"{c[1]} {c[0]}: objective {o['objective']!r}, n_best {o['n_best']}, "
            f"calls {o['calls']}, stage {o['stage']!r}"
        )


def _run(starts: int, backend: str) -> dict:
    cmd = [sys.executable, __file__, "--child", str(starts), backend]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
