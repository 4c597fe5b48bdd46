"""Run-folder rules of the trainer: one process at a time, and no silent change of settings.

:func:`claim` takes an OS file lock (``fcntl.flock`` on ``<run>/.lock``, released by the kernel
when the process dies, so a killed run never leaves a stale lock), then compares the settings with
the ones the folder was started with (``train_config.json``, or the checkpoint's for folders written
before that file existed). A difference is refused with the keys named; ``overwrite=True``
removes the folder's previous results first.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

from .._io import atomic_write_json, load_torch
from ..errors import ScaleFitError
from .config import TrainConfig, config_diff

#: Files of a run folder that ``overwrite=True`` removes.
RUN_FILES = ("checkpoint.pt", "history.csv", "diagnostics.csv", "train_config.json")
CHECKPOINT_DIR = "checkpoint.dcp"  # distributed (FSDP) checkpoint folder


def _saved_config(run_dir: Path) -> dict | None:
    path = run_dir / "train_config.json"
    if path.exists():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ScaleFitError(f"{path}: not a JSON configuration ({exc}).") from exc
    ckpt = run_dir / "checkpoint.pt"
    if ckpt.exists():
        state = load_torch(ckpt, what="trainer checkpoint")
        if not isinstance(state, dict) or not isinstance(state.get("config"), dict):
            raise ScaleFitError(f"{ckpt}: not a trainer checkpoint (no 'config' table).")
        return state["config"]
    return None


def _clear(run_dir: Path) -> None:
    import shutil

    for name in RUN_FILES:
        (run_dir / name).unlink(missing_ok=True)
    if (run_dir / CHECKPOINT_DIR).is_dir():
        shutil.rmtree(run_dir / CHECKPOINT_DIR)


def _lock(run_dir: Path):
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ScaleFitError(
            f"Run folder {run_dir} is in use by another training process; wait for it to finish "
            "or choose another --out."
        ) from None
    return fd


@contextlib.contextmanager
def claim(
    run_dir: Path | None, cfg: TrainConfig, *, overwrite: bool = False, owner: bool = True
) -> Iterator[None]:
    """Lock ``run_dir`` for this process and check (or record) its settings.

    Parameters
    ----------
    run_dir : pathlib.Path or None
        The run folder (``None``: nothing to do).
    cfg : TrainConfig
        The settings of this run.
    overwrite : bool
        Start afresh when the folder holds a run with other settings (its results are removed).
    owner : bool
        Whether this process owns the folder (rank 0 under ``torchrun``; other ranks only read).

    Raises
    ------
    ScaleFitError
        When another process holds the folder, or it was started with other settings.
    """
    if run_dir is None or not owner:
        yield
        return
    fd = _lock(run_dir)
    try:
        saved = _saved_config(run_dir)
        current = cfg.to_dict()
        diff = config_diff(saved, current) if saved is not None else []
        if diff and not overwrite:
            shown = ", ".join(f"{k} ({saved.get(k)!r} → {current.get(k)!r})" for k in diff[:8])
            raise ScaleFitError(
                f"Run folder {run_dir} was started with other settings: {shown}. Use another "
                "--out, or --overwrite to discard it."
            )
        if diff or (overwrite and saved is not None):
            _clear(run_dir)
        if diff or saved is None or not (run_dir / "train_config.json").exists():
            atomic_write_json(run_dir / "train_config.json", current)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
