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
* every ``.safetensors`` file is opened by the safetensors library itself, which checks its
  header (length, JSON, dtypes, shapes, offsets) without reading the tensors;
* a sharded checkpoint's index names plain files of the folder.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ..core._io import (
    MAX_CONFIG_BYTES,
    _kind,
    check_input_file,
    cpu_room,
    read_json,
)
from ..core.errors import ScaleFitError, one_line

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
    for name, limit in JSON_FILES.items():  # config.json first: it must exist
        path = folder / name
        if name != "config.json" and not os.path.lexists(path):
            continue
        data = read_json(
            path, what=f"model file ({name})", max_bytes=limit, max_int_digits=HF_INT_DIGITS
        )
        if not isinstance(data, dict):
            raise ScaleFitError(f"{path}: expected a JSON object; got {type(data).__name__}.")
        if "auto_map" in data:
            raise ScaleFitError(
                f"{path}: declares 'auto_map' (custom model or tokenizer code); scalefit never "
                "runs code from a model folder."
            )
        if name == "config.json":
            config = data
            _check_config(path, config, dtype_bytes)
        elif name.endswith(".index.json"):
            _check_index(folder, path, data)
    for name, limit in TEXT_FILES.items():
        if os.path.lexists(folder / name):
            check_input_file(folder / name, what=f"tokenizer file ({name})", max_bytes=limit)
    for path in sorted(folder.glob("*.safetensors")):
        check_safetensors(path)
    for path in sorted(folder.glob("*.bin")):
        check_input_file(path, what="weight file (.bin)", max_bytes=MAX_WEIGHT_BYTES)
    return config


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


def _check_config(path: Path, config: dict, dtype_bytes: int) -> None:
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


def _check_index(folder: Path, path: Path, index: dict) -> None:
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ScaleFitError(f"{path}: 'weight_map' must be an object of tensor → file names.")
    for file in set(weight_map.values()):
        if not isinstance(file, str) or not _PLAIN_NAME.match(file):
            raise ScaleFitError(
                f"{path}: 'weight_map' names {str(file)[:80]!r}; expected plain file names in "
                f"the model folder."
            )
        check_input_file(folder / file, what="weight file", max_bytes=MAX_WEIGHT_BYTES)


def check_safetensors(path: str | os.PathLike) -> None:
    """Check a ``.safetensors`` file with the safetensors library before transformers loads it.

    The file must be a regular file under :data:`MAX_WEIGHT_BYTES`; the library then refuses a
    header longer than the file or than 100 MB, a header that is not a JSON object of tensors
    with a known dtype and shape, and data offsets that overlap, leave gaps or run past the file.

    Parameters
    ----------
    path : path-like
        The file.

    Raises
    ------
    ScaleFitError
        Naming the file and the library's reason.
    """
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    check_input_file(path, what="weight file (.safetensors)", max_bytes=MAX_WEIGHT_BYTES)
    try:
        with safe_open(path, framework="numpy"):
            pass
    except SafetensorError as exc:
        raise safetensors_refusal(path, exc) from None


def safetensors_refusal(path: Path, exc: BaseException) -> ScaleFitError:
    """One line naming a weight file the safetensors library refused, and its reason."""
    reason = one_line(exc, 300, whole=True)
    return ScaleFitError(
        f"{path}: refused by safetensors ({reason}); expected the weights as the library writes "
        "them."
    )
