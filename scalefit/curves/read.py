"""Curve readers: the long format (CSV/JSONL), TensorBoard event files, W&B exports, trainer runs.

Every reader returns the validated long table of :mod:`scalefit.curves.table`. Reading never runs
anything from a file: CSV and JSON are parsed as data, event files record by record with
every length and checksum checked (:mod:`scalefit.curves._events`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..core._io import iter_input_lines, parse_json_text, read_json
from ..core._validation import fmt_value
from ..core.errors import ScaleFitError
from ..core.table import read_csv
from .table import validate_curves

#: Loss tags tried, in order, when a TensorBoard reader is given none.
LOSS_TAGS = ("loss", "train/loss", "val/loss", "eval/loss", "train_loss", "val_loss")
LR_TAGS = ("lr", "learning_rate", "train/lr", "train/learning_rate")


def read_curves(
    source: str | os.PathLike | pd.DataFrame,
    *,
    columns: Mapping[str, str] | None = None,
    run: str | None = None,
    run_columns: Sequence[str] | None = None,
    schedule: str | None = None,
) -> pd.DataFrame:
    """Read a long curve table from CSV (``.csv``), JSON Lines (``.jsonl``) or a DataFrame.

    The file is read as published: renaming (``columns``), run names made of several columns
    (``run_columns``) and schedules declared from columns (``schedule``) are arguments, so a
    public table needs no editing.

    Parameters
    ----------
    source : path-like or DataFrame
        The file (one checkpoint per row or line) or a DataFrame.
    columns : mapping, optional
        ``{name in file: canonical name}`` (canonical: run, step, tokens, loss, lr, params,
        width, depth, schedule, tokens_per_step).
    run : str, optional
        Run name for a file without a ``run`` column.
    run_columns : sequence of str, optional
        Columns whose values together name each run, joined by ``/`` (e.g.
        ``("model", "total_steps", "peak_lr")`` gives ``"m70/5000/0.004"``).
    schedule : str, optional
        Schedule template filled per run from columns, e.g.
        ``"cosine:lr={peak_lr},steps={total_steps},warmup=50,final_lr_ratio=0.1"``.

    Returns
    -------
    DataFrame
        The validated long table (:func:`scalefit.curves.table.validate_curves`).

    Examples
    --------
    >>> import pandas as pd
    >>> t = read_curves(pd.DataFrame({"run": ["a", "a"], "step": [10, 20], "loss": [3.0, 2.9]}))
    >>> t["loss"].tolist()
    [3.0, 2.9]
    >>> f = pd.DataFrame({"model": ["m", "m"], "lr0": [1e-3, 1e-3], "n": [20, 20],
    ...                   "step": [10, 20], "loss": [3.0, 2.9]})
    >>> t = read_curves(f, run_columns=["model", "n"], schedule="cosine:lr={lr0},steps={n}")
    >>> t["run"].iloc[0], t["schedule"].iloc[0]
    ('m/20', 'cosine:lr=0.001,steps=20,final_lr=0.0')
    """
    spec = {"columns": columns, "run": run, "run_columns": run_columns, "schedule": schedule}
    if isinstance(source, pd.DataFrame):
        return validate_curves(source, **spec)
    path = Path(source)
    if path.is_dir():
        return read_trainer_runs(path) if (path / "history.csv").exists() else _dir_error(path)
    frame = _read_frame(path, "curve JSON")
    if frame is None:
        raise ScaleFitError(
            f"{path}: expected a .csv, .jsonl or .json curve file, a TensorBoard folder or a "
            f"trainer run folder. Got a {path.suffix.lower() or 'suffix-less'} file."
        )
    return validate_curves(frame, source=str(path), **spec)


def _dir_error(path: Path):
    raise ScaleFitError(
        f"{path}: a folder without history.csv; for TensorBoard event files use "
        "read_tensorboard (scalefit curves fit --format tensorboard)."
    )


def _read_frame(path: Path, what: str) -> pd.DataFrame | None:
    """The table of a ``.csv``, ``.jsonl``/``.ndjson`` or ``.json`` (``what``) file; else None."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return read_csv(path)
    if suffix in (".jsonl", ".ndjson"):
        return _read_jsonl(path)
    if suffix == ".json":
        return _records(read_json(path, what=what), str(path))
    return None


