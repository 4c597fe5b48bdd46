"""Reference loss tables by name.

``load("depth_delusion")`` reads the table bundled in the repository's ``data/`` folder, as does
``load("gemstones")`` (the main Gemstones file, MIT, shipped with its licence). The two
Chinchilla tables come from public repositories and are not redistributed: they are resolved at run
time from, in order, the ``data_dir`` argument (``--data-dir``), the ``SCALEFIT_DATA_DIR``
environment variable, the user cache (``$SCALEFIT_CACHE_DIR/data``, else
``$XDG_CACHE_HOME/scalefit/data``, else ``~/.cache/scalefit/data``), and finally a download from
the public raw URL into the cache. Every file found or downloaded is checked against its sha256
checksum, and a verified copy found outside the cache is copied into it, so the next run finds it
from any folder. ``make``, the ``scalefit`` command and Python all go through :func:`locate`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from ..core._io import atomic_write_bytes, read_input_bytes, user_cache
from ..core.errors import ScaleFitError
from ..core.table import drop_highest_losses, parse_bytes, read_table

# An installed wheel ships the tables as the package ``scalefit._bundled`` (see setup.py); a source
# checkout (editable install) reads them from the repository's top-level ``data/`` folder.
_WHEEL_DIR = Path(__file__).resolve().parents[1] / "_bundled"
BUNDLED_DIR = _WHEEL_DIR if _WHEEL_DIR.is_dir() else Path(__file__).resolve().parents[2] / "data"


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
    loss_unit: str | None = None  # the loss column's unit, for axis labels (None: not stated)


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
        loss_unit="nats/token",
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
        loss_unit="nats/token",
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
        loss_unit="nats/byte",
    ),
    "depth_delusion": Dataset(
        name="depth_delusion",
        filename="depth_delusion.csv",
        description=(
            "30 architectures of Fahim & Karim, The Depth Delusion, Table 6 (bundled); tokens "
            "are an assumption for the 12 large-scale rows (20 x params), see data/README.md."
        ),
        bundled=True,
        loss_unit="nats/token",
    ),
    # --- IsoFLOP collection (issue 27): one file, one table per experiment; see
    # scalefit/datasets/isoflop.py and docs/datasets.md. load("isoflops", experiment=ID).
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
    # --- Gemstones (issue 36/38): five JSON-lines files under gemstones/, one table per file; see
    # scalefit/datasets/gemstones.py. load("gemstones", file=KEY); this entry is the default file.
    "gemstones": Dataset(
        name="gemstones",
        filename="gemstones/wandb_df_for_fitting_hot_100b+.jsonl",
        description=(
            "Gemstones (McLeish et al., MIT): 22 models, width 256-3072 x depth 3-80, checkpoints "
            "to 350B tokens; files hot_100b+ (the default, bundled with its licence), hot, "
            "cool_begin, cool_end, lr_ablation_hot: load one with file=KEY."
        ),
        sha256="1da97ce3d1394e0223826c8f5ca081cb0fb289ec65d2707fb5430721e92e9659",
        url="https://raw.githubusercontent.com/mcleish7/gemstone-scaling-laws/main/wandb_dfs/"
        "wandb_df_for_fitting_hot_100b+.jsonl",
        bundled=True,
    ),
    # --- OLMo model ladder (issue 43): 31 CSVs under olmo_ladder/ladder-runs/, one long table; see
    # scalefit/datasets/olmo_ladder.py. This entry is the 7B-4T target file.
    "olmo_ladder": Dataset(
        name="olmo_ladder",
        filename="olmo_ladder/ladder-runs/peteish7_eval_anneal.csv",
        description=(
            "OLMo model ladder (Bhagia et al. 2024, Apache-2.0): 190M-3B at 0.5-10x Chinchilla "
            "tokens with reruns, and the 7B-4T target; every evaluation step with validation "
            "losses and bits-per-byte and accuracy for ten downstream tasks."
        ),
        sha256="0742d6c113aa0f9c789cf9e5745678fc6f30eb9b873a1f98068fc6f6522c85df",
        url="https://raw.githubusercontent.com/allenai/OLMo-ladder/67a3f44/src/scripts/paper/data/"
        "ladder-runs/peteish7_eval_anneal.csv",
        loss_unit="nats/token",
    ),
}


def _read(path: Path) -> bytes:
    """The bytes of a reference table: a regular file of bounded size (never a FIFO or device)."""
    return read_input_bytes(path, what="reference table (CSV)")


def cache_dir() -> Path:
    """Folder of the user cache of reference tables.

    ``$SCALEFIT_CACHE_DIR/data`` when that variable is set, else ``$XDG_CACHE_HOME/scalefit/data``,
    else ``~/.cache/scalefit/data``.
    """
    return user_cache() / "data"


def search_path(data_dir: str | os.PathLike | None = None) -> list[tuple[str, Path | None]]:
    """The places a public table is looked for, in order, as ``(label, folder)`` pairs.

    The labels are ``data_dir`` (the argument, ``--data-dir`` on the command line),
    ``SCALEFIT_DATA_DIR`` and ``cache`` (:func:`cache_dir`); a folder is None when it is not
    set. The command line, ``make`` and Python all use this one list.
    """
    env = os.environ.get("SCALEFIT_DATA_DIR")
    return [
        ("data_dir", Path(data_dir) if data_dir else None),
        ("SCALEFIT_DATA_DIR", Path(env) if env else None),
        ("cache", cache_dir()),
    ]


PLACE_NAMES = {
    "data_dir": "the given data folder",
    "SCALEFIT_DATA_DIR": "SCALEFIT_DATA_DIR",
    "cache": "the user cache",
}


def _verified(where: Path | str, raw: bytes, ds: Dataset) -> bytes:
    """``raw`` when it matches the table's published sha256 (the one check of every copy)."""
    if ds.sha256 and hashlib.sha256(raw).hexdigest() != ds.sha256:
        fix = "; remove or replace the file" if isinstance(where, Path) else ""
        raise ScaleFitError(
            f"{where}: sha256 checksum does not match the published {ds.name!r} table "
            f"(expected {ds.sha256[:12]}…){fix}."
        )
    return raw


