"""Pre-training corpora as memory-mapped token shards, streamed by the trainer with exact resume.

:func:`prepare_shards` reads documents (``.jsonl`` lines with a text field, ``.txt`` files,
``.parquet`` files with ``pyarrow``, or a Hugging Face dataset through ``datasets`` when the
user has network), holds out whole documents for validation, tokenises everything once with a
standard tokenizer from ``tokenizers`` (a GPT-2-style byte-level BPE trained locally on the
training documents, or any ``tokenizer.json`` given by path) and writes

* ``train_00000.bin``, ``train_00001.bin``, … and ``val_00000.bin``, …: raw token ids, uint16 when
  the vocabulary fits (≤ 65,536) else uint32, documents separated by the end-of-text token;
* ``tokenizer.json``: the tokenizer used;
* ``manifest.json``: per shard its token count and sha256, the tokenizer's file and sha256, the
  dtype, vocabulary, separator id, document counts and UTF-8 byte counts (for bits per byte).

:class:`ShardData` memory-maps the shards and reads the training stream *sequentially*: step ``s``
takes rows ``s·B … s·B + B − 1`` of ``seq_len`` tokens (plus one target token) from the
concatenated shards, wrapping around at the end (another epoch). A batch is a function of the step
alone, so a resumed run reads exactly what an uninterrupted one would; :meth:`ShardData.position`
gives the (epoch, shard, offset) of a step, which the trainer records in its checkpoint and checks
on resume.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..core._io import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    check_input_file,
    decode_utf8,
    iter_jsonl_texts,
    parse_json_text,
    read_input_bytes,
)
from ..core._manifest import digest_file
from ..core._validation import Interval, validate
from ..core.errors import ScaleFitError, one_line, require
from ._tokenfiles import MAX_TOKEN_FILE_BYTES, map_tokens, read_token_meta
from .data import MAX_CORPUS_BYTES, TokenSource, read_text, train_bpe

FORMAT = "scalefit-shards-1"
EOT = "<|endoftext|>"


#: A shard's file name in a manifest: a plain name in the shard folder (no folders, no '..').
_SHARD_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}$")
#: Largest tokenizer file read (bytes); real ones are a few MB.
MAX_TOKENIZER_BYTES = 1 << 28


def _sha256(path: Path) -> str:
    check_input_file(path, what="token file (.bin)", max_bytes=MAX_TOKEN_FILE_BYTES)
    return digest_file(path)["sha256"]


def _parquet_docs(path: Path, field: str) -> Iterator[str]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ScaleFitError(
            f"{path}: reading parquet needs pyarrow (pip install pyarrow)."
        ) from None
    check_input_file(path, what="parquet file", max_bytes=MAX_CORPUS_BYTES)
    try:
        table = pq.read_table(path, columns=[field])
    except (OSError, ValueError, KeyError) as exc:  # pyarrow's errors derive from these
        msg = one_line(exc, 200)
        raise ScaleFitError(f"{path}: not a readable parquet file ({msg}).") from None
    yield from (t for t in table.column(field).to_pylist() if isinstance(t, str))


def iter_documents(source: str | os.PathLike, *, text_field: str = "text") -> Iterator[str]:
    """Documents of a local corpus: a ``.jsonl``/``.txt``/``.parquet`` file or a folder of them.

    ``hf:NAME[:SPLIT]`` streams a Hugging Face dataset with ``datasets`` (network needed).
    """
    if str(source).startswith("hf:"):
        yield from _hf_docs(str(source)[3:], text_field)
        return
    path = Path(source)
    if not os.path.lexists(path):
        raise ScaleFitError(f"Corpus {str(source)!r}: no such file or folder.")
    readers = {".jsonl": iter_jsonl_texts, ".parquet": _parquet_docs, ".txt": None}
    # in a folder every entry with a corpus suffix is read (a FIFO or device among them is refused)
    files = sorted(p for p in path.rglob("*") if not p.is_dir()) if path.is_dir() else [path]
    used = [f for f in files if f.suffix in readers]
    if not used:
        raise ScaleFitError(f"Corpus {path} holds no .jsonl, .txt or .parquet files.")
    for f in used:
        check_input_file(f, what="corpus file (.jsonl, .txt or .parquet)", max_bytes=1 << 40)
    for f in used:
        if f.suffix == ".txt":
            yield read_text(f)  # one document per file
        else:
            yield from readers[f.suffix](f, text_field)


def _hf_docs(spec: str, field: str) -> Iterator[str]:  # pragma: no cover - needs network
    datasets = require("datasets", "torch")
    name, _, split = spec.partition(":")
    for record in datasets.load_dataset(name, split=split or "train", streaming=True):
        yield record[field]


def _tokenizer(kind: str, train_docs: list[str], vocab_size: int):
    require("tokenizers", "torch")
    if kind != "bpe":
        path = Path(kind)
        if not os.path.lexists(path):
            raise ScaleFitError(
                f"The 'tokenizer' option must be 'bpe' or a tokenizer.json file. Got {kind!r}."
            )
        return load_tokenizer(path)
    return train_bpe(train_docs, vocab_size, special_tokens=(EOT,))


def load_tokenizer(path: str | os.PathLike):
    """Load a ``tokenizers`` JSON file from its bytes (a bounded regular file, checked JSON).

    Parameters
    ----------
    path : path-like
        The ``tokenizer.json``.

    Returns
    -------
    tokenizers.Tokenizer

    Raises
    ------
    ScaleFitError
        Naming the file: not a regular file, too large, not JSON (or nested too deep), or not a
        tokenizer.
    """
    tk = require("tokenizers", "torch")
    raw = read_input_bytes(path, what="tokenizer (tokenizer.json)", max_bytes=MAX_TOKENIZER_BYTES)
    text = decode_utf8(path, raw, expected="a tokenizer.json as UTF-8 JSON")
    data = parse_json_text(text, path=path, what="tokenizer (tokenizer.json)")
    if not isinstance(data, dict) or "model" not in data:
        raise ScaleFitError(f"{path}: not a tokenizers JSON file (no 'model' object).")
    try:
        return tk.Tokenizer.from_str(text)
    except Exception as exc:  # noqa: BLE001 - tokenizers raises its own Exception type
        msg = one_line(exc, 200)
        raise ScaleFitError(f"{path}: not a tokenizers JSON file ({msg}).") from None


#: The declared constraints of :func:`prepare_shards`' numeric options.
SHARD_OPTIONS = {
    "val_fraction": [Interval(float, 0, 1, closed="neither")],
    "shard_tokens": [Interval(int, 1, None)],
}


def prepare_shards(
    source: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    tokenizer: str = "bpe",
    vocab_size: int = 8192,
    shard_tokens: int = 1 << 24,
    val_fraction: float = 0.05,
    text_field: str = "text",
    seed: int = 0,
) -> Path:
    """Tokenise a corpus once into memory-mapped shards and a manifest (see the module docstring).

    Parameters
    ----------
    source : path-like or str
        A ``.jsonl``/``.txt``/``.parquet`` file, a folder of them, or ``hf:NAME[:SPLIT]``.
    out_dir : path-like
        Destination folder (an existing ``manifest.json`` there is reused as is).
    tokenizer : str
        ``"bpe"`` (a GPT-2-style byte-level BPE trained on the training documents) or the path of
        a ``tokenizer.json`` (e.g. GPT-2's or Llama's, downloaded beforehand).
    vocab_size : int
        Vocabulary of the trained BPE.
    shard_tokens : int
        Tokens per shard (the last one of each split may hold fewer).
    val_fraction : float
        Fraction of documents held out (whole documents; at least one).
    text_field : str
        Field holding the text in JSONL/parquet records.
    seed : int
        Seed of the document split and of the order of training documents.

    Returns
    -------
    pathlib.Path
        ``out_dir``.

    Examples
    --------
    >>> prepare_shards("corpus.jsonl", "shards/corpus", vocab_size=4096)  # doctest: +SKIP
    """
    out = Path(out_dir)
    if (out / "manifest.json").exists():
        return out
    validate("prepare_shards", locals(), SHARD_OPTIONS)
    docs = [d for d in iter_documents(source, text_field=text_field) if d]
    if len(docs) < 2:
        raise ScaleFitError(f"Corpus {source}: need at least 2 non-empty documents.")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(docs))
    n_val = min(len(docs) - 1, max(1, round(val_fraction * len(docs))))
    splits = {"val": [docs[i] for i in order[:n_val]], "train": [docs[i] for i in order[n_val:]]}
    tok = _tokenizer(tokenizer, splits["train"], vocab_size)
    vocab = tok.get_vocab_size()
    eot = tok.token_to_id(EOT)
    dtype = np.dtype(np.uint16 if vocab <= 1 << 16 else np.uint32)
    atomic_write_text(out / "tokenizer.json", tok.to_str())
    manifest = {
        "format": FORMAT,
        "source": str(source),
        "dtype": dtype.name,
        "vocab": vocab,
        "eot": eot,
        "seed": seed,
        "tokenizer": {
            "kind": "bpe-trained" if tokenizer == "bpe" else "file",
            "origin": tokenizer,
            "file": "tokenizer.json",
            "sha256": _sha256(out / "tokenizer.json"),
        },
    }
    for split, texts in splits.items():
        manifest[split] = _write_split(out, split, texts, tok, eot, dtype, shard_tokens)
        manifest[f"{split}_tokens"] = sum(s["tokens"] for s in manifest[split])
        manifest[f"{split}_bytes"] = sum(len(t.encode("utf-8")) for t in texts)
        manifest[f"{split}_docs"] = len(texts)
    atomic_write_json(out / "manifest.json", manifest)
    return out


def _write_split(out, split, texts, tok, eot, dtype, shard_tokens) -> list[dict]:
    shards, buf, size = [], [], 0

    def flush(final: bool) -> None:
        nonlocal buf, size
        ids = np.concatenate(buf) if buf else np.zeros(0, dtype)
        while ids.size >= shard_tokens or (final and ids.size):
            chunk, ids = ids[:shard_tokens], ids[shard_tokens:]
            name = f"{split}_{len(shards):05d}.bin"
            atomic_write_bytes(out / name, chunk.tobytes())
            shards.append({"file": name, "tokens": int(chunk.size), "sha256": _sha256(out / name)})
        buf, size = [ids], ids.size

    for start in range(0, len(texts), 256):
        for enc in tok.encode_batch(texts[start : start + 256]):
            ids = enc.ids + ([eot] if eot is not None else [])
            buf.append(np.asarray(ids, dtype=dtype))
            size += len(ids)
        if size >= shard_tokens:
            flush(final=False)
    flush(final=True)
    return shards


def verify_shards(data_dir: str | os.PathLike) -> None:
    """Check every shard's size and sha256 against the manifest; raise on the first mismatch."""
    data = Path(data_dir)
    manifest = _read_manifest(data)
    for split in ("train", "val"):
        for shard in manifest[split]:
            if _sha256(data / shard["file"]) != shard["sha256"]:
                raise ScaleFitError(f"{data / shard['file']}: sha256 differs from manifest.json.")


