"""The multi-power law (Luo et al. 2025) on curves: its quadrature, truth recovery, intervals."""

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest

from scalefit.cli import main
from scalefit.core.errors import ConvergenceWarning, ScaleFitError
from scalefit.core.schedule import parse_schedule
from scalefit.curves import fit_curves, forecast, prepare, synthetic_curves
from scalefit.curves.multipower import decay_drops, quadrature, with_quadrature
from scalefit.fit.result import FitResult
from scalefit.laws import get_law
from scalefit.laws.catalogue import MPL_SEGMENTS, mpl_inputs

#: Close to the paper's fits at 25M-400M parameters (peak lr 3e-4).
TRUTH = {"L0": 2.8, "A": 0.6, "alpha": 0.47, "B": 450.0, "C": 2.05, "beta": 0.59, "gamma": 0.64}
PEAKS = (3e-4, 1e-3)


def _schedule(kind: str, steps: int, lr: float) -> str:
    warm = steps // 50
    if kind == "constant":
        return f"constant:lr={lr},steps={steps},warmup={warm}"
    if kind == "cosine":
        return f"cosine:lr={lr},steps={steps},warmup={warm},final_lr={lr / 10}"
    return f"wsd:lr={lr},steps={steps},warmup={warm},decay=0.1"


def _curves(seed: int, kinds=("constant", "cosine", "wsd")) -> pd.DataFrame:
    """Twelve runs: each kind at two lengths and two peak learning rates.

    Noise 0.2 % per checkpoint and 0.1 % per run, the scale of a validation loss measured on a
    fixed held-out set every 10 steps.
    """
    scheds = [_schedule(k, n, lr) for k in kinds for n in (2000, 4000) for lr in PEAKS]
    return synthetic_curves(
        TRUTH, scheds, law="multi_power", every=10, noise=0.002, run_noise=0.001, seed=seed
    )


