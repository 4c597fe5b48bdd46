"""The ``train`` task of :mod:`scalefit.sweep`: one grid point → one loss-table row.

A grid spec (``[sweep] task = "train"``) sets any key of
:class:`~scalefit.train.loop.TrainConfig` / :class:`~scalefit.train.model.ModelConfig` in
``[fixed]`` or ``[grid]``, plus two task keys: ``diagnose`` (default true: write
``diagnostics.csv`` into the run folder and add ``grad_tau``) and ``diag_tokens`` (validation
tokens for the probes, default 16,384). Runs resume from their own ``checkpoint.pt``.

A grid point with ``schedule = "wsd"`` and ``cooldowns = [t1, t2, ...]`` trains its cooldown
branches too (:func:`scalefit.train.branches.train_cooldowns`) and gives one row per budget:
the main run's (``branch = "main"``) and each branch's (``branch = "cooldown"``, ``budget``,
``fork_step``); the diagnostics are the main run's.

Examples
--------
>>> from scalefit.sweep import load_spec, run_sweep  # doctest: +SKIP
>>> table = run_sweep(load_spec("configs/grid_shakespeare_cpu.toml"), "runs/lm")  # doctest: +SKIP
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..core._io import atomic_write_csv
from ..core._validation import Interval, validate
from ..core.errors import ScaleFitError

TASK_KEYS = {"diagnose": True, "diag_tokens": 16_384}
#: Loss-table columns every row has (``scalefit.read_table`` reads them; ``loss`` is NaN when
#: the run diverged).
TABLE_COLUMNS = [
    "depth", "width", "params", "params_nonembedding", "tokens", "flops", "epochs", "loss", "bpb",
    "variant", "seed", "wall_s", "diverged",
]  # fmt: skip


def _split(config: dict) -> tuple[dict, dict]:
    task = {k: config.get(k, v) for k, v in TASK_KEYS.items()}
    rest = {k: v for k, v in config.items() if k not in TASK_KEYS}
    return task, rest


def validate_config(config: dict) -> None:
    """Raise :class:`~scalefit.core.errors.ScaleFitError` for a config the trainer rejects."""
    from .loop import config_from_dict

    task, rest = _split(config)
    validate_task_keys(task, source="train grid")
    config_from_dict(rest, source="train grid")  # every trainer setting, before any work


def validate_task_keys(task: dict, *, source: str) -> None:
    """Check ``diagnose`` (a bool) and ``diag_tokens`` (an int >= 1)."""
    constraints = {"diagnose": ["boolean"], "diag_tokens": [Interval(int, 1, None)]}
    validate(f"trainer config {source!r}", task, constraints, noun="key")


def run_train_task(config: dict, run_dir: Path) -> dict:
    """Train one grid point, write its diagnostics, and return its loss-table row.

    Parameters
    ----------
    config : dict
        Flat settings (see the module docstring).
    run_dir : pathlib.Path
        The run's folder: ``checkpoint.pt``, ``history.csv`` and ``diagnostics.csv`` go there.

    Returns
    -------
    dict
        The row: :data:`TABLE_COLUMNS` plus ``bpb``, ``train_loss``, ``steps``, ``tokens_per_s``,
        ``grad_tau`` (Depth Delusion's τ, fitted to the hidden-state gradient norms
        ``grad_norm_hidden``; NaN when they do not decay towards the input), its inverse
        ``grad_decay_rate`` = 1/τ (≤ 0 then), the probes' ``probe_*`` summary and the
        architecture settings.
    """
    from .diagnostics import diagnose, grad_decay_rate, grad_decay_tau, mechanism_summary
    from .loop import config_from_dict, train

    task, rest = _split(config)
    cfg = config_from_dict(rest, source="train grid")
    run_dir = Path(run_dir)
    branches = None
    if cfg.cooldowns:
        from .branches import train_cooldowns

        branches = train_cooldowns(cfg, run_dir)
        result = branches.main
    else:
        result = train(cfg, run_dir)
    row = dict(result.row)
    row["grad_tau"] = row["grad_decay_rate"] = math.nan
    if task["diagnose"] and not row["diverged"]:
        diag = diagnose(result.model, result.data, eval_tokens=int(task["diag_tokens"]))
        # τ from ‖∂L/∂h_l‖, the hidden-state gradient of Depth Delusion's Eq. 2
        grads = diag[diag.metric == "grad_norm_hidden"].sort_values("layer")["value"].to_numpy()
        tau = grad_decay_tau(grads)
        row["grad_decay_rate"] = grad_decay_rate(grads)
        row["grad_tau"] = tau if math.isfinite(tau) else math.nan
        x_val, _ = next(iter(result.data.val_batches(int(task["diag_tokens"]), 16)))
        row.update(mechanism_summary(result.model, x_val))
        ident = {k: row[k] for k in ("depth", "width", "tokens", "variant", "seed")}
        atomic_write_csv(run_dir / "diagnostics.csv", diag.assign(**ident))
    if branches is not None:
        rows = branches.rows()
        return {"rows": [{**rows[0], **row}, *rows[1:]]}
    return row


run_train_task.validate_config = validate_config


def collect_diagnostics(out_dir: str | Path) -> pd.DataFrame:
    """Concatenate every ``runs/*/diagnostics.csv`` of a sweep folder (with a ``run_id`` column)."""
    from ..core.table import read_csv

    frames = []
    for path in sorted(Path(out_dir).glob("runs/*/diagnostics.csv")):  # checked files only
        frames.append(read_csv(path).assign(run_id=path.parent.name))
    if not frames:
        raise ScaleFitError(f"No runs/*/diagnostics.csv under {out_dir}.")
    return pd.concat(frames, ignore_index=True)
