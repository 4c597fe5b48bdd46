"""Check a local Hugging Face model folder before transformers reads any of it.

transformers trusts its folder: a ``config.json`` asking for 10⁹ layers allocates them, a
``.safetensors`` header length of 2⁶⁰ bytes or a FIFO named ``tokenizer.json`` ends in a
traceback or a hang. :func:`check_model_folder` reads what transformers would read, with the
package's bounded readers, and refuses anything hostile in one line naming the file:

* every entry of the folder is a regular file or a folder (no FIFO, device, socket or dangling
  link, whatever its name);
* ``config.json`` (and the other JSON files transformers or tokenizers open) is a bounded JSON
  object; ``auto_map`` (custom code) is refused; the size fields are whole numbers in sane
  ranges and the model they describe fits in memory;
* every ``.safetensors`` file has a header length that fits the file and a cap, a header that is
  a JSON object, and tensors whose offsets lie inside the file and match their dtype and shape;
* a sharded checkpoint's index names plain files of the folder.
"""

from __future__ import annotations

import math
import os
import re
import stat
import struct
from pathlib import Path

from .._io import (
    MAX_CONFIG_BYTES,
    _kind,
    check_input_file,
    cpu_room,
    decode_utf8,
    open_input,
    parse_json_text,
    read_json,
)
from ..errors import ScaleFitError

#: Largest ``.safetensors`` header (bytes); the safetensors library refuses larger ones too.
MAX_SAFETENSORS_HEADER = 100_000_000
#: Largest weight file (bytes) looked at.
MAX_WEIGHT_BYTES = 1 << 42
#: Largest tokenizer file (bytes).
MAX_TOKENIZER_BYTES = 1 << 28
#: JSON files of a model folder that transformers or tokenizers parse (name → size limit).
JSON_FILES = {
    "config.json": MAX_CONFIG_BYTES,
    "generation_config.json": MAX_CONFIG_BYTES,
    "tokenizer_config.json": MAX_TOKENIZER_BYTES,
    "special_tokens_map.json": MAX_CONFIG_BYTES,
    "added_tokens.json": MAX_TOKENIZER_BYTES,
    "tokenizer.json": MAX_TOKENIZER_BYTES,
    "vocab.json": MAX_TOKENIZER_BYTES,
    "model.safetensors.index.json": MAX_TOKENIZER_BYTES,
    "pytorch_model.bin.index.json": MAX_TOKENIZER_BYTES,
}
#: Other tokenizer files (name → size limit): only their kind and size are checked.
TEXT_FILES = {
    "merges.txt": MAX_TOKENIZER_BYTES,
    "vocab.txt": MAX_TOKENIZER_BYTES,
    "tokenizer.model": MAX_TOKENIZER_BYTES,
    "spiece.model": MAX_TOKENIZER_BYTES,
    "sentencepiece.bpe.model": MAX_TOKENIZER_BYTES,
}
#: Size fields of a config (any family's spelling) → the largest value accepted. ``None`` is
#: allowed (transformers then derives the value).
SIZE_LIMITS = {
    "num_hidden_layers": 1024,
    "n_layer": 1024,
    "hidden_size": 1 << 16,
    "n_embd": 1 << 16,
    "intermediate_size": 1 << 18,
    "n_inner": 1 << 18,
    "num_attention_heads": 1024,
    "n_head": 1024,
    "num_key_value_heads": 1024,
    "head_dim": 4096,
    "vocab_size": 1 << 22,
    "max_position_embeddings": 1 << 21,
    "n_positions": 1 << 21,
    "n_ctx": 1 << 21,
    "type_vocab_size": 1 << 16,
}
#: Bytes per element of the safetensors dtypes.
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
#: Most digits of an integer in a model folder's JSON (tokenizers write ``model_max_length`` as
#: int(1e30), 31 digits).
HF_INT_DIGITS = 64
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,250}$")


