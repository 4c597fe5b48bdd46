"""``run_plan``: ask → train (the sweep runner's ``train`` task) → tell, until the plan stops."""

from __future__ import annotations

import os

import pandas as pd

from ..core._validation import constraints, validate
from ..core.errors import ScaleFitError
from .core import Plan, load, run_config


def run_plan(
    folder: str | os.PathLike,
    *,
    k: int = 12,
    rounds: int | None = None,
    workers: int = 0,
    executor: str = "local",
) -> Plan:
    """Train the plan's runs round by round until its stopping rule holds (resumable).

    Each round trains the runs asked and not yet told (those of a round cut short by a kill
    first), else asks ``k`` new ones; runs whose ``result.json`` exists in ``folder/runs`` are
    not trained again (:func:`scalefit.sweep.run_sweep` skips them).

    Parameters
    ----------
    folder : path-like
        A plan started with trainer settings (:func:`scalefit.plan.plan` with ``trainer=``).
    k : int, default 12
        Runs asked per round.
    rounds : int, optional
        Most rounds this call runs (default: until the stopping rule holds).
    workers : int, default 0
        Worker processes of the sweep runner (0: train in this process); a round's runs train
        side by side.
    executor : {"local", "slurm"}
        Train here, or submit each round's runs to Slurm (:func:`scalefit.sweep.run_sweep`).

    Returns
    -------
    Plan
        The plan after the last tell.
    """
    validate("run_plan", locals(), constraints("k", "rounds", "workers", "executor"))
    p = load(folder)
    if p.settings["trainer"] is None:
        raise ScaleFitError(
            f"{folder}: this plan has no trainer settings, so its runs cannot be trained here; "
            "train the asked runs elsewhere and tell their losses."
        )
    done = 0
    while rounds is None or done < rounds:
        runs = p.pending
        if runs.empty:
            runs = p.ask(k)
        if runs.empty:
            break
        p.tell(_train(p, runs, workers, executor))
        done += 1
    return p


def _train(p: Plan, runs: pd.DataFrame, workers: int, executor: str) -> pd.DataFrame:
    """Train one round with the sweep runner and return its rows.

    The round is one spec whose grid spans the asked runs' depths, widths and tokens, run with
    ``only`` the asked ids, so the runner trains them side by side (or on Slurm) and skips those
    a killed call finished.
    """
    from ..sweep import SweepSpec, run_sweep

    number = int(runs["round"].max())  # the grid spans the whole round: the same spec each call
    whole = p.runs([a["run_id"] for a in p.asked if a["round"] == number])
    configs = [run_config(p.settings["trainer"], run) for _, run in whole.iterrows()]
    fixed = {k: v for k, v in configs[0][0].items() if k not in configs[0][1]}
    grid = {key: sorted({point[key] for _, point in configs}) for key in configs[0][1]}
    spec = SweepSpec(f"plan-round-{number}", "train", fixed, grid)
    ids = set(runs["run_id"])
    table = run_sweep(spec, p.folder, workers=workers, executor=executor, progress=False, only=ids)
    if set(table["run_id"]) != ids:
        raise ScaleFitError(
            f"{p.folder}: the sweep runner returned other runs than the plan asked for "
            f"({len(ids)} asked, {table['run_id'].nunique()} returned); the plan was not told."
        )
    cols = ["run_id", "depth", "width", "params", "tokens", "loss"]
    return table[cols].reset_index(drop=True)
