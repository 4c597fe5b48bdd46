"""Published IsoFLOP sweeps by experiment: Open-Athena's collection as named tables.

The collection is one long CSV (947 rows, 8 experiment ids) gathered by Open-Athena's
``scaling-law-analysis`` repository (``data/isoflops/extract/isoflops.csv``). scalefit does not
redistribute it: the file is resolved like the Chinchilla tables (``data_dir``,
``SCALEFIT_DATA_DIR``, the cache, a checksummed download; see :func:`scalefit.datasets.resolve`)
and each experiment is returned as a validated canonical table::

    from scalefit import datasets
    runs = datasets.load("isoflops", experiment="llama_3__exp_loss")
    datasets.isoflop_experiments()  # what each experiment is (no file needed)

Columns of the returned table: ``params, tokens, loss, budget`` (the nominal FLOP budget of the
IsoFLOP curve, as the source names it) and ``flops = 6 · params · tokens`` (derived). The
metadata below is what docs/datasets.md documents; it is checked against the file on every load.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core._validation import Options, validate
from ..core.errors import ScaleFitError
from ..core.table import parse_bytes, read_table, require_file_columns

#: Name of the collection in :data:`scalefit.datasets.DATASETS` (file, URL and sha256 there).
NAME = "isoflops"
#: Columns the file must have.
COLUMNS = ("source", "dataset", "model", "condition", "experiment", "tokens", "params", "budget")
#: ``6 · params · tokens / budget`` must lie in this range for every row (the budget is nominal).
RATIO_RANGE = (0.85, 1.4)


@dataclass(frozen=True)
class Experiment:
    """One IsoFLOP sweep of the collection: what its numbers are and where they come from."""

    experiment: str
    n_rows: int
    n_budgets: int
    budget_min: float
    budget_max: float
    loss: str
    params: str
    tokens: str
    budget: str
    provenance: str


_CHIN_BUDGET = (
    "6ND snapped to the nearest of Hoffmann et al.'s 9 IsoFLOP budgets (within 10 %); rows that "
    "snap to none were dropped by the collection"
)
_MARIN = (
    "Marin 'Scaling Ladders' sweep (the marin-community W&B report), Llama-2 style "
    "models trained on {data}"
)
_MARIN_LOSS = "Paloma macro-averaged evaluation loss (eval/paloma/macro_loss), nats per token"
_MARIN_BUDGET = (
    "parsed from the run name (forward FLOPs) × 3, i.e. total training FLOPs; 6ND/budget 0.93–1.35"
)

EXPERIMENTS: dict[str, Experiment] = {
    e.experiment: e
    for e in (
        Experiment(
            "ml_scalefit__massivetext__chinchilla", 124, 9, 6e18, 3e21,
            "final training loss of the Chinchilla runs (MassiveText) as in Apple ml-scalefit's "
            "data/chinchilla.csv (digitised from Hoffmann et al. 2022)",
            "ml-scalefit's model_size", "ml-scalefit's n_tokens",
            _CHIN_BUDGET + "; 6ND/budget 0.90–1.10",
            "Apple ml-scalefit (arXiv:2507.09404), data/chinchilla.csv",
        ),
        Experiment(
            "epochai_chinchilla__massivetext__chinchilla", 123, 9, 6e18, 3e21,
            "final training loss of the Chinchilla runs as extracted from the paper's SVG by "
            "Epoch AI",
            "Epoch's 'Model Size', rounded to an integer",
            "derived: budget / (6 params)",
            _CHIN_BUDGET + " (Epoch's 'Training FLOP', rounded); near-duplicates kept once",
            "Epoch AI, Besiroglu et al. 2024 (arXiv:2404.10102), data/svg_extracted_data.csv",
        ),
        Experiment(
            "misfitting__fineweb_c4__transformer", 176, 26, 8.46e16, 2.18e19,
            "C4 evaluation loss of models trained on FineWeb, interpolated (log-log) from each "
            "run's checkpoints at the budget, best learning rate per model size",
            "the study's N", "derived: budget / (6 params)",
            "26 log-spaced levels where at least 3 model sizes have a checkpoint within 10 %",
            "Misfitting (arXiv:2502.18969), github.com/hadasah/scaling_laws "
            "data/scaling_results.csv",
        ),
        Experiment(
            "llama_3__raw_loss", 133, 10, 6e18, 1e22,
            "validation loss as read off Llama 3's IsoFLOP figure (Dubey et al. 2024, Fig. 2), "
            "values 0.69–0.93 as plotted",
            "derived: budget / (6 tokens)", "the figure's training tokens",
            "the figure's compute budget (6e18–1e22)",
            "digitised by github.com/eric-czech/llama3_isoflop_extraction, isoflops_points.csv",
        ),
        Experiment(
            "llama_3__exp_loss", 133, 10, 6e18, 1e22,
            "exp of the raw_loss experiment's loss (2.00–2.54): the same points on another scale",
            "derived: budget / (6 tokens)", "the figure's training tokens",
            "the figure's compute budget (6e18–1e22)",
            "as llama_3__raw_loss; the exp transform is the collection's",
        ),
        Experiment(
            "marin_202603__comma__llama_2", 85, 7, 3e18, 3e20, _MARIN_LOSS,
            "parameter_count", "throughput/total_tokens", _MARIN_BUDGET,
            _MARIN.format(data="Comma"),
        ),
        Experiment(
            "marin_202603__dclm__llama_2", 85, 7, 3e18, 3e20, _MARIN_LOSS,
            "parameter_count", "throughput/total_tokens", _MARIN_BUDGET,
            _MARIN.format(data="DCLM"),
        ),
        Experiment(
            "marin_202603__nemotron__llama_2", 88, 8, 1.8e18, 3e20, _MARIN_LOSS,
            "parameter_count", "throughput/total_tokens", _MARIN_BUDGET,
            _MARIN.format(data="Nemotron-CC"),
        ),
    )
}  # fmt: skip


def _check_experiment(experiment: object) -> None:
    validate("load('isoflops')", locals(), {"experiment": [Options(set(EXPERIMENTS))]})


def split_name(name: str, experiment: str | None) -> str:
    """The experiment named by ``isoflops:<id>`` or by ``experiment=`` (exactly one of them)."""
    _, _, suffix = name.partition(":")
    if suffix and experiment is not None and suffix != experiment:
        raise ScaleFitError(
            f"load({name!r}, experiment={experiment!r}): the name and the 'experiment' "
            "parameter name different experiments; give one."
        )
    chosen = suffix or experiment
    if chosen is None:
        raise ScaleFitError(
            "load('isoflops') needs an experiment: load('isoflops', experiment=ID) or "
            f"'isoflops:ID', with ID one of {', '.join(EXPERIMENTS)}."
        )
    _check_experiment(chosen)
    return chosen


def frame_of(raw: bytes, path: os.PathLike | str, experiment: str) -> pd.DataFrame:
    """One experiment's rows of the (checksummed) collection as a validated canonical table."""
    _check_experiment(experiment)
    meta = EXPERIMENTS[experiment]
    whole = parse_bytes(raw, path, "IsoFLOP collection", keep_default_na=False, na_values=[""])
    require_file_columns(whole, (*COLUMNS, "loss"), path)
    rows = whole[whole["experiment"] == experiment]
    cols = ["params", "tokens", "budget", "loss"]
    frame = read_table(rows[cols].reset_index(drop=True))
    _check(frame, meta, path)
    first = rows.iloc[0]
    frame.attrs["scalefit"].update(
        source=str(path),
        dataset=NAME,
        experiment=experiment,
        origin={
            k: ("" if pd.isna(first[k]) else str(first[k]))
            for k in ("source", "dataset", "model", "condition")
        },
        derived=["flops = 6 params tokens (budget is the curve's nominal budget)"],
    )
    return frame


def _check(frame: pd.DataFrame, meta: Experiment, path) -> None:
    """Row count, budgets and ``6ND / budget`` as documented for the experiment."""
    where = f"{path} (experiment {meta.experiment!r})"
    budget = pd.to_numeric(frame["budget"], errors="coerce").to_numpy(float)
    if not np.all(np.isfinite(budget) & (budget > 0)):
        raise ScaleFitError(f"{where}: column 'budget' must be finite and positive.")
    n_budgets = len(np.unique(budget))
    if len(frame) != meta.n_rows or n_budgets != meta.n_budgets:
        raise ScaleFitError(
            f"{where}: expected {meta.n_rows} rows in {meta.n_budgets} budgets; "
            f"got {len(frame)} rows in {n_budgets}."
        )
    ratio = frame["flops"].to_numpy(float) / budget
    lo, hi = RATIO_RANGE
    if not np.all((ratio >= lo) & (ratio <= hi)):
        i = int(np.flatnonzero((ratio < lo) | (ratio > hi))[0])
        raise ScaleFitError(
            f"{where}: row {i + 1}: 6·params·tokens / budget = {ratio[i]:.3g}, expected {lo}–{hi}."
        )
    frame["budget"] = budget
