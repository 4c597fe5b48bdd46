"""scalefit's default fit against its peers on the eight public IsoFLOP sweeps, one process.

Usage (from the repository root; reads ``isoflops_experiments.csv`` from ``SCALEFIT_DATA_DIR``)::

    python benchmarks/bench_vs_peers.py [--repeats 3] [--threads 1] [--stages | --vs-random]

``--stages`` prints instead the CPU milliseconds of each stage of the default fit, and
``--vs-random`` the default fit against the same fit from 256 random starts (the default before)
on the sweeps and the decomposed law on Chinchilla's 203 rows and Gemstones.

Every fit is ``L = E + A/N**alpha + B/D**beta`` with N in millions of parameters and D in billions
of tokens, Huber loss (delta = 1e-3) on linear residuals (vpnls's own comparison); objectives are
the mean Huber loss times 1e6. Per sweep the ways run in alternating order, ``repeats`` times, in
this process; the time is the median CPU seconds (``time.process_time``) of the calls (scalefit's
warm: its programs compiled or loaded by one untimed fit of the same rows first).

- ``scalefit default``: ``scalefit.fit(..., loss="huber", delta=1e-3, residuals="linear")``
  (the grid over the exponents, then the full solve and its certificate);
- ``scalefit varpro``: the same with ``method="varpro", starts=32``;
- ``vpnls 0.01`` and ``vpnls 0.001``: vpnls itself (``fit_vpnls(..., method="grid")`` at those
  resolutions, Huber delta 1e-3, its default bounds), when it is importable. It is not on PyPI:
  build it from its public source (github.com/Open-Athena/vpnls, ``pip install <checkout>``, which
  needs Cython). Without it a stand-in runs, named ``grid 0.01`` and ``grid 0.001``: every point of
  the 0.01 grid of (alpha, beta) over [0.01, 1]^2 with (E, A, B) >= 0 solved by
  ``scipy.optimize.nnls`` inside iteratively reweighted least squares for the Huber loss, then a
  0.001 grid within +-0.02 of the best 0.01 point, timed once and added to the 0.01 grid's time
  (a Python loop: its times bound vpnls's from above);
- ``scipy least_squares``: Huber (``f_scale`` 1e-3), 32 starts on a grid of exponents and floors;
- ``lmfit``: ``leastsq`` on the Huber-weighted residuals from the same 32 starts, the best kept;
- ``chinchilla (PyPI)``: the ``chinchilla`` package's BFGS on its Huber loss over its start grid.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import alternate, argv_threads, header, pin_threads  # noqa: E402

THREADS = pin_threads(argv_threads(1))

import functools  # noqa: E402
import itertools  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.optimize import least_squares, nnls  # noqa: E402

import scalefit  # noqa: E402

try:
    from vpnls.api import fit_vpnls
    from vpnls.types import LossFunction, LossType
except ImportError:  # not on PyPI: the stand-in below runs instead
    fit_vpnls = None
#: the name of the grid peer in the output: vpnls itself, or the stand-in for it
GRID = "grid" if fit_vpnls is None else "vpnls"

DELTA = 1e-3
#: 32 starts of (E, A, B, alpha, beta) for the multi-start peers.
STARTS = [
    (e, a, a, al, be)
    for e, a, al, be in itertools.product((0.5, 2.0), (1.0, 10.0), (0.2, 0.6), (0.2, 0.6))
] + [(1.5, 3.0, 1.0, al, be) for al, be in itertools.product((0.1, 0.3, 0.5, 0.8), repeat=2)]


def huber(r: np.ndarray) -> np.ndarray:
    a = np.abs(r)
    return np.where(a <= DELTA, 0.5 * r**2, DELTA * (a - 0.5 * DELTA))


def model(t, n, d):
    e, a, b, al, be = t
    return e + a * n**-al + b * d**-be


def linear_block(n, d, y, alpha, beta):
    """(E, A, B) >= 0 minimising the Huber loss at fixed exponents: IRLS over scipy's NNLS."""
    x = np.column_stack([np.ones_like(n), n**-alpha, d**-beta])
    c, _ = nnls(x, y)
    f = float(np.sum(huber(y - x @ c)))
    for _ in range(50):
        r = y - x @ c
        u = np.sqrt(np.where(np.abs(r) <= DELTA, 1.0, DELTA / np.maximum(np.abs(r), 1e-300)))
        c_new, _ = nnls(x * u[:, None], y * u)
        f_new = float(np.sum(huber(y - x @ c_new)))
        if f_new > f * (1 - 1e-12):
            if f_new < f:
                c, f = c_new, f_new
            break
        c, f = c_new, f_new
    return f, c


