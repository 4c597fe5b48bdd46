"""Bayesian fits: known-truth recovery, priors, NetCDF/JSON round trips, CLI, model comparison."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import assert_png

pytest.importorskip("numpyro")
pytest.importorskip("arviz")

from scalefit import ScaleFitError, get_law  # noqa: E402
from scalefit.core.errors import ConvergenceWarning  # noqa: E402
from scalefit.fit import _arviz  # noqa: E402
from scalefit.fit.bayes import (  # noqa: E402
    fit_bayes,
    hdi_frame,
    load_netcdf,
    predictive_draws,
    save_netcdf,
)
from scalefit.fit.priors import read_priors_toml, resolve_priors  # noqa: E402
from scalefit.fit.result import FitResult  # noqa: E402

TRUTH = {"c": 2.0, "alpha": 1.1, "L0": 0.5}
SHORT = {"chains": 2, "draws": 300, "warmup": 300}


def synthetic_depth_table(seed: int, n_rep: int = 4, sigma: float = 0.01) -> pd.DataFrame:
    """depth_power data with log-normal noise of scale ``sigma`` at 8 depths."""
    rng = np.random.default_rng(seed)
    depth = np.repeat([2.0, 3, 4, 6, 8, 12, 16, 24], n_rep)
    law = get_law("depth_power")
    mean = law.evaluate(TRUTH, {"depth": depth})
    loss = mean * np.exp(rng.normal(0.0, sigma, depth.shape))
    return pd.DataFrame({"depth": depth, "loss": loss})


@pytest.fixture(scope="module")
def depth_fit():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        return fit_bayes(synthetic_depth_table(1), "depth_power", seed=3, **SHORT)


def test_known_truth_recovery(depth_fit):
    res = depth_fit
    assert res.method == "bayes"
    for name, value in TRUTH.items():
        lo, hi = res.ci[name]
        assert lo < value < hi, (name, lo, value, hi)
    np.testing.assert_allclose([res.params[k] for k in TRUTH], list(TRUTH.values()), rtol=0.15)
    assert res.draws.shape == (SHORT["chains"] * SHORT["draws"], 3)
    d = res.diagnostics
    for key in ("r_hat_max", "ess_bulk_min", "ess_tail_min", "divergences", "bfmi_min"):
        assert key in d
    assert d["r_hat_max"] < 1.05
    assert d["loo"]["n_pareto_k_bad"] == 0
    assert 0.7 <= d["ppc"]["posterior_coverage_90"] <= 1.0
    share50, share90 = (d["ppc"][f"posterior_coverage_{p}"] for p in (50, 90))
    line = next(t for t in res.report().splitlines() if t.startswith("ppc"))
    assert f"posterior: {share50:.0%} of rows in its 50% interval, {share90:.0%} in its 90%" in line
    assert "coverage" not in line  # not "posterior coverage 50 70%"
    assert res.converged == (d["divergences"] == 0 and d["r_hat_max"] <= 1.01)
    frame = hdi_frame(res)
    assert (frame["hdi_lo"] <= frame["median"]).all() and (frame["median"] <= frame["hdi_hi"]).all()


def test_predictive_bands_on_new_grid(depth_fit):
    grid = pd.DataFrame({"depth": [2.0, 48.0, 96.0]})
    mean = predictive_draws(depth_fit, grid, noise=False)
    noisy = predictive_draws(depth_fit, grid, noise=True)
    assert mean.shape == noisy.shape and mean.shape[1] == 3
    assert np.all(noisy.std(axis=0) > mean.std(axis=0))
    band = depth_fit.predict(grid, bands=True)
    assert list(band.columns) == ["loss", "lo", "hi"]
    assert (band["lo"] < band["hi"]).all()


def test_same_seed_same_draws(depth_fit):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        again = fit_bayes(synthetic_depth_table(1), "depth_power", seed=3, **SHORT)
    np.testing.assert_array_equal(again.draws, depth_fit.draws)


@pytest.mark.slow  # in `make test-slow`: the default run stays under 10 minutes on 2 cores
def test_own_driver_and_numpyro_mcmc_sample_the_same_posterior(depth_fit):
    """The one-program driver (public ``numpyro.infer.hmc.hmc``) and numpyro's ``MCMC`` (the
    ``sequential`` chain method) with another seed agree on every posterior mean within Monte
    Carlo error (4 standard errors of the difference, each from the bulk ESS)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        mcmc = fit_bayes(
            synthetic_depth_table(1), "depth_power", seed=11, chain_method="sequential", **SHORT
        )
    assert mcmc.diagnostics["chain_devices"] == 1
    for name in ("c", "alpha", "L0", "sigma", "nu"):
        draws = [_arviz.values(r.extras["inference_data"], name) for r in (depth_fit, mcmc)]
        ess = [r.diagnostics["ess_bulk"][name] for r in (depth_fit, mcmc)]
        means = [float(np.mean(d)) for d in draws]
        se = [float(np.std(d)) / np.sqrt(e) for d, e in zip(draws, ess, strict=True)]
        assert abs(means[0] - means[1]) < 4 * np.hypot(*se), (name, means, se)


