"""Loss tables: read, validate and normalise a CSV or DataFrame of training runs.

Every table handed to a fitter goes through :func:`read_table`, which maps column names onto
the canonical vocabulary (``params, tokens, flops, width, depth, loss``), checks every value
and records what it derived. Bad input raises :class:`~scalefit.core.errors.ScaleFitError` naming
the file, column and row; nothing is repaired silently.
"""

from __future__ import annotations

import csv
import difflib
import io
import os
import re
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ._io import decode_utf8, read_input_bytes
from ._validation import constraints, fmt_value, spelled, validate
from .accounting import tokens_for_budget, training_flops
from .errors import ScaleFitError, one_line

CANONICAL = ("params", "tokens", "flops", "width", "depth", "loss")

#: Column aliases seen in the wild (case-insensitive). ``D`` is deliberately absent: it means tokens
#: in Chinchilla/Liu et al. and depth in Fahim & Karim, so it must be mapped explicitly.
ALIASES: dict[str, str] = {
    "params": "params",
    "model size": "params",
    "model_size": "params",
    "n": "params",
    "parameters": "params",
    "tokens": "tokens",
    "num_tokens": "tokens",
    "t": "tokens",
    "flops": "flops",
    "flop": "flops",
    "training flop": "flops",
    "training_flop": "flops",
    "c": "flops",
    "compute": "flops",
    "width": "width",
    "d_model": "width",
    "m": "width",
    "depth": "depth",
    "n_layers": "depth",
    "layers": "depth",
    "n_layer": "depth",
    "loss": "loss",
    "val_loss": "loss",
    "test_loss": "loss",
}

#: Single-letter aliases are weak: they never take a canonical name another column already maps
#: to, and never rename a column the law being fitted reads under its own name (``keep``).
WEAK_ALIASES = frozenset(k for k in ALIASES if len(k) == 1)


def _source_name(source) -> str:
    return str(source) if isinstance(source, str | os.PathLike) else "<DataFrame>"


_THOUSANDS = re.compile(r"^[+-]?\d{1,3}([,_ ]\d{3})+(\.\d*)?$")


def _decode(path: Path, raw: bytes) -> str:
    """Decode a table's bytes as UTF-8, naming gzip, UTF-16, binary and Latin-1 files."""
    if raw[:2] == b"\x1f\x8b":
        raise ScaleFitError(
            f"{path}: the file is gzip-compressed; expected a plain-text UTF-8 CSV "
            f"(decompress it first, e.g. `gunzip -k`)."
        )
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise ScaleFitError(
            f"{path}: the file is UTF-16 encoded; expected a UTF-8 CSV (re-save it as UTF-8)."
        )
    if b"\x00" in raw[:4096]:
        raise ScaleFitError(
            f"{path}: the file contains NUL bytes (binary or UTF-16 data); expected a UTF-8 CSV."
        )
    return decode_utf8(path, raw, expected="a UTF-8 CSV")


def _check_header(path: Path, header: list[str]) -> None:
    if len(header) == 1:
        for delim, label in ((";", "semicolon"), ("\t", "tab"), ("|", "pipe")):
            if delim in header[0]:
                raise ScaleFitError(
                    f"{path}: the header has a single column {header[0]!r}; the file looks "
                    f"{label}-delimited, expected commas."
                )
    seen: set[str] = set()
    for h in header:
        if not h:
            raise ScaleFitError(
                f"{path}: the header has an empty column name (column {header.index(h) + 1}); "
                f"expected a name for every column."
            )
        if h.lower() in seen:
            raise ScaleFitError(f"{path}: duplicate column {h!r} in the header.")
        seen.add(h.lower())


def _split_thousands(row: list[str], n: int) -> bool:
    """Whether ``row`` (with more than ``n`` fields) looks like unquoted ``1,000`` numbers."""
    return any(
        re.fullmatch(r"[+-]?\d{1,3}", a.strip()) and re.fullmatch(r"\d{3}(\.\d*)?", b.strip())
        for a, b in zip(row, row[1:], strict=False)
    )


