"""Atomic file writes: a reader never sees a half-written file, a kill never leaves one."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file in the same folder, fsync, rename).

    Parameters
    ----------
    path : path-like
        Destination. Parent folders are created.
    data : bytes
        Content.

    Returns
    -------
    pathlib.Path
        The destination path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual file mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically; see :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented JSON to ``path`` atomically (NaN and inf written as null)."""
    return atomic_write_text(path, json.dumps(_json_safe(obj), indent=2, allow_nan=False) + "\n")


def atomic_write_csv(path: str | os.PathLike, frame) -> Path:
    """Write a pandas DataFrame to CSV atomically (no index column)."""
    return atomic_write_text(path, frame.to_csv(index=False))


def atomic_savefig(fig, path: str | os.PathLike, **kwargs) -> Path:
    """Save a matplotlib figure atomically; the format follows the file's suffix."""
    import io

    path = Path(path)
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lstrip(".") or "png", **kwargs)
    return atomic_write_bytes(path, buf.getvalue())


def _json_safe(obj: Any) -> Any:
    """Convert numpy scalars/arrays and non-finite floats into JSON-safe values."""
    import math

    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _json_safe(obj.tolist())
    if isinstance(obj, np.generic):
        return _json_safe(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def load_torch(path: str | os.PathLike, *, what: str, map_location: Any = "cpu") -> Any:
    """Load a ``torch.save`` file as tensors and plain data only; never run code from it.

    ``torch.load(weights_only=True)`` refuses any pickled object that is not a tensor, a plain
    container or a number/string, so a crafted file cannot execute anything.

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What the file should be, for messages (e.g. ``"toy model"``).
    map_location : optional
        Passed to :func:`torch.load`.

    Returns
    -------
    object
        The loaded payload.

    Raises
    ------
    ScaleFitError
        If the file is missing, unreadable, not a torch file, or holds anything but tensors and
        plain data.
    """
    import pickle
    import zipfile

    import torch

    from .errors import ScaleFitError

    path = Path(path)
    if not path.is_file():
        raise ScaleFitError(f"{path}: no such file; expected a {what} file.")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()
        detail = next((ln for ln in first if "Unsupported" in ln or "global" in ln), "")
        raise ScaleFitError(
            f"{path}: refused to load: a {what} file may hold only tensors and plain data "
            f"(numbers, strings, lists, dicts){'; ' + detail.strip() if detail else ''}."
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, KeyError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ScaleFitError(f"{path}: not a readable {what} file ({msg}).") from None
