"""Public tables read as published: run names from several columns, schedules from columns."""

import warnings

import pandas as pd
import pytest

from scalefit.cli import main
from scalefit.core.errors import ConvergenceWarning, ScaleFitError
from scalefit.core.schedule import fill_template, template_fields
from scalefit.curves import Schedule, parse_schedule, prepare, read_curves

TEMPLATE = "cosine:lr={peak_lr},steps={total_steps},warmup=5,final_lr_ratio=0.1"


def _sweep() -> pd.DataFrame:
    """Two sizes x two lengths x two peak rates, runs told apart only by their settings."""
    rows = []
    for model, n in (("m10", 1e7), ("m30", 3e7)):
        for total in (60, 120):
            for lr in (1e-3, 2e-3):
                for step in range(20, total + 1, 20):
                    loss = 2 + 30 / n**0.2 + 5 / (lr * step) ** 0.3
                    rows.append(
                        {"loss": loss, "N": n, "model": model, "total_steps": total,
                         "current_steps": step, "peak_lr": lr}
                    )  # fmt: skip
    return pd.DataFrame(rows)


def test_final_lr_ratio_is_a_fraction_of_the_peak():
    s = parse_schedule("cosine:lr=4e-3,steps=5000,warmup=50,final_lr_ratio=0.1")
    assert s == Schedule("cosine", 4e-3, 5000, warmup=50, final_lr=4e-4)
    assert parse_schedule(str(s)) == s
    with pytest.raises(ScaleFitError, match="final_lr or final_lr_ratio, not both"):
        parse_schedule("cosine:lr=1,steps=9,final_lr=0.1,final_lr_ratio=0.1")
    with pytest.raises(ScaleFitError, match=r"final_lr_ratio must be a number in \[0, 1\]"):
        parse_schedule("cosine:lr=1,steps=9,final_lr_ratio=2")


def test_template_fields_are_whole_values_and_never_evaluated():
    assert template_fields(TEMPLATE) == ("peak_lr", "total_steps")
    assert template_fields("wsd:lr=3e-3,steps=100") == ()
    assert str(fill_template(TEMPLATE, {"peak_lr": 2e-3, "total_steps": 60})) == (
        "cosine:lr=0.002,steps=60,warmup=5,final_lr=0.0002"
    )
    for bad, message in (
        ("cosine:lr=1{x},steps=9", "must be a whole setting value"),
        ("cosine:lr={__import__('os')}x,steps=9", "must be a whole setting value"),
        ("{kind}:lr=1,steps=9", "kind cannot be a"),
        ("cosine:lr={},steps=9", "empty field"),
    ):
        with pytest.raises(ScaleFitError, match=message):
            template_fields(bad)
    with pytest.raises(ScaleFitError, match=r"no value for the schedule field \{n\}"):
        fill_template("cosine:lr=1,steps={n}", {})


def test_run_columns_and_schedule_template_read_a_sweep_as_published(tmp_path):
    path = tmp_path / "sweep.csv"
    _sweep().to_csv(path, index=False)
    tab = read_curves(
        path,
        columns={"current_steps": "step", "N": "params"},
        run_columns=("model", "total_steps", "peak_lr"),
        schedule=TEMPLATE,
    )
    assert tab["run"].nunique() == 8
    one = tab[tab["run"] == "m30/120/0.002"]
    assert one["step"].tolist() == [20.0, 40.0, 60.0, 80.0, 100.0, 120.0]
    assert parse_schedule(one["schedule"].iloc[0]) == Schedule(
        "cosine", 2e-3, 120, warmup=5, final_lr=2e-4
    )
    prepared = prepare(tab)
    assert set(prepared.attrs["scalefit_curves"]["lr_source"].values()) == {
        str(parse_schedule(t)) for t in tab["schedule"].unique()
    }
    # the same table from a DataFrame, with the rows shuffled, gives the same runs
    shuffled = _sweep().sample(frac=1.0, random_state=0)
    again = read_curves(
        shuffled,
        columns={"current_steps": "step", "N": "params"},
        run_columns=["model", "total_steps", "peak_lr"],
        schedule=TEMPLATE,
    )
    pd.testing.assert_frame_equal(
        again.reset_index(drop=True)[tab.columns], tab.reset_index(drop=True)
    )