def _check_shape(path: Path, header: list[str], rows: list[tuple[int, list[str]]]) -> None:
    """Name index shifts (every row one field more), ragged rows and split ``1,000`` numbers."""
    n = len(header)
    counts = {len(r) for _, r in rows}
    if counts == {n + 1} and all(not r[-1].strip() for _, r in rows):
        raise ScaleFitError(
            f"{path}: every data row ends with an extra comma ({n + 1} fields for the {n} header "
            f"columns); expected one field per header column (remove the trailing commas)."
        )
    if counts == {n + 1} and not any(_split_thousands(r, n) for _, r in rows):
        raise ScaleFitError(
            f"{path}: every data row has {n + 1} fields but the header names {n} columns "
            f"({', '.join(header)}); expected one field per header column (an unnamed "
            f"index column? add its name to the header or remove it)."
        )
    for line, row in rows:
        if len(row) == n:
            continue
        if len(row) > n and _split_thousands(row, n):
            raise ScaleFitError(
                f"{path}: line {line}: {len(row)} fields for {n} columns; a number like "
                f"'1,000' seems to use a comma as thousands separator. Expected plain numbers "
                f"(1000 or 1e3) or quoted fields."
            )
        raise ScaleFitError(
            f"{path}: line {line}: {len(row)} field(s), but the header names {n} columns "
            f"({', '.join(header)}); expected {n} fields on every row."
        )


def read_csv(path: str | os.PathLike) -> pd.DataFrame:
    """Read a CSV with the file checks of :func:`read_table`, without touching its columns.

    Parameters
    ----------
    path : path-like
        A comma-separated UTF-8 file with a header row.

    Returns
    -------
    pandas.DataFrame
        The table as pandas parses it.

    Raises
    ------
    ScaleFitError
        For a missing, empty, undecodable (gzip, UTF-16, binary, Latin-1) or malformed file: a wrong
        delimiter, a duplicate or empty header name, an index shift, ragged rows or unquoted
        thousands separators, naming the file and line.
    """
    path = Path(path)
    _refuse_curves(path)
    raw = read_input_bytes(path, what="CSV file")
    text = _decode(path, raw)
    if not text.strip():
        raise ScaleFitError(f"{path}: the file is empty; expected a CSV with a header row.")
    try:
        reader = csv.reader(io.StringIO(text), skipinitialspace=True)
        lines = [(reader.line_num, row) for row in reader]
    except csv.Error as exc:
        raise ScaleFitError(f"{path}: not a well-formed CSV ({exc}).") from None
    lines = [(n, r) for n, r in lines if any(f.strip() for f in r)]
    header = [h.strip() for h in lines[0][1]]
    _check_header(path, header)
    _check_shape(path, header, lines[1:])
    try:
        frame = pd.read_csv(io.StringIO(text), skipinitialspace=True, index_col=False)
    except (pd.errors.ParserError, ValueError) as exc:
        msg = str(exc).replace("\n", " ")
        raise ScaleFitError(f"{path}: not a well-formed CSV ({msg}).") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if frame.empty:
        raise ScaleFitError(f"{path}: the table has a header but no rows.")
    return frame


def _refuse_curves(path: Path) -> None:
    """Loss curves (TensorBoard event files, a trainer run) given where a loss table goes."""
    if "tfevents" in path.name:
        kind = "a TensorBoard event file"
    elif path.is_dir() and (path / "history.csv").is_file():
        kind = "a trainer run folder"
    elif path.is_dir() and next(path.rglob("*tfevents*"), None) is not None:
        kind = "a folder of TensorBoard event files"
    else:
        return
    folder = path.parent if "tfevents" in path.name else path
    how = spelled("scalefit.curves.fit_curves", f"scalefit curves fit {folder}")
    raise ScaleFitError(
        f"{path}: {kind}, that is loss curves; a loss table has one row per finished run. "
        f"Fit curves with {how}."
    )