def _read_jsonl(path: Path) -> pd.DataFrame:
    rows = []
    for number, line in iter_input_lines(path, what="JSON Lines curve file"):
        if not line.strip():
            continue
        obj = parse_json_text(line, path=f"{path}, line {number}", what="JSON object")
        if not isinstance(obj, dict):
            raise ScaleFitError(f"{path}, line {number}: expected a JSON object per line.")
        rows.append(obj)
    if not rows:
        raise ScaleFitError(f"{path}: no records; expected one JSON object per line.")
    return pd.DataFrame(rows)


def _records(obj, where: str) -> pd.DataFrame:
    if isinstance(obj, dict) and all(isinstance(v, list) for v in obj.values()):
        try:
            return pd.DataFrame(obj)  # column-oriented
        except ValueError as exc:
            raise ScaleFitError(f"{where}: columns of unequal length ({exc}).") from None
    if isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj):
        return pd.DataFrame(obj)
    raise ScaleFitError(f"{where}: expected a list of records or an object of columns.")


# ------------------------------------------------------------------------------ TensorBoard
def read_tensorboard(
    logdir: str | os.PathLike,
    *,
    tag: str | None = None,
    lr_tag: str | None = None,
    runs: Mapping[str, Mapping[str, object]] | None = None,
) -> pd.DataFrame:
    """Read scalar curves from TensorBoard event files (one run per folder that holds them).

    Each file is read record by record, every length and checksum checked (a damaged file is
    an error, not a shorter curve); the events are parsed with TensorBoard's protocol buffers
    (``pip install 'scalefit[curves]'``).

    Parameters
    ----------
    logdir : path-like
        A folder of event files, or a folder of run folders.
    tag : str, optional
        Scalar tag of the loss (default: the first of :data:`LOSS_TAGS` present).
    lr_tag : str, optional
        Scalar tag of the learning rate (default: the first of :data:`LR_TAGS` present, if any).
    runs : mapping, optional
        Per-run constants ``{run: {"params": ..., "schedule": ...}}`` to attach.

    Returns
    -------
    DataFrame
        The long table; ``run`` is the folder path relative to ``logdir`` (``"."`` for files
        directly inside it).
    """
    try:
        from ._events import read_scalars
    except ModuleNotFoundError:
        raise ScaleFitError(
            "reading TensorBoard event files needs the tensorboard package: "
            "pip install 'scalefit[curves]'."
        ) from None
    root = Path(logdir)
    if not root.is_dir():
        raise ScaleFitError(f"{root}: expected a folder of TensorBoard event files.")
    folders = sorted({p.parent for p in root.rglob("events.out.tfevents.*") if p.is_file()})
    if not folders:
        raise ScaleFitError(f"{root}: no TensorBoard event files (events.out.tfevents.*).")
    parts = []
    for folder in folders:
        scalars = read_scalars(folder)
        name = str(folder.relative_to(root)) if folder != root else "."
        loss_tag = _pick(tag, scalars, LOSS_TAGS, f"{folder}: loss tag", required=True)
        frame = _scalar_frame(scalars[loss_tag], "loss")
        rate = _pick(lr_tag, scalars, LR_TAGS, f"{folder}: lr tag", required=lr_tag is not None)
        if rate is not None:
            frame = frame.merge(_scalar_frame(scalars[rate], "lr"), on="step", how="left")
        frame.insert(0, "run", name)
        parts.append(_attach(frame, runs, name))
    return validate_curves(pd.concat(parts, ignore_index=True), source=str(root))


def _pick(given, tags, defaults, where: str, *, required: bool):
    if given is not None:
        if given not in tags:
            raise ScaleFitError(f"{where} {given!r} not found; scalar tags: {sorted(tags)}.")
        return given
    for t in defaults:
        if t in tags:
            return t
    if required:
        raise ScaleFitError(
            f"{where}: none of {', '.join(defaults)} found; pass one of the scalar tags "
            f"{sorted(tags)}."
        )
    return None


def _scalar_frame(steps: dict, name: str) -> pd.DataFrame:
    return pd.DataFrame({"step": list(steps), name: list(steps.values())})


def _attach(frame: pd.DataFrame, runs, name: str) -> pd.DataFrame:
    for key, value in dict((runs or {}).get(name, {})).items():
        frame[key] = value
    return frame


