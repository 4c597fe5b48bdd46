"""Cooldown branches: one WSD run, final losses at several token budgets.

A WSD run (:mod:`scalefit.core.schedule`) holds ``lr`` until its decay; with the warm-up given
in steps, a WSD run of a smaller budget ``t`` is the same run up to the step where its own decay
starts, ``fork(t) = N(t) − max(1, round(decay_frac·N(t)))``. :func:`train_cooldowns` therefore
trains the main run (budget ``tokens``) once and, when it passes ``fork(t)`` for each ``t`` of
``cooldowns``, writes its state as the first checkpoint of the branch folder
``<run>/cooldowns/tokens_<t>``; the branch then resumes from there with its own decay to ``t``
(Hägele et al. 2024, §4: "cooldowns" forked from one constant-lr run).

Each branch folder is an ordinary run folder (``train_config.json`` with ``tokens = t`` and the
main run's warm-up as ``warmup_steps``, ``checkpoint.pt``, ``history.csv`` from step 0 with the
shared stable phase, ``run.json`` naming the main run and the fork step). A branch's numbers are
those of a standalone run of its configuration: the same batches (they depend on the seed and the
step only), the same learning rates before the fork, and an exact checkpoint round trip.

Resuming: every run of the set resumes from its own checkpoint; a branch whose ``run.json`` says
it finished (with matching settings) is not trained or evaluated again; a fork that is already
in place is not rewritten.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..core._io import MAX_CONFIG_BYTES, inside, read_json
from ..core._readonly import ReadOnlyMappings
from ..core.errors import ScaleFitError
from ..core.schedule import steps_of
from .config import TrainConfig, config_diff, config_from_dict, validate_config
from .loop import TrainResult, train
from .rundir import claim

__all__ = ["BRANCH_DIR", "Branch", "CooldownResult", "branch_config", "plan", "train_cooldowns"]

#: Sub-folder of the main run that holds the branch folders.
BRANCH_DIR = "cooldowns"


@dataclass(frozen=True)
class Branch:
    """One cooldown: its token ``budget``, settings, folder, and the main-run step it forks at."""

    budget: int
    cfg: TrainConfig
    folder: Path
    fork_step: int


@dataclass(frozen=True)
class CooldownResult(ReadOnlyMappings):
    """The main run's :class:`~scalefit.train.loop.TrainResult` and the finished branches' rows.

    ``finished`` is false when the call stopped early (``stop_after``); run it again to go on.
    ``steps_run`` counts the optimiser steps this call ran, main run and branches together.
    """

    main: TrainResult
    main_budget: int
    branches: dict[int, dict] = field(default_factory=dict)
    finished: bool = False
    steps_run: int = 0

    def rows(self) -> list[dict]:
        """Loss-table rows: the main run's, then one per finished branch (by budget)."""
        main = {**self.main.row, "budget": self.main_budget, "branch": "main", "fork_step": None}
        return [main] + [self.branches[b] for b in sorted(self.branches)]


def branch_config(cfg: TrainConfig, budget: int) -> TrainConfig:
    """The settings of the cooldown of ``budget`` tokens: a standalone WSD run of that budget.

    It keeps every setting of ``cfg`` but ``tokens`` (the budget), ``cooldowns`` (none) and
    ``warmup_steps`` (the main run's warm-up, in steps).
    """
    d = cfg.to_dict()
    d.update(tokens=int(budget), cooldowns=[], warmup_steps=cfg.lr_schedule().warmup)
    return config_from_dict(d, source="cooldown branch")


def plan(cfg: TrainConfig, run_dir: str | os.PathLike) -> list[Branch]:
    """The branches of ``cfg.cooldowns`` (a budget of the main run's length is the main run)."""
    per_step = cfg.batch_size * cfg.model.seq_len
    out = []
    for budget in sorted(set(cfg.cooldowns)):
        if steps_of(budget, per_step) == cfg.steps:
            continue
        folder = inside(
            run_dir, Path(BRANCH_DIR) / f"tokens_{budget}", what="cooldown branch folder"
        )
        branch = branch_config(cfg, budget)
        out.append(Branch(budget, branch, folder, branch.lr_schedule().decay_start))
    return out


