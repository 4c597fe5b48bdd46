"""Gemstones: a real width × depth × tokens grid of 22 language models, by file.

McLeish et al.'s Gemstones (github.com/mcleish7/gemstone-scaling-laws, MIT licence) trained 22
decoder-only models of 48M–2.0B parameters, width 256–3072 × depth 3–80, to up to 350B tokens,
with cooldown branches and a learning-rate ablation. The main file (``hot_100b+``, 157 kB) is
bundled with the package and its MIT licence (``data/gemstones/``); the other four of the
repository's ``wandb_dfs/`` files (one JSON object a line) are resolved like the other public tables
(``data_dir``, ``SCALEFIT_DATA_DIR``, the cache, a checksummed download; see
:func:`scalefit.datasets.resolve`). Each is checked against its sha256 and returned as a
validated canonical table::

    from scalefit import datasets
    runs = datasets.load("gemstones", file="cool_end")   # or load("gemstones:cool_end")

Columns of the returned table: ``params`` (``params_active_precise``), ``width``, ``depth``,
``tokens``, ``loss`` (``final_loss``: the loss at that checkpoint, nats per token), ``run`` (the
run name), ``step``, ``flops = 6 · params · tokens`` (derived), and the source's ``num_nodes`` and
``seconds_per_step`` unchanged. Every row is a checkpoint: group by ``run`` before any
bootstrap, and treat rows of one run as correlated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..core.errors import ScaleFitError
from ..core.table import parse_bytes, read_table, require_file_columns

#: Folder of the files inside a data directory.
FOLDER = "gemstones"
#: The file used when none is named; the one bundled with the package (``data/gemstones/``).
DEFAULT_FILE = BUNDLED_FILE = "hot_100b+"
#: Source column -> canonical column.
COLUMNS = {
    "params_active_precise": "params",
    "final_loss": "loss",
    "run_name": "run",
    "width": "width",
    "depth": "depth",
    "tokens": "tokens",
}
URL = "https://raw.githubusercontent.com/mcleish7/gemstone-scaling-laws/main/wandb_dfs/"


@dataclass(frozen=True)
class GemFile:
    """One shipped file: its key, name, checksum, row and run counts, and what it holds."""

    key: str
    sha256: str
    n_rows: int
    n_runs: int
    what: str

    @property
    def filename(self) -> str:
        """Path inside a data folder."""
        return f"{FOLDER}/wandb_df_for_fitting_{self.key}.jsonl"

    @property
    def url(self) -> str:
        """Public raw URL (the checksum guards what it serves)."""
        return URL + f"wandb_df_for_fitting_{self.key}.jsonl"


FILES: dict[str, GemFile] = {
    f.key: f
    for f in (
        GemFile(
            "hot_100b+",
            "1da97ce3d1394e0223826c8f5ca081cb0fb289ec65d2707fb5430721e92e9659",
            770,
            22,
            "main constant-lr ('hot') runs, checkpoints every 10B tokens, 10B-350B tokens",
        ),
        GemFile(
            "hot",
            "655467b59c99383403d6f73f5b7f23c02aea3f12935dc110382d8a8b43a0ff5d",
            220,
            22,
            "the same runs, 10B-100B tokens",
        ),
        GemFile(
            "cool_begin",
            "0e9991b2e0f694f7e01b4c49debd28b5075c1aff993344f753ebca96341b9510",
            199,
            20,
            "start of the cooldown branches forked every 10B tokens (10B-100B)",
        ),
        GemFile(
            "cool_end",
            "bdf01b6b21bafc414218124a6f9e195cee07f3d69ceacbfae2fcf069d34f4e61",
            199,
            20,
            "end of the cooldown branches (11B-110B tokens): each shape's loss after a cooldown",
        ),
        GemFile(
            "lr_ablation_hot",
            "acb4468e5fcba4f01bdf9584ccbaa513e9cece68f8daf46e452a867f355483ac",
            200,
            20,
            "the same shapes at a lower learning rate, 10B-100B tokens",
        ),
    )
}


def split_name(name: str, file: str | None) -> GemFile:
    """The file of ``load("gemstones", file=...)`` / ``load("gemstones:KEY")``."""
    key = name.split(":", 1)[1] if ":" in name else None
    if key is not None and file is not None and key != file:
        raise ScaleFitError(
            f"The 'file' parameter of load ({file!r}) contradicts the name {name!r}."
        )
    key = key or file or DEFAULT_FILE
    if key not in FILES:
        raise ScaleFitError(
            f"The 'file' parameter of load must be one of {sorted(FILES)} for 'gemstones'. "
            f"Got {key!r} instead."
        )
    return FILES[key]


def frame_of(raw: bytes, path: Path, gem: GemFile) -> pd.DataFrame:
    """The canonical table of one file's bytes (checked: columns, row count, values)."""
    frame = parse_bytes(raw, path, "JSON-lines table", pd.read_json, lines=True)
    require_file_columns(frame, [*COLUMNS, "step"], path)
    if len(frame) != gem.n_rows:
        raise ScaleFitError(f"{path}: {len(frame)} rows; the {gem.key!r} file has {gem.n_rows}.")
    frame = frame.rename(columns={"run_name": "run"})
    table = read_table(frame, {k: v for k, v in COLUMNS.items() if k != "run_name"})
    table["step"] = table["step"].astype(int)
    table.attrs["scalefit"]["source"] = str(path)
    table.attrs["scalefit"]["dataset"] = f"gemstones:{gem.key}"
    table.attrs["scalefit"]["loss_unit"] = "nats/token"
    return table