# ------------------------------------------------------------------------------ W&B
def read_wandb(
    source: str | os.PathLike,
    *,
    metric: str = "loss",
    run: str | None = None,
    runs: Mapping[str, Mapping[str, object]] | None = None,
) -> pd.DataFrame:
    """Read a Weights & Biases export.

    Two shapes are understood: the chart export of the W&B app (CSV with ``Step`` and one
    ``"<run> - <metric>"`` column per run; the ``__MIN``/``__MAX`` columns are ignored), and a
    run's history (``run.history()`` saved as CSV or JSON, or the ``wandb-history.jsonl`` file:
    ``_step`` plus a column per metric). Rows where the metric was not logged (W&B writes one
    row per ``log`` call) are left out.

    Parameters
    ----------
    source : path-like
        The exported file (``.csv``, ``.json`` or ``.jsonl``).
    metric : str, default "loss"
        The logged loss key (e.g. ``"train/loss"``).
    run : str, optional
        Run name of a history export (default: the file name without suffix).
    runs : mapping, optional
        Per-run constants to attach.

    Returns
    -------
    DataFrame
        The long table.
    """
    path = Path(source)
    frame = _read_frame(path, "W&B history JSON")
    if frame is None:
        raise ScaleFitError(f"{path}: expected a W&B export (.csv, .json or .jsonl).")
    chart = [c for c in frame.columns if str(c).endswith(f" - {metric}")]
    if chart:
        long = _from_chart(frame, chart, metric, str(path))
    else:
        long = _from_history(frame, metric, run or path.stem, str(path))
    parts = [_attach(g.copy(), runs, name) for name, g in long.groupby("run", sort=False)]
    return validate_curves(pd.concat(parts, ignore_index=True), source=str(path))


def _from_chart(frame: pd.DataFrame, chart: list, metric: str, where: str) -> pd.DataFrame:
    if "Step" not in frame.columns:
        raise ScaleFitError(f"{where}: a W&B chart export needs its 'Step' column.")
    parts = []
    for col in chart:
        name = str(col)[: -len(f" - {metric}")]
        part = pd.DataFrame({"run": name, "step": frame["Step"], "loss": frame[col]})
        parts.append(part[part["loss"].notna()])
    return pd.concat(parts, ignore_index=True)


def _from_history(frame: pd.DataFrame, metric: str, run: str, where: str) -> pd.DataFrame:
    if metric not in frame.columns:
        keys = [c for c in frame.columns if not str(c).startswith("_")]
        raise ScaleFitError(f"{where}: no metric {metric!r} in the W&B history; keys: {keys}.")
    if "_step" not in frame.columns:
        raise ScaleFitError(f"{where}: a W&B history export needs its '_step' column.")
    keep = frame[frame[metric].notna()]
    out = pd.DataFrame({"run": run, "step": keep["_step"], "loss": keep[metric]})
    for src in ("lr", "learning_rate", "train/lr", "tokens"):
        if src in keep.columns and keep[src].notna().all():
            out["tokens" if src == "tokens" else "lr"] = keep[src].to_numpy()
    return out


# ------------------------------------------------------------------------------ trainer
def _run_info(folder: Path) -> dict:
    """The trainer's ``run.json`` (schedule, branch, result) or ``{}`` when the folder has none."""
    path = folder / "run.json"
    if not path.exists():
        return {}
    info = read_json(path, what="trainer run metadata")
    if not isinstance(info, dict):
        raise ScaleFitError(f"{path}: expected a JSON object.")
    return info


def read_trainer_runs(run_dir: str | os.PathLike) -> pd.DataFrame:
    """A trainer run folder and its cooldown branches (``cooldowns/*/``) as one long table.

    The main run is named after its folder, each branch ``<main>/<branch folder>``. A branch's
    history repeats the main run's stable phase up to its fork step; only the steps after the
    fork are kept for the branch, so no checkpoint appears twice. Every row carries
    ``main_run`` (the main run's name): branches share the main run's stable phase, so
    resample them with it (``fit_curves(..., cluster="main_run")``, ``--cluster main_run``).

    Parameters
    ----------
    run_dir : path-like
        The main run's folder.

    Returns
    -------
    DataFrame
        The long table of :func:`read_trainer_run` for every run of the set, with
        ``main_run``.
    """
    folder = Path(run_dir)
    parts = [read_trainer_run(folder).assign(main_run=folder.name)]
    branches = folder / "cooldowns"
    if branches.is_dir():
        for sub in sorted(p for p in branches.iterdir() if (p / "history.csv").exists()):
            frame = read_trainer_run(sub, run=f"{folder.name}/{sub.name}")
            frame = frame.assign(main_run=folder.name)
            fork = (_run_info(sub).get("branch") or {}).get("fork_step")
            if isinstance(fork, int) and not isinstance(fork, bool):
                frame = frame[frame["step"] > fork]
            parts.append(frame)
    if len(parts) == 1:
        return parts[0]
    return validate_curves(pd.concat(parts, ignore_index=True), source=str(folder))


