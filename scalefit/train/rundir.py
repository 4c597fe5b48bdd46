"""Run-folder rules of the trainer: one process at a time, and no silent change of settings.

:func:`claim` takes an OS file lock (:func:`scalefit.core._io.folder_lock`, released by the kernel
when the process dies, so a killed run never leaves a stale lock), then compares the
settings with the ones the folder was started with (``train_config.json``, or the checkpoint's
for folders written before that file existed). A difference is refused with the keys named;
``overwrite=True`` removes the folder's previous results first, without reading them (so a folder
whose checkpoint is refused, e.g. one without ``checksums.json``, can always be started afresh).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from ..core._io import MAX_CONFIG_BYTES, atomic_write_json, folder_lock, inside, read_json
from ..core._manifest import MANIFEST_FILE, load_torch
from ..core.errors import ScaleFitError
from .config import TrainConfig, config_diff

#: Files of a run folder that ``overwrite=True`` removes (the checksums last).
RUN_FILES = ("checkpoint.pt", "history.csv", "diagnostics.csv", "run.json", "train_config.json")
CHECKPOINT_DIR = "checkpoint.dcp"  # distributed (FSDP) checkpoint folder
#: What to do about a refused checkpoint.
REMEDY = "to start the run afresh, use --overwrite (train(..., overwrite=True))."


def _saved_config(run_dir: Path) -> dict | None:
    path = run_dir / "train_config.json"
    if os.path.lexists(path):
        saved = read_json(path, what="trainer configuration", max_bytes=MAX_CONFIG_BYTES)
        if not isinstance(saved, dict):
            raise ScaleFitError(
                f"{path}: not a trainer configuration (expected a JSON object of settings); "
                f"{REMEDY}"
            )
        return saved
    ckpt = run_dir / "checkpoint.pt"
    if os.path.lexists(ckpt):
        state = load_torch(ckpt, what="trainer checkpoint", remedy=REMEDY)
        if not isinstance(state, dict) or not isinstance(state.get("config"), dict):
            raise ScaleFitError(f"{ckpt}: not a trainer checkpoint (no 'config' table); {REMEDY}")
        return state["config"]
    return None


def _clear(run_dir: Path) -> None:
    import shutil

    dcp = run_dir / CHECKPOINT_DIR
    if dcp.is_dir() and not dcp.is_symlink():
        shutil.rmtree(dcp)
    for name in (*RUN_FILES, CHECKPOINT_DIR, MANIFEST_FILE):  # a link in the folder's place too
        _unlink(run_dir / name)


def _unlink(path: Path) -> None:
    """Remove a file, link, FIFO or device entry (never what a link points to)."""
    if os.path.lexists(path) and not (path.is_dir() and not path.is_symlink()):
        path.unlink()


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
    with folder_lock(run_dir, wait=False, what="training run folder"):
        for name in (*RUN_FILES, CHECKPOINT_DIR, MANIFEST_FILE, "result.json", "cooldowns"):
            inside(run_dir, name, what="run folder entry")  # no link out of the run folder
        saved = None if overwrite else _saved_config(run_dir)
        current = cfg.to_dict()
        diff = config_diff(saved, current) if saved is not None else []
        if diff:
            shown = ", ".join(f"{k} ({saved.get(k)!r} → {current.get(k)!r})" for k in diff[:8])
            raise ScaleFitError(
                f"Run folder {run_dir} was started with other settings: {shown}. Use another "
                "--out, or --overwrite to discard it."
            )
        if overwrite:
            _clear(run_dir)
        if diff or saved is None or not (run_dir / "train_config.json").exists():
            atomic_write_json(run_dir / "train_config.json", current)
        yield
