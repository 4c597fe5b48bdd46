"""Reference loss tables by name.

``load("depth_delusion")`` reads the table bundled in the repository's ``data/`` folder. The two
Chinchilla tables come from public repositories and are not redistributed: they are resolved at run
time from, in order, the ``data_dir`` argument, the ``SCALEFIT_DATA_DIR`` environment variable, the
cache (``SCALEFIT_CACHE_DIR`` or ``~/.cache/scalefit``), and finally a download from the public raw
URL into the cache. Every file found or downloaded is checked against its sha256 checksum.
"""

from __future__ import annotations

import hashlib
import io
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ._io import atomic_write_bytes, read_input_bytes
from .errors import ScaleFitError
from .table import read_table

# An installed wheel ships the tables as the package ``scalefit._bundled`` (see setup.py); a source
# checkout (editable install) reads them from the repository's top-level ``data/`` folder.
_WHEEL_DIR = Path(__file__).resolve().parent / "_bundled"
BUNDLED_DIR = _WHEEL_DIR if _WHEEL_DIR.is_dir() else Path(__file__).resolve().parent.parent / "data"


@dataclass(frozen=True)
class Dataset:
    """A named reference table: where it comes from and how its columns map."""

    name: str
    filename: str
    description: str
    columns: dict[str, str] = field(default_factory=dict)
    sha256: str | None = None
    url: str | None = None
    bundled: bool = False
    drop_columns: tuple[str, ...] = ()


DATASETS: dict[str, Dataset] = {
    "chinchilla": Dataset(
        name="chinchilla",
        filename="chinchilla_depth_width.csv",
        description=(
            "245 Chinchilla runs (Hoffmann et al. Fig. 4, digitised by Epoch AI) with width and "
            "depth from the model table, as assembled by Liu et al.; params include embeddings; "
            "flops = 6 params tokens."
        ),
        columns={
            "model_size": "params",
            "FLOP": "flops",
            "num_tokens": "tokens",
            "d_model": "width",
            "n_layers": "depth",
        },
        sha256="cb474e8f5fc87be4132190a0c782d1521c4f06b9c041395b3a78ff2ffc34f83e",
        url="https://raw.githubusercontent.com/liuyz0/DepthScaling/main/Scaling/"
        "get_fitting_data_chinchilla.csv",
    ),
    "chinchilla_epoch": Dataset(
        name="chinchilla_epoch",
        filename="chinchilla_epoch_svg.csv",
        description=(
            "245 Chinchilla runs as extracted from the paper's SVG by Epoch AI (Besiroglu et al. "
            "2024); tokens derived as flops / (6 params)."
        ),
        columns={"Model Size": "params", "Training FLOP": "flops"},
        sha256="193478df4e90f040016431996c45682659306840ecdadf83cfb9cd5ca0aa1b30",
        url="https://raw.githubusercontent.com/epoch-research/analyzing-chinchilla/main/data/"
        "svg_extracted_data.csv",
        drop_columns=("x", "y", "color", "hex_color"),
    ),
    "lm_grid_shakespeare": Dataset(
        name="lm_grid_shakespeare",
        filename="lm_grid_shakespeare.csv",
        description=(
            "48 runs of scalefit's reference trainer on Shakespeare bytes (CPU): depth "
            "{1,2,4,8} x width {32,64,128}, Pre-LN at 3 token budgets and LNS at one; see "
            "data/README.md. Filter by the 'variant' column before fitting."
        ),
        bundled=True,
    ),
    "depth_delusion": Dataset(
        name="depth_delusion",
        filename="depth_delusion.csv",
        description=(
            "30 architectures of Fahim & Karim, The Depth Delusion, Table 6 (bundled); tokens "
            "are an assumption for the 12 large-scale rows (20 x params), see data/README.md."
        ),
        bundled=True,
    ),
    # --- IsoFLOP collection (issue 27): one file, one table per experiment; see
    # scalefit/isoflop/datasets.py and docs/datasets.md. load("isoflops", experiment=ID).
    "isoflops": Dataset(
        name="isoflops",
        filename="isoflops_experiments.csv",
        description=(
            "947 rows of published IsoFLOP sweeps under 8 experiment ids (Open-Athena's "
            "collection: Chinchilla twice, Llama 3 raw and exp loss, three Marin sweeps, "
            "Misfitting); load one with experiment=ID, list them with isoflop_experiments()."
        ),
        sha256="cf343ffda3106862e0e73bfc10ed017f683a03e46f4540896a213276fd180651",
        url="https://raw.githubusercontent.com/Open-Athena/scaling-law-analysis/main/data/"
        "isoflops/extract/isoflops.csv",
    ),
}