def read_trainer_run(run_dir: str | os.PathLike, *, run: str | None = None) -> pd.DataFrame:
    """Read a run folder of :func:`scalefit.train.train` (``train_config.json``, ``history.csv``).

    The trainer logs, for each update ``i = 0, 1, ...``, the training loss of the batch measured
    before the update and the update's learning rate. Here that loss becomes the checkpoint at
    ``step = i`` (``i`` updates done) with ``lr`` the rate of update ``i`` (the last one applied);
    step 0 is left out. The loss is the training loss of one batch (noisy; the evaluation loss
    of the finished run is in the trainer's result row, not in the history).
    ``tokens = step * batch_size * seq_len``; ``params`` from the shared
    parameter accounting.

    Parameters
    ----------
    run_dir : path-like
        The run folder.
    run : str, optional
        Run name (default: the folder name).

    Returns
    -------
    DataFrame
        The long table; ``schedule`` is the one the trainer recorded in ``run.json``
        (``schedule_text``), else the one ``train_config.json`` gives
        (:func:`scalefit.core.schedule.trainer_schedule`).
    """
    from ..core.accounting import param_count
    from ..core.schedule import trainer_schedule

    folder = Path(run_dir)
    cfg = read_json(folder / "train_config.json", what="trainer configuration")
    if not isinstance(cfg, dict):
        raise ScaleFitError(f"{folder / 'train_config.json'}: expected a JSON object.")
    hist = _history(folder / "history.csv")
    try:
        sizes = {k: int(cfg[k]) for k in ("batch_size", "seq_len", "depth", "width", "vocab")}
        for key, value in sizes.items():
            if value < 1:
                raise ScaleFitError(
                    f"{folder / 'train_config.json'}: {key} must be a whole number >= 1; got "
                    f"{value}."
                )
        per_step = sizes["batch_size"] * sizes["seq_len"]
        params = param_count(
            sizes["depth"],
            sizes["width"],
            vocab=sizes["vocab"],
            block=str(cfg.get("block", "standard")),
            embeddings=str(cfg.get("embeddings", "tied")),
            mlp_ratio=float(cfg.get("mlp_ratio", 4.0)),
            ffn_hidden=cfg.get("ffn_hidden"),
        )
        schedule = str(trainer_schedule(cfg))  # the trainer's own step and warm-up arithmetic
    except ScaleFitError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise ScaleFitError(
            f"{folder / 'train_config.json'}: not a trainer configuration ({exc!r})."
        ) from None
    info = _run_info(folder)
    if isinstance(info.get("schedule_text"), str):
        schedule = info["schedule_text"]  # written by the trainer in this module's grammar
    step = hist["step"]
    frame = pd.DataFrame(
        {
            "run": run or folder.name,
            "step": step[1:],
            "tokens": step[1:] * per_step,
            "loss": hist["loss"][1:],
            "lr": hist["lr"][:-1],
            "params": float(params),
            "width": float(cfg["width"]),
            "depth": float(cfg["depth"]),
            "tokens_per_step": float(per_step),
            "schedule": schedule,
        }
    )
    if np.any(hist["step"] != np.arange(len(hist["step"]))):
        raise ScaleFitError(f"{folder / 'history.csv'}: steps are not 0, 1, 2, ... in order.")
    return validate_curves(frame, source=str(folder))


def _history(path: Path) -> dict[str, np.ndarray]:
    """The ``step``, ``lr`` and ``loss`` columns of a trainer's ``history.csv`` as floats."""
    hist = read_csv(path)
    out = {}
    for col in ("step", "lr", "loss"):
        if col not in hist.columns:
            raise ScaleFitError(f"{path}: no {col!r} column.")
        out[col] = pd.to_numeric(hist[col], errors="coerce").to_numpy(dtype=float)
        text = np.isnan(out[col]) & hist[col].notna().to_numpy()
        if text.any():
            i = int(np.flatnonzero(text)[0])
            raise ScaleFitError(
                f"{path}: row {i + 1}, column {col!r}: expected a number, got "
                f"{fmt_value(hist[col].iloc[i])}."
            )
    return out
