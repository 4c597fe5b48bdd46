"""Helpers shared by the CLI commands."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from ..errors import ScaleFitError


def add_table_args(p: argparse.ArgumentParser) -> None:
    """Add the TABLE positional and the options that shape how it is read."""
    p.add_argument(
        "table",
        metavar="TABLE",
        help="a CSV path or a dataset name (chinchilla, chinchilla_epoch, depth_delusion, "
        "lm_grid_shakespeare)",
    )
    p.add_argument(
        "--drop-highest",
        type=int,
        default=0,
        metavar="K",
        help="drop the K highest losses (keeps rows strictly below the K-th highest)",
    )
    p.add_argument(
        "--data-dir",
        default=None,
        metavar="DIR",
        help="folder with the public reference CSVs (else SCALEFIT_DATA_DIR, cache, download)",
    )
    p.add_argument(
        "--columns",
        default=None,
        metavar="SRC=CANON,...",
        help="explicit column mapping, e.g. 'D=tokens,N=params'",
    )
    p.add_argument(
        "--where",
        default=None,
        metavar="EXPR",
        help="keep only the rows matching a filter over column names (comparisons, and/or/not, "
        "in [...]; no calls or attributes), e.g. \"variant == 'pre_ln' and depth >= 4\" "
        "(applied before --drop-highest)",
    )


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


def load_table_arg(args: argparse.Namespace) -> pd.DataFrame:
    """Read the TABLE argument as a dataset name or a CSV path, then apply ``--where``."""
    from ..datasets import is_dataset_name, load
    from ..table import read_table

    where = getattr(args, "where", None)
    drop = 0 if where else args.drop_highest
    pos = getattr(args, "residuals", "log") == "log"  # linear residuals: any finite loss
    if is_dataset_name(args.table):
        if args.columns:
            raise ScaleFitError("--columns applies to CSV files, not to named datasets.")
        table = load(args.table, args.data_dir, drop_highest=drop)
    else:
        path = Path(args.table)
        if not path.exists():
            raise ScaleFitError(
                f"{path}: no such file, and not a dataset name (chinchilla, "
                f"chinchilla_epoch, depth_delusion, lm_grid_shakespeare)."
            )
        table = read_table(
            path, parse_mapping(args.columns, "--columns"), drop_highest=drop, positive_loss=pos
        )
    if not where:
        return table
    from ..expr import filter_rows

    try:
        kept = filter_rows(table, where)
    except ScaleFitError as exc:
        raise ScaleFitError(f"--where: {exc}") from None
    if kept.empty:
        raise ScaleFitError(f"--where {where!r} keeps no rows.")
    meta = dict(table.attrs.get("scalefit", {}))
    out = read_table(kept.reset_index(drop=True), drop_highest=args.drop_highest, positive_loss=pos)
    meta.update({k: out.attrs["scalefit"][k] for k in ("drop_highest", "outlier_rule")})
    meta["where"] = where
    out.attrs["scalefit"] = meta
    return out


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


def plots_dir(path: str | None) -> Path | None:
    """Create and return the plots folder (or None)."""
    if not path:
        return None
    from .._io import ensure_folder

    return ensure_folder(path)


def check_outputs(
    *, files: dict[str, str | None] | None = None, folders: dict[str, str | None] | None = None
) -> None:
    """Refuse output paths that cannot be written, before any work starts.

    Parameters
    ----------
    files : dict
        Option name (``"--out"``) to a file path that will be written (or None).
    folders : dict
        Option name (``"--plots"``) to a folder that will be created (or None).

    Raises
    ------
    ScaleFitError
        A file path that names a folder, a folder path that names a file, or a path under a file.
    """
    checks = [(k, v, False) for k, v in (files or {}).items()]
    checks += [(k, v, True) for k, v in (folders or {}).items()]
    for option, path, want_dir in checks:
        if not path:
            continue
        p = Path(path)
        if p.exists() and p.is_dir() != want_dir:
            kind = "a folder" if p.is_dir() else "a file"
            need = "a folder" if want_dir else "a file name"
            raise ScaleFitError(f"{option} {path}: is {kind}; expected {need}.")
        for parent in p.parents:
            if parent.exists() and not parent.is_dir():
                raise ScaleFitError(f"{option} {path}: {parent} is a file; expected a folder.")


def positive_flops(text: str) -> float:
    """Argparse type for a FLOP count: a finite number > 0 (e.g. ``1e21``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of FLOPs; got {text!r}")
    return value


def int_at_least(low: int):
    """Argparse type factory for a whole number ``>= low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}; got {text!r}")
        return value

    return parse