def _remember(path: Path, raw: bytes, ds: Dataset) -> None:
    """Keep a verified copy in the user cache, so later runs find it without the folder.

    A cache that cannot be written (read-only home, full disk) is not an error: the table was
    found and is used from where it is.
    """
    target = cache_dir() / ds.filename
    try:
        if target.exists() or target.resolve() == path.resolve():
            return
        atomic_write_bytes(target, raw)
    except (OSError, ScaleFitError):  # a cache under a file, unwritable or full: used as is
        return


def fetch_command(name: str) -> str:
    """One shell command that downloads a public table into the user cache."""
    return _fetch_command(DATASETS[name])


def _fetch_command(ds: Dataset) -> str:
    target = cache_dir() / ds.filename
    return f"curl -fL --create-dirs -o {shlex.quote(str(target))} {ds.url}"


class TableNotFound(ScaleFitError):
    """A public table that is in none of the places looked and was not downloaded.

    Attributes
    ----------
    name : str
        The dataset.
    places : list of (str, Path or None)
        Each place looked (:func:`search_path`).
    why : str
        Why nothing was downloaded (downloads off, or the download's error).
    """

    def __init__(self, ds: Dataset, places: list[tuple[str, Path | None]], why: str) -> None:
        self.name, self.places, self.why = ds.name, places, why
        super().__init__(_not_found(ds, places, why))


class Found(NamedTuple):
    """Where :func:`locate` found a table: its verified path and the place's label."""

    path: Path
    where: str


def locate(name: str, data_dir: str | os.PathLike | None = None, *, download: bool = True) -> Found:
    """Find (or fetch) a table and say where it came from (see :func:`resolve`).

    ``where`` is one of the labels of :func:`search_path`, ``"download"`` or ``"bundled"``.
    """
    return _locate(_dataset(name), data_dir, download)[0]


def _dataset(name: str) -> Dataset:
    if name not in DATASETS:
        raise ScaleFitError(
            f"Unknown dataset {name!r}; expected one of {', '.join(sorted(DATASETS))}."
        )
    return DATASETS[name]


