"""Resumable parameter sweeps: a TOML spec → runs on a local process pool or Slurm (submitit).

Examples
--------
>>> from scalefit.sweep import load_spec, run_sweep  # doctest: +SKIP
>>> table = run_sweep(load_spec("toy/cpu.toml"), "runs/cpu", workers=2)  # doctest: +SKIP
"""

from __future__ import annotations

from .registry import register_task, registered_tasks, resolve_task, task_ref
from .runner import (
    SweepError,
    collect_results,
    execute_run,
    is_finished,
    run_dir_of,
    run_sweep,
    validate_runs,
)
from .spec import Run, SweepSpec, load_spec, make_run_id, spec_from_dict

__all__ = [
    "Run",
    "SweepError",
    "SweepSpec",
    "collect_results",
    "execute_run",
    "is_finished",
    "load_spec",
    "make_run_id",
    "register_task",
    "registered_tasks",
    "resolve_task",
    "run_dir_of",
    "run_sweep",
    "spec_from_dict",
    "task_ref",
    "validate_runs",
]
