import textwrap

import pandas as pd
import pytest

pytest.importorskip("torch")

from scalefit.cli import main  # noqa: E402

SPEC = """
[sweep]
name = "tiny"
task = "toy"

[fixed]
preset = "cpu"
teacher_depth = 16
depths = [2, 3, 4, 6]
batch = 64
steps = 60
eval_steps = [20, 40, 60]
test_size = 512
checkpoint_every = 0

[grid]
teacher_mode = ["independent", "tied"]
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    import torch

    torch.set_num_threads(1)
    base = tmp_path_factory.mktemp("toy")
    spec = base / "tiny.toml"
    spec.write_text(textwrap.dedent(SPEC))
    out = base / "out"
    assert main(["toy", "run", str(spec), "--out", str(out), "--workers", "0", "--quiet"]) == 0
    return spec, out


def test_toy_run_writes_tidy_results_and_resumes(sweep, capsys):
    spec, out = sweep
    table = pd.read_csv(out / "results.csv")
    assert len(table) == 2 * 4 * 3
    assert {"teacher_mode", "rho", "temperature", "seed", "depth", "width", "steps"} <= set(
        table.columns
    )
    assert main(["toy", "run", str(spec), "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "2 runs, 2 already finished" in text


def test_toy_fit_prints_table_writes_csv_and_plots(sweep, capsys):
    _, out = sweep
    code = main(["toy", "fit", str(out), "--bootstrap", "10"])
    assert code in (0, 3)  # 3: some tiny-run fit did not converge (reported, not hidden)
    text = capsys.readouterr().out
    assert "alpha" in text and "independent" in text and "tied" in text
    alphas = pd.read_csv(out / "alpha.csv")
    assert len(alphas) == 2 * 3  # teacher modes × checkpoints
    assert {"alpha", "alpha_lo", "alpha_hi", "steps", "teacher_mode"} <= set(alphas.columns)
    for name in ("loss_vs_depth_tau1.png", "alpha_vs_steps.png", "probes_vs_depth.png"):
        assert (out / "plots" / name).stat().st_size > 1000


def test_probe_command(sweep, tmp_path, capsys):
    _, out = sweep
    run_dir = next((out / "runs").iterdir())
    csv, png = tmp_path / "layers.csv", tmp_path / "probe.png"
    code = main(["probe", str(run_dir), "--tokens", "64", "--out", str(csv), "--plot", str(png)])
    assert code == 0
    text = capsys.readouterr().out
    assert "teacher: mechanism:" in text and "students: mechanism:" in text
    layers = pd.read_csv(csv)
    assert set(layers["model"]) == {"teacher", "student_2", "student_3", "student_4", "student_6"}
    assert png.stat().st_size > 1000


def test_bad_inputs_exit_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('[sweep]\nname="x"\ntask="toy"\n[fixed]\nwidht=32\n[grid]\nseed=[0]\n')
    assert main(["toy", "run", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "widht" in err[0] and "bad.toml" in err[0]
    assert main(["toy", "fit", str(tmp_path)]) == 2
    assert "no results.csv" in capsys.readouterr().err
    assert main(["probe", str(tmp_path)]) == 2
    assert "model.pt" in capsys.readouterr().err


def test_plot_functions_return_figures_for_several_temperatures():
    import numpy as np

    from scalefit.plot import toy as toyplot

    rows = []
    for mode, alpha in (("independent", 1.0), ("tied", 3.0)):
        for tau in (0.1, 1.0):
            for steps in (100, 200):
                rows.append(
                    {"teacher_mode": mode, "rho": float(mode == "tied"), "temperature": tau,
                     "steps": steps, "alpha": alpha, "alpha_lo": alpha - 0.1,
                     "alpha_hi": alpha + 0.1, "c": 1.0, "L0": 0.0, "warnings": ""}
                )  # fmt: skip
    alphas = pd.DataFrame(rows)
    depths = np.array([6, 12, 24, 48])
    table = pd.DataFrame(
        [
            {**r, "depth": d, "test_loss": r["c"] / d ** r["alpha"], "theta_mid": 1 / d,
             "dtheta_mid": 1.5}
            for r in rows
            for d in depths
        ]
    )  # fmt: skip
    figs = [
        toyplot.loss_vs_depth(table[table["steps"] == 200], temperature=1.0, alphas=alphas),
        toyplot.alpha_vs_steps(alphas),
        toyplot.alpha_vs_temperature(alphas),
        toyplot.probe_summary(table[table["steps"] == 200]),
    ]
    for fig in figs:
        assert fig.axes and all(ax.has_data() for ax in fig.axes)
    legend = [t.get_text() for t in figs[0].axes[0].get_legend().get_texts()]
    assert legend == ["independent (α = 1.00)", "tied (α = 3.00)"]
