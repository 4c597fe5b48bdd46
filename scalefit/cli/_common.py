"""Helpers shared by the CLI commands."""

from __future__ import annotations

import argparse
import itertools
import os
import stat
from pathlib import Path

import pandas as pd

from ..core._validation import VOCABULARY, Interval, Option
from ..core.errors import ScaleFitError


def add_option(
    p: argparse.ArgumentParser, flag: str, later: bool = False, name: str = "", **changes
):
    """Add the option ``flag`` of :data:`scalefit.core._validation.VOCABULARY` to ``p``.

    The option's default, choices, range and help come from its one declaration; ``changes``
    are what a command says differently (its help, its default). With ``later``, an option not
    given reads None and the command applies the declared default itself (shown in the help):
    for options refused where they do not apply, or filled in from a saved result. ``name`` is
    the vocabulary's name when the flag spells it differently (``--where-a`` is ``where``).
    """
    option = VOCABULARY[name or flag.lstrip("-").replace("-", "_")]
    if later:
        changes = {"default": None, "fallback": option.default, **changes}
    return p.add_argument(flag, **option.argparse_kwargs(**changes))


def add_table_args(p: argparse.ArgumentParser) -> None:
    """Add the TABLE positional and the options that shape how it is read."""
    p.add_argument(
        "table",
        metavar="TABLE",
        help="a CSV path or a dataset name (chinchilla, chinchilla_epoch, depth_delusion, "
        "gemstones (bundled; gemstones:FILE for its other files), isoflops:ID, "
        "lm_grid_shakespeare, olmo_ladder)",
    )
    for flag in ("--drop-highest", "--data-dir"):
        add_option(p, flag)
    add_option(p, "--columns", shown="canonical names and their known aliases")
    add_option(p, "--where")


def parse_mapping(text: str | None, what: str) -> dict[str, str]:
    """Parse ``a=b,c=d`` into a dict, with a clear error."""
    if not text:
        return {}
    out: dict[str, str] = {}
    for item in text.split(","):
        if "=" not in item:
            raise ScaleFitError(
                f"{what}: expected NAME=VALUE pairs separated by commas; got {item!r}."
            )
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def load_table_arg(args: argparse.Namespace, **changes) -> pd.DataFrame:
    """Read the TABLE argument as a dataset name or a CSV path, then apply ``--where``.

    ``changes`` replace arguments of ``args`` (another table, another filter).
    """
    from ..core.table import read_table
    from ..datasets import is_dataset_name, load
    from ..fit.data import names_read

    args = argparse.Namespace(**{**vars(args), **changes})
    where = getattr(args, "where", None)
    keep = names_read(None, getattr(args, "formula", None))
    drop = 0 if where else args.drop_highest
    pos = getattr(args, "residuals", "log") == "log"  # linear residuals: any finite loss
    if is_dataset_name(args.table):
        if args.columns:
            raise ScaleFitError("--columns applies to CSV files, not to named datasets.")
        table = load(args.table, args.data_dir, drop_highest=drop)
    else:
        path = Path(args.table)
        if not _lexists(path):
            from ..datasets import DATASETS

            names = ", ".join(n if n != "isoflops" else "isoflops:ID" for n in sorted(DATASETS))
            raise ScaleFitError(f"{path}: no such file, and not a dataset name ({names}).")
        table = read_table(
            path,
            parse_mapping(args.columns, "--columns"),
            drop_highest=drop,
            positive_loss=pos,
            keep=keep,
        )
    if not where:
        return table
    kept = rows_where(table, where)
    meta = dict(table.attrs.get("scalefit", {}))
    out = read_table(
        kept.reset_index(drop=True), drop_highest=args.drop_highest, positive_loss=pos, keep=keep
    )
    meta.update({k: out.attrs["scalefit"][k] for k in ("drop_highest", "outlier_rule")})
    meta["where"] = where
    out.attrs["scalefit"] = meta
    return out