#: The authors' own fits of the decomposed law on ``hot_100b+`` (their
#: ``parameters_delta-3/-4/approach_3_width_depth_grid_search_0_hot_100b+.json``), by Huber
#: threshold: ``log L = logsumexp(c_i - a_i log x_i, e)`` over ``x = (width, depth, tokens)``,
#: fitted by grid search then L-BFGS on the *summed* ``scipy.special.huber(delta, r)`` of the log
#: residuals; ``objective`` is the value they report (``loss``). ``e`` ran to -4555 / -156:
#: their irreducible loss is ``exp(e) = 0``.
PUBLISHED: dict[float, dict[str, tuple[float, ...] | float]] = {
    1e-3: {
        "exponents": (0.2606504897, 0.1416453973, 0.530963438),
        "coefficients": (2.1144598737, 0.7307645279, 11.2841184982),
        "irreducible": -4555.3789970242,
        "objective": 0.0038782174,
    },
    1e-4: {
        "exponents": (0.2607743843, 0.1418010881, 0.5420589921),
        "coefficients": (2.1161206619, 0.7321112501, 11.5418232414),
        "irreducible": -155.5414963039,
        "objective": 0.0004199462,
    },
}


def published_params(delta: float = 1e-3) -> dict[str, float]:
    """McLeish et al.'s published decomposed-law fit of ``hot_100b+`` in scalefit's parameters.

    Parameters
    ----------
    delta : {1e-3, 1e-4}, default 1e-3
        The Huber threshold of their fit (:data:`PUBLISHED`).

    Returns
    -------
    dict
        ``c_width, a_width, c_depth, a_depth, c_tokens, a_tokens, L0`` of the ``decomposed``
        law: ``c = exp(coefficient)``, ``L0 = exp(irreducible)`` (0.0 and 3e-68: no floor).

    Examples
    --------
    >>> p = published_params()
    >>> round(p["a_depth"], 4), p["L0"]
    (0.1416, 0.0)
    """
    if delta not in PUBLISHED:
        raise ScaleFitError(
            f"The 'delta' parameter of published_params must be one of {sorted(PUBLISHED)}. "
            f"Got {delta!r} instead."
        )
    fit = PUBLISHED[delta]
    out: dict[str, float] = {}
    for name, a, c in zip(
        ("width", "depth", "tokens"), fit["exponents"], fit["coefficients"], strict=True
    ):
        out[f"c_{name}"], out[f"a_{name}"] = math.exp(c), a
    out["L0"] = math.exp(fit["irreducible"])
    return out
