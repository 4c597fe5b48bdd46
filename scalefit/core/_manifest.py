"""Checksums of the checkpoint files scalefit writes, checked before any of their bytes is parsed.

Every folder that holds checkpoints (a trainer run folder with ``checkpoint.pt`` and the FSDP
``checkpoint.dcp/step-*`` shards, a toy run folder with ``state.pt`` and ``model.pt``) carries
``checksums.json``: the SHA-256 and size of each checkpoint file, keyed by its path relative to
the folder. It is written atomically after the files it covers. A reader hashes a file's raw
bytes and refuses it when the digest is not the recorded one, or when the folder has no
``checksums.json`` at all, before torch or the unpickler sees a byte.

A file with a fixed name (``checkpoint.pt``, ``state.pt``) is replaced in three atomic steps:
``checksums.json`` first lists the new digest as *pending* beside the current one, then the file
is replaced, then ``checksums.json`` is rewritten with the new digest only. A kill at any moment
therefore leaves a file whose digest is accepted: the previous checkpoint or the new one.

The checksums guard against files changed after scalefit wrote them (a replaced shard, a
downloaded ``.metadata``, a truncated copy). They are not a signature: whoever can write the
folder can write a matching ``checksums.json``. What keeps a crafted file from running code is
the loaders themselves (``weights_only`` torch loads and the restricted DCP metadata reader).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ._io import atomic_write_bytes, atomic_write_json, check_input_file, open_input, read_json
from .errors import ScaleFitError, one_line

#: The file name of a folder's checksums.
MANIFEST_FILE = "checksums.json"
#: The ``format`` value that marks a scalefit checksum file.
FORMAT = "scalefit-checksums"
VERSION = 1
#: Largest ``checksums.json`` read (bytes).
MAX_MANIFEST_BYTES = 16 << 20
#: Largest checkpoint file (``checkpoint.pt``, ``state.pt``, ``model.pt``) loaded (bytes).
MAX_CHECKPOINT_BYTES = 1 << 36
_HEX = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


def digest_bytes(data: bytes) -> dict:
    """The manifest entry of ``data``: ``{"sha256": hex digest, "bytes": length}``."""
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def _digest_stream(fh) -> dict:
    h, n = hashlib.sha256(), 0
    while chunk := fh.read(_CHUNK):
        h.update(chunk)
        n += len(chunk)
    return {"sha256": h.hexdigest(), "bytes": n}


def digest_file(path: str | os.PathLike) -> dict:
    """The manifest entry of a file scalefit has just written (streamed; any size)."""
    with open(path, "rb") as fh:
        return _digest_stream(fh)


def _rel_ok(rel: object) -> bool:
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\\" in rel:
        return False
    return all(part not in ("", ".", "..") for part in rel.split("/"))


def _entry_ok(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and set(entry) == {"sha256", "bytes"}
        and isinstance(entry["sha256"], str)
        and _HEX.fullmatch(entry["sha256"]) is not None
        and type(entry["bytes"]) is int
        and entry["bytes"] >= 0
    )


def _read(folder: Path) -> dict | None:
    """``{"files": ..., "pending": ...}`` of ``folder``'s manifest; ``None`` when there is none."""
    path = folder / MANIFEST_FILE
    if not os.path.lexists(path):
        return None
    data = read_json(path, what="checksum file", max_bytes=MAX_MANIFEST_BYTES)
    ok = (
        isinstance(data, dict)
        and data.get("format") == FORMAT
        and data.get("version") == VERSION
        and isinstance(data.get("files"), dict)
        and isinstance(data.get("pending", {}), dict)
    )
    tables = (data.get("files", {}), data.get("pending", {})) if ok else ()
    for table in tables:
        ok = ok and all(_rel_ok(k) and _entry_ok(v) for k, v in table.items())
    if not ok:
        raise ScaleFitError(
            f"{path}: not a scalefit checksum file (expected format {FORMAT!r} version "
            f"{VERSION} with a table of SHA-256 digests); refusing the files it would cover."
        )
    return {"files": data["files"], "pending": data.get("pending", {})}


def _load(folder: Path, shown: Path, remedy: str, what: str = "checkpoint") -> dict:
    """``folder``'s checksums, or a refusal naming ``shown`` when they are missing or invalid."""
    try:
        manifest = _read(folder)
    except ScaleFitError as exc:
        raise ScaleFitError(f"{shown}: refused: {exc} {remedy}") from None
    if manifest is None:
        raise ScaleFitError(
            f"{shown}: refused as a {what}: its folder has no {MANIFEST_FILE}, so scalefit did "
            f"not write it (or an older version did, before checkpoints carried checksums); "
            f"{remedy}"
        )
    return manifest