def _read(path: Path) -> bytes:
    """The bytes of a reference table: a regular file of bounded size (never a FIFO or device)."""
    return read_input_bytes(path, what="reference table (CSV)")


def _sha256(path: Path) -> str:
    return hashlib.sha256(_read(path)).hexdigest()


def cache_dir() -> Path:
    """Folder for downloaded tables: ``SCALEFIT_CACHE_DIR`` (or ``~/.cache/scalefit``) / data."""
    root = os.environ.get("SCALEFIT_CACHE_DIR") or Path.home() / ".cache" / "scalefit"
    return Path(root) / "data"


def _verified(path: Path, ds: Dataset) -> Path:
    if ds.sha256 and _sha256(path) != ds.sha256:
        raise ScaleFitError(
            f"{path}: sha256 checksum does not match the published {ds.name!r} table "
            f"(expected {ds.sha256[:12]}…); remove or replace the file."
        )
    return path


def resolve(name: str, data_dir: str | os.PathLike | None = None, *, download: bool = True) -> Path:
    """Find (or fetch) the file behind a dataset name and return its verified path.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.
    data_dir : path-like, optional
        A folder to look in first.
    download : bool, default True
        Allow a download into the cache when no local copy exists.

    Returns
    -------
    pathlib.Path
        Path to a file whose checksum matches.
    """
    if name not in DATASETS:
        raise ScaleFitError(
            f"Unknown dataset {name!r}; expected one of {', '.join(sorted(DATASETS))}."
        )
    ds = DATASETS[name]
    if ds.bundled:
        path = BUNDLED_DIR / ds.filename
        if not path.exists():
            raise ScaleFitError(f"bundled table {path} is missing from this installation.")
        return path
    folders = [Path(d) for d in (data_dir, os.environ.get("SCALEFIT_DATA_DIR")) if d]
    folders.append(cache_dir())
    for folder in folders:
        candidate = folder / ds.filename
        if candidate.exists():
            return _verified(candidate, ds)
    if not download:
        raise ScaleFitError(
            f"dataset {name!r} not found in {', '.join(map(str, folders))} and downloads are off."
        )
    target = cache_dir() / ds.filename
    import urllib.error  # here, not at the top: http/ssl/email cost ~20 ms of every command
    import urllib.request

    try:
        with urllib.request.urlopen(ds.url, timeout=30) as resp:  # noqa: S310 - fixed https URL
            payload = resp.read()
    except (urllib.error.URLError, OSError) as exc:
        raise ScaleFitError(
            f"dataset {name!r} is not available locally and the download failed ({exc}); "
            f"put {ds.filename} in a folder and give it (--data-dir DIR on the command line, "
            f"data_dir=DIR in Python) or set SCALEFIT_DATA_DIR."
        ) from exc
    if ds.sha256 and hashlib.sha256(payload).hexdigest() != ds.sha256:
        raise ScaleFitError(f"downloaded {name!r} from {ds.url} but its sha256 does not match.")
    atomic_write_bytes(target, payload)
    return target


