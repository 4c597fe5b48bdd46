"""A trainer grid in chunks: the runs a loss table lacks, most informative first, in time.

A grid bigger than one sitting (the GPU depth grid needs about 25 GPU-minutes; a borrowed GPU
may give 9) runs in chunks. Each chunk reads the grid's loss table (possibly written on other
machines), trains the runs it does not hold yet in an order that spreads the finished runs over
the grid as fast as possible, starts a run only while the time left covers it (estimated from
the runs already timed on the same device), and merges what it finished into the table with the
machine that ran it. A run killed mid-chunk has no row, so the next chunk runs it again (from its
checkpoint when the run folder is still there); a row in the table is never trained or counted
twice.

Runs are matched between table and grid by their grid values (``depth``, ``width``, ``tokens``,
``seed``, ...), not by their run id, whose hash includes paths that differ between machines.
"""

from __future__ import annotations

import datetime
import json
import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..core._io import atomic_write_csv
from ..core.accounting import flops_per_token, param_count
from ..core.errors import ScaleFitError
from ..core.table import read_csv
from ..sweep import run_sweep
from ..sweep.spec import Run, SweepSpec

#: Columns added to every row a chunk merges into the table (and ``run_s``, the run's seconds
#: in the chunk: start-up, compilation, training and evaluation).
PROVENANCE = ("host", "device_name", "torch", "cuda", "chunk")
#: Grid keys used to place runs in the information order (log scale).
SHAPE_KEYS = ("depth", "width", "tokens")


@dataclass
class ChunkReport:
    """What one chunk did.

    Attributes
    ----------
    ran : list of str
        Run ids trained (or resumed) and merged by this chunk, in order.
    remaining : int
        Runs of the grid still missing from the table.
    stopped : str
        Why the chunk ended: ``"complete"``, ``"time"`` (the next run would not fit) or ``"all"``
        (every pending run ran).
    table : pandas.DataFrame
        The merged table, as written.
    """

    ran: list[str] = field(default_factory=list)
    remaining: int = 0
    stopped: str = "all"
    table: pd.DataFrame | None = None


def point_key(values: dict, keys: list[str]) -> str:
    """The canonical text of a run's grid values (numbers as floats, so 6e6 == 6000000)."""

    def canon(v):
        if isinstance(v, bool) or v is None:
            return v
        try:
            return float(v)
        except (TypeError, ValueError):
            return str(v)

    return json.dumps({k: canon(values.get(k)) for k in keys}, sort_keys=True)