def _read_manifest(data: Path) -> dict:
    path = data / "manifest.json"
    manifest = read_token_meta(path, what="shard manifest")
    if manifest.get("format") != FORMAT:
        raise ScaleFitError(f"{path}: not a {FORMAT} manifest.")
    for split in ("train", "val"):
        shards = manifest.get(split)
        if not isinstance(shards, list) or not shards or len(shards) > 1 << 20:
            raise ScaleFitError(f"{path}: '{split}' must be a non-empty list of shards.")
        for shard in shards:
            ok = (
                isinstance(shard, dict)
                and isinstance(shard.get("file"), str)
                and _SHARD_NAME.match(shard["file"])
                and type(shard.get("tokens")) is int
                and 0 < shard["tokens"] <= MAX_TOKEN_FILE_BYTES
                and isinstance(shard.get("sha256"), str)
            )
            if not ok:
                raise ScaleFitError(
                    f"{path}: a '{split}' shard must be an object with a plain 'file' name in "
                    f"the folder, a positive whole 'tokens' and a 'sha256'; got "
                    f"{str(shard)[:80]}."
                )
    return manifest


class ShardData(TokenSource):
    """Memory-mapped token shards read as one sequential stream (see the module docstring).

    Same interface as :class:`~scalefit.train.data.TokenData` (``batch``, ``val_batches``, and
    ``vocab``, ``bytes_per_token``, ``meta`` from :class:`~scalefit.train.data.TokenSource`),
    plus :meth:`position`.
    """

    def __init__(self, data_dir: str | os.PathLike, seq_len: int, *, seed: int = 0) -> None:
        super().__init__(data_dir, _read_manifest(Path(data_dir)), seq_len, seed=seed)
        dtype = self.meta["dtype"]
        self.splits = {}
        for split in ("train", "val"):
            maps = []
            for shard in self.meta[split]:
                path = self.dir / shard["file"]
                maps.append(map_tokens(path, dtype, tokens=shard["tokens"]))
            self._check_split_size(split, sum(m.size for m in maps))
            self.splits[split] = (maps, np.cumsum([0] + [m.size for m in maps]))

    def position(self, step: int, batch_size: int) -> dict:
        """Where step ``step`` starts reading: ``epoch``, ``shard`` index and ``offset`` in it."""
        _, bounds = self.splits["train"]
        pos = step * batch_size * self.seq_len
        epoch, pos = divmod(pos, int(bounds[-1]))
        shard = int(np.searchsorted(bounds, pos, side="right") - 1)
        return {"epoch": int(epoch), "shard": shard, "offset": int(pos - bounds[shard])}

    def _read(self, split: str, start: int, n: int) -> np.ndarray:
        maps, bounds = self.splits[split]
        total, out, pos = int(bounds[-1]), [], start % int(bounds[-1])
        while n > 0:
            shard = int(np.searchsorted(bounds, pos, side="right") - 1)
            off = pos - int(bounds[shard])
            take = min(n, maps[shard].size - off)
            out.append(np.asarray(maps[shard][off : off + take], dtype=np.int64))
            n, pos = n - take, (pos + take) % total
        return np.concatenate(out)

    def batch(self, step: int, batch_size: int, *, rank: int = 0, world: int = 1):
        """Return this rank's rows of step ``step``'s global batch: inputs and targets, int64."""
        if batch_size % world:
            raise ScaleFitError(f"batch_size {batch_size} is not divisible by {world} processes.")
        per, t = batch_size // world, self.seq_len
        first = (step * batch_size + rank * per) * t
        rows = self._read("train", first, per * t + 1)
        return self._pairs(np.lib.stride_tricks.sliding_window_view(rows, t + 1)[::t])

    def val_batches(self, max_tokens: int, batch_size: int):
        """Yield the first ``max_tokens`` validation tokens as consecutive windows, batched."""
        total = int(self.splits["val"][1][-1])
        n = min(max(1, max_tokens // self.seq_len), (total - 1) // self.seq_len)
        rows = self._read("val", 0, n * self.seq_len + 1)
        win = np.lib.stride_tricks.sliding_window_view(rows, self.seq_len + 1)[:: self.seq_len]
        for i in range(0, n, batch_size):
            yield self._pairs(win[i : i + batch_size])
