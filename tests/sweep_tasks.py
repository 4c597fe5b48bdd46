"""A small real sweep task for the sweep tests: a seeded least-squares fit, optionally slow.

It lives with the tests (``tests/`` is on ``sys.path``: pytest's ``pythonpath`` in this process,
spawned workers inherit it, and ``tests/sweep/test_sweep.py`` puts it on ``PYTHONPATH`` for the
child processes it starts).
"""

from __future__ import annotations

import time
from pathlib import Path

from scalefit.core._io import atomic_write_json
from scalefit.core.errors import ScaleFitError


def demo_task(config: dict, run_dir: Path) -> dict:
    """Fit a line to seeded noisy data; sleep ``sleep_s`` seconds first (to test kills).

    Parameters
    ----------
    config : dict
        ``seed`` (int), ``n`` (points, default 50), ``slope`` (default 2.0), ``sleep_s``
        (default 0), ``fail`` (bool, default False: raise to test error handling), ``log`` (a
        file to which every execution appends one line ``<seed> <pid>``, to count executions).
    run_dir : pathlib.Path
        The run's folder; a ``fit.json`` is written there.

    Returns
    -------
    dict
        ``slope_hat``, ``intercept_hat`` and ``pid`` (the worker's process id).
    """
    import os

    import numpy as np

    if config.get("log"):
        fd = os.open(config["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{config['seed']} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
    time.sleep(float(config.get("sleep_s", 0.0)))
    if config.get("fail", False):
        raise RuntimeError("demo_task asked to fail")
    rng = np.random.default_rng(int(config["seed"]))
    n = int(config.get("n", 50))
    x = rng.uniform(0, 1, n)
    y = float(config.get("slope", 2.0)) * x + 1.0 + 0.01 * rng.standard_normal(n)
    slope, intercept = np.polyfit(x, y, 1)
    atomic_write_json(Path(run_dir) / "fit.json", {"slope": slope, "intercept": intercept})
    return {"slope_hat": float(slope), "intercept_hat": float(intercept), "pid": os.getpid()}


def _validate(config: dict) -> None:
    if "seed" not in config:
        raise ScaleFitError("demo_task needs a 'seed' setting.")
    unknown = sorted(set(config) - {"seed", "n", "slope", "sleep_s", "fail", "log"})
    if unknown:
        raise ScaleFitError(f"unknown setting(s) {unknown} for demo_task.")


demo_task.validate_config = _validate
