"""Schedule-aware laws on curves: truth recovery, run-level bootstrap, forecasts, the CLI."""

import warnings

import numpy as np
import pytest
from conftest import assert_png

from scalefit.cli import main
from scalefit.core.errors import ConvergenceWarning, ScaleFitError
from scalefit.curves import (
    final_losses,
    fit_curves,
    forecast,
    prepare,
    read_curves,
    synthetic_curves,
    truncate,
)
from scalefit.laws import get_law

TRUTH = {"L0": 2.0, "A": 1.5, "alpha": 0.5, "C": 0.3}
LENGTHS = (1000, 2000, 3000, 4000, 5000, 6000)
#: Twelve runs: with six, percentile intervals over resampled runs under-cover (about 0.85-0.9
#: at 95 % over 40 seeds), as few-cluster bootstraps do.
TWELVE = tuple(range(1000, 7000, 500))


def _schedule(kind: str, steps: int) -> str:
    warm = steps // 50
    if kind == "constant":
        return f"constant:lr=0.003,steps={steps},warmup={warm}"
    if kind == "cosine":
        return f"cosine:lr=0.003,steps={steps},warmup={warm},final_lr=0.0003"
    return f"wsd:lr=0.003,steps={steps},warmup={warm},decay=0.2"


def _curves(kind, seed, lengths=LENGTHS, **kw):
    """Runs of one schedule family; noise 0.5 % per checkpoint and 0.3 % per run."""
    scheds = [_schedule(kind, n) for n in lengths]
    return synthetic_curves(TRUTH, scheds, every=20, noise=0.005, run_noise=0.003, seed=seed, **kw)