def grid_fit(n, d, y, alphas, betas):
    """The best grid point: (objective, alpha, beta)."""
    best = (np.inf, 0.0, 0.0)
    for a in alphas:
        for b in betas:
            f, _ = linear_block(n, d, y, a, b)
            if f < best[0]:
                best = (f, a, b)
    return best


def grid_01(n, d, y):
    coarse = np.round(np.arange(0.01, 1.0 + 1e-9, 0.01), 10)
    return grid_fit(n, d, y, coarse, coarse)


def grid_001(n, d, y, best):
    """The 0.01 grid's ``best`` point refined on the 0.001 grid within +-0.02 of it."""
    _, a0, b0 = best
    fa = np.round(np.arange(a0 - 0.02, a0 + 0.02 + 1e-9, 0.001), 10)
    fb = np.round(np.arange(b0 - 0.02, b0 + 0.02 + 1e-9, 0.001), 10)
    fine = grid_fit(n, d, y, fa[(fa >= 0.01) & (fa <= 1)], fb[(fb >= 0.01) & (fb <= 1)])
    return min(best, fine)


def vpnls_fit(n, d, y, resolution):
    """vpnls's grid at ``resolution``; the objective recomputed from its parameters."""
    r = fit_vpnls(
        n, d, y, method="grid", resolution=resolution, loss=LossFunction(LossType.HUBER, DELTA)
    )
    return (float(np.sum(huber(y - model((r.E, r.A, r.B, r.alpha, r.beta), n, d)))),)


def scipy_fit(n, d, y):
    best = np.inf
    for x0 in STARTS:
        r = least_squares(
            lambda t: y - model(t, n, d),
            x0,
            bounds=([0, 0, 0, 0, 0], [10, np.inf, np.inf, 5, 5]),
            loss="huber",
            f_scale=DELTA,
        )
        best = min(best, float(np.sum(huber(y - model(r.x, n, d)))))
    return (best,)


def lmfit_fit(n, d, y):
    import lmfit

    def resid(p):  # sqrt of twice the Huber loss, signed: its sum of squares is 2 * objective
        r = y - model([p[k].value for k in "E A B alpha beta".split()], n, d)
        return np.sign(r) * np.sqrt(2.0 * huber(r))

    best = np.inf
    for x0 in STARTS:
        pars = lmfit.Parameters()
        for k, v, hi in zip(
            "E A B alpha beta".split(), x0, (10, np.inf, np.inf, 5, 5), strict=True
        ):
            pars.add(k, value=v, min=0.0, max=hi)
        r = lmfit.minimize(resid, pars, method="leastsq")
        t = [r.params[k].value for k in "E A B alpha beta".split()]
        best = min(best, float(np.sum(huber(y - model(t, n, d)))))
    return (best,)


def chinchilla_fit(n, d, y):
    import logging

    from chinchilla import Chinchilla
    from chinchilla._metrics import huber as their_huber

    # the package searches log E, log A, log B, alpha, beta from every point of this grid (32)
    grid = {"e": [-1.0, 0.5], "a": [0.0, 3.0], "b": [0.0, 3.0], "alpha": [0.2, 0.6]}
    grid["beta"] = [0.2, 0.6]
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("chinchilla").setLevel(logging.ERROR)
        cc = Chinchilla(
            tmp, param_grid=grid, loss_fn=functools.partial(their_huber, delta=DELTA), log_level=50
        )
        for ni, di, yi in zip(n, d, y, strict=True):
            cc.database.append(N=ni, D=di, loss=yi)
        try:
            cc.fit(parallel=False)
        except ValueError:  # its fit diverged (NaN) and its plot of the fit failed
            return (np.nan,)
        p = cc.get_params()
    t = [p["E"], p["A"], p["B"], p["alpha"], p["beta"]]
    return (float(np.sum(huber(y - model(t, n, d)))),)


