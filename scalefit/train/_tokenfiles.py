"""Token files of a token folder: the metadata checked, the ``.bin`` files memory-mapped.

A token folder (``meta.json`` with ``train.bin``/``val.bin``, or a shard ``manifest.json`` with
its shards) may come from anywhere: its metadata is read with the bounded JSON reader and every
field the trainer uses is checked, its token files must be regular files whose size matches
their dtype (they are memory-mapped, never read whole); the readers of
:mod:`scalefit.train.data` refuse a batch holding a token id outside the vocabulary.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..core._io import MAX_CONFIG_BYTES, check_input_file, read_json
from ..core.errors import ScaleFitError

#: Token dtypes a token folder may use.
TOKEN_DTYPES = ("uint8", "uint16", "uint32")
#: Largest vocabulary a token folder may declare (the embedding is allocated from it).
MAX_VOCAB = 1 << 22
#: Largest token file (bytes) checked before it is memory-mapped (never read whole).
MAX_TOKEN_FILE_BYTES = 1 << 44


def read_token_meta(path: str | os.PathLike, *, what: str) -> dict:
    """Read and check a token folder's metadata (``meta.json`` or ``manifest.json``).

    Parameters
    ----------
    path : path-like
        The JSON file.
    what : str
        What it is, for messages.

    Returns
    -------
    dict
        The metadata, with ``dtype`` one of :data:`TOKEN_DTYPES`, ``vocab`` a whole number in
        ``[2, min(MAX_VOCAB, largest id of the dtype + 1)]`` and positive whole
        ``train_tokens``, ``val_tokens`` and ``val_bytes``.

    Raises
    ------
    ScaleFitError
        Naming the file and the first field that is missing or wrong.
    """
    meta = read_json(path, what=what, max_bytes=MAX_CONFIG_BYTES)
    if not isinstance(meta, dict):
        raise ScaleFitError(f"{path}: a {what} must be a JSON object; got {type(meta).__name__}.")
    dtype = meta.get("dtype")
    if dtype not in TOKEN_DTYPES:
        raise ScaleFitError(
            f"{path}: 'dtype' must be one of {list(TOKEN_DTYPES)}; got {str(dtype)[:40]!r}."
        )
    top = min(MAX_VOCAB, int(np.iinfo(dtype).max) + 1)
    many = (1, 1 << 62)
    checks = {"vocab": (2, top), "train_tokens": many, "val_tokens": many, "val_bytes": many}
    for key, (low, high) in checks.items():
        value = meta.get(key)
        if type(value) is not int or not low <= value <= high:
            raise ScaleFitError(
                f"{path}: '{key}' must be a whole number in [{low:,}, {high:,}]; got "
                f"{str(value)[:40]!r}."
            )
    return meta


def map_tokens(path: Path, dtype: str, *, tokens: int | None = None) -> np.ndarray:
    """Memory-map a token file (a regular file, never read whole); wrong sizes are one line.

    Parameters
    ----------
    path : path-like
        The ``.bin`` file of raw token ids.
    dtype : str
        One of :data:`TOKEN_DTYPES`.
    tokens : int, optional
        The number of tokens it must hold.

    Returns
    -------
    numpy.memmap
        The read-only token array.
    """
    st = check_input_file(path, what="token file (.bin)", max_bytes=MAX_TOKEN_FILE_BYTES)
    size = np.dtype(dtype).itemsize
    if st.st_size == 0 or st.st_size % size:
        raise ScaleFitError(
            f"{path}: {st.st_size:,} bytes is not a whole, non-zero number of {dtype} tokens."
        )
    if tokens is not None and st.st_size != tokens * size:
        raise ScaleFitError(
            f"{path}: missing or not {tokens} tokens as the metadata says "
            f"({st.st_size // size:,} found)."
        )
    try:
        return np.memmap(path, dtype=dtype, mode="r")
    except (OSError, ValueError) as exc:
        raise ScaleFitError(f"{path}: cannot map the token file ({exc}).") from None
