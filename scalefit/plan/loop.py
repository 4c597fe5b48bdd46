"""``run_plan``: ask → train (the sweep runner's ``train`` task) → tell, until the plan stops."""

from __future__ import annotations

import os

import pandas as pd

from .._validation import constraints, validate
from ..errors import ScaleFitError
from .core import Plan, load, run_config


def run_plan(
    folder: str | os.PathLike,
    *,
    k: int = 12,
    rounds: int | None = None,
    workers: int = 0,
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
        Worker processes of the sweep runner (0: train in this process).

    Returns
    -------
    Plan
        The plan after the last tell.
    """
    validate("run_plan", locals(), constraints("k", "rounds", "workers"))
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
        p.tell(_train(p, runs, workers))
        done += 1
    return p


def _train(p: Plan, runs: pd.DataFrame, workers: int) -> pd.DataFrame:
    """Train ``runs`` with the sweep runner (one single-point spec each) and return their rows."""
    from ..sweep import SweepSpec, run_sweep

    rows = []
    for _, run in runs.iterrows():
        fixed, point = run_config(p.settings["trainer"], run)
        fixed = {k: v for k, v in fixed.items() if k not in point}
        name = "plan-" + run["run_id"].rsplit("-", 1)[-1]
        spec = SweepSpec(name, "train", fixed, {k: [v] for k, v in point.items()})
        table = run_sweep(spec, p.folder, workers=workers, progress=False)
        assert list(table["run_id"]) == [run["run_id"]], "run ids of the plan and the sweep"
        rows.append(table)
    cols = ["run_id", "depth", "width", "params", "tokens", "loss"]
    return pd.concat(rows, ignore_index=True)[cols]