def _fit(curves, law="lr_annealing", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # ridge warnings are expected here
        kw.setdefault("bootstrap", 0)  # intervals only where a test asks for them
        return fit_curves(prepare(curves), law, starts=32, progress=False, **kw)


@pytest.mark.parametrize("kind", ["cosine", "wsd"])
def test_truth_recovered_within_run_bootstrap_intervals(kind):
    covered, total = 0, 0
    for seed in range(3):
        res = _fit(_curves(kind, seed, lengths=TWELVE), bootstrap=100, seed=seed)
        assert res.converged and not res.not_identified
        for name, value in TRUTH.items():
            lo, hi = res.ci[name]
            covered += lo <= value <= hi
            total += 1
            assert res.params[name] == pytest.approx(value, rel=0.08)
    assert covered >= total - 1  # 95 % intervals: at most one miss in 12


def test_constant_schedule_leaves_the_annealing_term_unidentified_and_a_formula_fits():
    curves = _curves("constant", 0)
    res = _fit(curves)
    assert "C" in res.not_identified  # S2 is 0 everywhere: no footprint of C
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain = fit_curves(
            prepare(curves),
            None,
            formula="L0 + A*S1**(-alpha)",
            bootstrap=100,
            starts=32,
            progress=False,
        )
    assert plain.law.inputs == ("S1",) and not plain.not_identified
    for name in ("L0", "A", "alpha"):
        lo, hi = plain.ci[name]
        assert lo <= TRUTH[name] <= hi


def test_joint_law_with_model_size():
    truth = {**TRUTH, "B": 400.0, "beta": 0.3}
    sizes = [2e7, 5e7, 1e8, 2e8, 5e8, 1e9]
    scheds = [_schedule("cosine", 3000)] * 3 + [_schedule("wsd", 3000)] * 3
    curves = synthetic_curves(
        truth, scheds, law="lr_annealing_params", params=sizes, every=20, noise=0.003, seed=0
    )
    res = _fit(curves, "lr_annealing_params")
    assert res.converged
    for name, value in truth.items():
        assert res.params[name] == pytest.approx(value, rel=0.15), name


def test_bootstrap_resamples_runs_not_checkpoints():
    res = _fit(_curves("cosine", 0), bootstrap=20)
    assert res.conventions["curves"]["resample"] == "runs"
    assert res.diagnostics.get("resample", res.conventions.get("resample")) in (
        "clusters of 'run'",
        None,
    )
    assert "clusters of 'run'" in res.report()
    one = _curves("cosine", 0, lengths=(3000,))
    with pytest.raises(ScaleFitError, match="need at least 2 runs"):
        _fit(one, bootstrap=20)


def test_bootstrap_resamples_a_main_run_with_its_branches_when_grouped():
    curves = _curves("wsd", 0, lengths=TWELVE)
    curves["family"] = curves["run"].map(lambda r: f"f{sorted(set(curves['run'])).index(r) // 3}")
    res = _fit(curves, bootstrap=20, cluster="family")
    assert res.conventions["curves"]["resample"] == "runs grouped by 'family'"
    assert "clusters of 'family'" in res.report()
    split = curves.assign(family=np.arange(len(curves)) % 2)
    with pytest.raises(ScaleFitError, match="a cluster must hold whole runs"):
        _fit(split, bootstrap=20, cluster="family")
    with pytest.raises(ScaleFitError, match="'model' is not a column"):
        _fit(curves, cluster="model")
    with pytest.raises(ScaleFitError, match="cluster column 'family' has missing values"):
        _fit(curves.assign(family=np.where(curves["run"] == "run0", None, curves["family"])),
             bootstrap=20, cluster="family")  # fmt: skip
    with pytest.raises(ScaleFitError, match="need at least 2 values of 'family'"):
        _fit(curves.assign(family="one"), bootstrap=20, cluster="family")


def test_every_registered_curve_law_reads_the_areas():
    for name in ("lr_annealing", "lr_annealing_params"):
        law = get_law(name)
        assert {"S1", "S2"} <= set(law.inputs)
        x = {"S1": np.array([1.0, 2.0]), "S2": np.array([0.0, 0.5]), "params": np.array([1e8, 1e8])}
        p = {k: 1.0 for k in law.param_names}
        y = law.evaluate(p, x)
        assert y[1] < y[0]  # more forward and annealing area: lower loss


def test_final_loss_from_the_first_part_and_other_schedules():
    curves = _curves("cosine", 4)
    head = truncate(curves, 0.6)
    res = _fit(head, bootstrap=50, seed=4)
    table = final_losses(res, head)
    truth_end = final_losses(res.replace(params=TRUTH), head)["predicted"]
    assert np.allclose(table["predicted"], truth_end, rtol=0.01)
    assert (table["lo"] < table["predicted"]).all() and (table["predicted"] < table["hi"]).all()
    wsd = forecast(res, _schedule("wsd", 6000), steps=[3000, 6000])
    assert wsd["S2"].iloc[0] == 0.0 and wsd["S2"].iloc[1] > 0  # stable phase, then the decay
    exact = get_law("lr_annealing").evaluate(TRUTH, wsd)
    assert np.allclose(wsd["loss"], exact, rtol=0.01)
    with pytest.raises(ScaleFitError, match="steps must lie in"):
        forecast(res, _schedule("wsd", 6000), steps=[7000])


def test_cli_curves_fit_report_forecast_and_plot(tmp_path, capsys):
    path = tmp_path / "curves.csv"
    _curves("wsd", 0).to_csv(path, index=False)
    code = main(
        [
            "curves",
            "fit",
            str(path),
            "--bootstrap",
            "30",
            "--starts",
            "16",
            "--fit-fraction",
            "0.9",
            "--forecast",
            _schedule("wsd", 9000),
            "--plots",
            str(tmp_path / "plots"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "lr_annealing" in out and "intervals resample whole runs" in out
    assert "final loss of each run from its first 0.9" in out and "forecast wsd:" in out
    assert_png(tmp_path / "plots" / "curves_lr_annealing.png")


def test_cli_curves_fit_resamples_runs_grouped_by_a_column(tmp_path, capsys):
    curves = _curves("wsd", 0)
    curves["model"] = curves["run"].map({f"run{i}": f"m{i // 2}" for i in range(6)})
    path = tmp_path / "curves.csv"
    curves.to_csv(path, index=False)
    code = main(["curves", "fit", str(path), "--bootstrap", "10", "--starts", "8",
                 "--cluster", "model"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "intervals resample whole runs grouped by 'model'" in out
    assert "clusters of 'model'" in out
    # one value of the cluster column: no intervals by default, and the line says why
    curves.assign(model="m0").to_csv(path, index=False)
    assert main(["curves", "fit", str(path), "--starts", "8", "--cluster", "model"]) == 0
    out = capsys.readouterr().out
    assert "grouped by 'model', and one value of 'model' (one cluster) cannot be resampled" in out
    assert "(--bootstrap 0)" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--fit-fraction", "1.5"],
            "'--fit-fraction' option of scalefit curves fit must be a float in the range (0, 1)",
        ),
        (["--forecast", "cosine:lr=1"], "--forecast: the schedule needs its length"),
        (["--law", "nope"], "Unknown law 'nope'"),
        (["--tag", "val/loss"], "--tag applies to TensorBoard and W&B files"),
        (["--params", "1e8"], "--params is the model size of a --forecast"),
        (["--cluster", "model"], "fit_curves: cluster 'model' is not a column of the curves"),
        (
            ["--momentum", "1.5"],
            "'momentum' parameter of the annealing area must be a float in the range [0, 1)",
        ),
    ],
)
def test_cli_curves_bad_input_is_one_line_exit_2(tmp_path, capsys, args, message):
    path = tmp_path / "curves.csv"
    _curves("cosine", 0, lengths=(1000, 2000)).to_csv(path, index=False)
    code = main(["curves", "fit", str(path), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_cli_reads_a_file_without_schedules_only_with_one(tmp_path, capsys):
    frame = read_curves(_curves("cosine", 0, lengths=(1000, 2000)))
    frame = frame[frame["run"] == "run0"].drop(columns=["schedule", "lr"])
    frame.to_csv(tmp_path / "c.csv", index=False)
    assert main(["curves", "fit", str(tmp_path / "c.csv")]) == 2
    assert "no learning rates" in capsys.readouterr().err
    code = main(["curves", "fit", str(tmp_path / "c.csv"), "--schedule", _schedule("cosine", 1000)])
    assert code == 0


def test_cli_reads_a_tensorboard_folder(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    curves = _curves("cosine", 0, lengths=(1000, 2000))
    for run, part in curves.groupby("run"):
        with SummaryWriter(log_dir=str(tmp_path / "tb" / run)) as writer:
            for row in part.itertuples():
                writer.add_scalar("train/loss", row.loss, int(row.step))
                writer.add_scalar("lr", row.lr, int(row.step))
    code = main(["curves", "fit", str(tmp_path / "tb"), "--tag", "train/loss", "--starts", "16"])
    out = capsys.readouterr().out
    assert code == 0 and "curves: 2 runs" in out
    est = {line.split()[0]: float(line.split()[1]) for line in out.splitlines()[6:10]}
    assert est["C"] == pytest.approx(TRUTH["C"], rel=0.1)  # lr logged every 20 steps, interpolated


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["cosine", "wsd"])
def test_run_bootstrap_intervals_cover_at_their_nominal_rate(kind):
    """40 seeds, twelve runs each: every 95 % interval covers the truth in >= 34 of 40.

    A 95 % interval that covers at its nominal rate fails this with probability < 1 %.
    """
    lengths = TWELVE
    hits = dict.fromkeys(TRUTH, 0)
    for seed in range(40):
        res = _fit(_curves(kind, seed, lengths=lengths), bootstrap=200, seed=seed)
        for name, value in TRUTH.items():
            lo, hi = res.ci[name]
            hits[name] += lo <= value <= hi
    assert min(hits.values()) >= 34, hits


def test_forecast_says_when_its_losses_cannot_be_used():
    """A fit that did not converge, or a law that goes below zero, is said, not printed as is."""
    import dataclasses

    res = _fit(_curves("cosine", 0))
    sched = _schedule("cosine", 6000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        forecast(res, sched)  # converged, positive: no warning
    with pytest.warns(ConvergenceWarning, match="forecast from a fit that did not converge"):
        forecast(dataclasses.replace(res, converged=False), sched)
    steep = dataclasses.replace(res, params=res.params | {"C": 1e6})
    with pytest.warns(ConvergenceWarning, match="not a positive number at step"):
        out = forecast(steep, sched, bands=False)
    assert (out["loss"] <= 0).any()


def test_the_report_prints_the_momentum_beside_C():
    """C is per unit of S2, whose size the momentum sets: the report says at which."""
    curves = _curves("wsd", 0, lengths=(1000, 2000, 3000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = fit_curves(prepare(curves, momentum=0.99), "lr_annealing", starts=4)
        plain = fit_curves(prepare(curves), None, formula="L0 + A*S1**(-alpha)", starts=4)
    line = next(x for x in res.report().splitlines() if x.startswith("C "))
    assert line.endswith("at momentum λ = 0.99")
    assert "λ" not in plain.report()  # a law without S2


@pytest.mark.slow  # three fits: 2.4-3.6 s on a shared machine, 17 s under heavy load
def test_momentum_profile_prefers_the_generating_lambda_and_shows_C_move():
    """Curves made with lambda = 0.999: the profile's objective is lowest there, and C (per
    unit of S2) changes several-fold across the grid."""
    from scalefit.curves import momentum_profile

    scheds = [_schedule(k, n) for k in ("wsd", "cosine") for n in (1000, 2000, 3000)]
    curves = synthetic_curves(TRUTH, scheds, every=20, noise=0.001, seed=0, momentum=0.999)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        prof = momentum_profile(curves, (0.99, 0.999, 0.9995), starts=4)
    assert prof["momentum"].tolist() == [0.99, 0.999, 0.9995] and prof["converged"].all()
    assert prof["objective"].idxmin() == 1
    assert prof.loc[1, "C"] == pytest.approx(TRUTH["C"], rel=0.05)
    assert prof["C"].max() > 4 * prof["C"].min()


@pytest.mark.parametrize("momenta", [(), (0.999, 1.0), ("x",)])
def test_momentum_profile_refuses_a_bad_grid(momenta):
    from scalefit.curves import momentum_profile

    with pytest.raises(ScaleFitError, match="momentum"):
        momentum_profile(_curves("wsd", 0), momenta)


def _python_hint(text: str) -> str | None:
    """The first ``name=value`` suggestion not followed by its command-line spelling."""
    import re

    for hit in re.finditer(r"\b(?:run|bootstrap|columns)=\S+", text):
        if not text[hit.end() :].startswith(" (--"):
            return hit.group(0)
    return None


def test_cli_a_one_run_step_loss_file_at_a_constant_rate(tmp_path, capsys):
    """The file a user has: ``step,loss``, one run, constant learning rate."""
    sched = _schedule("constant", 3000)
    path = tmp_path / "one.csv"
    _curves("constant", 0, lengths=(3000,))[["step", "loss"]].to_csv(path, index=False)
    assert main(["curves", "fit", str(path), "--schedule", sched]) == 2
    err = capsys.readouterr().err
    assert "no 'run' column" in err and "--run NAME on the command line" in err
    assert _python_hint(err) is None
    base = ["curves", "fit", str(path), "--run", "mine", "--schedule", sched, "--starts", "8"]
    out_json = tmp_path / "fit.json"
    assert main([*base, "--out", str(out_json)]) == 0  # not exit 3: the law it fits is identified
    out = capsys.readouterr().out
    assert "law choice: L0 + A/S1^alpha (lr_constant)" in out and "S2 = 0" in out
    assert "law        lr_constant" in out and "converged  yes" in out
    assert "not identified" not in out and "one run cannot be resampled" in out
    assert "curves: 1 run," in out and _python_hint(out) is None
    from scalefit.fit.result import FitResult

    res = FitResult.load(out_json)
    for name in ("L0", "A", "alpha"):
        assert res.params[name] == pytest.approx(TRUTH[name], rel=0.1), name
    # one run cannot be resampled: say so, and name the command line's alternative
    assert main([*base, "--bootstrap", "20"]) == 2
    err = capsys.readouterr().err
    assert "need at least 2 runs; the curves have 1" in err
    assert "--bootstrap 0 on the command line" in err and _python_hint(err) is None
    # the annealing law asked for by name: fitted, with the line that says why C is not pinned
    assert main([*base, "--law", "lr_annealing"]) == 3
    out = capsys.readouterr().out
    assert "law choice: the learning rate never decays" in out and _python_hint(out) is None
    assert "see the stderr line above" in out


def test_cli_the_default_law_with_a_decay_is_lr_annealing(tmp_path, capsys):
    path = tmp_path / "one.csv"
    _curves("wsd", 0, lengths=(3000,))[["step", "loss"]].to_csv(path, index=False)
    args = ["--run", "a", "--schedule", _schedule("wsd", 3000), "--starts", "16"]
    assert main(["curves", "fit", str(path), *args]) == 0
    out = capsys.readouterr().out
    assert "law        lr_annealing" in out and "law choice" not in out
    for flag in ("--run", "--columns"):  # the CSV options refused on other formats, by name
        assert main(["curves", "fit", str(path), "--format", "wandb", flag, "a=b"]) == 2
        assert f"{flag} applies to CSV/JSON curve files" in capsys.readouterr().err


def test_cli_a_forecast_outside_its_band_says_so(capsys):
    """The forecast line follows the report's rule: inside its band, or the line says why."""
    import argparse

    from scalefit.cli.curves import _forecasts

    curves = _curves("wsd", 0, lengths=(1000, 2000, 3000))
    res = _fit(curves)
    point = np.array(list(res.params.values()))
    spread = 1 + 0.01 * np.random.default_rng(0).standard_normal((20, len(point)))
    res = res.replace(draws=point * spread)  # draws around the estimate: its band holds it
    args = argparse.Namespace(fit_fraction=None, momentum=0.999, schedule=None)
    sched = _schedule("wsd", 4000)
    _forecasts(args, res, curves, [sched], {})
    assert "estimate outside" not in capsys.readouterr().out
    shifted = np.array(res.draws, dtype=float)
    shifted[:, list(res.params).index("L0")] += 0.5  # every draw's forecast above the fit's
    _forecasts(args, res.replace(draws=shifted), curves, [sched], {})
    out = capsys.readouterr().out
    assert "(estimate outside: the draws sit to one side of it)" in out