def _rename(
    frame: pd.DataFrame,
    columns: Mapping[str, str] | None,
    where: str,
    keep: Iterable[str] = (),
) -> tuple[pd.DataFrame, dict[str, str]]:
    """Map source column names to canonical names (explicit mapping first, then aliases).

    Returns the renamed frame and the ``{source: canonical}`` renames made by aliases.
    """
    columns = dict(columns or {})
    keep = set(keep)
    for src, dst in columns.items():
        if dst not in CANONICAL and dst != src:
            raise ScaleFitError(
                f"The 'columns' mapping must map onto {', '.join(CANONICAL)} (or a name onto "
                f"itself, to keep it as it is). Got {src!r} -> {dst!r} instead."
            )
        if src not in frame.columns:
            raise ScaleFitError(f"{where}: column {src!r} named in 'columns' is not in the table.")
    rename: dict[str, str] = {}
    targets: dict[str, str] = {}
    weak: list[tuple[str, str]] = []
    ambiguous: list[str] = []  # 'D': reported with the other column problems (_column_problems)
    for col in frame.columns:
        if col in columns:
            dst = columns[col]
            if dst == col and dst not in CANONICAL:
                continue  # kept as it is
        elif col in keep:
            continue  # the law reads this name: never alias it away
        else:
            dst = ALIASES.get(col.lower())
            if col.lower() in WEAK_ALIASES:
                weak.append((col, dst))
                continue
        if dst is None:
            if col.lower() == "d":
                ambiguous.append(col)
            continue
        if dst in targets:
            raise ScaleFitError(
                f"{where}: columns {targets[dst]!r} and {col!r} both map to {dst!r}; "
                f"keep one or pass an explicit 'columns' mapping."
            )
        targets[dst] = col
        rename[col] = dst
    renamed = {src: dst for src, dst in rename.items() if src != dst and src not in columns}
    taken = set(targets) | {c for c in frame.columns if c not in rename}
    for col, dst in weak:
        if dst in taken:
            continue  # a single letter never takes a name another column has
        taken.add(dst)
        rename[col] = dst
        renamed[col] = dst
    frame = frame.rename(columns=rename)
    _column_problems(frame, ambiguous, where)
    return frame, renamed


def _column_problems(frame: pd.DataFrame, ambiguous: list[str], where: str) -> None:
    """One error for every column problem at once: an ambiguous 'D', no loss column."""
    problems, fix = [], {}
    for col in ambiguous:
        problems.append(
            f"column {col!r} is ambiguous (tokens in Chinchilla, depth in Fahim & Karim)"
        )
        fix[col] = "tokens"
    if "loss" not in frame.columns:
        problems.append("no loss column; expected one of 'loss', 'val_loss', 'test_loss'")
        guess = [c for c in frame.columns if str(c).lower() == "l" or "loss" in str(c).lower()]
        fix[guess[0] if len(guess) == 1 else "NAME"] = "loss"
    if problems:
        python = "columns={" + ", ".join(f"{k!r}: {v!r}" for k, v in fix.items()) + "}"
        cli = "--columns " + ",".join(f"{k}={v}" for k, v in fix.items())
        raise ScaleFitError(
            f"{where}: {'; '.join(problems)}. Map them explicitly, e.g. {spelled(python, cli)}. "
            f"Columns: {', '.join(map(str, frame.columns))}."
        )