def _locate(ds: Dataset, data_dir, download: bool) -> tuple[Found, bytes]:
    """Where the table is and its bytes, read once and checked against its sha256."""
    if ds.bundled:
        path = BUNDLED_DIR / ds.filename
        if not path.exists():
            raise ScaleFitError(f"bundled table {path} is missing from this installation.")
        return Found(path, "bundled"), _verified(path, _read(path), ds)
    places = search_path(data_dir)
    for label, folder in places:
        path = None if folder is None else folder / ds.filename
        if path is not None and path.exists():
            raw = _verified(path, _read(path), ds)
            if label != "cache":
                _remember(path, raw, ds)
            return Found(path, label), raw
    if not download:
        raise TableNotFound(ds, places, "downloads are off")
    import urllib.error  # here, not at the top: http/ssl/email cost ~20 ms of every command
    import urllib.request

    try:
        with urllib.request.urlopen(ds.url, timeout=30) as resp:  # noqa: S310 - fixed https URL
            payload = resp.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = str(getattr(exc, "reason", exc)).replace("(", "").replace(")", "")
        raise TableNotFound(ds, places, f"the download failed: {reason}") from exc
    _verified(f"the download of {ds.name!r} from {ds.url}", payload, ds)
    target = cache_dir() / ds.filename
    atomic_write_bytes(target, payload)
    return Found(target, "download"), payload


def _not_found(ds: Dataset, places: list[tuple[str, Path | None]], why: str) -> str:
    """One line: each place looked, why nothing was fetched, the URL and a command to fetch it."""
    looked = "; ".join(
        f"{PLACE_NAMES[label]}: {'not set' if folder is None else folder}"
        for label, folder in places
    )
    return (
        f"dataset {ds.name!r} ({ds.filename}) was not found. Looked in {looked}. Not "
        f"downloaded: {why}. Its URL is {ds.url}; to fetch it into the cache run: "
        f"{_fetch_command(ds)}"
    )


def resolve(name: str, data_dir: str | os.PathLike | None = None, *, download: bool = True) -> Path:
    """Find (or fetch) the file behind a dataset name and return its verified path.

    Bundled tables are read from the installation. A public table is looked for, in order, in
    ``data_dir``, in ``SCALEFIT_DATA_DIR`` and in the user cache (:func:`search_path`); the first
    copy found is checked against its sha256 and, when it is not in the cache yet, copied there
    so later runs find it anywhere. When no copy exists and ``download`` is true it is downloaded
    into the cache.

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

    Raises
    ------
    ScaleFitError
        When no copy is found (and none could be downloaded): one line naming each place
        looked, the URL and one command that fetches the table.
    """
    return locate(name, data_dir, download=download).path