def test_unconstrain_inverts_numpyro_constrain_fn():
    """``bayes_model.unconstrain`` (public handlers + biject_to) is the inverse of numpyro's
    documented ``constrain_fn`` for every kind of site the generated models have."""
    import jax
    from numpyro.infer.util import constrain_fn

    from scalefit.fit import bayes_model as bm

    law = get_law("decomposed")
    raw = {
        "width": np.array([512.0, 1024, 2048]),
        "depth": np.array([8.0, 16, 32]),
        "tokens": np.array([1e9, 1e10, 1e11]),
    }
    y = np.array([3.1, 2.8, 2.5])
    specs = resolve_priors(law, y, None)  # coef normal, exponent truncated, floor below_min
    model = bm.build_model(law, specs, law.references(raw), float(y.min()), "student_t")
    init = bm.init_values(law, specs, None, 0.05, float(y.min()))  # sigma, nu positive
    args, kwargs = (law.variables(np, raw),), {"logy": np.log(y)}
    with jax.enable_x64(True):
        u = bm.unconstrain(model, args, kwargs, init)
        back = constrain_fn(model, args, kwargs, u)
    assert set(u) == set(init) and len(init) == 9
    for name, value in init.items():
        np.testing.assert_allclose(float(back[name]), value, rtol=1e-10, err_msg=name)


_SPLIT_SCRIPT = """
import json, sys, warnings
import jax
jax.config.update("jax_num_cpu_devices", 2)
import numpy as np, pandas as pd
from scalefit.fit import _arviz, _programs, bayes_model as bm
from scalefit.fit.bayes import fit_bayes

real, exported = _programs.cached_program, []
def spy(fn, key, args):
    out = real(fn, key, args)
    if key is not None and '"kind": "nuts"' in key:
        exported.append(out is not fn)
    return out
_programs.cached_program = spy
tab = pd.read_csv(sys.argv[1])
tiny = {"chains": 2, "draws": 60, "warmup": 60, "seed": 5}
folder = sys.argv[2] + "/jax/programs"
files = lambda: {str(f): f.stat().st_mtime_ns for f in __import__("pathlib").Path(folder).glob("*")}
from scalefit.core.errors import ConvergenceWarning
warnings.filterwarnings("ignore", category=ConvergenceWarning)
split = fit_bayes(tab, "depth_power", **tiny)  # chains split over the 2 CPU devices
written = files()
again = fit_bayes(tab, "depth_power", **tiny)  # the saved program read back
reread = files()
bm.chain_devices = lambda chains: 1  # both chains on one device: another program
one = fit_bayes(tab, "depth_power", **tiny)
mcmc = fit_bayes(tab, "depth_power", progress=True, **tiny)  # numpyro's MCMC driver
out = {"devices": jax.local_device_count(), "exported": exported,
       "files": [len(written), written == reread, len(files())]}
arrays = {}
for name, res in (("split", split), ("again", again), ("one", one), ("mcmc", mcmc)):
    arrays[name] = res.draws.reshape(2, 60, -1)
    for f in ("diverging", "n_steps", "tree_depth", "lp"):
        arrays[f"{name}_{f}"] = _arviz.values(res.extras["inference_data"], f, "sample_stats")
np.savez(sys.argv[3], **arrays)
print(json.dumps(out))
"""


