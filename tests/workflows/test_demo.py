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
from scalefit.core.accounting import param_count
from scalefit.core.errors import NoRecommendationWarning
from scalefit.workflows.demo import GEMSTONES

GEM_ACCOUNTING = GEMSTONES["accounting"]

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
    with pytest.warns(NoRecommendationWarning, match="no shape at any budget: boundary solution"):
        a = allocate("decomposed", [1e13], params=SHALLOW, head_dim=32, accounting=acc)
    row = a.summary.iloc[0]
    assert int(row["depth"]) == 1 and bool(row["boundary"]) and not bool(row["recommended"])
    assert any(w.startswith("boundary solution at 1e13 FLOP") for w in a.warnings)
    text = budget_text(a, 0, 1e13)
    assert "recommended  depth" not in text and "boundary solution" in text
    # a higher floor moves the edge: the optimum sits on it again
    with pytest.warns(NoRecommendationWarning):
        kw = {"head_dim": 32, "accounting": acc, "min_depth": 3}
        a3 = allocate("decomposed", [1e13], params=SHALLOW, **kw)
    assert int(a3.summary["depth"].iloc[0]) == 3 and bool(a3.summary["boundary"].iloc[0])
    # an interior optimum stays a recommendation
    b = allocate("decomposed", [1e19], params=INTERIOR, head_dim=128)
    row = b.summary.iloc[0]
    assert 10 < row["depth"] < 40 and not bool(row["boundary"]) and bool(row["recommended"])
    assert "recommended  depth" in budget_text(b, 0, 1e19)
    assert not any("boundary" in w for w in b.warnings)


@pytest.fixture(scope="module")
def shakespeare(tmp_path_factory):
    """The trainer's Shakespeare grid (depth 1-8): its fit cannot pin depth; the demo's verdict."""
    import contextlib
    import io

    from scalefit import FitResult
    from scalefit.workflows.demo import recommendation_table, recommendation_text, unpinned_reasons

    out = tmp_path_factory.mktemp("shakespeare")
    buf = io.StringIO()
    argv = ["fit", "lm_grid_shakespeare", "--where", "variant == 'pre_ln'", "--law", "decomposed"]
    with contextlib.redirect_stdout(buf):
        code = main([*argv, "--bootstrap", "20", "--out", str(out / "fit.json")])
    assert code == 0
    res = FitResult.load(out / "fit.json")
    acc = Accounting(vocab=256, embeddings="tied")
    with pytest.warns(NoRecommendationWarning) as said:  # once, for all three budgets
        alloc = allocate(res, [1e13, 1e14, 1e15], head_dim=32, accounting=acc)
    assert len(said) == 1 and "the fit does not pin down a_depth" in str(said[0].message)
    table = recommendation_table(alloc, res.not_identified)
    spec = {"table": "lm_grid_shakespeare"}
    text = recommendation_text(table, alloc, spec, res.not_identified, unpinned_reasons(res))
    return res, buf.getvalue(), table, alloc, text


def test_an_unpinned_exponent_is_marked_not_identified_everywhere(shakespeare):
    res, printed, *_ = shakespeare
    # many resamples put a_depth outside its declared range [0, 5]
    assert res.diagnostics["boot_out_of_range_share"]["a_depth"] > 0.025
    assert "a_depth" in res.not_identified and not res.identified
    assert not res.summary().loc["a_depth", "identified"]
    assert np.isnan(res.summary().loc["a_depth", "stderr"])
    assert "a_depth" in res.to_dict()["not_identified"]
    assert "not identified: a_depth" in printed


def test_a_fit_that_cannot_pin_depth_recommends_no_shape_and_says_why(shakespeare):
    _, _, rec, alloc, text = shakespeare
    assert not rec["recommended"].any() and rec["boundary"].all()
    assert rec["depth"].isna().all() and (rec["not_identified"] == "a_depth").all()
    closing = text.split("== what to train")[1]
    assert "What it does pin down: depth" not in closing
    assert "\n   depth         1 [" not in closing  # no depth is given as a value
    assert "recommends no shape" in closing and "boundary solution" in closing
    assert alloc.summary["boundary"].all() and not alloc.summary["recommended"].any()


@pytest.fixture(scope="module")
def offline_demo(tmp_path_factory):
    """``scalefit demo`` with no table anywhere and no network: the bundled Gemstones grid."""
    import contextlib
    import io
    import urllib.request

    tmp = tmp_path_factory.mktemp("offline")
    out = tmp / "demo"
    buf = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        _no_data_anywhere(tmp, mp)
        mp.setenv("SCALEFIT_DATA_DIR", str(tmp / "empty"))
        mp.setattr(urllib.request, "urlopen", _no_network)
        with contextlib.redirect_stdout(buf):
            code = main(["demo", "--bootstrap", "20", "--out", str(out)])
    assert code == 0
    return out, buf.getvalue()