def _check_values(frame: pd.DataFrame, where: str, positive_loss: bool = True) -> pd.DataFrame:
    """Require every canonical column present to be numeric, finite and positive.

    With ``positive_loss=False`` the loss need only be finite (a response fitted on linear
    residuals may be zero or negative).
    """
    for col in CANONICAL:
        if col not in frame.columns:
            continue
        raw = frame[col]
        values = pd.to_numeric(raw, errors="coerce")
        bad = values.isna() & raw.notna()
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            cell = raw.iloc[i]
            hint = ""
            if isinstance(cell, str) and _THOUSANDS.match(cell.strip()):
                hint = " (a thousands separator? write plain numbers such as 1000 or 1e3)"
            raise ScaleFitError(
                f"{where}: column {col!r}, row {i + 1}: expected a number, got "
                f"{fmt_value(cell)}{hint}."
            )
        arr = values.to_numpy(dtype=float)
        for test, what in (
            (np.isnan(arr), "a missing value"),
            (~np.isfinite(arr) & ~np.isnan(arr), "a non-finite value"),
            (
                np.isfinite(arr) & (arr <= 0) & (positive_loss or col != "loss"),
                "a value that is not positive",
            ),
        ):
            if test.any():
                i = int(np.flatnonzero(test)[0])
                raise ScaleFitError(
                    f"{where}: column {col!r}, row {i + 1}: {what} ({fmt_value(arr[i])}); "
                    f"expected a finite positive number."
                )
        frame[col] = arr
    return frame


def read_table(
    source: str | os.PathLike | pd.DataFrame,
    columns: Mapping[str, str] | None = None,
    *,
    drop_highest: int = 0,
    positive_loss: bool = True,
    keep: Iterable[str] = (),
) -> pd.DataFrame:
    """Read and validate a loss table.

    Parameters
    ----------
    source : path-like or pandas.DataFrame
        A CSV file (comma-separated, header row) or a DataFrame.
    columns : mapping, optional
        Explicit ``{source_name: canonical_name}`` mapping, applied before the built-in aliases
        (:data:`ALIASES`). Canonical names are ``params, tokens, flops, width, depth, loss``.
        Mapping a name onto itself (``{"t": "t"}``) keeps it as it is.
    drop_highest : int, default 0
        Outlier rule: drop the ``k`` highest losses by keeping the rows whose loss is *strictly
        below* the k-th highest loss value. With ties at the cut-off this drops more than ``k`` rows
        (Liu et al.'s rule: ``k = 40`` on the Chinchilla table keeps 203 of 245 rows).
    positive_loss : bool, default True
        Require a positive loss. ``False`` accepts any finite loss (a response fitted on linear
        residuals, ``scalefit.fit(..., residuals="linear")``, may be zero or negative).
    keep : iterable of str, optional
        Column names never renamed by an alias (the fitters pass the names the law reads, so a
        formula input named ``t`` or ``n`` stays ``t`` or ``n``). The single-letter aliases
        ``n, t, c, m`` are weak in any case: they never take a canonical name that another column
        already has or maps to.

    Returns
    -------
    pandas.DataFrame
        Canonical columns as float64, other columns unchanged. ``frame.attrs["scalefit"]`` records
        the source, the alias renames (``renamed``), what was derived (``tokens = flops /
        (6 params)`` when tokens are missing, ``flops = 6 params tokens`` when flops are missing)
        and the outlier rule.

    Raises
    ------
    ScaleFitError
        For a missing or empty file, a wrong delimiter, a duplicate header, an unknown mapping,
        or a missing, non-numeric, non-finite or non-positive value (naming column and row).

    Examples
    --------
    >>> import pandas as pd
    >>> t = read_table(pd.DataFrame({"N": [1e8, 1e9], "D": [2e9, 2e10], "loss": [3.1, 2.7]}),
    ...                columns={"D": "tokens"})
    >>> list(t.columns)
    ['params', 'tokens', 'loss', 'flops']
    """
    where = _source_name(source)
    if isinstance(source, pd.DataFrame):
        frame = source.copy()
        frame.columns = [str(c).strip() for c in frame.columns]
        if frame.empty:
            raise ScaleFitError("<DataFrame>: the table has no rows.")
    elif isinstance(source, str | os.PathLike):
        frame = read_csv(source)
    else:
        raise ScaleFitError(
            f"The 'source' parameter of read_table must be a path or a DataFrame. "
            f"Got {type(source).__name__} instead."
        )
    frame, renamed = _rename(frame, columns, where, keep)
    frame = _check_values(frame, where, positive_loss)
    derived: list[str] = []
    if "tokens" not in frame.columns and {"flops", "params"} <= set(frame.columns):
        frame["tokens"] = tokens_for_budget(frame["flops"], frame["params"])
        derived.append("tokens = flops / (6 params)")
    if "flops" not in frame.columns and {"tokens", "params"} <= set(frame.columns):
        frame["flops"] = training_flops(frame["params"], frame["tokens"])
        derived.append("flops = 6 params tokens")
    dup = frame.duplicated()
    if dup.any():
        warnings.warn(
            f"{where}: {int(dup.sum())} duplicate row(s) (identical in every column), first at "
            f"row {int(np.flatnonzero(dup.to_numpy())[0]) + 1}; they are kept.",
            UserWarning,
            stacklevel=2,
        )
    n_read = len(frame)
    frame = drop_highest_losses(frame, drop_highest)
    frame = frame.reset_index(drop=True)
    frame.attrs["scalefit"] = {
        "source": where,
        "n_read": n_read,
        "renamed": renamed,
        "derived": derived,
        "drop_highest": int(drop_highest),
        "outlier_rule": (
            f"kept rows with loss strictly below the highest loss value of rank {drop_highest}"
            if drop_highest
            else "none"
        ),
    }
    return frame