@pytest.mark.parametrize(
    ("edit", "kwargs", "message"),
    [
        (None, {"run_columns": ["model", "nope"]}, "run column 'nope' is not in the file"),
        (None, {"run_columns": []}, "run_columns must name one column or more"),
        (None, {"run_columns": ["model"], "run": "x"}, "run_columns builds the run name"),
        (
            lambda f: f.assign(run="r"),
            {"run_columns": ["model"]},
            "already has a 'run' column",
        ),
        (
            lambda f: f.assign(model=f["model"].where(f.index != 3)),
            {"run_columns": ["model"]},
            "row 4, run column 'model': an empty value",
        ),
        (None, {"schedule": "cosine:lr={lr_peak},steps={total_steps}"}, "field {lr_peak}"),
        (
            lambda f: f.assign(peak_lr=f["peak_lr"].astype(object).where(f.index != 2, "fast")),
            {"schedule": TEMPLATE},
            "row 3, column 'peak_lr': expected a number",
        ),
        (
            lambda f: f.assign(schedule="constant:lr=1"),
            {"schedule": TEMPLATE},
            "has a 'schedule' column already",
        ),
    ],
)
def test_bad_run_columns_and_templates_are_named(tmp_path, edit, kwargs, message):
    frame = _sweep() if edit is None else edit(_sweep())
    path = tmp_path / "bad.csv"
    frame.to_csv(path, index=False)
    kwargs = {"run_columns": ["model", "total_steps", "peak_lr"], **kwargs}
    if "run" in frame.columns or kwargs.get("run"):
        kwargs.setdefault("run_columns", ["model"])
    with pytest.raises(ScaleFitError, match=message) as err:
        read_curves(path, columns={"current_steps": "step", "N": "params"}, **kwargs)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_a_template_field_that_changes_within_a_run_is_refused(tmp_path):
    # runs named without peak_lr mix two peak rates: the template cannot give one schedule
    with pytest.raises(
        ScaleFitError, match=r"run 'm10/60', row 4, column 'peak_lr': 0.002 differs from the run's"
    ):
        read_curves(
            _sweep(),
            columns={"current_steps": "step", "N": "params"},
            run_columns=["model", "total_steps"],
            schedule=TEMPLATE,
        )


def test_cli_reads_a_sweep_with_run_columns_and_a_template(tmp_path, capsys):
    path = tmp_path / "sweep.csv"
    _sweep().to_csv(path, index=False)
    flags = [
        "curves", "fit", str(path), "--columns", "current_steps=step,N=params",
        "--run-columns", "model,total_steps,peak_lr", "--schedule", TEMPLATE,
        "--law", "lr_annealing_params", "--starts", "8", "--early", "0",
    ]  # fmt: skip
    code = main(flags)
    out = capsys.readouterr().out
    assert code in (0, 3) and "curves: 8 runs" in out
    assert main([*flags[:3], "--run-columns", "model,,peak_lr", "--columns", "N=params"]) == 2
    assert "--run-columns: expected column names" in capsys.readouterr().err


def test_a_formula_in_tokens_forecasts_each_run_end_from_its_own_tokens_per_step(tmp_path):
    """``final_losses`` reads each run's tokens per step; ``forecast`` takes it as an option."""
    import numpy as np

    from scalefit.curves import final_losses, fit_curves, forecast

    frame = _sweep()
    frame["D"] = frame["current_steps"] * 4096.0 * (1 + (frame["model"] == "m30"))
    frame["loss"] = 2 + 30 / frame["N"] ** 0.2 + 40 / frame["D"] ** 0.3  # exact: no noise
    path = tmp_path / "sweep.csv"
    frame.to_csv(path, index=False)
    kw = dict(columns={"current_steps": "step", "N": "params", "D": "tokens"})
    curves = read_curves(path, run_columns=("model", "total_steps", "peak_lr"), **kw,
                         schedule=TEMPLATE)  # fmt: skip
    formula = "E + A*params**(-alpha) + B*tokens**(-beta)"
    x0 = {"E": 2.0, "A": 30.0, "alpha": 0.2, "B": 40.0, "beta": 0.3}
    with warnings.catch_warnings():  # two sizes: E, A and alpha trade off (the ends do not)
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = fit_curves(prepare(curves, drop_warmup=False, early=0.0), None, formula=formula,
                         x0=x0, progress=False)  # fmt: skip
    ends = final_losses(res, curves)
    last = curves.groupby("run")["loss"].last()
    assert np.allclose(ends.set_index("run")["predicted"], last.reindex(ends["run"]), rtol=1e-6)
    sched = parse_schedule("cosine:lr=1e-3,steps=120,warmup=5")
    with pytest.raises(ScaleFitError, match="needs tokens"):
        forecast(res, sched, params=1e7)
    with pytest.raises(ScaleFitError, match="'tokens_per_step' parameter of forecast"):
        forecast(res, sched, params=1e7, tokens_per_step=-1)
    bent = curves.assign(tokens=curves["tokens"] * (1 + 0.01 * (curves["step"] == 40)))
    with pytest.raises(ScaleFitError, match="tokens per step is not constant"):
        final_losses(res, bent)
