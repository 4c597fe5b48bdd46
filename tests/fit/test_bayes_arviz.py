"""The ArviZ adapter (0.x InferenceData, 1.x DataTree), the Bayes path's public-API-only imports
and its process hygiene (float64 and JAX settings as they were after a fit)."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("numpyro")
az = pytest.importorskip("arviz")

from scalefit import ScaleFitError, get_law  # noqa: E402
from scalefit.core.errors import ConvergenceWarning  # noqa: E402
from scalefit.fit import _arviz  # noqa: E402

ROOT = Path(__file__).resolve().parents[2] / "scalefit"
BAYES_FILES = [
    "fit/_arviz.py",
    "fit/bayes.py",
    "fit/bayes_model.py",
    "fit/bayes_checks.py",
    "fit/compare.py",
    "plot/bayes.py",
    "cli/bayes.py",
]


def _synthetic(seed: int = 0, chains: int = 3, draws: int = 400, rows: int = 25):
    """An ArviZ object of a normal model (unit scale, unknown mean) with iid posterior draws."""
    rng = np.random.default_rng(seed)
    y = rng.normal(1.0, 1.0, rows)
    mu = rng.normal(y.mean(), 1 / np.sqrt(rows), (chains, draws))  # flat-prior posterior
    ll = -0.5 * (y - mu[..., None]) ** 2 - 0.5 * np.log(2 * np.pi)
    energy = rng.normal(0.0, 1.0, (chains, draws)).cumsum(axis=1) * 0.1 + rng.normal(
        0, 1, (chains, draws)
    )
    row = {"log_loss": ("row",)}
    return _arviz.build(
        {
            "posterior": _arviz.dataset({"mu": mu}),
            "log_likelihood": _arviz.dataset({"log_loss": ll}, **row),
            "sample_stats": _arviz.dataset(
                {"energy": energy, "diverging": np.zeros((chains, draws), bool)}
            ),
            "observed_data": _arviz.dataset({"log_loss": y}, sample_dims=(), **row),
        }
    )


def test_build_matches_installed_series():
    obj = _synthetic()
    if _arviz.major() < 1:
        assert isinstance(obj, az.InferenceData)
    else:
        import xarray as xr

        assert isinstance(obj, xr.DataTree)
    assert _arviz.group_names(obj) == [
        "posterior",
        "log_likelihood",
        "sample_stats",
        "observed_data",
    ]
    assert _arviz.values(obj, "mu").shape == (3, 400)
    assert _arviz.values(obj, "log_loss", "observed_data").shape == (25,)
    assert dict(_arviz.group(obj, "log_likelihood").sizes) == {"chain": 3, "draw": 400, "row": 25}
    with pytest.raises(KeyError):
        _arviz.group(obj, "prior")


def test_netcdf_round_trip_in_memory(tmp_path):
    obj = _synthetic()
    path = _arviz.write_netcdf(obj, tmp_path / "sub" / "p.nc")
    back = _arviz.read_netcdf(path)
    path.unlink()  # read fully into memory: the data stay readable without the file
    assert _arviz.group_names(back) == _arviz.group_names(obj)
    np.testing.assert_array_equal(_arviz.values(back, "mu"), _arviz.values(obj, "mu"))
    assert _arviz.values(back, "diverging", "sample_stats").dtype == bool
    assert not list((tmp_path / "sub").iterdir())  # no temporary left behind


def test_diagnostics_and_information_criteria():
    obj = _synthetic()
    post = _arviz.group(obj, "posterior")
    rhat = _arviz.rhat(post, ["mu"])["mu"]
    bulk = _arviz.ess(post, ["mu"], "bulk")["mu"]
    tail = _arviz.ess(post, ["mu"], "tail")["mu"]
    assert abs(rhat - 1) < 0.01 and 600 < bulk < 1800 and 600 < tail < 1800  # iid draws
    energy = _arviz.values(obj, "energy", "sample_stats")
    np.testing.assert_allclose(
        _arviz.bfmi(energy), np.asarray(az.bfmi(_arviz.group(obj, "sample_stats")["energy"]))
    )
    loo = _arviz.loo(obj)
    waic = _arviz.waic(_arviz.values(obj, "log_loss", "log_likelihood"))
    assert loo["pareto_k"].shape == (25,) and loo["pareto_k"].max() < 0.7
    # a one-parameter model: about one effective parameter, LOO and WAIC agree closely
    assert 0.5 < loo["p_loo"] < 1.5 and abs(waic["p_waic"] - loo["p_loo"]) < 0.05
    assert abs(waic["elpd_waic"] - loo["elpd_loo"]) < 0.05
    assert loo["se"] > 0 and waic["se"] > 0


@pytest.mark.skipif(_arviz.major() >= 1, reason="az.waic exists in ArviZ 0.x only")
def test_waic_equals_arviz_0x():
    obj = _synthetic(seed=3)
    ours = _arviz.waic(_arviz.values(obj, "log_loss", "log_likelihood"))
    with warnings.catch_warnings():  # ArviZ's own caution when a row's variance exceeds 0.4
        warnings.filterwarnings("ignore", message="For one or more samples", category=UserWarning)
        theirs = az.waic(obj)
    assert ours["elpd_waic"] == pytest.approx(float(theirs.elpd_waic), rel=1e-10)
    assert ours["p_waic"] == pytest.approx(float(theirs.p_waic), rel=1e-10)
    assert ours["se"] == pytest.approx(float(theirs.se), rel=1e-10)


def test_compare_columns_and_sign():
    good, worse = _synthetic(seed=1), _synthetic(seed=1)
    if _arviz.major() < 1:
        ll = worse.log_likelihood["log_loss"] - 0.2  # 0.2 nats worse on every row
        worse.log_likelihood["log_loss"] = ll
    else:
        node = worse["log_likelihood"]
        node["log_loss"] = node["log_loss"] - 0.2
    cmp = _arviz.compare({"worse": worse, "good": good})
    assert list(cmp.columns) == ["rank", "elpd_loo", "se", "elpd_diff", "dse", "p_loo", "weight"]
    assert list(cmp.index) == ["good", "worse"] and list(cmp["rank"]) == [0, 1]
    assert cmp.loc["good", "elpd_diff"] == 0
    assert cmp.loc["worse", "elpd_diff"] == pytest.approx(0.2 * 25, rel=1e-6)
    assert np.isclose(cmp["weight"].sum(), 1.0)


def test_hdi_is_the_shortest_interval():
    x = np.random.default_rng(0).exponential(1.0, 20000)
    lo, hi = _arviz.hdi(x, 0.9)
    assert 0 <= lo < 0.01 and hi == pytest.approx(-np.log(0.1), rel=0.05)
    assert np.mean((x >= lo) & (x <= hi)) == pytest.approx(0.9, abs=0.005)


def _imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


@pytest.mark.parametrize("rel", BAYES_FILES)
def test_bayes_path_uses_public_modules_of_dependencies_only(rel):
    """No import of a private module or name of JAX, numpyro, ArviZ or xarray, and no direct
    ``arviz`` import outside the adapter."""
    tree = ast.parse((ROOT / rel).read_text())
    for name in _imports(tree):
        top, *parts = name.split(".")
        if top in ("jax", "jaxlib", "numpyro", "arviz", "xarray"):
            assert not any(p.startswith("_") for p in parts), f"{rel}: imports {name}"
        if top == "arviz":
            assert rel == "fit/_arviz.py", f"{rel}: imports arviz outside the adapter"
    text = (ROOT / rel).read_text()
    assert not re.search(r"jax\._src", text), f"{rel}: reaches into jax's private package"
    assert not re.search(r'simplefilter\("ignore"\)', text), f"{rel}: ignores every warning"


def test_fit_bayes_leaves_jax_settings_and_warning_filters_as_they_were():
    """After a Bayesian fit the process computes as before: float32 by default, the same JAX
    compile-cache settings, the same warning filters (float64 only inside the call)."""
    import jax
    import jax.numpy as jnp

    from scalefit.fit import engine

    if not hasattr(engine, "float64"):
        pytest.skip("engine.py still switches float64 on for the process (issue 23 engine part)")
    from scalefit.fit.bayes import fit_bayes

    keys = (
        "jax_enable_x64",
        "jax_compilation_cache_dir",
        "jax_persistent_cache_min_compile_time_secs",
    )
    before = {k: getattr(jax.config, k) for k in keys}
    dtype = jnp.ones(1).dtype
    rng = np.random.default_rng(0)
    depth = np.repeat([2.0, 4, 8, 16], 3)
    loss = get_law("depth_power").evaluate({"c": 2.0, "alpha": 1.0, "L0": 0.5}, {"depth": depth})
    tab = pd.DataFrame({"depth": depth, "loss": loss * np.exp(rng.normal(0, 0.01, depth.shape))})
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        filters = list(warnings.filters)
        res = fit_bayes(tab, "depth_power", chains=1, draws=50, warmup=50, seed=0)
        assert list(warnings.filters) == filters
    assert _arviz.values(res.extras["inference_data"], "alpha").dtype == np.float64
    assert {k: getattr(jax.config, k) for k in keys} == before
    assert jnp.ones(1).dtype == dtype


def test_load_netcdf_rejects_other_files(tmp_path):
    from scalefit.fit.bayes import load_netcdf

    path = _arviz.write_netcdf(
        _arviz.build({"observed_data": _arviz.dataset({"y": np.ones(3)}, sample_dims=())}),
        tmp_path / "other.nc",
    )
    with pytest.raises(ScaleFitError, match="other.nc: expected a posterior written by"):
        load_netcdf(path)