def load(
    name: str,
    data_dir: str | os.PathLike | None = None,
    *,
    drop_highest: int = 0,
    download: bool = True,
    experiment: str | None = None,
) -> pd.DataFrame:
    """Load a reference table by name as a validated canonical table.

    Parameters
    ----------
    name : {"chinchilla", "chinchilla_epoch", "depth_delusion"}
        The dataset.
    data_dir : path-like, optional
        Folder holding the public CSVs (else ``SCALEFIT_DATA_DIR``, the cache, a download).
    drop_highest : int, default 0
        Outlier rule passed to :func:`scalefit.read_table` (40 reproduces Liu et al.'s 203 rows).
    download : bool, default True
        Allow downloading into the cache.
    experiment : str, optional
        For ``"isoflops"`` only (required there): one experiment id of
        :func:`isoflop_experiments`; ``load("isoflops:ID")`` is the same.

    Returns
    -------
    pandas.DataFrame
        As returned by :func:`scalefit.read_table`, with ``attrs["scalefit"]["dataset"]`` set.

    Examples
    --------
    >>> t = load("depth_delusion")
    >>> len(t), sorted(t.columns)[:3]
    (30, ['depth', 'flops', 'loss'])
    """
    if _is_isoflops(name):
        return _load_isoflops(name, data_dir, experiment, drop_highest, download)
    if experiment is not None:
        raise ScaleFitError(
            f"The 'experiment' parameter of load applies to 'isoflops' only. Got {experiment!r} "
            f"for {name!r}."
        )
    path = resolve(name, data_dir, download=download)
    ds = DATASETS[name]
    raw = _read(path)
    if ds.sha256 and hashlib.sha256(raw).hexdigest() != ds.sha256:  # replaced since resolve()
        raise ScaleFitError(f"{path}: sha256 checksum does not match the published {name!r} table.")
    try:
        frame = pd.read_csv(io.BytesIO(raw))
    except (pd.errors.ParserError, ValueError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ScaleFitError(f"{path}: not a readable reference table ({msg}).") from None
    frame = frame.drop(columns=[c for c in ds.drop_columns if c in frame.columns])
    table = read_table(frame, ds.columns, drop_highest=drop_highest)
    table.attrs["scalefit"]["source"] = str(path)
    table.attrs["scalefit"]["dataset"] = name
    return table


def is_dataset_name(value: str) -> bool:
    """True when ``value`` names a dataset (``isoflops:ID`` included) rather than a file path."""
    return (value in DATASETS or _is_isoflops(value)) and not Path(value).exists()


# --- IsoFLOP collection (issue 27) ---------------------------------------------------------------
# One file resolved like the Chinchilla tables; the per-experiment rules live in
# scalefit/isoflop/datasets.py (imported here lazily: it pulls in nothing at start-up).


def _is_isoflops(name: str) -> bool:
    return isinstance(name, str) and (name == "isoflops" or name.startswith("isoflops:"))


def _load_isoflops(name, data_dir, experiment, drop_highest, download) -> pd.DataFrame:
    from .isoflop.datasets import frame_of, split_name

    chosen = split_name(name, experiment)
    path = resolve("isoflops", data_dir, download=download)
    raw = _read(path)
    if hashlib.sha256(raw).hexdigest() != DATASETS["isoflops"].sha256:  # replaced since resolve()
        raise ScaleFitError(
            f"{path}: sha256 checksum does not match the published 'isoflops' table."
        )
    table = frame_of(raw, path, chosen)
    if drop_highest:
        from .table import drop_highest_losses

        table = drop_highest_losses(table, drop_highest).reset_index(drop=True)
        table.attrs["scalefit"].update(
            drop_highest=int(drop_highest),
            outlier_rule=f"kept rows with loss strictly below the highest loss value of rank "
            f"{drop_highest}",
        )
    return table


def isoflop_experiments() -> pd.DataFrame:
    """The experiment ids of ``load("isoflops", experiment=ID)`` and what their numbers are.

    Returns
    -------
    pandas.DataFrame
        One row per experiment: ``experiment, n_rows, n_budgets, budget_min, budget_max, loss,
        params, tokens, budget, provenance`` (documented in docs/datasets.md; no file is read).
    """
    from .isoflop.datasets import experiments

    return experiments()