def check_model_folder(folder: str | os.PathLike, *, dtype_bytes: int = 4) -> dict:
    """Check a local model folder as described in the module docstring.

    Parameters
    ----------
    folder : path-like
        The model folder.
    dtype_bytes : int
        Bytes per weight of the dtype the model will be loaded in (for the memory estimate).

    Returns
    -------
    dict
        The parsed ``config.json``.

    Raises
    ------
    ScaleFitError
        Naming the file and what is wrong with it.
    """
    folder = Path(folder)
    _check_entries(folder)
    config = read_json(
        folder / "config.json",
        what="model configuration (config.json)",
        max_bytes=MAX_CONFIG_BYTES,
        max_int_digits=HF_INT_DIGITS,
    )
    if not isinstance(config, dict):
        raise ScaleFitError(
            f"{folder / 'config.json'}: a model configuration must be a JSON object; got "
            f"{type(config).__name__}."
        )
    _check_config(folder / "config.json", config, dtype_bytes)
    for name, limit in JSON_FILES.items():
        path = folder / name
        if name != "config.json" and os.path.lexists(path):
            data = read_json(
                path, what=f"model file ({name})", max_bytes=limit, max_int_digits=HF_INT_DIGITS
            )
            if not isinstance(data, dict):
                raise ScaleFitError(f"{path}: expected a JSON object; got {type(data).__name__}.")
            if "auto_map" in data:
                raise ScaleFitError(_custom_code(path))
            if name == "tokenizer.json":
                _check_tokenizer(path, data)
    for name, limit in TEXT_FILES.items():
        if os.path.lexists(folder / name):
            check_input_file(folder / name, what=f"tokenizer file ({name})", max_bytes=limit)
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if os.path.lexists(folder / index):
            _check_index(folder, folder / index)
    for path in sorted(folder.glob("*.safetensors")):
        check_safetensors(path)
    for path in sorted(folder.glob("*.bin")):
        check_input_file(path, what="weight file (.bin)", max_bytes=MAX_WEIGHT_BYTES)
    return config


def _check_tokenizer(path: Path, data: dict) -> None:
    """Build the tokenizer once from the checked JSON (tokenizers raises a bare Exception)."""
    import json

    try:
        import tokenizers
    except ImportError:  # pragma: no cover - transformers' fast tokenizers need it
        return
    try:
        tokenizers.Tokenizer.from_str(json.dumps(data))
    except Exception as exc:  # noqa: BLE001 - the tokenizers package raises Exception itself
        msg = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise ScaleFitError(f"{path}: not a tokenizers file ({msg}).") from None


