"""Stream a local text corpus into fixed-length token windows for the language-model probes.

Documents come from a plain-text file (documents separated by one or more blank lines) or a JSONL
file (one JSON object per line with a text field). They are read lazily in file order, tokenised
one at a time and packed into windows of ``seq_len`` tokens, so memory does not grow with the
corpus. Each window carries a per-position flag for the first token of a document.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..core._io import iter_input_lines, iter_jsonl_texts
from ..core._validation import spelled
from ..core.errors import ScaleFitError


def iter_documents(path: str | Path, *, text_field: str = "text") -> Iterator[str]:
    """Yield the documents of a ``.txt`` (blank-line separated) or ``.jsonl`` file in order.

    Raises
    ------
    ScaleFitError
        The file is missing, is a folder, or a JSONL line is not an object with ``text_field``.
    """
    path = Path(path)
    if not os.path.lexists(path):
        raise ScaleFitError(f"{path}: no such text file.")
    if path.is_dir():
        raise ScaleFitError(f"{path}: is a folder; give a .txt or .jsonl file.")
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        yield from (text for text in iter_jsonl_texts(path, text_field) if text.strip())
        return
    lines: list[str] = []
    for _, line in iter_input_lines(path, what="text file (.txt or .jsonl)"):
        if line.strip():
            lines.append(line.rstrip("\n"))
        elif lines:
            yield "\n".join(lines)
            lines = []
    if lines:
        yield "\n".join(lines)


def iter_windows(
    documents, tokenizer, *, seq_len: int, encoder: bool
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pack tokenised documents into windows of ``seq_len`` token ids.

    Decoders: documents are joined with a separator (the tokenizer's BOS, else EOS token) before
    each document, as in pre-training; encoders (``encoder=True``): every window is
    ``[CLS] … [SEP]`` around ``seq_len − 2`` content tokens and documents are joined with SEP.
    The last incomplete window is dropped.

    Yields
    ------
    ids : numpy.ndarray
        ``(seq_len,)`` int64 token ids.
    doc_start : numpy.ndarray
        ``(seq_len,)`` bool, True at the first token of each document.
    """
    sep = _separator(tokenizer, encoder)
    width = seq_len - 2 if encoder else seq_len
    buf_ids: list[int] = []
    buf_start: list[bool] = []
    for doc in documents:
        ids = tokenizer(doc, add_special_tokens=False, verbose=False)["input_ids"]
        if not ids:
            continue
        if sep is not None:
            buf_ids.append(sep)
            buf_start.append(False)
        buf_ids.extend(ids)
        buf_start.extend([True] + [False] * (len(ids) - 1))
        while len(buf_ids) >= width:
            ids_w, start_w = buf_ids[:width], buf_start[:width]
            del buf_ids[:width], buf_start[:width]
            if encoder:
                ids_w = [tokenizer.cls_token_id, *ids_w, tokenizer.sep_token_id]
                start_w = [False, *start_w, False]
            yield np.asarray(ids_w, dtype=np.int64), np.asarray(start_w, dtype=bool)


def _separator(tokenizer, encoder: bool) -> int | None:
    if encoder:
        if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
            raise ScaleFitError("the encoder's tokenizer has no [CLS]/[SEP] tokens.")
        return tokenizer.sep_token_id
    for name in ("bos_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    return None


class DatasetDocuments:
    """Documents of a Hugging Face ``datasets`` dataset, streamed; iterable more than once.

    Parameters
    ----------
    name : str
        A local dataset folder (e.g. of ``.jsonl`` files) or a hub dataset name.
    config : str, optional
        The dataset's configuration (``name=`` of ``datasets.load_dataset``).
    split : str
        The split to stream.
    text_field : str
        The column holding the text.
    allow_download : bool
        Hub names need network; without this they are refused before anything is fetched.
    """

    def __init__(
        self,
        name: str,
        *,
        config: str | None = None,
        split: str = "train",
        text_field: str = "text",
        allow_download: bool = False,
    ) -> None:
        if not Path(name).exists() and not allow_download:
            raise ScaleFitError(
                f"dataset {name!r} is not a local folder; a hub dataset needs network (pass "
                f"{spelled('allow_download=True', '--allow-download')} on a machine with "
                "network, or give a local folder)."
            )
        self.name, self.config, self.split, self.text_field = name, config, split, text_field

    def __iter__(self) -> Iterator[str]:
        try:
            import datasets
        except ImportError:
            raise ScaleFitError(
                "reading a dataset needs the 'datasets' package: pip install datasets."
            ) from None
        try:
            rows = datasets.load_dataset(self.name, self.config, split=self.split, streaming=True)
            for row in rows:
                if self.text_field not in row:
                    raise ScaleFitError(
                        f"dataset {self.name!r} has no field '{self.text_field}' (fields: "
                        f"{', '.join(map(str, row))})."
                    )
                text = row[self.text_field]
                if isinstance(text, str) and text.strip():
                    yield text
        except ScaleFitError:
            raise
        except Exception as exc:  # datasets raises many exception types for a bad name/split
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ScaleFitError(
                f"dataset {self.name!r}: cannot read it ({type(exc).__name__}: {first})."
            ) from exc

    def __repr__(self) -> str:
        return f"datasets:{self.name}/{self.config or ''}/{self.split}/{self.text_field}"