def load(
    name: str,
    data_dir: str | os.PathLike | None = None,
    *,
    drop_highest: int = 0,
    download: bool = True,
    experiment: str | None = None,
    file: str | None = None,
) -> pd.DataFrame:
    """Load a reference table by name as a validated canonical table.

    Parameters
    ----------
    name : str
        The dataset: one of :data:`DATASETS` (``"olmo_ladder"``: the OLMo ladder's runs as one
        long table, :mod:`scalefit.datasets.olmo_ladder`).
    data_dir : path-like, optional
        Folder holding the public CSVs (else ``SCALEFIT_DATA_DIR``, the cache, a download).
    drop_highest : int, default 0
        Outlier rule passed to :func:`scalefit.read_table` (40 reproduces Liu et al.'s 203 rows).
    download : bool, default True
        Allow downloading into the cache.
    experiment : str, optional
        For ``"isoflops"`` only (required there): one experiment id of
        :func:`isoflop_experiments`; ``load("isoflops:ID")`` is the same.
    file : str, optional
        For ``"gemstones"`` only: one of ``hot_100b+`` (the default), ``hot``, ``cool_begin``,
        ``cool_end``, ``lr_ablation_hot`` (:data:`scalefit.datasets.gemstones.FILES`);
        ``load("gemstones:KEY")`` is the same.

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
    if _is_gemstones(name):
        if experiment is not None or drop_highest:
            raise ScaleFitError(
                "The 'experiment' and 'drop_highest' parameters of load do not apply to "
                f"'gemstones'. Got experiment={experiment!r}, drop_highest={drop_highest!r}."
            )
        return _load_gemstones(name, data_dir, file, download)
    if name == "olmo_ladder" and file is None and experiment is None:
        if drop_highest:
            raise ScaleFitError(
                "The 'drop_highest' parameter of load does not apply to 'olmo_ladder' (rows are "
                f"checkpoints, not runs). Got {drop_highest!r}."
            )
        return _load_olmo_ladder(data_dir, download)
    if file is not None:
        raise ScaleFitError(
            f"The 'file' parameter of load applies to 'gemstones' only. Got {file!r} for {name!r}."
        )
    if _is_isoflops(name):
        return _load_isoflops(name, data_dir, experiment, drop_highest, download)
    if experiment is not None:
        raise ScaleFitError(
            f"The 'experiment' parameter of load applies to 'isoflops' only. Got {experiment!r} "
            f"for {name!r}."
        )
    ds = _dataset(name)
    (path, _), raw = _locate(ds, data_dir, download)
    frame = parse_bytes(raw, path, "reference table")
    frame = frame.drop(columns=[c for c in ds.drop_columns if c in frame.columns])
    table = read_table(frame, ds.columns, drop_highest=drop_highest)
    table.attrs["scalefit"]["source"] = str(path)
    table.attrs["scalefit"]["dataset"] = name
    if ds.loss_unit:
        table.attrs["scalefit"]["loss_unit"] = ds.loss_unit
    return table


def is_dataset_name(value: str) -> bool:
    """True when ``value`` names a dataset (``isoflops:ID`` included) rather than a file path."""
    return (value in DATASETS or _is_isoflops(value) or _is_gemstones(value)) and not Path(
        value
    ).exists()


# --- IsoFLOP collection (issue 27) ---------------------------------------------------------------
# One file resolved like the Chinchilla tables; the per-experiment rules live in
# scalefit/datasets/isoflop.py (imported here lazily: it pulls in nothing at start-up).


def _is_isoflops(name: str) -> bool:
    return isinstance(name, str) and (name == "isoflops" or name.startswith("isoflops:"))


def _load_isoflops(name, data_dir, experiment, drop_highest, download) -> pd.DataFrame:
    from .isoflop import frame_of, split_name

    chosen = split_name(name, experiment)
    (path, _), raw = _locate(DATASETS["isoflops"], data_dir, download)
    table = frame_of(raw, path, chosen)
    if drop_highest:
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

    Examples
    --------
    >>> len(isoflop_experiments())
    8
    """
    from .isoflop import EXPERIMENTS

    return pd.DataFrame([dataclasses.asdict(e) for e in EXPERIMENTS.values()])


# --- Gemstones (issues 36, 38) --------------------------------------------------------------------
# Five files under gemstones/: the main one (hot_100b+) is bundled with its MIT licence, the other
# four are resolved and checksummed like the Chinchilla tables; the per-file facts live in
# scalefit/datasets/gemstones.py.


def _is_gemstones(name: str) -> bool:
    return isinstance(name, str) and (name == "gemstones" or name.startswith("gemstones:"))


def _load_gemstones(name, data_dir, file, download) -> pd.DataFrame:
    from .gemstones import BUNDLED_FILE, frame_of, split_name

    gem = split_name(name, file)
    ds = dataclasses.replace(
        DATASETS["gemstones"],
        filename=gem.filename,
        sha256=gem.sha256,
        url=gem.url,
        bundled=gem.key == BUNDLED_FILE,
    )
    (path, _), raw = _locate(ds, data_dir, download)
    return frame_of(raw, path, gem)


# --- OLMo model ladder (issue 43) -----------------------------------------------------------------
# 31 files resolved and checksummed one by one like the Chinchilla tables; the per-file rules live
# in scalefit/datasets/olmo_ladder.py.


def _load_olmo_ladder(data_dir, download) -> pd.DataFrame:
    from .olmo_ladder import FOLDER, SHA256, checked, frame_of, url

    frames, sources = [], []
    for stem, digest in SHA256.items():
        ds = dataclasses.replace(
            DATASETS["olmo_ladder"], filename=f"{FOLDER}/{stem}.csv", sha256=digest, url=url(stem)
        )
        (path, _), raw = _locate(ds, data_dir, download)
        frames.append(frame_of(raw, path, stem))
        sources.append(str(path))
    return checked(pd.concat(frames, ignore_index=True), sources)