def information_order(runs: list[Run], done: list[Run]) -> list[Run]:
    """Order ``runs`` so that each next one is the farthest from every run already done.

    Greedy maximin in standardised log(depth), log(width), log(tokens): the first pending run is
    the corner farthest from the finished ones (from the grid's centre when none is finished),
    and each next run the one whose nearest finished-or-chosen neighbour is farthest. Ties go to
    the cheaper run (fewer ``depth * width**2 * tokens``). A prefix of this order spans the grid,
    which is what pins the three exponents of the decomposed law soonest.
    """
    if not runs:
        return []
    every = runs + done
    keys = [k for k in SHAPE_KEYS if all(k in r.config for r in every)]
    if not keys:
        return list(runs)
    x = np.log([[float(r.config[k]) for k in keys] for r in every])
    spread = x.std(axis=0)
    x = (x - x.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    pend, fixed = x[: len(runs)], x[len(runs) :]
    cost = np.array([_cost(r.config) for r in runs])
    if len(fixed):
        near = np.min(np.linalg.norm(pend[:, None] - fixed[None], axis=2), axis=1)
    else:  # the first run is the corner farthest from the centre; then spread from it
        near = np.full(len(runs), np.inf)
        centre = np.linalg.norm(pend, axis=1)
        first = max(range(len(runs)), key=lambda i: (round(centre[i], 9), -cost[i]))
        near = np.minimum(near, np.linalg.norm(pend - pend[first], axis=1))
    order = [] if len(fixed) else [first]
    left = [i for i in range(len(runs)) if i not in order]
    while left:
        best = max(left, key=lambda i: (round(near[i], 9), -cost[i]))
        order.append(best)
        left.remove(best)
        near = np.minimum(near, np.linalg.norm(pend - pend[best], axis=1))
    return [runs[i] for i in order]


def _cost(config: dict) -> float:
    try:
        return float(config["depth"]) * float(config["width"]) ** 2 * float(config["tokens"])
    except (KeyError, TypeError, ValueError):
        return math.nan


def provenance(device: str = "auto") -> dict:
    """The machine a chunk runs on: host, device name, torch and CUDA versions, start time (UTC)."""
    import torch

    name = "cpu"
    if device != "cpu" and torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
    return {
        "host": platform.node(),
        "device_name": name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        "chunk": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def run_chunk(
    spec: SweepSpec,
    out: str | Path,
    table_path: str | Path,
    *,
    max_minutes: float | None = None,
    run: Callable[[Run], pd.DataFrame] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ChunkReport:
    """Train the runs of ``spec`` missing from ``table_path`` until they are done or time is up.

    Parameters
    ----------
    spec : SweepSpec
        A trainer grid (``task = "train"``).
    out : path-like
        The sweep folder (run folders and checkpoints, as for :func:`scalefit.sweep.run_sweep`).
    table_path : path-like
        The grid's loss table: read first (rows from any machine count as done), then rewritten
        atomically after each finished run with the new rows appended and :data:`PROVENANCE`.
    max_minutes : float, optional
        Start a run only if the minutes since the chunk began plus its estimated minutes stay
        below this. The estimate is ``a + b * FLOPs`` fitted (a, b >= 0) to the runs timed on this
        device (``run_s`` of the table's rows with the same ``device_name``, then this chunk's);
        until two runs of different sizes are timed, the next run starts. Default: no limit.
    run : callable, optional
        Trains one run and returns its rows (default: :func:`scalefit.sweep.run_sweep` on that
        run alone, in this process).
    clock : callable, default time.monotonic
        Seconds, for the time limit.

    Returns
    -------
    ChunkReport
    """
    start = clock()
    table_path, out = Path(table_path), Path(out)
    runs = spec.runs()
    keys = list(spec.grid)
    table = read_csv(table_path) if table_path.exists() else pd.DataFrame()
    missing = [k for k in keys if len(table) and k not in table.columns]
    if missing:
        raise ScaleFitError(
            f"{table_path}: lacks the grid's column(s) {', '.join(missing)}; it is not this grid's "
            "loss table."
        )
    have = {point_key(row, keys) for row in table.to_dict("records")}
    done = [r for r in runs if point_key(r.config, keys) in have]
    todo = information_order([r for r in runs if point_key(r.config, keys) not in have], done)
    prov = provenance(str(spec.fixed.get("device", "auto")))
    timed = _timed(table, prov["device_name"])
    report = ChunkReport(remaining=len(todo), stopped="complete" if not todo else "all")
    run = run or (lambda r: run_sweep(spec, out, workers=0, progress=False, only={r.run_id}))
    for r in todo:
        need = _estimate(timed, run_flops(r.config))
        if max_minutes is not None and need is not None:
            if clock() - start + need > max_minutes * 60:
                report.stopped = "time"
                break
        t0 = clock()
        rows = run(r)
        seconds = clock() - t0
        rows = rows.assign(**prov, run_s=seconds)
        table = pd.concat([table, rows], ignore_index=True) if len(table) else rows
        atomic_write_csv(table_path, table)
        timed.append((run_flops(r.config), seconds))
        report.ran.append(r.run_id)
        report.remaining -= 1
    report.table = table
    return report


def run_flops(config: dict) -> float:
    """FLOPs of a trainer config (parameters counted by :mod:`~scalefit.core.accounting`)."""
    depth, width = int(config["depth"]), int(config["width"])
    vocab = int(config.get("bpe_vocab", 1024)) if config.get("tokenizer") == "bpe" else 256
    params = param_count(
        depth,
        width,
        vocab=vocab,
        block=config.get("block", "standard"),
        embeddings=config.get("embeddings", "tied"),
    )
    seq_len = int(config.get("seq_len", 128))
    return flops_per_token(params, depth=depth, width=width, seq_len=seq_len) * float(
        config["tokens"]
    )


def _estimate(timed: list[tuple[float, float]], flops: float) -> float | None:
    """Seconds of a run of ``flops``: ``a + b * flops`` (a, b >= 0) fitted to the timed runs.

    None (start the run) until two runs of different sizes are timed: one run cannot tell the
    fixed cost (start-up, compilation, evaluation) from the cost per FLOP.
    """
    if len({f for f, _ in timed}) < 2:
        return None
    from scipy.optimize import nnls

    x = np.array([[1.0, f] for f, _ in timed])
    scale = x.max(axis=0)
    coef, _ = nnls(x / scale, np.array([t for _, t in timed]))
    return float(coef[0] + coef[1] * flops / scale[1])


def _timed(table: pd.DataFrame, device_name: str) -> list[tuple[float, float]]:
    """(FLOPs, seconds) of the table's runs that a chunk timed on this device."""
    need = {"device_name", "run_s", *SHAPE_KEYS}
    if not len(table) or not need <= set(table.columns):
        return []
    seconds = pd.to_numeric(table["run_s"], errors="coerce")  # a hand-edited cell is skipped
    rows = table[(table["device_name"] == device_name) & (seconds > 0)]
    if "run_id" in rows.columns:
        rows = rows.drop_duplicates("run_id")  # one line per run (cooldown branches share it)
    out = []
    for row in rows.to_dict("records"):
        try:
            out.append((run_flops(row), float(row["run_s"])))
        except (KeyError, TypeError, ValueError):
            continue
    return out
