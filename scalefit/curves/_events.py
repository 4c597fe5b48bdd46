"""TensorBoard event files read record by record, every length and checksum checked.

An event file is a sequence of records: an 8-byte little-endian length, the masked CRC-32C of
those 8 bytes, the data (an ``Event`` protocol buffer) and the masked CRC-32C of the data. A
length is checked against what the file holds before anything is read, a checksum that does not
match is reported (never taken as the end of the file), and each file is read once, so a folder
of many small files takes time in proportion to its bytes. Only the scalar values are kept.
"""

from __future__ import annotations

import os
import struct
import warnings
from collections.abc import Iterator
from pathlib import Path

from ..core._io import open_input
from ..core.errors import ScaleFitError

#: Largest record accepted (bytes); a scalar event is under 200.
MAX_RECORD = 64 << 20
_WHAT = "TensorBoard event file"


def _crc_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C (Castagnoli) of ``data``, as TFRecord files store it."""
    crc, table = 0xFFFFFFFF, _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def iter_records(path: str | os.PathLike) -> Iterator[bytes]:
    """Yield the data of each record of an event file, checked.

    An incomplete last record (a writer killed mid-record) ends the file with a warning naming
    the bytes left out; a checksum that does not match or a length larger than
    :data:`MAX_RECORD` or than the file is a :class:`~scalefit.core.errors.ScaleFitError`.
    """
    with open_input(path, what=_WHAT, max_bytes=1 << 40) as fh:
        size, offset = os.fstat(fh.fileno()).st_size, 0
        while head := fh.read(12):
            left = size - offset
            if len(head) == 12:
                (length,) = struct.unpack("<Q", head[:8])
                if struct.unpack("<I", head[8:])[0] != masked_crc32c(head[:8]):
                    raise _corrupt(path, offset, "the checksum of its length does not match")
                if length > MAX_RECORD:
                    raise _corrupt(
                        path, offset, f"it claims {length:,} bytes (at most {MAX_RECORD:,})"
                    )
            if len(head) < 12 or length + 16 > left:
                warnings.warn(
                    f"{path}: the last {left:,} bytes are an incomplete record (a writer "
                    "stopped mid-record?); they are left out.",
                    UserWarning,
                    stacklevel=2,
                )
                return
            data, crc = fh.read(length), fh.read(4)
            if struct.unpack("<I", crc)[0] != masked_crc32c(data):
                raise _corrupt(path, offset, "the checksum of its data does not match")
            yield data
            offset += length + 16


def _corrupt(path, offset: int, why: str) -> ScaleFitError:
    return ScaleFitError(
        f"{path}: corrupt {_WHAT}: the record at byte {offset:,} is damaged ({why}); the file "
        "is not read past a damaged record (restore it, or move it out of the folder)."
    )


def read_scalars(folder: Path) -> dict[str, dict[int, float]]:
    """The scalar series ``{tag: {step: value}}`` of the event files directly in ``folder``.

    Files are read in name order (their names start with the time they were opened). A step
    logged again (a resumed run) replaces the value and every later step of that tag logged
    before it, as TensorBoard's own reader purges the orphaned steps of a restarted run.
    """
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto import event_pb2

    series: dict[str, dict[int, float]] = {}
    plugins: dict[str, str] = {}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        if not path.is_file():
            continue
        for data in iter_records(path):
            try:
                event = event_pb2.Event.FromString(data)
            except DecodeError:
                raise ScaleFitError(
                    f"{path}: corrupt {_WHAT}: a record whose checksum matches is not an event."
                ) from None
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name:
                    plugins[value.tag] = value.metadata.plugin_data.plugin_name
                try:
                    number = _scalar(value, plugins.get(value.tag))
                except (TypeError, ValueError) as exc:
                    raise ScaleFitError(
                        f"{path}: corrupt {_WHAT}: the value of tag {value.tag!r} at step "
                        f"{event.step} is not a scalar ({exc})."
                    ) from None
                if number is not None:
                    _add(series.setdefault(value.tag, {}), int(event.step), number)
    return series


def _scalar(value, plugin: str | None) -> float | None:
    """The number of a summary value that is a scalar (TF1 ``simple_value`` or a rank-0 tensor)."""
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if not value.HasField("tensor") or plugin != "scalars" or value.tensor.tensor_shape.dim:
        return None  # only a rank-0 tensor: its declared shape is never allocated
    from tensorboard.util import tensor_util

    array = tensor_util.make_ndarray(value.tensor)  # TypeError, ValueError: not a tensor
    if array.dtype.kind not in "fiu":
        return None  # a text or other non-numeric tensor: not a curve
    return float(array)


def _add(steps: dict[int, float], step: int, number: float) -> None:
    while steps and next(reversed(steps)) >= step:  # steps are kept in increasing order
        steps.popitem()
    steps[step] = number
