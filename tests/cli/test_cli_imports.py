"""``scalefit fit`` stays light: a real fresh process, checked through its ``sys.modules``.

The fit path needs jax, numpy and pandas; it must not import the plotting, statistics, Bayesian,
lmfit or torch stacks, nor SciPy beyond what JAX itself imports to load a saved program (it sets
up its CPU LAPACK routines, which imports ``scipy.linalg``; scalefit uses no private means to
skip that). Each would add tenths of a second to every ``scalefit fit`` (see
benchmarks/bench_latency.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import needs_reference_data

HEAVY = (
    "matplotlib",
    "scipy",
    "arviz",
    "numpyro",
    "lmfit",
    "torch",
    "xarray",
    "tqdm",
)

SCRIPT = """
import io, json, sys, contextlib
from scalefit.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
print(json.dumps({{"code": code, "heavy": heavy, "report": out.getvalue()}}))
"""


def _fit_in_fresh_process(cache, *args):
    env = dict(os.environ, SCALEFIT_JAX_CACHE=str(cache))
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(heavy=set(HEAVY)), "fit", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_reference_data
def test_fit_imports_no_heavy_module(tmp_path):
    args = ["chinchilla", "--law", "decomposed", "--drop-highest", "40", "--starts", "8"]
    jax_own = _modules_jax_imports_to_load_a_program()
    # first process: compiles and writes the solver program; second: loads it (the path on
    # which JAX sets up LAPACK, importing scipy.linalg)
    for run in ("cold", "warm"):
        res = _fit_in_fresh_process(tmp_path, *args)
        assert res["code"] == 0
        assert "converged" in res["report"]
        heavy = sorted(set(res["heavy"]) - jax_own)
        assert heavy == [], f"{run} `scalefit fit` imported {heavy}"


def _modules_jax_imports_to_load_a_program() -> set[str]:
    """The HEAVY modules a bare process imports to export, load and run a one-line program."""
    script = (
        "import json, sys, jax; "
        "e = jax.export.deserialize(jax.export.export(jax.jit(lambda x: x + 1))(1.0).serialize()); "
        "jax.jit(e.call)(1.0).block_until_ready(); "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {set(HEAVY)!r})))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


DRIVER = """
import contextlib, io, json, sys
from scalefit.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
cli = sorted(m for m in sys.modules if m.startswith("scalefit.cli"))
top = sorted({m.split(".")[1] for m in sys.modules if m.startswith("scalefit.")})
print(json.dumps({"code": code, "cli": cli, "top": top}))
"""
#: The library packages of the other commands (allocate, curves, design, isoflop, multiplier,
#: probe, tasks, toy, train), figures and the Bayesian fits: a `scalefit fit` loads none of them.
OTHER_COMMANDS = {
    "allocate", "curves", "design", "isoflop", "isoflop_data", "multiplier", "plot", "probes",
    "sim", "sweep", "tasks", "train", "workflows", "experimental", "_torch",
}  # fmt: skip


def _cli_modules(*args) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, *args], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_fit_builds_only_its_own_parser(tmp_path):
    """`scalefit fit --help` and a `scalefit fit` run import no other command's module."""
    from scalefit.fit.synthetic import simulate_table

    path = tmp_path / "t.csv"
    simulate_table("chinchilla", seed=0).iloc[:40].to_csv(path, index=False)
    own = ["scalefit.cli", "scalefit.cli._common", "scalefit.cli.fit"]
    run = ["fit", str(path), "--law", "chinchilla", "--starts", "4", "--no-progress"]
    for args in (["fit", "--help"], run):
        got = _cli_modules(*args)
        assert (got["code"], got["cli"]) == (0, own), args
        assert not OTHER_COMMANDS & set(got["top"]), (
            args,
            sorted(OTHER_COMMANDS & set(got["top"])),
        )
    assert _cli_modules("--help")["cli"] == ["scalefit.cli"]
