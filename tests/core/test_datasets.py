import dataclasses

import numpy as np
import pytest
from conftest import needs_reference_data

from scalefit import ScaleFitError
from scalefit.core.accounting import param_count
from scalefit.datasets import DATASETS, load, resolve


def test_depth_delusion_bundled_and_checked():
    t = load("depth_delusion")
    assert len(t) == 30
    assert set(t["set"]) == {"baseline", "large_scale"}
    assert (t.loc[t["set"] == "baseline", "tokens"] == 6.4e9).all()
    acc = np.array(
        [
            param_count(int(d), int(w), vocab=50257, embeddings="untied", norms=False)
            for d, w in zip(t["depth"], t["width"], strict=True)
        ]
    )
    rel = (t["params"].to_numpy() - acc) / acc
    typo = (t["depth"] == 56) & (t["width"] == 2176)
    assert typo.sum() == 1 and rel[typo.to_numpy()][0] < -0.1  # documented in data/README.md
    assert np.all(np.abs(rel[~typo.to_numpy()]) < 0.01)


@needs_reference_data
def test_reference_tables_resolve_with_checksums():
    t = load("chinchilla")
    assert len(t) == 245 and {"width", "depth", "tokens", "flops"} <= set(t.columns)
    e = load("chinchilla_epoch")
    assert len(e) == 245 and "x" not in e.columns
    np.testing.assert_allclose(e["tokens"], e["flops"] / (6 * e["params"]))


def test_offline_with_nothing_local_is_a_clear_error(tmp_path, monkeypatch):

    monkeypatch.delenv("SCALEFIT_DATA_DIR", raising=False)
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ScaleFitError, match="not found"):
        resolve("chinchilla", tmp_path, download=False)
    with pytest.raises(ScaleFitError, match="Unknown dataset"):
        resolve("nope")


def test_checksum_mismatch_is_rejected(tmp_path):
    (tmp_path / DATASETS["chinchilla"].filename).write_text("model_size,loss\n1,2\n")
    with pytest.raises(ScaleFitError, match="sha256"):
        resolve("chinchilla", tmp_path)


def test_lm_grid_bundled():
    t = load("lm_grid_shakespeare")
    assert {"depth", "width", "tokens", "params", "loss", "variant"} <= set(t.columns)
    assert set(t["variant"]) >= {"pre_ln", "lns"}


# ---------------- one lookup, a cache that remembers
TINY = b"model_size,num_tokens,FLOP,loss\n1e6,2e7,1.2e14,3.5\n2e6,4e7,4.8e14,3.2\n"


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A public-style table (checksummed, with a file:// URL) and an empty home: no network."""
    import hashlib

    from scalefit.datasets import Dataset

    src = tmp_path / "published" / "tiny.csv"
    src.parent.mkdir()
    src.write_bytes(TINY)
    ds = Dataset(
        name="tiny",
        filename="tiny.csv",
        description="two rows",
        columns={"model_size": "params", "num_tokens": "tokens", "FLOP": "flops"},
        sha256=hashlib.sha256(TINY).hexdigest(),
        url=src.as_uri(),
    )
    monkeypatch.setitem(DATASETS, "tiny", ds)
    for var in ("SCALEFIT_DATA_DIR", "SCALEFIT_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return ds


def _folder(tmp_path, name):
    d = tmp_path / name
    d.mkdir()
    (d / "tiny.csv").write_bytes(TINY)
    return d


def test_cache_folder_follows_scalefit_then_xdg_then_home(tmp_path, monkeypatch, tiny):
    from scalefit.datasets import cache_dir

    assert cache_dir() == tmp_path / "home" / ".cache" / "scalefit" / "data"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "scalefit" / "data"
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "sc"))
    assert cache_dir() == tmp_path / "sc" / "data"