def _fit(curves, law="multi_power", points=40, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        kw.setdefault("bootstrap", 0)  # intervals only where a test asks for them
        return fit_curves(prepare(curves, max_points=points), law, starts=16, progress=False, **kw)


def _exact_drop(eta, t, warmup, p):
    """The paper's per-step sum LD(t), written out."""
    d = decay_drops(eta, warmup)[:t]
    s = np.cumsum(eta[:t][::-1])[::-1]  # S_k(t) for k = 1 .. t
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(s > 0, eta[:t] ** -p["gamma"] * s, 0.0)  # an lr of 0 has S_k(t) = 0
    g = 1 - (p["C"] * u + 1) ** -p["beta"]
    return float(np.sum(d * g))


@pytest.mark.parametrize(
    "spec",
    [
        "cosine:lr=3e-4,steps=20000,warmup=400",
        "cosine:lr=1e-3,steps=6000,warmup=120,final_lr=1e-4",
        "wsd:lr=3e-4,steps=20000,warmup=400,decay=0.2",
        "linear:lr=3e-3,steps=8000,warmup=100",
    ],
)
def test_quadrature_matches_the_exact_sum(spec):
    """16 nodes: the loss drop within 5e-4 of itself (measured: at most 2.6e-4)."""
    sched = parse_schedule(spec)
    eta = sched.sequence()
    steps = np.arange(sched.warmup + 1, sched.steps + 1, 97)
    q = quadrature(eta, steps, segments=MPL_SEGMENTS, warmup=sched.warmup)
    law = get_law("multi_power")
    p = {**TRUTH, "L0": 0.0, "A": 0.0}
    approx = -law.evaluate(p, {**q, "S1": np.cumsum(eta)[steps - 1]})
    exact = np.array([TRUTH["B"] * _exact_drop(eta, t, sched.warmup, p) for t in steps])
    assert exact.max() > 0.1  # a drop of the paper's size
    assert np.max(np.abs(approx - exact)) <= 5e-4 * exact.max()


@pytest.mark.parametrize(
    "spec",
    [
        "linear:lr=3e-3,steps=8000,warmup=100",
        "wsd:lr=3e-4,steps=20000,warmup=400,decay=0.2",
        "wsd:lr=3e-4,steps=20000,warmup=400,decay=0.2,shape=sqrt",
    ],
)
def test_quadrature_to_an_lr_of_zero_keeps_the_bound(spec):
    """The decrement into lr = 0 has a node of its own: the error at the last step stays within
    5e-4 of the drop (measured at most 3.5e-4; 1.6e-3 to 2.0e-3 when it shared a group)."""
    sched = parse_schedule(spec)
    eta = sched.sequence()
    assert eta[-1] == 0.0
    steps = np.array([sched.steps - 1, sched.steps])
    q = quadrature(eta, steps, segments=MPL_SEGMENTS, warmup=sched.warmup)
    p = {**TRUTH, "L0": 0.0, "A": 0.0}
    approx = -get_law("multi_power").evaluate(p, {**q, "S1": np.cumsum(eta)[steps - 1]})
    exact = np.array([TRUTH["B"] * _exact_drop(eta, t, sched.warmup, p) for t in steps])
    assert np.max(np.abs(approx - exact)) <= 5e-4 * exact.max()


def test_quadrature_is_exact_for_few_changes_and_zero_without_decay():
    eta = np.r_[np.full(100, 1e-3), np.full(100, 3e-4), np.full(100, 1e-4), np.full(50, 0.0)]
    steps = np.array([50, 150, 250, 320, 350])
    q = quadrature(eta, steps, segments=4, warmup=0)
    p = {**TRUTH, "L0": 0.0, "A": 0.0}
    approx = -get_law("multi_power", segments=4).evaluate(p, {**q, "S1": np.cumsum(eta)[steps - 1]})
    exact = [TRUTH["B"] * _exact_drop(eta, t, 0, p) for t in steps]
    assert approx[0] == 0.0 and np.allclose(approx, exact, rtol=1e-12, atol=1e-15)
    flat = quadrature(parse_schedule("constant:lr=3e-4,steps=500,warmup=50").sequence(), [500])
    assert all(flat[f"mpl_w{j}"][0] == 0.0 for j in range(1, MPL_SEGMENTS + 1))


def test_warmup_increases_are_not_decay():
    eta = parse_schedule("linear:lr=1e-3,steps=100,warmup=10").sequence()
    d = decay_drops(eta, 10)
    assert (d[:10] == 0).all() and (d[10:] >= 0).all() and d[10] > 0  # the drop from the peak
    assert np.array_equal(decay_drops(eta), d)  # warm-up read from the rise to the peak


def test_numpy_and_jax_agree_and_gradients_are_finite():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    eta = parse_schedule("wsd:lr=1e-3,steps=400,warmup=10,decay=0.5").sequence()
    steps = np.array([100, 300, 400])  # the lr is 0 at step 400
    x = {**quadrature(eta, steps, segments=8), "S1": np.cumsum(eta)[steps - 1]}
    law = get_law("multi_power", segments=8)
    with jax.enable_x64(True):
        y = law.evaluate(TRUTH, {k: jnp.asarray(v) for k, v in x.items()}, xp=jnp)
        assert np.allclose(np.asarray(y), law.evaluate(TRUTH, x), rtol=1e-12)

        def total(theta):
            p = dict(zip(TRUTH, theta, strict=True))
            return law.evaluate(p, {k: jnp.asarray(v) for k, v in x.items()}, xp=jnp).sum()

        grad = jax.grad(total)(jnp.asarray(list(TRUTH.values())))
    assert np.all(np.isfinite(np.asarray(grad)))


def test_law_options_and_inputs():
    law = get_law("multi_power", segments=3)
    assert law.inputs == ("S1", *mpl_inputs(3)) and len(law.inputs) == 10
    assert get_law("multi_power").options == {"segments": MPL_SEGMENTS}
    with pytest.raises(ScaleFitError, match="segments must be an integer >= 1"):
        get_law("multi_power", segments=0)
    joint = get_law("multi_power_params")
    assert joint.inputs[0] == "params" and joint.param_names[-2:] == ("D", "delta")


@pytest.fixture(scope="module")
def mixed_fit():
    curves = _curves(3)
    return curves, _fit(curves, bootstrap=50, seed=3)


@pytest.mark.slow  # in `make test-slow`: the default run stays under 10 minutes on 2 cores
def test_truth_recovered_within_run_bootstrap_intervals(mixed_fit):
    """95 % intervals from 50 resamples of the twelve runs hold every true value (seed 3).

    Not every seed does: with seed 0 the intervals of L0, A and alpha miss (the three trade
    off), with seed 1 that of gamma; the slow test measures the rate over 40 seeds.
    """
    curves, res = mixed_fit
    # resamples of runs that draw few decays can leave beta or gamma unpinned (flagged), but
    # the full fit pins every parameter and the intervals still hold the truth
    assert res.converged and set(res.not_identified) <= {"C", "beta", "gamma"}
    assert res.conventions["curves"]["resample"] == "runs"
    for name, value in TRUTH.items():
        lo, hi = res.ci[name]
        assert lo <= value <= hi, (name, lo, hi)


@pytest.mark.slow  # in `make test-slow`: the default run stays under 10 minutes on 2 cores
def test_multistart_reaches_the_optimum_a_start_at_the_truth_finds(mixed_fit):
    curves, res = mixed_fit
    law = dataclasses.replace(get_law("multi_power"), start_points=(TRUTH,))
    from_truth = _fit(curves, law)
    assert res.objective <= from_truth.objective * (1 + 1e-6)


@pytest.mark.slow  # in `make test-slow`: the default run stays under 10 minutes on 2 cores
def test_forecasts_and_the_figure_read_the_quadrature(mixed_fit, tmp_path):
    curves, res = mixed_fit
    sched = _schedule("wsd", 8000, 3e-4)
    pred = forecast(res, sched, steps=[7000, 8000])
    truth = synthetic_curves(TRUTH, [sched], law="multi_power", every=1000, noise=0.0, seed=0)
    true_end = truth.set_index("step").loc[[7000, 8000], "loss"].to_numpy()
    assert np.allclose(pred["loss"], true_end, rtol=0.01)
    assert (pred["lo"] <= pred["loss"]).all() and (pred["loss"] <= pred["hi"]).all()
    res.save(tmp_path / "mpl.json")
    again = FitResult.load(tmp_path / "mpl.json")
    assert again.law.options == {"segments": MPL_SEGMENTS}
    assert np.allclose(forecast(again, sched, steps=[8000])["loss"], pred["loss"].iloc[-1:])
    pytest.importorskip("matplotlib")
    from scalefit.plot.curves import plot_curves

    fig = plot_curves(res, prepare(curves, max_points=20))
    assert len(fig.axes[0].lines) > 12


def test_constant_schedules_leave_the_drop_unidentified():
    res = _fit(_curves(1, kinds=("constant",)))
    assert {"B", "C", "beta", "gamma"} & set(res.not_identified)
    for name in ("L0", "A", "alpha"):
        assert res.params[name] == pytest.approx(TRUTH[name], rel=0.05)


def test_a_frame_without_lr_history_is_refused():
    prepared = prepare(_curves(0, kinds=("wsd",)), max_points=10)
    bare = pd.DataFrame(prepared)
    bare.attrs = {}
    with pytest.raises(ScaleFitError, match="needs each run's learning-rate history"):
        with_quadrature(bare, get_law("multi_power"))


@pytest.mark.slow  # in `make test-slow`: the default run stays under 10 minutes on 2 cores
def test_bayesian_fit_runs_the_law():
    pytest.importorskip("numpyro")
    from scalefit.curves.api import curve_table
    from scalefit.fit.bayes import fit_bayes

    law = get_law("multi_power", segments=4)
    prepared = with_quadrature(prepare(_curves(0), max_points=6), law)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 30 draws: a low ESS is expected
        res = fit_bayes(
            curve_table(prepared), law, group="run", chains=1, draws=30, warmup=30, seed=0
        )
    assert res.method == "bayes" and set(res.params) == set(TRUTH)
    assert all(np.isfinite(v) for v in res.params.values())
    assert res.params["alpha"] == pytest.approx(TRUTH["alpha"], rel=0.2)


def test_cli_fits_the_multi_power_law(tmp_path, capsys):
    path = tmp_path / "curves.csv"
    _curves(0, kinds=("cosine", "wsd")).to_csv(path, index=False)
    args = [
        "curves",
        "fit",
        str(path),
        "--law",
        "multi_power",
        "--starts",
        "16",
        "--bootstrap",
        "0",
    ]
    code = main([*args, "--max-points", "30", "--forecast", _schedule("wsd", 6000, 3e-4)])
    out = capsys.readouterr().out
    assert code in (0, 3) and "multi_power" in out and "forecast wsd:" in out


@pytest.mark.slow
def test_run_bootstrap_intervals_cover_at_their_nominal_rate():
    """40 seeds: every 95 % interval covers the truth in >= 34 of 40 fits (measured: >= 37)."""
    hits = dict.fromkeys(TRUTH, 0)
    for seed in range(40):
        res = _fit(_curves(seed), bootstrap=200, seed=seed)
        for name, value in TRUTH.items():
            lo, hi = res.ci[name]
            hits[name] += lo <= value <= hi
    assert min(hits.values()) >= 34, hits


#: The joint law's truth: TRUTH plus a model-size term D / params^delta.
JOINT = {**TRUTH, "D": 300.0, "delta": 0.35}
SIZES = (2e7, 5e7, 1e8, 2e8, 5e8, 1e9)


def _joint_curves(seed: int, noise: float = 0.002) -> tuple[pd.DataFrame, list[str], list[float]]:
    """Six model sizes, each with a cosine and a WSD run at two lengths (24 runs)."""
    scheds, sizes = [], []
    for i, n in enumerate(SIZES):
        for j, kind in enumerate(("cosine", "wsd")):
            for steps in (2000, 4000):
                scheds.append(_schedule(kind, steps, PEAKS[(i + j) % 2]))
                sizes.append(n)
    curves = synthetic_curves(
        JOINT,
        scheds,
        law="multi_power_params",
        params=sizes,
        every=10,
        noise=noise,
        run_noise=noise / 2,
        seed=seed,
    )
    return curves, scheds, sizes


def test_joint_law_recovers_the_size_term_and_the_final_losses():
    """Seed 1: the size term and the power law in S1 within a few per cent of the truth.

    ``C`` and ``beta`` trade off along a ridge of the drop term (measured over seeds 0-2: C from
    0.49 to 7.9 against 2.05), so they are not asserted; the drop they make together is, through
    the final losses of every run.
    """
    curves, _, _ = _joint_curves(1)
    res = _fit(curves, "multi_power_params")
    assert res.converged
    for name in ("L0", "A", "alpha", "delta"):
        assert res.params[name] == pytest.approx(JOINT[name], rel=0.03), name
    for name in ("B", "D"):
        assert res.params[name] == pytest.approx(JOINT[name], rel=0.12), name
    law = res.law
    clean, _, _ = _joint_curves(1, noise=0.0)
    prepared = with_quadrature(prepare(clean, max_points=40), law)
    last = prepared.groupby("run")["step"].transform("max") == prepared["step"]
    final = prepared[last]
    x = {k: final[k].to_numpy() for k in law.inputs}
    predicted = law.evaluate(res.params, x)
    assert np.allclose(predicted, final["loss"].to_numpy(), rtol=3e-3)


@pytest.mark.slow
def test_joint_law_intervals_hold_the_size_term():
    """Seeds 0-2, 50 run resamples: the 95 % intervals of D and delta hold the truth."""
    for seed in range(3):
        curves, _, _ = _joint_curves(seed)
        res = _fit(curves, "multi_power_params", bootstrap=50, seed=seed)
        for name in ("L0", "A", "alpha", "D", "delta"):
            lo, hi = res.ci[name]
            assert lo <= JOINT[name] <= hi, (seed, name, lo, hi)
