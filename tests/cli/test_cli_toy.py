import textwrap

import pandas as pd
import pytest
from conftest import assert_png

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
        assert_png(out / "plots" / name)


def test_probe_command(sweep, tmp_path, capsys):
    _, out = sweep
    run_dir = next((out / "runs").iterdir())
    csv, figs = tmp_path / "layers.csv", tmp_path / "figs"
    code = main(["probe", str(run_dir), "--tokens", "64", "--out", str(csv), "--plots", str(figs)])
    assert code == 0
    text, err = capsys.readouterr()
    assert "teacher: mechanism:" in text and "students: mechanism:" in text
    assert f"wrote {csv}" in text and f"wrote {figs / 'probes.png'}" in text and err == ""
    layers = pd.read_csv(csv)
    assert set(layers["model"]) == {"teacher", "student_2", "student_3", "student_4", "student_6"}
    assert_png(figs / "probes.png")
    # the old spelling of 0.1.0 (never released) is gone, not read as a prefix of --plots
    png = tmp_path / "probe.png"
    with pytest.raises(SystemExit) as exc:
        main(["probe", str(run_dir), "--tokens", "64", "--plot", str(png)])
    assert exc.value.code == 2 and "Did you mean '--plots'?" in capsys.readouterr().err
    assert not png.exists()


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
    assert legend == ["independent teacher (α = 1.00)", "tied teacher (α = 3.00)"]


CONCURRENT_TOY = """
[sweep]
name = "conc"
task = "toy"

[fixed]
preset = "cpu"
teacher_depth = 8
depths = [2, 4]
batch = 32
steps = 150
eval_steps = [50, 150]
test_size = 256
checkpoint_every = 0

[grid]
seed = [0, 1, 2]
"""


def _two_at_once(args):
    """Start two real `scalefit` processes on the same arguments at once; return their outputs."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "scalefit", *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    return [p.returncode for p in procs], outs


@pytest.mark.slow
def test_two_concurrent_toy_runs_on_one_folder_train_every_run_once(tmp_path):
    import re

    spec = tmp_path / "conc.toml"
    spec.write_text(textwrap.dedent(CONCURRENT_TOY))
    out = tmp_path / "out"
    codes, outs = _two_at_once(["toy", "run", spec, "--out", out, "--workers", "1", "--quiet"])
    assert codes == [0, 0], outs
    ran = [int(re.search(r"\((\d+) run by this process\)", o).group(1)) for o, _ in outs]
    assert sum(ran) == 3, outs  # every run trained exactly once, by one process or the other
    assert all("Traceback" not in e for _, e in outs)
    table = pd.read_csv(out / "results.csv")
    assert sorted(table["seed"].unique()) == [0, 1, 2] and len(table) == 3 * 2 * 2
    assert not list(out.glob("runs/*/.*.tmp")) and not list(out.glob("runs/*/error.txt"))


@pytest.mark.slow
def test_two_concurrent_train_grids_on_one_folder_do_not_collide(tmp_path):
    from train_support import make_corpus

    from scalefit.train.data import build_tokens

    corpus = make_corpus(tmp_path / "c", vocab=["to", "be", "or", "not"], words=1500)
    tokens = build_tokens(corpus, tmp_path / "t", val_fraction=0.25)
    spec = tmp_path / "grid.toml"
    spec.write_text(
        f'[sweep]\nname = "cg"\ntask = "train"\n[fixed]\ndata = "{tokens}"\nseq_len = 16\n'
        "batch_size = 4\ntokens = 2048\neval_tokens = 128\ndiag_tokens = 64\n"
        "[grid]\ndepth = [1, 2]\nwidth = [16]\n"
    )
    out = tmp_path / "out"
    codes, outs = _two_at_once(["train", "grid", spec, "--out", out, "--workers", "1"])
    assert codes == [0, 0], outs
    assert all("Traceback" not in e for _, e in outs)
    assert all("2 finished runs of 2" in o for o, _ in outs), outs
    table = pd.read_csv(out / "results.csv")
    assert sorted(table["depth"]) == [1, 2] and table["run_id"].is_unique
    assert len(list(out.glob("runs/*/result.json"))) == 2
    assert not list(out.glob("runs/*/.*.tmp")) and not list(out.glob("runs/*/error.txt"))