@pytest.mark.slow  # in `make test-slow`: the default run stays under 10 minutes on 2 cores
def test_compiled_sampler_matches_numpyro_mcmc_per_chain_on_any_device_count(tmp_path):
    """In a process with 2 CPU devices the one-program sampler splits the chains over both; each
    chain equals numpyro MCMC's vectorised chain and the one-device program's (to rounding); the
    program is serialised once per device count and a second fit reads it back (same draws)."""
    import json
    import os
    import subprocess
    import sys

    table, arrays = tmp_path / "t.csv", tmp_path / "draws.npz"
    synthetic_depth_table(4).to_csv(table, index=False)
    env = {**os.environ, "SCALEFIT_JAX_CACHE": str(tmp_path / "jax")}
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run(
        [sys.executable, "-c", _SPLIT_SCRIPT, str(table), str(tmp_path), str(arrays)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["devices"] == 2
    assert out["exported"] == [True, True, True]  # split: written, read back; one device: written
    written, untouched, final = out["files"]
    assert untouched and final == written + 1  # one program per device count, none rewritten
    d = np.load(arrays)
    np.testing.assert_array_equal(d["again"], d["split"])
    for chain in range(2):
        for ref in ("one", "mcmc"):
            np.testing.assert_allclose(
                d["split"][chain], d[ref][chain], rtol=1e-6, atol=1e-9, err_msg=f"{ref} {chain}"
            )
            for name in ("diverging", "n_steps", "tree_depth"):
                np.testing.assert_array_equal(
                    d[f"split_{name}"][chain], d[f"{ref}_{name}"][chain], err_msg=name
                )
            np.testing.assert_allclose(d["split_lp"][chain], d[f"{ref}_lp"][chain], rtol=1e-6)


@pytest.mark.parametrize(
    ("chains", "env", "expected"),
    [
        (4, {}, None),  # one device per core, a divisor of the chains
        (1, {}, 1),
        (4, {"JAX_NUM_CPU_DEVICES": "1"}, 1),  # the user's setting wins
        (4, {"XLA_FLAGS": "--xla_force_host_platform_device_count=3"}, 3),
    ],
)
def test_bayes_cli_gives_jax_one_cpu_device_per_chain(chains, env, expected):
    """``scalefit bayes`` asks JAX for min(chains, cores) CPU devices (a divisor of the chains)
    before JAX starts, unless the user set the count; a one-device process samples unsplit."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, scalefit.cli; from scalefit.cli.bayes import _devices_for_chains; "
        "scalefit.cli.OWNS_PROCESS = True; "  # as under the console script (cli.run)
        "_devices_for_chains(int(sys.argv[1])); import jax; "
        "from scalefit.fit.bayes_model import chain_devices; "
        "print(jax.local_device_count(), chain_devices(int(sys.argv[1])))"
    )
    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(chains)],
        capture_output=True,
        text=True,
        env={**base, **env},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    devices, used = map(int, proc.stdout.split())
    if expected is None:
        cores = len(os.sched_getaffinity(0))
        expected = max(n for n in range(1, min(chains, cores) + 1) if chains % n == 0)
    assert devices == expected
    assert used == max(n for n in range(1, min(chains, devices) + 1) if chains % n == 0)


def test_netcdf_round_trip(depth_fit, tmp_path):
    path = save_netcdf(depth_fit, tmp_path / "post.nc")
    back = load_netcdf(path)
    idata = depth_fit.extras["inference_data"]
    assert type(back) is type(idata)  # InferenceData (ArviZ 0.x) or DataTree (1.x)
    assert _arviz.group_names(back) == _arviz.group_names(idata) == list(_arviz.GROUPS)
    for group in _arviz.GROUPS:
        want = _arviz.group(idata, group)
        got = _arviz.group(back, group)
        assert set(got.data_vars) == set(want.data_vars), group
        for name in want.data_vars:
            np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(want[name]))
    assert not list(tmp_path.glob(".*tmp"))
    bad = tmp_path / "bad.nc"
    bad.write_text("not a netcdf file")
    with pytest.raises(ScaleFitError, match="bad.nc: expected a NetCDF-4 posterior"):
        load_netcdf(bad)
    with pytest.raises(ScaleFitError, match="no such NetCDF file"):
        load_netcdf(tmp_path / "missing.nc")


def test_json_round_trip(depth_fit, tmp_path):
    depth_fit.save(tmp_path / "r.json")
    back = FitResult.load(tmp_path / "r.json")
    assert back.method == "bayes"
    assert back.params == depth_fit.params
    assert back.diagnostics["divergences"] == depth_fit.diagnostics["divergences"]
    np.testing.assert_allclose(back.draws, depth_fit.draws)
    with pytest.raises(ScaleFitError, match="no posterior"):
        save_netcdf(back, tmp_path / "x.nc")
    noisy = predictive_draws(back, pd.DataFrame({"depth": [4.0]}), noise=True)
    assert np.isfinite(noisy).all()


def test_bayes_result_is_frozen_and_records_the_shared_provenance(depth_fit):
    import dataclasses

    from scalefit.fit.build import FitSettings, provenance

    with pytest.raises(dataclasses.FrozenInstanceError):
        depth_fit.converged = True  # type: ignore[misc]
    table = depth_fit.extras["table"]
    lsq = FitSettings()  # log residuals, no weights, as fitted
    shared = provenance(table, depth_fit.law, depth_fit.refs, lsq, {}, ("jax", "numpyro", "arviz"))
    assert {k: depth_fit.conventions[k] for k in shared} == shared
    assert depth_fit.conventions["sampler"] == "NUTS" and "total_seconds" in depth_fit.diagnostics


def test_prior_overrides_validated():
    law = get_law("decomposed")
    y = np.array([2.0, 2.5, 3.0])
    specs = resolve_priors(law, y, {"a_depth": {"dist": "normal", "loc": 1, "scale": 0.5}})
    assert specs["a_depth"] == {"dist": "normal", "loc": 1.0, "scale": 0.5}
    assert specs["L0"]["dist"] == "below_min"
    with pytest.raises(ScaleFitError, match="unknown parameter 'a_dept'"):
        resolve_priors(law, y, {"a_dept": {"dist": "normal", "loc": 1, "scale": 1}})
    with pytest.raises(ScaleFitError, match="unknown dist 'gaussian'"):
        resolve_priors(law, y, {"a_depth": {"dist": "gaussian", "loc": 1, "scale": 1}})
    with pytest.raises(ScaleFitError, match="missing key"):
        resolve_priors(law, y, {"a_depth": {"dist": "normal", "loc": 1}})
    with pytest.raises(
        ScaleFitError, match="'scale' key of the prior for 'a_depth' must be a finite"
    ):
        resolve_priors(law, y, {"a_depth": {"dist": "normal", "loc": 1, "scale": -1}})
    with pytest.raises(ScaleFitError, match="positive support"):
        resolve_priors(law, y, {"sigma": {"dist": "normal", "loc": 0, "scale": 1}})
    with pytest.raises(ScaleFitError, match="floor parameters only"):
        resolve_priors(law, y, {"a_depth": {"dist": "below_min"}})


def test_bad_options_raise():
    tab = synthetic_depth_table(0)
    with pytest.raises(ScaleFitError, match="'likelihood' parameter"):
        fit_bayes(tab, "depth_power", likelihood="cauchy")
    with pytest.raises(ScaleFitError, match="'chains' parameter"):
        fit_bayes(tab, "depth_power", chains=0)
    with pytest.raises(ScaleFitError, match="Unknown law"):
        fit_bayes(tab, "no_such_law")


def test_priors_toml(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[a_depth]\ndist = "normal"\nloc = 1.0\nscale = 0.5\n')
    assert read_priors_toml(path) == {"a_depth": {"dist": "normal", "loc": 1.0, "scale": 0.5}}
    path.write_text("a_depth = 3\n")
    with pytest.raises(ScaleFitError, match="must be tables"):
        read_priors_toml(path)
    path.write_text("[a_depth\n")
    with pytest.raises(ScaleFitError, match="not valid TOML"):
        read_priors_toml(path)


def _run_cli(argv, capsys):
    from scalefit.cli import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_bad_input_exit_2(tmp_path, capsys):
    csv = tmp_path / "t.csv"
    synthetic_depth_table(0).to_csv(csv, index=False)
    code, _, err = _run_cli(["bayes", str(csv), "--law", "nope"], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    bad = tmp_path / "bad.toml"
    bad.write_text('[alpha]\ndist = "weird"\n')
    code, _, err = _run_cli(
        ["bayes", str(csv), "--law", "depth_power", "--priors", str(bad)], capsys
    )
    assert code == 2 and "unknown dist" in err and err.count("\n") == 1
    code, _, err = _run_cli(["compare", str(csv), "--laws", "depth_power"], capsys)
    assert code == 2 and "at least two" in err
    with pytest.raises(SystemExit) as exc:
        _run_cli(["bayes", str(csv), "--law", "depth_power", "--chains", "0"], capsys)
    assert exc.value.code == 2


def test_cli_bayes_writes_outputs(tmp_path, capsys):
    csv = tmp_path / "t.csv"
    synthetic_depth_table(2).to_csv(csv, index=False)
    args = ["bayes", str(csv), "--law", "depth_power", "--no-progress"]
    args += [f"--{k}={v}" for k, v in SHORT.items()]
    args += ["--out", str(tmp_path / "r.json"), "--netcdf", str(tmp_path / "p.nc")]
    args += ["--plots", str(tmp_path / "figs")]
    code, out, _ = _run_cli(args, capsys)
    assert code in (0, 3)
    assert "R-hat max" in out and "elpd_loo" in out
    assert FitResult.load(tmp_path / "r.json").diagnostics["ess_bulk_min"] > 0
    posterior = _arviz.read_netcdf(tmp_path / "p.nc")
    for name in TRUTH:  # every parameter, every chain and draw
        draws = _arviz.values(posterior, name)
        assert draws.shape == (SHORT["chains"], SHORT["draws"]) and np.isfinite(draws).all()
    figures = sorted((tmp_path / "figs").glob("*.png"))
    assert len(figures) == 3
    for png in figures:
        assert_png(png)


@pytest.mark.slow  # in `make test-slow`: the default run stays under 10 minutes on 2 cores
def test_compare_columns_and_ranking(depth_fit):
    from scalefit.fit.compare import COLUMNS, compare_fits
    from scalefit.laws import Law, Param

    # A wrong functional form for the same data: exponential decay in depth.
    wrong = Law(
        name="depth_exp_test",
        inputs=("depth",),
        params=(
            Param("c", "positive", start=(0.1, 10.0)),
            Param("s", "positive", start=(1.0, 30.0)),
            Param("L0", "floor"),
        ),
        expr=lambda xp, p, x: p["c"] * xp.exp(-x["depth"] / p["s"]) + p["L0"],
        formula="L = c exp(-depth / s) + L0",
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        other = fit_bayes(synthetic_depth_table(1), wrong, seed=3, **SHORT)
    frame = compare_fits({"depth_power": depth_fit, "depth_exp_test": other})
    assert list(frame.reset_index().columns) == COLUMNS
    assert frame.index[0] == "depth_power"
    assert frame.loc["depth_exp_test", "elpd_diff"] > 2 * frame.loc["depth_exp_test", "dse"]
    assert np.isclose(frame["weight"].sum(), 1.0)
    with pytest.raises(ScaleFitError, match="at least two"):
        compare_fits({"depth_power": depth_fit})


# ---------------------------------------------------------------------------- calibration (slow)
CALIBRATION = {
    "depth_power": (TRUTH, {"depth": np.repeat([2.0, 3, 4, 6, 8, 12, 16, 24], 4)}),
    "decomposed": (
        {
            "c_width": 275.0,
            "a_width": 0.95,
            "c_depth": 6.7,
            "a_depth": 1.3,
            "c_tokens": 530.0,
            "a_tokens": 0.3,
            "L0": 1.75,
        },
        {
            k: v.ravel()
            for k, v in zip(
                ("width", "depth", "tokens"),
                np.meshgrid([512.0, 1024, 2048, 4096], [8.0, 16, 32, 64], [1e9, 1e10, 1e11]),
                strict=True,
            )
        },
    ),
}


def calibration_coverage(law: str, n_rep: int, *, sigma: float = 0.01) -> dict[str, float]:
    """Share of ``n_rep`` seeded replicates whose 90% interval covers the truth, per parameter
    and pooled (``"all"``); data simulated from the law with log-normal noise ``sigma``."""
    truth, x = CALIBRATION[law]
    mean = get_law(law).evaluate(truth, x)
    hits = {k: 0 for k in truth}
    for rep in range(n_rep):
        rng = np.random.default_rng(1000 + rep)
        tab = pd.DataFrame({**x, "loss": mean * np.exp(rng.normal(0.0, sigma, mean.shape))})
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=ConvergenceWarning)
            res = fit_bayes(
                tab,
                law,
                likelihood="normal",
                ci_prob=0.9,
                seed=rep,
                chains=4,
                draws=500,
                warmup=500,
            )
        for k, v in truth.items():
            hits[k] += res.ci[k][0] <= v <= res.ci[k][1]
    out = {k: h / n_rep for k, h in hits.items()}
    out["all"] = sum(hits.values()) / (n_rep * len(truth))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("law", sorted(CALIBRATION))
def test_calibration_90pct_intervals(law):
    cov = calibration_coverage(law, 40)
    print(f"\ncalibration {law}: {cov}")
    assert 0.80 <= cov["all"] <= 0.97, cov


@pytest.mark.slow
def test_linear_residuals_and_weights_in_the_likelihood():
    # Additive noise, a response that crosses zero, and a wild row with weight 0.
    rng = np.random.default_rng(5)
    depth = np.repeat([2.0, 3, 4, 6, 8, 12, 16, 24], 3)
    loss = 2.0 / depth**1.1 - 0.2 + rng.normal(0.0, 0.005, depth.shape)
    loss[0] = 40.0
    w = np.ones(len(depth))
    w[0] = 0.0
    from scalefit import Law

    law = Law.from_formula("c/depth**alpha + L0", starts={"alpha": (0.5, 2.0), "c": (0.5, 5.0)})
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        res = fit_bayes(
            pd.DataFrame({"depth": depth, "loss": loss}).assign(loss=lambda f: f["loss"] + 1.0),
            law,
            residuals="linear",
            weights=w,
            seed=1,
            **SHORT,
        )
    assert res.conventions["residuals"] == "linear" and res.conventions["weights"] == "array"
    lo, hi = res.ci["alpha"]
    assert lo < 1.1 < hi and hi - lo < 0.5
    assert res.ci["L0"][0] < 0.8 < res.ci["L0"][1]
    sims = predictive_draws(res, pd.DataFrame({"depth": [4.0]}), noise=True)
    assert abs(np.median(sims) - (2.0 / 4**1.1 + 0.8)) < 0.05


def test_in_process_bayes_cli_leaves_the_device_count_alone():
    """Only the console script sets JAX's CPU device count; ``cli.main`` in a user's process
    (a notebook, a test) must leave it as it was."""
    import subprocess
    import sys

    code = (
        "import jax, scalefit.cli; from scalefit.cli.bayes import _devices_for_chains; "
        "_devices_for_chains(4); print(jax.config.jax_num_cpu_devices)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["-1"]
