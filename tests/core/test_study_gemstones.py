"""The Gemstones study (``docs/studies/gemstones.py``): its published fit, accounting and splits.

The study's numbers are on docs/gemstones.md and docs/studies/depth.md; these checks pin the
pieces those numbers rest on, without fitting (each well under a second).
"""

from pathlib import Path

import numpy as np
import pytest
from conftest import load_study, needs_reference_data

from scalefit import datasets
from scalefit.laws import get_law

pytestmark = needs_reference_data


def _study():
    return load_study("gemstones")


def _published_file() -> Path:
    import os

    path = Path(os.environ["SCALEFIT_DATA_DIR"]) / "gemstones" / "published_fits"
    path = path / _study().PUBLISHED
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


def test_published_fit_is_the_decomposed_law_at_the_authors_numbers():
    """The authors' logsumexp form is scalefit's decomposed law with c = exp(coefficient)."""
    _published_file()
    study = _study()
    table = datasets.load("gemstones")
    # /work/shared/data/README.md: exponents 0.2607 / 0.1416 / 0.5310, log-coefficients
    # 2.114 / 0.731 / 11.284, e = -4555 (so L0 = exp(e) = 0)
    params = {"c_width": np.exp(2.1144598737), "a_width": 0.2606504897,
              "c_depth": np.exp(0.7307645279), "a_depth": 0.1416453973,
              "c_tokens": np.exp(11.2841184982), "a_tokens": 0.530963438, "L0": 0.0}  # fmt: skip
    want = get_law("decomposed").evaluate(params, table)
    np.testing.assert_allclose(study.published(table), want, rtol=1e-12)
    err = np.abs(np.log(study.published(table)) - np.log(table["loss"]))
    assert 0.005 < err.mean() < 0.02  # a fit, not an interpolation (in-sample, all 770 rows)


def test_gemstones_accounting_counts_the_published_parameters():
    acc = _study().GEM_ACCOUNTING
    shapes = datasets.load("gemstones").groupby("run")[["width", "depth", "params"]].first()
    counted = acc.params(shapes["depth"].to_numpy(), shapes["width"].to_numpy(), exact=True)
    rel = counted / shapes["params"].to_numpy() - 1
    assert len(shapes) == 22 and np.max(np.abs(rel)) < 0.016
    assert np.median(np.abs(rel)) < 1e-3


def test_held_out_shapes_are_the_largest_and_every_token_count():
    study = _study()
    tables = study.tables()
    gem = tables["gemstones"]
    for split, n in (("2B", 3), ("1B+2B", 6)):
        held = study.largest(gem, "gemstones", split)
        sizes = gem.groupby("run")["params"].first()
        assert gem.loc[held, "run"].nunique() == n
        assert gem.loc[held, "params"].min() > gem.loc[~held, "params"].max()
        assert gem.loc[held, "tokens"].nunique() == gem["tokens"].nunique() == 35
        assert set(gem.loc[held, "run"]) == set(sizes.nlargest(n).index)
    chin = tables["chinchilla"]
    held = study.largest(chin, "chinchilla", "5B+")
    assert len(chin) == 203 and chin.loc[held, "run"].nunique() == 5
    assert chin.loc[held, "params"].min() > 5e9 >= chin.loc[~held, "params"].max()


def test_design_reads_what_each_table_measures():
    study = _study()
    tables = study.tables()
    gem, chin = study.design(tables["gemstones"]), study.design(tables["chinchilla"])
    assert gem["depth_range"] == "3-80" and gem["shapes"] == 22
    assert chin["depth_range"] == "12-47" and chin["width_range"] == "768-5120"
    # Chinchilla's widths grow with depth; Gemstones varies them apart
    assert chin["corr_lnW_lnl"] > 0.9 and gem["corr_lnW_lnl"] < 0


def test_figure_draws_from_the_recorded_results(tmp_path):
    from conftest import assert_png

    results = Path(__file__).resolve().parents[2] / "docs" / "studies" / "results"
    out = tmp_path / "depth.png"
    _study().figure(results, out)
    assert_png(out, min_width=1000)