def _accepted(folder: Path, rel: str, shown: Path, remedy: str, what: str) -> list[dict]:
    """The entries a file may match (recorded and pending); refuses when there are none."""
    manifest = _load(folder, shown, remedy, what)
    entries = [t[rel] for t in (manifest["files"], manifest["pending"]) if rel in t]
    if not entries:
        raise ScaleFitError(
            f"{shown}: refused as a {what}: {folder / MANIFEST_FILE} does not list this file, "
            f"so scalefit did not write it; {remedy}"
        )
    return entries


def listed(folder: str | os.PathLike, prefix: str, *, shown: Path, remedy: str) -> set[str]:
    """The files under ``prefix`` that ``folder``'s checksums list (recorded or pending).

    Raises
    ------
    ScaleFitError
        When the folder has no valid ``checksums.json``.
    """
    manifest = _load(Path(folder), shown, remedy)
    return {rel for t in manifest.values() for rel in t if rel.startswith(prefix)}


def _match(got: dict, entries: list[dict], shown: Path, folder: Path, remedy: str) -> None:
    if got not in entries:
        raise ScaleFitError(
            f"{shown}: refused: its SHA-256 ({got['sha256'][:12]}…, {got['bytes']:,} bytes) does "
            f"not match {folder / MANIFEST_FILE} (the file changed after scalefit wrote it); "
            f"{remedy}"
        )


def _relative(folder: Path, path: Path) -> str:
    return path.relative_to(folder).as_posix()


def open_verified(
    path: str | os.PathLike,
    *,
    folder: str | os.PathLike | None = None,
    what: str,
    remedy: str,
    max_bytes: int,
):
    """Open a checkpoint file whose raw bytes match its folder's checksums, positioned at 0.

    The file is opened once (non-blocking, checked to be a regular file through the descriptor),
    hashed, compared with ``checksums.json`` and rewound: the bytes a caller then parses are
    the bytes that were checked (a file renamed into place afterwards is not read).

    Parameters
    ----------
    path : path-like
        The file.
    folder : path-like, optional
        The folder whose ``checksums.json`` covers the file (default: the file's folder).
    what : str
        What the file should be, for messages.
    remedy : str
        What the user can do, appended to a refusal.
    max_bytes : int
        The largest size accepted.

    Returns
    -------
    io.BufferedReader
        The open file (the caller closes it).

    Raises
    ------
    ScaleFitError
        Unreadable, not listed, no checksum file, or a digest that does not match.
    """
    path = Path(path)
    folder = Path(folder) if folder is not None else path.parent
    check_input_file(path, what=f"{what} file", max_bytes=max_bytes)
    entries = _accepted(folder, _relative(folder, path), path, remedy, what)
    fh = open_input(path, what=f"{what} file", max_bytes=max_bytes)
    try:
        _match(_digest_stream(fh), entries, path, folder, remedy)
        fh.seek(0)
    except BaseException:
        fh.close()
        raise
    return fh


def verify_file(
    folder: str | os.PathLike, rel: str, *, what: str, remedy: str, max_bytes: int
) -> int:
    """Check that ``folder/rel`` matches ``folder``'s checksums; return its size in bytes.

    Raises
    ------
    ScaleFitError
        As :func:`open_verified`.
    """
    folder = Path(folder)
    path = folder / rel
    with open_verified(path, folder=folder, what=what, remedy=remedy, max_bytes=max_bytes) as fh:
        return os.fstat(fh.fileno()).st_size


def verify_bytes(
    folder: str | os.PathLike, rel: str, data: bytes, *, remedy: str, what: str = "checkpoint"
) -> None:
    """Check bytes already read from ``folder/rel`` against ``folder``'s checksums.

    Raises
    ------
    ScaleFitError
        Not listed, no checksum file, or a digest that does not match.
    """
    folder = Path(folder)
    entries = _accepted(folder, rel, folder / rel, remedy, what)
    _match(digest_bytes(data), entries, folder / rel, folder, remedy)


def recorded_names(folder: str | os.PathLike, *, pending: bool = False) -> list[str]:
    """The files ``folder``'s checksums list; [] when there are none.

    ``pending=True`` adds those announced by a save that may have been killed. An unreadable
    ``checksums.json`` counts as none (it is refused when a file is loaded).
    """
    manifest = _read_own(Path(folder))
    return sorted(set(manifest["files"]) | (set(manifest["pending"]) if pending else set()))


