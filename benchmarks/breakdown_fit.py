"""Where a fresh process spends a global fit's time (run with a warm compile cache).

SCALEFIT_DATA_DIR=../shared/data python benchmarks/breakdown_fit.py
"""

import time

import scalefit
from scalefit.fit.engine import Problem, jax_modules
from scalefit.fit.lsq import solve_many
from scalefit.laws import get_law, sample_starts

table = scalefit.datasets.load("chinchilla", drop_highest=40)
t0 = time.perf_counter()
jax_modules()
import jax.numpy as jnp  # noqa: E402

jnp.ones(3).block_until_ready()
print(f"JAX start-up                         {time.perf_counter() - t0:.2f} s")
law = get_law("decomposed")
y = table["loss"].to_numpy()
prob = Problem(law, table, y, loss="mse", delta=1e-3)
z0 = sample_starts(law, 256, y, seed=0)
t0 = time.perf_counter()
prob.solve_raw(z0[:1], max_iter=0)
print(f"trace + compile (or cache load)      {time.perf_counter() - t0:.2f} s")
t0 = time.perf_counter()
solve_many(prob, z0)
print(f"solve 256 starts                     {time.perf_counter() - t0:.2f} s")
t0 = time.perf_counter()
scalefit.fit(table, law, starts=256, seed=0, progress=False)
print(f"whole scalefit.fit, warm process     {time.perf_counter() - t0:.2f} s")
