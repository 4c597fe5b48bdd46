"""Every figure kind, drawn for a one-exponent, a two-exponent and a three-exponent law, and
checked with matplotlib's own bounding boxes: no text leaves the canvas or overlaps other text.

``layout_problems`` (tests/figure_layout.py) does the checking; the first test shows it finds a
planted overlap and a title cut by the canvas edge, so a clean result means something.
"""

import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from figure_layout import layout_problems  # noqa: E402

import scalefit  # noqa: E402
from scalefit.plot.style import pyplot  # noqa: E402

LAWS = {
    "one exponent": {"law": None, "formula": "E + A/params**alpha"},
    "chinchilla": {"law": "chinchilla"},
    "decomposed": {"law": "decomposed"},
}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    pyplot().close("all")


@pytest.fixture(scope="module")
def table():
    return scalefit.datasets.load("depth_delusion")


@pytest.fixture(scope="module")
def results(table):
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scalefit.core.errors.ConvergenceWarning)
        for name, kw in LAWS.items():
            out[name] = scalefit.fit(
                table, kw.get("law"), formula=kw.get("formula"), starts=16, bootstrap=30,
                seed=0, progress=False,
            )  # fmt: skip
    return out


def _clean(fig):
    problems = layout_problems(fig)
    assert not problems, "\n".join(problems)


def test_the_checker_finds_an_overlap_and_a_cut_title():
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.text(0.5, 0.5, "first label", transform=ax.transAxes)
    ax.text(0.52, 0.5, "second label", transform=ax.transAxes)
    fig.suptitle("a title much too long to fit on a figure three inches wide, cut at both ends")
    problems = layout_problems(fig)
    assert any("overlaps" in p and "first label" in p for p in problems)
    assert any("leaves the figure" in p and "a title" in p for p in problems)


@pytest.mark.parametrize("name", list(LAWS))
def test_fit_and_draws_figures(results, table, name):
    from scalefit.plot.fit import plot_draws, plot_fit

    _clean(plot_fit(results[name], table))
    _clean(plot_draws(results[name]))


def test_loss_axes_carry_the_tables_own_unit_or_none(results, table, tmp_path):
    """depth_delusion is nats per token, the byte grid nats per byte, a plain CSV unstated."""
    from scalefit.plot.fit import plot_fit
    from scalefit.plot.style import loss_label

    res = results["chinchilla"]
    assert res.conventions["loss_unit"] == "nats/token"
    assert plot_fit(res, table).axes[0].get_ylabel() == "observed loss (nats/token)"
    res.save(tmp_path / "fit.json")
    assert loss_label(scalefit.FitResult.load(tmp_path / "fit.json")) == "loss (nats/token)"
    assert loss_label(scalefit.datasets.load("lm_grid_shakespeare")) == "loss (nats/byte)"
    table.to_csv(tmp_path / "t.csv", index=False)
    plain = scalefit.read_table(tmp_path / "t.csv")
    assert loss_label(plain) == "loss" and loss_label(None) == "loss"


@pytest.mark.parametrize("name", ["chinchilla", "decomposed"])
def test_allocation_figures(results, name):
    from scalefit.allocate.analysis import isoflop_curve
    from scalefit.plot.allocate import plot_frontier, plot_isoflop

    res = results[name]
    budgets = [1e20, 1e21, 1e22]
    with warnings.catch_warnings():  # the figures draw what is not recommended too
        warnings.simplefilter("ignore", scalefit.NoRecommendationWarning)
        alloc = scalefit.allocate(res, budgets)
        wide = scalefit.allocate(res, np.logspace(19, 23, 9))
    if alloc.kind == "shape":
        curves = {b: isoflop_curve(res, b) for b in budgets}
        _clean(plot_isoflop(curves, summary=alloc.summary, eps=alloc.eps, source=res))
    _clean(plot_frontier(wide.summary, source=res))


def test_design_figure(results):
    from scalefit.design import next_runs
    from scalefit.plot.design import plot_design

    _clean(plot_design(next_runs(results["decomposed"], 1e22, 1e20, k=6)))


def test_isoflop_figures():
    from scalefit.isoflop import approach2, compare_approaches, synthetic_isoflops, true_exponents
    from scalefit.plot.isoflop import plot_comparison, plot_isoflops

    runs = synthetic_isoflops(sigma=0.003, seed=1)
    isos = [approach2(runs, method=m) for m in ("parabola", "profile")]
    _clean(plot_isoflops(isos[0], runs))
    _clean(plot_comparison(compare_approaches(isoflops=isos), truth=true_exponents()))