def drop_highest_losses(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    """Keep the rows whose loss is strictly below the ``k``-th highest loss value.

    Parameters
    ----------
    frame : pandas.DataFrame
        A table with a ``loss`` column.
    k : int
        Number of highest losses to drop; 0 keeps everything. Ties at the cut-off are dropped
        too, so more than ``k`` rows can go.

    Returns
    -------
    pandas.DataFrame
        The kept rows, in their original order.
    """
    validate("read_table or load", {"drop_highest": k}, constraints("drop_highest"))
    if k == 0:
        return frame
    if k >= len(frame):
        raise ScaleFitError(
            f"The 'drop_highest' parameter must be smaller than the number of rows "
            f"({len(frame)}). Got {k} instead."
        )
    cutoff = np.sort(frame["loss"].to_numpy())[::-1][k - 1]
    return frame[frame["loss"] < cutoff]


def parse_bytes(raw: bytes, path, what: str, read=pd.read_csv, **kw) -> pd.DataFrame:
    """A table file's (checksummed) bytes parsed by ``read``; a parser error is one line."""
    try:
        return read(io.BytesIO(raw), **kw)
    except ValueError as exc:  # pandas' ParserError is a ValueError
        raise ScaleFitError(f"{path}: not a readable {what} ({one_line(exc)}).") from None


def require_file_columns(frame: pd.DataFrame, columns, path) -> None:
    """Refuse a reference file that lacks some of ``columns``, naming them."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ScaleFitError(f"{path}: missing column(s) {', '.join(map(repr, missing))}.")


def require_columns(frame: pd.DataFrame, needed, what: str) -> None:
    """Raise :class:`ScaleFitError` unless every column in ``needed`` is in ``frame``.

    The message suggests a ``columns`` mapping for each missing name that some column of the
    table resembles: one that contains the name (``num_params`` for ``params``), else the most
    similar one (``difflib``).
    """
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        src = frame.attrs.get("scalefit", {}).get("source", "<table>")
        have = [str(c) for c in frame.columns]
        raise ScaleFitError(
            f"{src}: {what} needs column(s) {', '.join(missing)}; the table has "
            f"{', '.join(have)}.{_mapping_hint(missing, have)}"
        )


def _mapping_hint(missing: list[str], have: list[str]) -> str:
    """`` Did you mean columns={'num_params': 'params'} (...)?`` or ``""`` when none is close."""
    spare = [c for c in have if c not in missing and c not in CANONICAL]
    pairs = {}
    for name in missing:
        inside = [c for c in spare if name in c.lower() or c.lower() in name]
        close = inside or difflib.get_close_matches(name, spare, n=1, cutoff=0.6)
        if close:
            pairs[close[0]] = name
    if not pairs:
        return ""
    cli = ",".join(f"{k}={v}" for k, v in pairs.items())
    return f" Did you mean {spelled(f'columns={pairs!r}', f'--columns {cli}')}?"
