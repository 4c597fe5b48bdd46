"""The demo recommends only what the data pin down, and finds its table the documented way."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scalefit.allocate import Accounting, allocate
from scalefit.allocate.report import budget_text
from scalefit.cli import main

# The bundled table's decomposed fit (rounded): the loss keeps falling as depth shrinks to 1.
SHALLOW = dict(
    c_width=12.98,
    a_width=0.771,
    c_depth=0.0405,
    a_depth=3.047,
    c_tokens=94.18,
    a_tokens=0.3128,
    L0=0.4843,
)
# Chinchilla's decomposed fit (rounded): an interior optimum near depth 20 at 1e19 FLOP.
INTERIOR = dict(
    c_width=274.7,
    a_width=0.9455,
    c_depth=6.721,
    a_depth=1.325,
    c_tokens=529.3,
    a_tokens=0.2991,
    L0=1.754,
)


def test_an_optimum_on_the_depth_bound_is_a_boundary_solution_not_a_recommendation():
    acc = Accounting(vocab=256, embeddings="tied")
    a = allocate("decomposed", [1e13], params=SHALLOW, head_dim=32, accounting=acc)
    row = a.summary.iloc[0]
    assert int(row["depth"]) == 1 and bool(row["boundary"]) and not bool(row["recommended"])
    assert any(w.startswith("boundary solution at 1e13 FLOP") for w in a.warnings)
    text = budget_text(a, 0, 1e13)
    assert "recommended  depth" not in text and "boundary solution" in text
    # a higher floor moves the edge: the optimum sits on it again
    a3 = allocate("decomposed", [1e13], params=SHALLOW, head_dim=32, accounting=acc, min_depth=3)
    assert int(a3.summary["depth"].iloc[0]) == 3 and bool(a3.summary["boundary"].iloc[0])
    # an interior optimum stays a recommendation
    b = allocate("decomposed", [1e19], params=INTERIOR, head_dim=128)
    row = b.summary.iloc[0]
    assert 10 < row["depth"] < 40 and not bool(row["boundary"]) and bool(row["recommended"])
    assert "recommended  depth" in budget_text(b, 0, 1e19)
    assert not any("boundary" in w for w in b.warnings)


@pytest.fixture(scope="module")
def bundled_demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["demo", "--bundled", "--bootstrap", "20", "--out", str(out)])
    assert code == 0
    return out, buf.getvalue()


def test_bundled_demo_marks_the_unpinned_exponent_not_identified_everywhere(bundled_demo):
    from scalefit import FitResult

    out, text = bundled_demo
    res = FitResult.load(out / "fit.json")
    # many resamples put a_depth outside its declared range [0, 5]
    assert res.diagnostics["boot_out_of_range_share"]["a_depth"] > 0.025
    assert "a_depth" in res.not_identified and not res.identified
    assert not res.summary().loc["a_depth", "identified"]
    assert np.isnan(res.summary().loc["a_depth", "stderr"])
    assert "a_depth" in res.to_dict()["not_identified"]
    assert "not identified: a_depth" in text


def test_bundled_demo_recommends_no_shape_and_says_why(bundled_demo):
    out, text = bundled_demo
    rec = pd.read_csv(out / "recommendation.csv")
    assert not rec["recommended"].any() and rec["boundary"].all()
    assert rec["depth"].isna().all() and (rec["not_identified"] == "a_depth").all()
    closing = text.split("== what to train")[1]
    assert "What it does pin down: depth" not in closing
    assert "\n   depth         1 [" not in closing  # no depth is given as a value
    assert "recommends no shape" in closing and "boundary solution" in closing
    assert "not how it depends on depth" in " ".join(closing.split())
    alloc = pd.read_csv(out / "allocation.csv")
    assert alloc["boundary"].all() and not alloc["recommended"].any()


# ---------------- where the demo's table comes from
def _no_data_anywhere(tmp_path, monkeypatch):

    for var in ("SCALEFIT_DATA_DIR", "SCALEFIT_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def test_demo_fallback_names_each_place_the_url_and_one_command(tmp_path, monkeypatch):
    from scalefit.cli.demo import FALLBACK, choose_data
    from scalefit.datasets import DATASETS, cache_dir

    _no_data_anywhere(tmp_path, monkeypatch)
    spec, why = choose_data(str(tmp_path / "given"), download=False, bundled=False)
    assert spec is FALLBACK
    assert str(tmp_path / "given") in why and "SCALEFIT_DATA_DIR: not set" in why
    assert str(cache_dir()) in why and str(tmp_path / "xdg") in why
    assert DATASETS["chinchilla"].url in why
    fetch = [line for line in why.splitlines() if "curl" in line]
    assert len(fetch) == 1 and str(cache_dir() / "chinchilla_depth_width.csv") in fetch[0]
    depth = 0
    for ch in why:  # no nested parentheses
        depth += (ch == "(") - (ch == ")")
        assert depth <= 1


def test_demo_finds_the_table_once_then_from_the_cache(tmp_path, monkeypatch):
    import shutil

    from scalefit.cli.demo import CHINCHILLA, choose_data
    from scalefit.datasets import DATASETS, cache_dir

    shared = Path(os.environ.get("SCALEFIT_DATA_DIR", "")) / DATASETS["chinchilla"].filename
    if not shared.is_file():
        pytest.skip("the public Chinchilla table is not here (CI sets SCALEFIT_DATA_DIR)")
    _no_data_anywhere(tmp_path, monkeypatch)
    folder = tmp_path / "tables"
    folder.mkdir()
    shutil.copy(shared, folder)
    monkeypatch.setenv("SCALEFIT_DATA_DIR", str(folder))
    spec, why = choose_data(None, download=False, bundled=False)
    assert spec is CHINCHILLA and why == f"found in SCALEFIT_DATA_DIR={folder}, sha256 verified"
    monkeypatch.delenv("SCALEFIT_DATA_DIR")
    spec, why = choose_data(None, download=False, bundled=False)
    assert spec is CHINCHILLA and why.startswith(f"found in the user cache {cache_dir()}")


def test_make_demo_uses_the_same_lookup_as_the_command():
    import re

    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    assert not re.search(r"SCALEFIT_DATA_DIR\s*[?:+]?=", makefile)  # make sets no data folder
    assert "\t$(BIN)/scalefit demo --out $(OUT)" in makefile


@pytest.mark.slow
def test_the_demo_runs_on_the_core_dependencies_alone(tmp_path):
    """`make demo` installs the package without extras: the demo imports none of them."""
    import re
    import subprocess
    import sys
    import tomllib

    repo = Path(__file__).resolve().parents[2]
    extras = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    extras = extras["optional-dependencies"]
    blocked = {"h5py"} | {
        re.split(r"[\[<>=!~ ]", req)[0].replace("-", "_")
        for key in ("bayes", "torch", "hf", "curves")
        for req in extras[key]
    }
    assert {"numpyro", "arviz", "torch", "transformers", "tensorboard"} <= blocked
    script = f"""
import sys

class Extras:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {sorted(blocked)!r}:
            raise ImportError(f"{{name}} belongs to an extra")

sys.meta_path.insert(0, Extras())
from scalefit.cli import main
sys.exit(main(["demo", "--bootstrap", "3", "--no-download", "--out", {str(tmp_path)!r}]))
"""
    env = {**os.environ, "PYTHONPATH": str(repo), "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=repo, env=env
    )
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert (tmp_path / "recommendation.csv").is_file()
