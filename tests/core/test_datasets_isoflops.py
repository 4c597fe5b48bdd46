"""The published IsoFLOP collection by experiment: offline loading, checks, refusals."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from scalefit import ScaleFitError
from scalefit.datasets import DATASETS, is_dataset_name, isoflop_experiments, load, resolve

FILE = DATASETS["isoflops"].filename
_DIR = os.environ.get("SCALEFIT_DATA_DIR")
needs_isoflops = pytest.mark.skipif(
    not (_DIR and (Path(_DIR) / FILE).exists()),
    reason=f"needs the public IsoFLOP sweeps {FILE} (not redistributed; "
    f"{DATASETS['isoflops'].url}) in a folder named by SCALEFIT_DATA_DIR",
)
IDS = list(isoflop_experiments()["experiment"])


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """A data folder holding only the collection, an empty cache, no download allowed."""
    folder = tmp_path / "data"
    folder.mkdir()
    shutil.copy(Path(_DIR) / FILE, folder / FILE)
    monkeypatch.delenv("SCALEFIT_DATA_DIR", raising=False)
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "cache"))
    return folder


def test_listing_has_the_eight_experiments_without_a_file():
    frame = isoflop_experiments()
    assert len(frame) == 8 and frame["experiment"].is_unique
    assert frame["n_rows"].sum() == 947
    assert {"loss", "params", "tokens", "budget", "provenance"} <= set(frame.columns)
    raw = frame.set_index("experiment").loc["llama_3__raw_loss", "loss"]
    assert "as plotted" in raw


@needs_isoflops
@pytest.mark.parametrize("experiment", IDS)
def test_every_experiment_loads_offline_and_validated(offline, experiment):
    meta = isoflop_experiments().set_index("experiment").loc[experiment]
    table = load("isoflops", offline, experiment=experiment, download=False)
    assert len(table) == meta["n_rows"]
    assert {"params", "tokens", "flops", "loss", "budget"} <= set(table.columns)
    assert table["budget"].nunique() == meta["n_budgets"]
    assert table["budget"].min() == pytest.approx(meta["budget_min"], rel=1e-2)
    assert table["budget"].max() == pytest.approx(meta["budget_max"], rel=1e-2)
    np.testing.assert_allclose(table["flops"], 6 * table["params"] * table["tokens"])
    for col in ("params", "tokens", "loss", "budget"):
        assert np.all(np.isfinite(table[col])) and np.all(table[col] > 0)
    info = table.attrs["scalefit"]
    assert info["experiment"] == experiment and info["source"] == str(offline / FILE)


@needs_isoflops
def test_llama_exp_loss_is_exp_of_raw_loss(offline):
    raw = load("isoflops:llama_3__raw_loss", offline, download=False)
    exp = load("isoflops", offline, experiment="llama_3__exp_loss", download=False)
    np.testing.assert_allclose(exp["loss"], np.exp(raw["loss"]), rtol=1e-12)
    np.testing.assert_array_equal(exp["params"], raw["params"])


def test_checksum_mismatch_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / FILE).write_text("source,experiment,params,tokens,budget,loss\n")
    with pytest.raises(ScaleFitError, match="sha256"):
        load("isoflops", tmp_path, experiment=IDS[0], download=False)
    with pytest.raises(ScaleFitError, match="sha256"):
        resolve("isoflops", tmp_path)


@needs_isoflops
def test_a_one_byte_change_is_refused(offline):
    data = bytearray((offline / FILE).read_bytes())
    data[-3] = ord("7") if data[-3] != ord("7") else ord("8")
    (offline / FILE).write_bytes(bytes(data))
    with pytest.raises(ScaleFitError, match="sha256"):
        load("isoflops", offline, experiment=IDS[0], download=False)


def test_missing_file_offline_is_a_clear_error(tmp_path, monkeypatch):

    monkeypatch.delenv("SCALEFIT_DATA_DIR", raising=False)
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ScaleFitError, match="not found"):
        load("isoflops", tmp_path, experiment=IDS[0], download=False)


@pytest.mark.parametrize(
    ("name", "kwargs", "match"),
    [
        ("isoflops", {}, "needs an experiment"),
        ("isoflops", {"experiment": "llama3"}, "must be one of"),
        ("isoflops:nope", {}, "Got 'nope'"),
        ("isoflops:llama_3__raw_loss", {"experiment": "llama_3__exp_loss"}, "different"),
        ("chinchilla", {"experiment": "llama_3__raw_loss"}, "applies to 'isoflops' only"),
    ],
)
def test_bad_experiment_arguments_are_one_line_errors(name, kwargs, match):
    with pytest.raises(ScaleFitError, match=match) as info:
        load(name, **kwargs)
    assert "\n" not in str(info.value)


def test_isoflops_names_are_dataset_names():
    assert is_dataset_name("isoflops") and is_dataset_name("isoflops:llama_3__raw_loss")
    assert not is_dataset_name("isoflop")


def test_cli_refuses_an_unknown_experiment_in_one_line(capsys):
    from scalefit.cli import main

    code = main(["fit", "isoflops:nope", "--law", "chinchilla"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Got 'nope'" in err and "llama_3__exp_loss" in err


@needs_isoflops
def test_cli_reads_an_experiment_by_name(capsys):
    from scalefit.cli import main

    code = main(["isoflop", "isoflops:marin_202603__dclm__llama_2"])
    out, _ = capsys.readouterr()
    assert code == 0 and "7 budgets" in out


@needs_isoflops
def test_drop_highest_applies_to_one_experiment(offline):
    full = load("isoflops:llama_3__raw_loss", offline, download=False)
    kept = load("isoflops:llama_3__raw_loss", offline, drop_highest=3, download=False)
    assert len(kept) == 130 and kept["loss"].max() < np.sort(full["loss"])[-3]
    assert kept.attrs["scalefit"]["drop_highest"] == 3