def rows_where(table: pd.DataFrame, expr: str, flag: str = "--where") -> pd.DataFrame:
    """The rows of ``table`` a filter keeps (the ``--where`` grammar); none kept is an error."""
    from ..core.expr import filter_rows

    try:
        kept = filter_rows(table, expr)
    except ScaleFitError as exc:
        raise ScaleFitError(f"{flag}: {exc}") from None
    if kept.empty:
        raise ScaleFitError(f"{flag} {expr!r} keeps no rows.")
    return kept


def _lexists(path: Path) -> bool:
    """Whether ``path`` exists (a dangling link counts); a name too long is one line."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise ScaleFitError(f"{path}: cannot be read ({exc.strerror or exc}).") from None
    return True


def number(text: str, option: str, name: str) -> float:
    """A float from the command line (``inf``/``-inf`` allowed, NaN refused), with a clear error."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if value != value:
        raise ScaleFitError(f"{option}: {name}={text!r} is not a number.")
    return value


def law_options_arg(text: str | None) -> dict:
    """Parse ``--law-option k=v,...`` values into numbers where possible."""
    out: dict = {}
    for k, v in parse_mapping(text, "--law-option").items():
        try:
            out[k] = int(v)
        except ValueError:
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out


def check_paths(
    *,
    inputs: dict[str, str | os.PathLike | None] | list | None = None,
    files: dict[str, str | os.PathLike | None] | None = None,
    folders: dict[str, str | os.PathLike | None] | None = None,
    max_bytes: int | None = None,
) -> None:
    """Refuse unusable input and output paths at once, before a command does any work.

    Every command calls this first with the files it will read and the paths it will write, so
    a FIFO, a device, a folder where a file belongs (or the reverse), a path under a file or a
    name too long for the file system is one line and exit 2, never a hang, a traceback or
    half of the outputs written.

    Parameters
    ----------
    inputs : dict or list of (str, path) pairs
        What a file is (``"fit result (JSON)"``) to its path (or None): each must be a readable
        regular file of at most ``max_bytes`` bytes (symbolic links are followed).
    files : dict
        Option name (``"--out"``) to a file path that will be written (or None): it must not
        exist, or be a regular file; its parent must be (or become) a folder.
    folders : dict
        Option name (``"--plots"``) to a folder that will be written into (or None): it must
        not exist, or be a folder; its parent must be (or become) a folder.
    max_bytes : int, optional
        Size limit of the inputs (default :data:`scalefit.core._io.MAX_INPUT_BYTES`).

    Raises
    ------
    ScaleFitError
        Naming the option or file and what is wrong.
    """
    from ..core._io import MAX_INPUT_BYTES, check_input_file

    pairs = inputs.items() if isinstance(inputs, dict) else (inputs or [])
    for what, path in pairs:
        if path is not None and str(path) != "":
            check_input_file(path, what=what, max_bytes=max_bytes or MAX_INPUT_BYTES)
    checks = [(k, v, False) for k, v in (files or {}).items()]
    checks += [(k, v, True) for k, v in (folders or {}).items()]
    for option, path, want_dir in checks:
        if path is not None and str(path) != "":
            check_output_path(path, option=option, folder=want_dir)