def _toy_alphas(outside: bool = False) -> pd.DataFrame:
    rows = []
    for mode, alpha in (("independent", 1.0), ("tied", 3.0)):
        for tau in (0.1, 1.0):
            for steps in (100, 200, 400):
                rows.append(
                    {"teacher_mode": mode, "rho": float(mode == "tied"), "temperature": tau,
                     "steps": steps, "alpha": alpha, "alpha_lo": alpha - 0.1,
                     "alpha_hi": alpha + 0.1, "c": 1.0, "L0": 0.0, "warnings": ""}
                )  # fmt: skip
    if outside:  # one bootstrap interval to one side of its estimate, as percentile ones can be
        rows[5].update(alpha_lo=rows[5]["alpha"] + 0.2, alpha_hi=rows[5]["alpha"] + 0.6)
    return pd.DataFrame(rows)


def _notes(fig) -> list[str]:
    """Legend lines of a figure that say an estimate lies outside its interval."""
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    texts = [t.get_text() for leg in legends if leg is not None for t in leg.get_texts()]
    return [t for t in texts if t.startswith("estimate outside its interval")]


def test_toy_figures():
    from scalefit.plot import toy as toyplot

    alphas = _toy_alphas()
    rows = alphas.to_dict("records")
    _clean(toyplot.alpha_vs_steps(alphas))
    _clean(toyplot.alpha_vs_temperature(alphas))
    depths = np.array([6, 12, 24, 48])
    table = pd.DataFrame(
        [
            {**r, "depth": d, "test_loss": r["c"] / d ** r["alpha"], "theta_mid": 1 / d,
             "dtheta_mid": 1.5}
            for r in rows
            for d in depths
        ]
    )  # fmt: skip
    last = table[table["steps"] == 400]
    _clean(toyplot.loss_vs_depth(last, temperature=1.0, alphas=alphas))
    _clean(toyplot.probe_summary(last))


def test_an_estimate_outside_its_interval_is_named_in_the_figure_and_otherwise_not():
    from scalefit.isoflop import approach2, compare_approaches, synthetic_isoflops
    from scalefit.plot import toy as toyplot
    from scalefit.plot.isoflop import plot_comparison

    why = "estimate outside its interval:\nthe draws sit to one side of it"
    for draw in (toyplot.alpha_vs_steps, toyplot.alpha_vs_temperature):
        assert _notes(draw(_toy_alphas())) == []
        fig = draw(_toy_alphas(outside=True))
        assert _notes(fig) == [why]
        _clean(fig)
    # Hoffmann et al.'s approach 3 (a = 0.46 [0.454, 0.455]) is rounded outside its interval
    iso = approach2(synthetic_isoflops(sigma=0.003, seed=1))
    assert _notes(plot_comparison(compare_approaches(isoflops=[iso]))) == []
    fig = plot_comparison(compare_approaches(isoflops=[iso], published=True))
    assert _notes(fig) == ["estimate outside its interval:\npublished estimates are rounded"]
    _clean(fig)


@pytest.fixture(scope="module")
def bayes_result(table):
    from scalefit.fit.bayes import fit_bayes

    with warnings.catch_warnings():  # a short run: R-hat may exceed 1.01; the figures still draw
        warnings.simplefilter("ignore", scalefit.core.errors.ConvergenceWarning)
        return fit_bayes(table, "chinchilla", chains=2, draws=150, warmup=150, seed=0)


def test_bayes_figures(bayes_result, table):
    from scalefit.plot.bayes import plot_bands, plot_corner, plot_predictive, plot_trace

    _clean(plot_trace(bayes_result))
    _clean(plot_corner(bayes_result))
    _clean(plot_predictive(bayes_result, table))
    grid = pd.DataFrame({"params": np.logspace(8, 10, 20), "tokens": np.full(20, 2e10)})
    _clean(plot_bands(bayes_result, grid, "params"))


def test_curves_figure():
    from scalefit.curves import fit_curves, forecast, prepare, synthetic_curves
    from scalefit.plot.curves import plot_curves

    truth = {"L0": 2.0, "A": 1.5, "alpha": 0.5, "C": 0.8}
    schedules = [f"cosine:lr=0.003,steps={n},warmup=50,final_lr=0.0003" for n in (800, 1200)]
    schedules += ["wsd:lr=0.003,steps=1000,warmup=50,decay=0.2,final_lr=0.0"]
    curves = prepare(synthetic_curves(truth, schedules, seed=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scalefit.core.errors.ConvergenceWarning)
        res = fit_curves(curves, "lr_annealing", starts=16)
    ahead = forecast(res, "wsd:lr=0.003,steps=2000,warmup=50,decay=0.2,final_lr=0.0")
    fig = plot_curves(res, curves, forecasts={"wsd, 2000 steps": ahead})
    _clean(fig)
    assert fig.axes[0].get_ylabel() == "loss"  # synthetic curves: no unit to state