def train_cooldowns(
    cfg: TrainConfig,
    run_dir: str | os.PathLike,
    *,
    progress: bool = False,
    stop_after: int | None = None,
    overwrite: bool = False,
) -> CooldownResult:
    """Train a WSD run and its cooldown branches (see the module docstring).

    Parameters
    ----------
    cfg : TrainConfig
        Settings with ``schedule = "wsd"`` and the branch budgets in ``cooldowns``.
    run_dir : path-like
        The main run's folder; branches go to ``run_dir/cooldowns/tokens_<budget>``.
    progress : bool
        Progress bars.
    stop_after : int, optional
        Stop once this call has run this many optimiser steps, main run and branches together
        (each checkpointed as if interrupted there).
    overwrite : bool
        Discard the main run and its branches and start afresh.

    Returns
    -------
    CooldownResult

    Raises
    ------
    ScaleFitError
        For invalid settings, or a branch whose fork the main run has passed while the branch
        folder has no checkpoint (it cannot be made without running the main run again).
    """
    validate_config(cfg.to_dict())
    run_dir = Path(run_dir)
    branches = plan(cfg, run_dir)
    if overwrite:
        for b in branches:
            with claim(b.folder, b.cfg, overwrite=True):
                pass
    forks = {b.fork_step: (b.cfg, b.folder) for b in branches}
    main = train(
        cfg, run_dir, progress=progress, overwrite=overwrite, max_steps=stop_after, forks=forks
    )
    rows: dict[int, dict] = {}
    ran = main.steps_run

    def out(finished: bool = False) -> CooldownResult:
        return CooldownResult(main, cfg.tokens, rows, finished, ran)

    left = None if stop_after is None else stop_after - main.steps_run
    done = len(main.history)
    if done < cfg.steps and not main.row["diverged"]:
        return out()  # stopped early: the remaining forks are still ahead
    for b in branches:
        meta = {"main": "../..", "fork_step": b.fork_step, "budget": b.budget}
        extra = {"budget": b.budget, "branch": "cooldown", "fork_step": b.fork_step}
        row = _finished_row(b)
        if row is None and done < b.fork_step:  # the main run diverged before this fork
            row = {**main.row, "loss": math.nan, "bpb": math.nan, "diverged": True}
        elif row is None:
            if not os.path.lexists(b.folder / "checkpoint.pt"):
                raise ScaleFitError(
                    f"{b.folder}: the cooldown of {b.budget} tokens forks at step {b.fork_step}, "
                    f"which the main run {run_dir} has passed, but the folder has no checkpoint; "
                    "run again with --overwrite (train_cooldowns(..., overwrite=True))."
                )
            if left is not None and left <= 0:
                return out()
            res = train(b.cfg, b.folder, progress=progress, max_steps=left, branch=meta)
            left = None if left is None else left - res.steps_run
            ran += res.steps_run
            if len(res.history) < b.cfg.steps and not res.row["diverged"]:
                return out()
            row = res.row
        rows[b.budget] = {**row, **extra}
    return out(finished=True)


def _finished_row(b: Branch) -> dict | None:
    """The result row recorded in a finished branch folder with the branch's settings, or None."""
    info, saved = b.folder / "run.json", b.folder / "train_config.json"
    if not (info.is_file() and saved.is_file()):
        return None
    meta = read_json(info, what="run metadata", max_bytes=MAX_CONFIG_BYTES)
    config = read_json(saved, what="trainer configuration", max_bytes=MAX_CONFIG_BYTES)
    if not (
        isinstance(meta, dict) and meta.get("finished") and isinstance(meta.get("result"), dict)
    ):
        return None
    if not isinstance(config, dict) or config_diff(config, b.cfg.to_dict()):
        return None  # other settings: train() refuses the folder with the keys named
    return {k: (math.nan if v is None else v) for k, v in meta["result"].items()}