def check_output_path(path: str | os.PathLike, *, option: str, folder: bool = False) -> None:
    """Refuse an output path that cannot be written as a file (or, with ``folder``, a folder).

    Parameters
    ----------
    path : path-like
        The path.
    option : str
        The option that gave it, for the message (``"--out"``).
    folder : bool
        True when a folder is expected.

    Raises
    ------
    ScaleFitError
        An existing path of the wrong kind (a folder, a device, a FIFO, a socket, a file where
        a folder is expected), a parent that is not a folder, a name too long, or a folder
        that cannot be written into.
    """
    from ..core._io import _kind

    given = str(path)
    where = f"{option} {given if len(given) <= 200 else given[:200] + '...'}"
    if "\x00" in given:
        raise ScaleFitError(f"{where}: a path may not contain a NUL character.")
    p = Path(path)
    st = _stat(p, where)
    if st is not None:
        ok = stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)
        if not ok:
            kind = "a file" if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)
            need = "an output folder" if folder else "a file name (a regular file or a new name)"
            raise ScaleFitError(f"{where}: is {kind}; expected {need}.")
        if folder and not os.access(p, os.W_OK | os.X_OK):
            raise ScaleFitError(f"{where}: cannot write into this folder (permission denied).")
        if folder:
            _check_folder_entries(p, where)
        return
    for parent in p.absolute().parents:
        pst = _stat(parent, where)
        if pst is None:
            continue
        if not stat.S_ISDIR(pst.st_mode):
            kind = "a file" if stat.S_ISREG(pst.st_mode) else _kind(pst.st_mode)
            raise ScaleFitError(f"{where}: {parent} is {kind}; expected a folder.")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ScaleFitError(f"{where}: cannot create it in {parent} (permission denied).")
        return


def _check_folder_entries(folder: Path, where: str, limit: int = 10_000) -> None:
    """Refuse an output folder holding a FIFO, device or socket (a file the command may write)."""
    from ..core._io import _kind

    try:
        entries = list(itertools.islice(os.scandir(folder), limit))
    except OSError as exc:
        raise ScaleFitError(f"{where}: cannot list this folder ({exc.strerror or exc}).") from None
    for entry in entries:
        try:
            mode = os.stat(entry.path).st_mode
        except OSError:
            continue  # a dangling link: replaced, not followed, if the command writes this name
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise ScaleFitError(
                f"{where}: holds {entry.name!r}, which is {_kind(mode)}; an output folder may "
                f"hold only files and folders."
            )


def _stat(path: Path, where: str) -> os.stat_result | None:
    """``os.stat`` of ``path`` (None if it does not exist); other errors are one line."""
    try:
        return os.stat(path)
    except NotADirectoryError:  # a parent is a file: the walk over the parents names it
        return None
    except FileNotFoundError:
        if os.path.islink(path):  # a dangling link: writing would follow or replace it
            raise ScaleFitError(
                f"{where}: is a symbolic link to a missing target ({os.readlink(path)})."
            ) from None
        return None
    except OSError as exc:
        raise ScaleFitError(f"{where}: cannot be used ({exc.strerror or exc}).") from None


#: Argparse type for a FLOP count: a finite number > 0 (e.g. ``1e21``).
positive_flops = VOCABULARY["budget"].parse


def int_at_least(low: int):
    """Argparse type for a whole number ``>= low`` (the vocabulary's range check)."""
    return Option("value", (Interval(int, low, None),)).parse


#: Columns of a written table that hold FLOP counts, and columns that hold whole numbers.
FLOP_COLUMNS = ("budget", "target")
WHOLE_COLUMNS = (
    "depth",
    "width",
    "params",
    "n_within_eps",
    "n_within_interval",
    "n_draws",
    "n_unbounded",
)


def tidy_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` for a CSV a person reads: budgets as ``1e13``, depths as ``96``.

    Budgets (:data:`FLOP_COLUMNS`) become text in the command line's notation, which any CSV
    reader still parses as a number; whole-number columns (:data:`WHOLE_COLUMNS` and the
    ``set_depth``/``set_width`` bounds) lose their ``.0``, a missing value staying empty.
    """
    from ..core.accounting import flops_text

    out = frame.copy()
    for col in out.columns:
        values = pd.to_numeric(out[col], errors="coerce")
        if values.isna().all() or not pd.api.types.is_numeric_dtype(out[col]):
            continue
        finite = values[values.notna()]
        if col in FLOP_COLUMNS:  # as the command line writes them: 1e13, 3.2e20 (not 1e+13)
            out[col] = [flops_text(v, digits=4) if pd.notna(v) else "" for v in values]
        elif (col in WHOLE_COLUMNS or col.startswith(("set_depth", "set_width"))) and bool(
            ((finite % 1) == 0).all()
        ):
            out[col] = values.astype("Int64")
    return out