def _check_entries(folder: Path) -> None:
    """Every entry is a regular file or a folder (links followed); nothing else is opened."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        raise ScaleFitError(f"{folder}: cannot list the model folder ({exc.strerror}).") from None
    for entry in entries[:100_000]:
        try:
            mode = os.stat(entry.path).st_mode
        except OSError as exc:
            raise ScaleFitError(
                f"{entry.path}: cannot be read ({exc.strerror or exc}); a model folder holds "
                f"regular files."
            ) from None
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise ScaleFitError(
                f"{entry.path}: is {_kind(mode)}; a model folder holds regular files only."
            )


def _custom_code(path: Path) -> str:
    return (
        f"{path}: declares 'auto_map' (custom model or tokenizer code); scalefit never runs code "
        f"from a model folder."
    )


def _check_config(path: Path, config: dict, dtype_bytes: int) -> None:
    if "auto_map" in config:
        raise ScaleFitError(_custom_code(path))
    if not isinstance(config.get("model_type"), str):
        raise ScaleFitError(f"{path}: 'model_type' must be a string naming the architecture.")
    archs = config.get("architectures")
    if archs is not None and not (
        isinstance(archs, list) and all(isinstance(a, str) for a in archs)
    ):
        raise ScaleFitError(f"{path}: 'architectures' must be a list of class names.")
    for key, high in SIZE_LIMITS.items():
        value = config.get(key)
        if value is None:
            continue
        if type(value) is not int or not 1 <= value <= high:
            raise ScaleFitError(
                f"{path}: '{key}' must be a whole number in [1, {high:,}]; got {str(value)[:40]!r}."
            )
    need = _estimate_bytes(config, dtype_bytes)
    have = cpu_room()
    if have is not None and need > have:
        raise ScaleFitError(
            f"{path}: the configured model needs about {need / 2**30:,.1f} GiB for its weights; "
            f"{have / 2**30:,.1f} GiB of memory is available."
        )


def _first(config: dict, *keys: str, default: int = 0) -> int:
    for key in keys:
        if isinstance(config.get(key), int):
            return config[key]
    return default


def _estimate_bytes(config: dict, dtype_bytes: int) -> int:
    """Bytes of the weights a config asks for (blocks, embeddings, positions), from above."""
    d = _first(config, "hidden_size", "n_embd", default=768)
    layers = _first(config, "num_hidden_layers", "n_layer", default=12)
    ff = _first(config, "intermediate_size", "n_inner", default=4 * d)
    vocab = _first(config, "vocab_size", default=50_000)
    positions = _first(config, "max_position_embeddings", "n_positions", default=0)
    params = layers * (4 * d * d + 3 * d * ff) + (2 * vocab + positions) * d
    return int(params) * dtype_bytes


def _check_index(folder: Path, path: Path) -> None:
    index = read_json(
        path, what="checkpoint index", max_bytes=MAX_TOKENIZER_BYTES, max_int_digits=HF_INT_DIGITS
    )
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ScaleFitError(f"{path}: 'weight_map' must be an object of tensor → file names.")
    for file in set(weight_map.values()):
        if not isinstance(file, str) or not _PLAIN_NAME.match(file):
            raise ScaleFitError(
                f"{path}: 'weight_map' names {str(file)[:80]!r}; expected plain file names in "
                f"the model folder."
            )
        check_input_file(folder / file, what="weight file", max_bytes=MAX_WEIGHT_BYTES)


def check_safetensors(path: str | os.PathLike) -> dict:
    """Check a ``.safetensors`` file's header before any library parses it.

    The first 8 bytes are the header's length (little-endian unsigned 64-bit); it must fit in
    the file and under :data:`MAX_SAFETENSORS_HEADER`. The header must be a JSON object of
    tensors with a known dtype, a shape of whole numbers and data offsets inside the file that
    match the dtype and shape.

    Parameters
    ----------
    path : path-like
        The file.

    Returns
    -------
    dict
        The header.

    Raises
    ------
    ScaleFitError
        Naming the file and what is wrong.
    """
    path = Path(path)
    size = check_input_file(path, what="weight file (.safetensors)", max_bytes=MAX_WEIGHT_BYTES)
    size = size.st_size
    with open_input(path, what="weight file (.safetensors)", max_bytes=MAX_WEIGHT_BYTES) as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise ScaleFitError(f"{path}: {size} bytes, too short for a safetensors file.")
        (n,) = struct.unpack("<Q", head)
        if n > min(MAX_SAFETENSORS_HEADER, size - 8):
            raise ScaleFitError(
                f"{path}: the safetensors header claims {n:,} bytes, but the file holds "
                f"{size - 8:,} after the length (limit {MAX_SAFETENSORS_HEADER:,}); a truncated "
                f"or corrupt file."
            )
        raw = fh.read(n)
    if len(raw) != n:
        raise ScaleFitError(f"{path}: truncated safetensors header.")
    text = decode_utf8(path, raw, expected="a safetensors header (UTF-8 JSON)")
    header = parse_json_text(text, path=path, what="safetensors header", max_nesting=8)
    if not isinstance(header, dict):
        raise ScaleFitError(f"{path}: the safetensors header must be a JSON object.")
    data_bytes = size - 8 - n
    for name, info in header.items():
        if name == "__metadata__":
            if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
                raise ScaleFitError(f"{path}: '__metadata__' must map names to strings.")
            continue
        _check_tensor(path, name, info, data_bytes)
    return header


def _check_tensor(path: Path, name: str, info, data_bytes: int) -> None:
    where = f"{path}: tensor {name[:80]!r}"
    if not isinstance(info, dict) or info.get("dtype") not in DTYPE_BYTES:
        raise ScaleFitError(f"{where}: expected an object with a known 'dtype'.")
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if (
        not isinstance(shape, list)
        or len(shape) > 8
        or not all(type(s) is int and s >= 0 for s in shape)
    ):
        raise ScaleFitError(f"{where}: 'shape' must be a list of whole numbers ≥ 0.")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(type(o) is int for o in offsets)
        or not 0 <= offsets[0] <= offsets[1] <= data_bytes
    ):
        raise ScaleFitError(
            f"{where}: 'data_offsets' must be [begin, end] inside the file's {data_bytes:,} "
            f"data bytes."
        )
    if math.prod(shape) * DTYPE_BYTES[info["dtype"]] != offsets[1] - offsets[0]:
        raise ScaleFitError(f"{where}: its shape and dtype do not match its data offsets.")
