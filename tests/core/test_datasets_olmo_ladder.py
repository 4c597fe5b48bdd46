"""The OLMo ladder as one long table: runs, counts, flags, checksums and refusals."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from scalefit import ScaleFitError
from scalefit.datasets import TableNotFound, is_dataset_name, load
from scalefit.datasets.olmo_ladder import FOLDER, SHA256, SIZES, TASKS

_DIR = os.environ.get("SCALEFIT_DATA_DIR")
needs_ladder = pytest.mark.skipif(
    not (_DIR and all((Path(_DIR) / FOLDER / f"{s}.csv").exists() for s in SHA256)),
    reason="needs the OLMo ladder CSVs (github.com/allenai/OLMo-ladder, "
    "src/scripts/paper/data/ladder-runs/) in SCALEFIT_DATA_DIR/olmo_ladder/ladder-runs/",
)


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """A data folder holding only the ladder files, an empty cache, no download allowed."""
    folder = tmp_path / "data"
    (folder / FOLDER).mkdir(parents=True)
    for stem in SHA256:
        shutil.copy(Path(_DIR) / FOLDER / f"{stem}.csv", folder / FOLDER / f"{stem}.csv")
    monkeypatch.delenv("SCALEFIT_DATA_DIR", raising=False)
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "cache"))
    return folder


def test_names_and_refusals():
    assert is_dataset_name("olmo_ladder")
    with pytest.raises(ScaleFitError, match="'drop_highest' parameter of load does not apply"):
        load("olmo_ladder", drop_highest=3)
    with pytest.raises(ScaleFitError, match="applies to 'gemstones' only"):
        load("olmo_ladder", file="hot")


@needs_ladder
def test_the_ladder_loads_as_one_long_table(offline):
    t = load("olmo_ladder", offline, download=False)
    runs = t.groupby("run").first()
    assert len(runs) == 31 and runs["rerun"].sum() == 5 and runs["target"].sum() == 1
    assert sorted(runs["size"].unique()) == sorted(SIZES)
    for size, (params, per_token) in SIZES.items():
        rows = t[t["size"] == size]
        assert (rows["params"] == params).all()
        np.testing.assert_allclose(rows["flops"], per_token * rows["tokens"])
    final = t[~t["target"]].sort_values("tokens").groupby("run").last()
    # kxC = k * 20 tokens per parameter, to within the last batch
    np.testing.assert_allclose(
        final["tokens"], 20 * final["multiplier"] * final["params"], rtol=0.01
    )
    for task in TASKS:
        assert t[f"acc_{task}"].between(0, 1).all() and (t[f"bpb_{task}"] > 0).all()
    target = t[t["target"]].iloc[0]
    assert target["size"] == "7B" and target["tokens"] > 3.9e12
    assert t.attrs["scalefit"]["dataset"] == "olmo_ladder"


@needs_ladder
def test_a_changed_file_or_a_missing_one_is_refused(offline):
    path = offline / FOLDER / "370M-2xC.csv"
    path.chmod(0o644)
    path.write_bytes(path.read_bytes().replace(b"0.", b"1.", 1))
    with pytest.raises(ScaleFitError, match=r"370M-2xC.csv: sha256 checksum does not match"):
        load("olmo_ladder", offline, download=False)
    path.unlink()
    with pytest.raises(TableNotFound, match="370M-2xC.csv.*downloads are off"):
        load("olmo_ladder", offline, download=False)