def _write(folder: Path, files: dict, pending: dict | None = None) -> None:
    doc = {"format": FORMAT, "version": VERSION, "files": dict(sorted(files.items()))}
    if pending:
        doc["pending"] = dict(sorted(pending.items()))
    atomic_write_json(folder / MANIFEST_FILE, doc)


def record(
    folder: str | os.PathLike,
    *,
    write: dict[str, bytes] | None = None,
    written: Iterable[str] = (),
    forget: Callable[[str], bool] | None = None,
) -> None:
    """Write checkpoint files atomically and record their checksums, a kill-safe update.

    Only the process that owns ``folder`` (it holds the folder's lock) calls this.

    Parameters
    ----------
    folder : path-like
        The checkpoint folder.
    write : dict, optional
        ``{relative path: bytes}`` to write (atomically) and record.
    written : iterable of str
        Relative paths of files already complete on disk (e.g. DCP shards) to hash and record.
    forget : callable, optional
        Entries of the previous checksums for which ``forget(relative path)`` is true are
        dropped from the new ones (files about to be removed).
    """
    folder = Path(folder)
    write = write or {}
    old = _read_own(folder)["files"]
    new = {rel: digest_bytes(data) for rel, data in write.items()}
    new.update({rel: digest_file(folder / rel) for rel in written})
    if write:  # announce the new digests, then replace the files
        _write(folder, old, new)
        for rel, data in write.items():
            atomic_write_bytes(folder / rel, data)
    keep = {k: v for k, v in old.items() if k not in new and not (forget and forget(k))}
    _write(folder, {**keep, **new})


def save_torch(folder: str | os.PathLike, name: str, payload: Any, **kw: Any) -> None:
    """``torch.save`` ``payload`` as ``folder/name`` through :func:`record` (``kw`` passed on)."""
    import torch

    buf = io.BytesIO()
    torch.save(payload, buf)
    record(folder, write={name: buf.getvalue()}, **kw)


def forget_files(folder: str | os.PathLike, rels: Iterable[str]) -> None:
    """Remove files from ``folder`` and then their checksums (owner only)."""
    folder = Path(folder)
    rels = set(rels)
    for rel in rels:
        (folder / rel).unlink(missing_ok=True)
    old = _read_own(folder)["files"]
    if any(rel in old for rel in rels):
        _write(folder, {k: v for k, v in old.items() if k not in rels})


def _read_own(folder: Path) -> dict:
    """``folder``'s checksums, empty when missing or unreadable (a load refuses those, not this)."""
    try:
        manifest = _read(folder)
    except ScaleFitError:
        manifest = None
    return manifest or {"files": {}, "pending": {}}


def weights_only_refusal(path, what: str, exc: BaseException) -> ScaleFitError:
    """One line for ``torch.load(weights_only=True)``'s refusal of ``path``: the file and why."""
    lines = str(exc).strip().splitlines()
    detail = next((ln for ln in lines if re.search("unsupported|global", ln, re.I)), "")
    return ScaleFitError(
        f"{path}: refused to load: a {what} file may hold only tensors and plain data "
        f"(numbers, strings, lists, dicts){'; ' + detail.strip().rstrip('.') if detail else ''}."
    )


def load_torch(
    path: str | os.PathLike,
    *,
    what: str,
    map_location: Any = "cpu",
    remedy: str = "write it again with scalefit.",
) -> Any:
    """Load a checkpoint scalefit wrote, as tensors and plain data only; never run code from it.

    The file's raw bytes are first checked against its folder's ``checksums.json``
    (this module): a file scalefit did not write, or one changed since, is refused
    before any byte is parsed. Then ``torch.load(weights_only=True)`` refuses any pickled object
    that is not a tensor, a plain container or a number/string, so even a crafted file with a
    matching checksum cannot execute anything.

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What the file should be, for messages (e.g. ``"toy model"``).
    map_location : optional
        Passed to :func:`torch.load`.
    remedy : str
        What the user can do about a refused file (ends the message).

    Returns
    -------
    object
        The loaded payload.

    Raises
    ------
    ScaleFitError
        If the file is missing, unreadable, not covered by matching checksums, not a torch file,
        or holds anything but tensors and plain data.
    """
    import pickle
    import zipfile

    import torch

    path = Path(path)
    fh = open_verified(path, what=what, remedy=remedy, max_bytes=MAX_CHECKPOINT_BYTES)
    try:
        with fh:
            return torch.load(fh, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        raise weights_only_refusal(path, what, exc) from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, KeyError) as exc:
        raise ScaleFitError(f"{path}: not a readable {what} file ({one_line(exc)}).") from None
