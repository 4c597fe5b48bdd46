"""The console script's entry point (``scalefit.cli.run``), in real fresh processes.

``run`` is ``main`` plus a frozen garbage collector at the end, so the interpreter's exit skips
its full collections over JAX's and pandas' objects (benchmarks/bench_latency.py). ``main``
itself, which tests and notebooks call in-process, must leave the collector alone.
"""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import needs_reference_data

PROBE = """
import gc, json, sys
frozen_at_start = gc.get_freeze_count()  # CPython 3.12 freezes objects at start-up itself
from scalefit.cli import main, run
code_main = main(sys.argv[1:])
frozen_after_main = gc.get_freeze_count()
code_run = run(sys.argv[1:])
print(json.dumps({"main": code_main, "run": code_run, "frozen_after_main": frozen_after_main,
                  "frozen_after_run": gc.get_freeze_count(), "frozen_at_start": frozen_at_start}))
"""


def test_run_returns_mains_exit_code_and_only_run_freezes_the_collector(tmp_path):
    missing = tmp_path / "missing.csv"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "fit", str(missing), "--law", "decomposed"],
        capture_output=True,
        text=True,
        check=False,
    )
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["main"] == res["run"] == 2
    assert res["frozen_after_main"] == res["frozen_at_start"]
    assert res["frozen_after_run"] > res["frozen_at_start"]
    # the error stays one line per call
    assert proc.stderr.count("scalefit: error:") == 2


@needs_reference_data
def test_python_m_scalefit_fits_and_exits_cleanly(tmp_path):
    out = tmp_path / "fit.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "scalefit",
            "fit",
            "chinchilla",
            "--law",
            "decomposed",
            "--drop-highest",
            "40",
            "--starts",
            "8",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "converged" in proc.stdout
    # the result file written before the collector was frozen is complete
    assert json.loads(out.read_text())["law"]
