"""Gemstones by file: canonical columns, row counts, checksums and refusals."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from scalefit import ScaleFitError
from scalefit.datasets import TableNotFound, is_dataset_name, load
from scalefit.datasets.gemstones import FILES

_DIR = os.environ.get("SCALEFIT_DATA_DIR")
needs_gemstones = pytest.mark.skipif(
    not (_DIR and all((Path(_DIR) / f.filename).exists() for f in FILES.values())),
    reason="needs the public Gemstones files (github.com/mcleish7/gemstone-scaling-laws, "
    "wandb_dfs/) in SCALEFIT_DATA_DIR/gemstones/",
)


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """A data folder holding only the Gemstones files, an empty cache, no download allowed."""
    folder = tmp_path / "data"
    (folder / "gemstones").mkdir(parents=True)
    for f in FILES.values():
        shutil.copy(Path(_DIR) / f.filename, folder / f.filename)
    monkeypatch.delenv("SCALEFIT_DATA_DIR", raising=False)
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "cache"))
    return folder


def test_bad_file_name_is_refused():
    with pytest.raises(ScaleFitError, match=r"'file' parameter of load must be one of .*'nope'"):
        load("gemstones", file="nope")
    with pytest.raises(ScaleFitError, match="contradicts"):
        load("gemstones:hot", file="cool_end")
    with pytest.raises(ScaleFitError, match="applies to 'gemstones' only"):
        load("depth_delusion", file="hot")
    with pytest.raises(ScaleFitError, match="do not apply to 'gemstones'"):
        load("gemstones", file="hot", experiment="x")


def test_names():
    assert is_dataset_name("gemstones") and is_dataset_name("gemstones:cool_end")


@needs_gemstones
@pytest.mark.parametrize("key", sorted(FILES))
def test_each_file_loads_with_its_row_count(offline, key):
    t = load("gemstones", offline, file=key, download=False)
    gem = FILES[key]
    assert len(t) == gem.n_rows and t["run"].nunique() == gem.n_runs
    assert {"params", "width", "depth", "tokens", "loss", "flops", "run", "step"} <= set(t.columns)
    np.testing.assert_allclose(t["flops"], 6 * t["params"] * t["tokens"])
    assert t.attrs["scalefit"]["dataset"] == f"gemstones:{key}"
    assert t["width"].between(256, 3072).all() and t["depth"].between(3, 80).all()


@needs_gemstones
def test_default_and_colon_name(offline):
    assert len(load("gemstones", offline, download=False)) == 770
    assert len(load("gemstones:cool_end", offline, download=False)) == 199


@needs_gemstones
def test_checksum_and_missing_file(offline):
    path = offline / FILES["hot"].filename
    path.write_bytes(path.read_bytes().replace(b"3.", b"4.", 1))
    with pytest.raises(ScaleFitError, match="sha256"):
        load("gemstones", offline, file="hot", download=False)
    (offline / FILES["cool_end"].filename).unlink()
    with pytest.raises(TableNotFound, match="wandb_df_for_fitting_cool_end.jsonl"):
        load("gemstones", offline, file="cool_end", download=False)


def _no_network(*args, **kwargs):
    raise OSError("no network in this test")


def test_the_main_file_is_bundled_with_its_licence_and_found_offline(tmp_path, monkeypatch):
    import urllib.request

    from scalefit.datasets import BUNDLED_DIR, locate

    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("SCALEFIT_DATA_DIR", str(empty))
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    main = FILES["hot_100b+"]
    t = load("gemstones")
    assert len(t) == 770 and t["run"].nunique() == 22
    assert Path(t.attrs["scalefit"]["source"]) == BUNDLED_DIR / main.filename
    assert locate("gemstones").where == "bundled"
    licence = (BUNDLED_DIR / "gemstones" / "LICENSE").read_text()
    assert licence.startswith("MIT License") and "Sean McLeish" in licence
    assert not (tmp_path / "cache").exists()  # nothing fetched, nothing copied
    # the other four files are not bundled: looked for, and the download is tried and fails
    with pytest.raises(TableNotFound, match="the download failed: no network in this test"):
        load("gemstones", file="hot")
