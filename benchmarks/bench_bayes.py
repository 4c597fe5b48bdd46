"""Benchmark: `scalefit bayes` on Liu's 203-row Chinchilla table vs a hand-written numpyro model.

Both run 4 vectorised chains x (1000 warm-up + 1000 draws) of the `decomposed` law in float64 with
a Student-t likelihood on log loss, each in a fresh process so imports and compilation count:

* project: the whole CLI command ``scalefit bayes chinchilla --law decomposed --drop-highest 40``
  (model generated from the law catalogue, least-squares initialisation, predictive checks, LOO);
* reference: a plain numpyro model of the same law written by hand with reference-pinned
  coefficients, default NUTS settings (diagonal mass, target 0.8), initialised at the prior median.

Usage::

    SCALEFIT_DATA_DIR=../shared/data python benchmarks/bench_bayes.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REFERENCE = r"""
import json, time
t0 = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import arviz as az
from numpyro.infer import MCMC, NUTS
from scalefit.datasets import load

tab = load("chinchilla", drop_highest=40)
w, l, t = (jnp.log(tab[c].to_numpy(float)) for c in ("width", "depth", "tokens"))
w0, l0, t0_ = float(w.mean()), float(l.mean()), float(t.mean())
logy = jnp.log(tab["loss"].to_numpy(float))

def model(logy=None):
    tw = numpyro.sample("tw", dist.Normal(0.0, 3.0))
    aw = numpyro.sample("aw", dist.Normal(1.0, 1.0))
    tl = numpyro.sample("tl", dist.Normal(0.0, 3.0))
    al = numpyro.sample("al", dist.Normal(1.0, 1.0))
    tt = numpyro.sample("tt", dist.Normal(0.0, 3.0))
    at = numpyro.sample("at", dist.Normal(0.5, 1.0))
    le = numpyro.sample("le", dist.Normal(0.0, 1.0))
    mu = jnp.log(jnp.exp(tw - aw * (w - w0)) + jnp.exp(tl - al * (l - l0))
                 + jnp.exp(tt - at * (t - t0_)) + jnp.exp(le))
    sigma = numpyro.sample("sigma", dist.HalfNormal(0.1))
    nu = numpyro.sample("nu", dist.Gamma(2.0, 0.1))
    numpyro.sample("obs", dist.StudentT(nu, mu, sigma), obs=logy)

mcmc = MCMC(NUTS(model), num_warmup=1000, num_samples=1000, num_chains=4,
            chain_method="vectorized", progress_bar=False)
t1, c1 = time.perf_counter(), time.process_time()
mcmc.run(jax.random.PRNGKey(0), logy=logy, extra_fields=("diverging",))
jax.block_until_ready(mcmc.get_samples())
t2, c2 = time.perf_counter(), time.process_time()
s = az.summary(az.from_numpyro(mcmc), kind="diagnostics")
print(json.dumps({"mcmc_seconds": t2 - t1, "mcmc_cpu_seconds": c2 - c1,
                  "total_seconds": time.perf_counter() - t0,
                  "ess_bulk_min": float(s["ess_bulk"].min()),
                  "r_hat_max": float(s["r_hat"].max()),
                  "divergences": int(mcmc.get_extra_fields()["diverging"].sum())}))
"""


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_project() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        cmd = [
            sys.executable,
            "-m",
            "scalefit",
            "bayes",
            "chinchilla",
            "--law",
            "decomposed",
            "--drop-highest",
            "40",
            "--no-progress",
            "--out",
            str(out),
        ]
        t0, c0 = time.perf_counter(), _cpu()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
        if proc.returncode not in (0, 3):
            raise SystemExit(proc.stderr)
        d = json.loads(out.read_text())["diagnostics"]
    return {
        "total_seconds": wall,
        "cpu_seconds": cpu,
        "mcmc_seconds": d["mcmc_seconds"],
        "mcmc_cpu_seconds": d.get("mcmc_cpu_seconds", float("nan")),
        "ess_bulk_min": d["ess_bulk_min"],
        "r_hat_max": d["r_hat_max"],
        "divergences": d["divergences"],
    }


def run_reference() -> dict:
    t0, c0 = time.perf_counter(), _cpu()
    proc = subprocess.run([sys.executable, "-c", REFERENCE], capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    if proc.returncode:
        raise SystemExit(proc.stderr)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["total_seconds"], out["cpu_seconds"] = wall, cpu
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--skip-reference", action="store_true")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    rows = []
    for r in range(args.repeats):
        rows.append(("scalefit bayes", r, run_project()))
        if not args.skip_reference:
            rows.append(("hand-written numpyro", r, run_reference()))
    print(
        f"{'way':<22}{'run':>4}{'total s':>9}{'cpu s':>7}{'mcmc s':>8}{'mcmc cpu':>9}"
        f"{'ESS min':>9}{'ESS/s':>7}{'ESS/cpu-s':>10}{'R-hat':>7}{'div':>5}"
    )
    for way, r, m in rows:
        print(
            f"{way:<22}{r:>4}{m['total_seconds']:>9.1f}{m['cpu_seconds']:>7.1f}"
            f"{m['mcmc_seconds']:>8.1f}{m['mcmc_cpu_seconds']:>9.1f}{m['ess_bulk_min']:>9.0f}"
            f"{m['ess_bulk_min'] / m['mcmc_seconds']:>7.0f}"
            f"{m['ess_bulk_min'] / m['mcmc_cpu_seconds']:>10.0f}"
            f"{m['r_hat_max']:>7.3f}{m['divergences']:>5}"
        )
    if not args.skip_reference:
        p = [m for w, _, m in rows if w == "scalefit bayes"]
        q = [m for w, _, m in rows if w != "scalefit bayes"]
        ratio = min(m["total_seconds"] for m in p) / min(m["total_seconds"] for m in q)
        print(f"total-time ratio scalefit / hand-written (best runs): {ratio:.2f}")
        ratio = min(m["cpu_seconds"] for m in p) / min(m["cpu_seconds"] for m in q)
        print(f"CPU-time ratio scalefit / hand-written (best runs): {ratio:.2f}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