def test_every_cache_user_follows_the_one_rule(tmp_path, monkeypatch, tiny):
    """Datasets, the compiled programs and the trainer's corpora share one cache root."""
    from scalefit.fit._programs import jax_cache_dir
    from scalefit.train.data import cache_dir as trainer_cache

    monkeypatch.delenv("SCALEFIT_JAX_CACHE", raising=False)
    for var, root in (
        ("XDG_CACHE_HOME", tmp_path / "xdg"),
        ("SCALEFIT_CACHE_DIR", tmp_path / "sc"),
    ):
        monkeypatch.setenv(var, str(root))
        base = root / "scalefit" if var == "XDG_CACHE_HOME" else root
        assert trainer_cache() == base
        assert jax_cache_dir() == base / "jax"


def test_lookup_order_and_the_cache_remembers_a_verified_copy(tmp_path, monkeypatch, tiny):
    from scalefit.datasets import cache_dir, locate

    given, env = _folder(tmp_path, "given"), _folder(tmp_path, "env")
    monkeypatch.setenv("SCALEFIT_DATA_DIR", str(env))
    found = locate("tiny", given, download=False)
    assert (found.where, found.path) == ("data_dir", given / "tiny.csv")
    assert (cache_dir() / "tiny.csv").read_bytes() == TINY  # remembered
    (cache_dir() / "tiny.csv").unlink()
    found = locate("tiny", download=False)
    assert (found.where, found.path) == ("SCALEFIT_DATA_DIR", env / "tiny.csv")
    # the folder is gone from the environment: the cache answers, from any folder, offline
    monkeypatch.delenv("SCALEFIT_DATA_DIR")
    monkeypatch.chdir(tmp_path)
    found = locate("tiny", download=False)
    assert (found.where, found.path) == ("cache", cache_dir() / "tiny.csv")
    assert len(load("tiny", download=False)) == 2


def test_a_copy_that_fails_its_checksum_is_not_remembered(tmp_path, tiny):
    from scalefit.datasets import cache_dir

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "tiny.csv").write_bytes(TINY + b"3e6,6e7,1.08e15,3.0\n")
    with pytest.raises(ScaleFitError, match="sha256"):
        resolve("tiny", bad, download=False)
    assert not (cache_dir() / "tiny.csv").exists()


def test_download_on_request_lands_in_the_cache(tmp_path, tiny):
    from scalefit.datasets import cache_dir, locate

    found = locate("tiny", download=True)  # tiny's URL is a local file:// URL
    assert (found.where, found.path) == ("download", cache_dir() / "tiny.csv")
    assert found.path.read_bytes() == TINY


def _max_paren_depth(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        deepest = max(deepest, depth)
    return deepest


@pytest.mark.parametrize("download", [False, True])
def test_not_found_names_each_place_the_url_and_one_fetch_command(
    tmp_path, monkeypatch, tiny, download
):
    from scalefit.datasets import TableNotFound, cache_dir

    monkeypatch.setitem(
        DATASETS, "tiny", dataclasses.replace(tiny, url=(tmp_path / "gone.csv").as_uri())
    )
    monkeypatch.setenv("SCALEFIT_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(TableNotFound) as info:
        resolve("tiny", tmp_path / "given", download=download)
    msg = str(info.value)
    assert "\n" not in msg and _max_paren_depth(msg) <= 1
    for place in (tmp_path / "given", tmp_path / "nowhere", cache_dir()):
        assert str(place) in msg
    assert ("downloads are off" in msg) != download and ("download failed" in msg) == download
    assert (tmp_path / "gone.csv").as_uri() in msg
    assert f"curl -fL --create-dirs -o {cache_dir() / 'tiny.csv'} " in msg


def test_a_checkout_and_a_wheel_look_in_the_same_places():
    """No folder beside a source checkout: a user's clone finds what a wheel finds."""
    from scalefit.datasets import search_path

    labels = [label for label, _ in search_path()]
    assert labels == ["data_dir", "SCALEFIT_DATA_DIR", "cache"]