def _no_network(*args, **kwargs):
    raise OSError("no network in this test")


def test_offline_demo_fits_the_bundled_gemstones_grid_and_says_so(offline_demo):
    out, text = offline_demo
    assert text.startswith("data     gemstones: bundled Gemstones grid (McLeish et al. 2025, MIT)")
    assert "the Chinchilla table was not found, so the bundled Gemstones grid is fitted" in text
    assert "the download failed: no network in this test" in text
    assert "$ scalefit fit gemstones --cluster run --law decomposed --bootstrap 20" in text
    assert "--head-dim 128 --vocab 50304 --embeddings untied --mlp-ratio 5.5" in text
    assert "[95% interval of the optimum over 20 bootstrap draws + the law's misfit in N*]" in text


def test_offline_demo_recommends_shapes_a_user_could_train(offline_demo):
    out, text = offline_demo
    rec = pd.read_csv(out / "recommendation.csv")
    assert list(rec["budget"]) == [1e19, 3e19, 1e20]
    assert not rec["boundary"].any() and rec["not_identified"].isna().all()
    assert rec["recommended"].iloc[0] and rec["recommended"].iloc[1]
    ok = rec[rec["recommended"]]
    # shapes inside the grid's own widths (256-3072) and sizes (48M-2B), depths a model can have
    assert ok["width"].between(256, 3072).all() and (ok["width"] % 128 == 0).all()
    assert ok["depth"].between(3, 80).all() and ok["params"].between(4.8e7, 2.1e9).all()
    for q in ("depth", "width", "params", "tokens"):
        assert (ok[f"{q}_lo"] <= ok[q] * 1.05).all() and (ok[q] <= ok[f"{q}_hi"] * 1.05).all()
        assert (ok[f"{q}_hi"] / ok[f"{q}_lo"] < 3).all(), q
    # the allocation counts parameters the way Gemstones does, and spends each budget exactly
    alloc = pd.read_csv(out / "allocation.csv")
    np.testing.assert_allclose(6 * alloc["params"] * alloc["tokens"], alloc["budget"], rtol=1e-9)
    for r in alloc.itertuples():
        n = param_count(int(r.depth), int(r.width), **GEM_ACCOUNTING, norms=False)
        assert r.params == n
    assert "In plain words: with " in text and "Gemstones spans 48M-2B parameters" in text


def test_the_demo_counts_parameters_as_gemstones_does():
    from scalefit.datasets import load

    runs = load("gemstones").groupby("run").first()
    ratio = [
        param_count(int(r.depth), int(r.width), **GEM_ACCOUNTING) / r.params
        for r in runs.itertuples()
    ]
    # exact with the norms counted, for all but the two models of width 384 (1-1.5 % more)
    assert sum(abs(x - 1) < 1e-12 for x in ratio) == 20 and max(ratio) < 1.02
    assert set(runs.loc[np.abs(np.array(ratio) - 1) > 1e-12, "width"]) == {384}


# ---------------- where the demo's table comes from
def _no_data_anywhere(tmp_path, monkeypatch):

    for var in ("SCALEFIT_DATA_DIR", "SCALEFIT_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def test_demo_fallback_names_each_place_the_url_and_one_command(tmp_path, monkeypatch):
    from scalefit.datasets import DATASETS, cache_dir
    from scalefit.workflows.demo import GEMSTONES, choose_data

    _no_data_anywhere(tmp_path, monkeypatch)
    spec, why = choose_data(str(tmp_path / "given"), download=False, bundled=False)
    assert spec is GEMSTONES
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

    from scalefit.datasets import DATASETS, cache_dir
    from scalefit.workflows.demo import CHINCHILLA, choose_data

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


def test_mlp_ratio_is_checked_once_for_python_and_the_command(capsys):
    from scalefit import ScaleFitError

    with pytest.raises(ScaleFitError, match="The 'mlp_ratio' parameter of Accounting"):
        Accounting(mlp_ratio=0.0)
    params = ",".join(f"{k}={v}" for k, v in SHALLOW.items())
    with pytest.raises(SystemExit) as exc:
        main(["allocate", "--law", "decomposed", "--params", params, "--budget", "1e13",
              "--mlp-ratio", "0"])  # fmt: skip
    assert exc.value.code == 2 and "--mlp-ratio" in capsys.readouterr().err