def scalefit_fit(tab, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = scalefit.fit(tab, "chinchilla", loss="huber", delta=DELTA, residuals="linear", **kw)
    return (res.objective,)


def _best(store: dict, key: str, best: tuple) -> tuple:
    store[key] = best
    return best


def _keep(out: dict, name: str, fn):
    """``fn`` that also stores its objective under ``name``."""

    def call():
        out[name] = fn()[0]

    return call


def stages(table: pd.DataFrame, repeats: int) -> None:
    """CPU seconds of each stage of the default fit, per sweep (median of ``repeats`` runs)."""
    from scalefit.fit.build import FitSettings, build_result
    from scalefit.fit.lsq import JaxBackend, make_problem
    from scalefit.fit.varpro import grid_starts
    from scalefit.laws import get_law

    law = get_law("chinchilla")
    settings = FitSettings(loss="huber", delta=DELTA, residuals="linear")
    print("\nstages of the default fit, CPU ms (median): problem, grid, JAX solve, result")
    for exp, e in table.groupby("experiment", sort=True):
        tab = pd.DataFrame(
            {"params": e["params"] / 1e6, "tokens": e["tokens"] / 1e9, "loss": e["loss"]}
        )
        times = []
        for _ in range(repeats + 1):  # the first run compiles or loads the programs
            t = [time.process_time()]
            prob = make_problem(tab, law, settings)
            t.append(time.process_time())
            z = grid_starts(prob)
            t.append(time.process_time())
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                opt = JaxBackend().minimize(prob, z)
                t.append(time.process_time())
                build_result(prob, tab, opt, settings)
            t.append(time.process_time())
            times.append(np.diff(t) * 1e3)
        med = np.median(times[1:], axis=0)
        print(f"  {exp:45s} " + " ".join(f"{v:7.1f}" for v in med), flush=True)


def vs_random(table: pd.DataFrame, repeats: int) -> None:
    """The default fit against the same fit from 256 random starts (the default before)."""
    from scalefit.datasets import load
    from scalefit.fit.build import FitSettings
    from scalefit.fit.lsq import JaxBackend, least_squares
    from scalefit.laws import get_law

    cases = []
    for res in ("linear", "log"):
        for exp, e in table.groupby("experiment", sort=True):
            tab = pd.DataFrame(
                {"params": e["params"] / 1e6, "tokens": e["tokens"] / 1e9, "loss": e["loss"]}
            )
            kw = {"loss": "huber", "delta": DELTA, "residuals": res}
            cases.append((f"{exp} ({res})", tab, "chinchilla", kw))
    cases += [
        ("chinchilla 203 rows, decomposed", load("chinchilla", drop_highest=40), "decomposed", {}),
        ("gemstones, decomposed", load("gemstones"), "decomposed", {}),
        ("gemstones, decomposed, huber", load("gemstones"), "decomposed", {"loss": "huber"}),
    ]
    print("\ndefault fit vs 256 random starts: objective, CPU s (median), starts at the best")
    for name, tab, law, kw in cases:
        out: dict[str, object] = {}

        def grid(tab=tab, law=law, kw=kw, out=out):
            out["grid"] = scalefit.fit(tab, law, **kw)

        def rand(tab=tab, law=law, kw=kw, out=out):
            out["random"] = least_squares(
                tab, get_law(law), FitSettings(**kw), backend=JaxBackend()
            )

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            grid(), rand()  # untimed: compile or load the programs
            timing = alternate({"grid": grid, "random": rand}, repeats=repeats, verbose=False)
        line = []
        for way in ("grid", "random"):
            r, cpu = out[way], float(np.median(timing[way].cpu))
            d = r.diagnostics
            line.append(f"{way} {r.objective:.10g} {cpu:.3f} s {d['n_best']}/{d['n_starts']}")
        print(f"  {name:52s} " + " | ".join(line), flush=True)


def main() -> int:
    if "--vs-random" in sys.argv:
        data_dir = Path(os.environ.get("SCALEFIT_DATA_DIR", "data"))
        vs_random(pd.read_csv(data_dir / "isoflops_experiments.csv"), 3)
        return 0
    if "--stages" in sys.argv:
        data_dir = Path(os.environ.get("SCALEFIT_DATA_DIR", "data"))
        stages(pd.read_csv(data_dir / "isoflops_experiments.csv"), 5)
        return 0
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 3
    header("scalefit default fit vs peers on the eight IsoFLOP sweeps", THREADS)
    print("grid peer: " + ("vpnls (installed)" if fit_vpnls else "stand-in (vpnls not installed)"))
    data_dir = Path(os.environ.get("SCALEFIT_DATA_DIR", "data"))
    table = pd.read_csv(data_dir / "isoflops_experiments.csv")
    rows = []
    grid_01_best: dict[str, tuple] = {}
    for exp, e in table.groupby("experiment", sort=True):
        n, d, y = (
            np.array(e[k], dtype=float) / s
            for k, s in (("params", 1e6), ("tokens", 1e9), ("loss", 1))
        )
        tab = pd.DataFrame({"params": n, "tokens": d, "loss": y})
        ways = {
            "scalefit default": lambda tab=tab: scalefit_fit(tab),
            "scalefit varpro": lambda tab=tab: scalefit_fit(tab, method="varpro", starts=32),
            "grid 0.01": lambda n=n, d=d, y=y, exp=exp: _best(grid_01_best, exp, grid_01(n, d, y)),
            "vpnls 0.01": lambda n=n, d=d, y=y: vpnls_fit(n, d, y, 0.01),
            "vpnls 0.001": lambda n=n, d=d, y=y: vpnls_fit(n, d, y, 0.001),
            "scipy least_squares": lambda n=n, d=d, y=y: scipy_fit(n, d, y),
            "lmfit": lambda n=n, d=d, y=y: lmfit_fit(n, d, y),
            "chinchilla (PyPI)": lambda n=n, d=d, y=y: chinchilla_fit(n, d, y),
        }
        for name in ("vpnls 0.01", "vpnls 0.001") if GRID == "grid" else ("grid 0.01",):
            del ways[name]
        print(f"## {exp} ({len(y)} rows)", flush=True)
        for name in ("scalefit default", "scalefit varpro"):
            ways[name]()  # untimed: compile or load the programs for these rows
        out: dict[str, float] = {}
        timed = {name: _keep(out, name, fn) for name, fn in ways.items()}
        timing = alternate(timed, repeats=repeats, verbose=False)
        if GRID == "grid":  # the stand-in's 0.001 grid: its 0.01 grid plus its window, timed once
            c0 = time.process_time()
            out["grid 0.001"] = grid_001(n, d, y, grid_01_best[exp])[0]
            window = time.process_time() - c0
            ways["grid 0.001"] = None
        objective = {name: out[name] / len(y) * 1e6 for name in ways}
        for name in ways:
            if name == "grid 0.001":
                cpu = float(np.median(timing["grid 0.01"].cpu)) + window
            else:
                cpu = float(np.median(timing[name].cpu))
            rows.append({"sweep": exp, "way": name, "objective": objective[name], "cpu_s": cpu})
            print(f"  {name:20s} {objective[name]:10.4f} {cpu:8.3f} CPU s", flush=True)
    df = pd.DataFrame(rows)
    obj = df.pivot(index="sweep", columns="way", values="objective")
    cpu = df.pivot(index="sweep", columns="way", values="cpu_s")
    with pd.option_context("display.width", 250, "display.precision", 4):
        print("\nmean Huber loss x 1e6:\n" + obj.to_string())
        print("\nCPU seconds (median of the repeats):\n" + cpu.to_string())
        print(
            "\ntotals:\n" + pd.DataFrame({"objective": obj.sum(), "cpu_s": cpu.sum()}).to_string()
        )
    exact = bool((obj["scalefit default"] <= obj[f"{GRID} 0.001"] * (1 + 1e-9)).all())
    fast = bool(cpu["scalefit default"].sum() <= cpu[f"{GRID} 0.01"].sum())
    print(f"default objective <= {GRID} 0.001 on every sweep: {exact}")
    print(f"default total CPU <= {GRID} 0.01 total CPU: {fast}")
    return 0 if exact and fast else 1


if __name__ == "__main__":
    raise SystemExit(main())
