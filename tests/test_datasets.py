import numpy as np
import pytest
from conftest import needs_reference_data

from scalefit import ScaleFitError
from scalefit.accounting import param_count
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
