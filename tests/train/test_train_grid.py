import math

import numpy as np
import pandas as pd
import pytest
from conftest import assert_png

torch = pytest.importorskip("torch")

from train_support import _one_torch_thread  # noqa: E402, F401 - autouse fixture
from train_support import make_corpus as _make_corpus  # noqa: E402

from scalefit.cli import main  # noqa: E402
from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.sweep import run_sweep, spec_from_dict  # noqa: E402
from scalefit.train.data import build_tokens  # noqa: E402
from scalefit.train.grid import TABLE_COLUMNS, collect_diagnostics, validate_config  # noqa: E402


def make_corpus(folder):
    return _make_corpus(
        folder,
        vocab=["all", "the", "world", "is", "a", "stage", "and", "men", "players"],
        n_docs=4,
        words=2500,
        seed=4,
    )


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("grid")
    return str(build_tokens(make_corpus(root / "c"), root / "t", val_fraction=0.25))


def spec(token_dir, grid):
    fixed = dict(
        data=token_dir,
        seq_len=16,
        batch_size=4,
        tokens=4 * 16 * 12,
        eval_tokens=256,
        diag_tokens=128,
        warmup_frac=0.0,
    )
    return spec_from_dict({"sweep": {"name": "g", "task": "train"}, "fixed": fixed, "grid": grid})


def test_grid_writes_a_fittable_table_and_records_divergence(token_dir, tmp_path):
    grid = {"lr": [3e-3, 80.0], "variant": ["pre_ln", "lns"], "depth": [2], "width": [16]}
    table = run_sweep(spec(token_dir, grid), tmp_path / "sweep", workers=0, progress=False)
    assert len(table) == 4 and set(TABLE_COLUMNS) <= set(table.columns)
    bad = table[table.lr == 80.0]
    assert bad["diverged"].all() and bad["loss"].isna().all()
    good = table[table.lr == 3e-3]
    assert (~good["diverged"]).all() and np.isfinite(good["loss"]).all()
    assert (good["params_nonembedding"] < good["params"]).all()
    diag = collect_diagnostics(tmp_path / "sweep")
    assert set(diag["variant"]) == {"pre_ln", "lns"} and diag["run_id"].nunique() == 2
    import scalefit

    if hasattr(scalefit, "read_table"):
        path = tmp_path / "good.csv"
        good[TABLE_COLUMNS].to_csv(path, index=False)
        read = scalefit.read_table(path)
        assert {"params", "tokens", "flops", "width", "depth", "loss"} <= set(read.columns)


def test_grid_resumes_finished_runs_without_training_again(token_dir, tmp_path):
    grid = {"depth": [1], "width": [16], "seed": [0]}
    first = run_sweep(spec(token_dir, grid), tmp_path / "s", workers=0, progress=False)
    second = run_sweep(spec(token_dir, grid), tmp_path / "s", workers=0, progress=False)
    pd.testing.assert_frame_equal(first, second)


def test_validate_config_names_bad_keys():
    with pytest.raises(ScaleFitError, match="layers"):
        validate_config({"layers": 3})
    with pytest.raises(ScaleFitError, match="variant"):
        validate_config({"variant": "rezero"})


def test_cli_grid_and_data_prepare(token_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "mycorpus")
    assert main(["data", "prepare", str(corpus)]) == 0
    assert "held-out documents" in capsys.readouterr().out
    spec_file = tmp_path / "grid.toml"
    spec_file.write_text(
        '[sweep]\nname = "cli"\ntask = "train"\n[fixed]\n'
        f'data = "{token_dir}"\nseq_len = 16\nbatch_size = 4\ntokens = 256\neval_tokens = 128\n'
        "diag_tokens = 64\n[grid]\ndepth = [1, 2]\nwidth = [16]\n"
    )
    table = tmp_path / "table.csv"
    code = main(
        [
            "train",
            "grid",
            str(spec_file),
            "--out",
            str(tmp_path / "o"),
            "--workers",
            "0",
            "--table",
            str(table),
        ]
    )
    assert code == 0 and "2 finished runs" in capsys.readouterr().out
    written = pd.read_csv(table)
    assert list(written.columns[: len(TABLE_COLUMNS)]) == TABLE_COLUMNS
    ckpt = next((tmp_path / "o" / "runs").glob("*/checkpoint.pt"))
    assert main(["train", "diagnose", str(ckpt), "--out", str(tmp_path / "d.csv")]) == 0
    assert set(pd.read_csv(tmp_path / "d.csv").columns) == {"layer", "metric", "value"}
    assert main(["train", "diagnose", str(tmp_path / "missing.pt")]) == 2
    assert math.isfinite(written["loss"].iloc[0])


def test_report_writes_table_and_preln_vs_lns_figures(token_dir, tmp_path):
    pytest.importorskip("matplotlib")
    from scalefit.workflows.train_report import fit_decomposed, grid_report

    grid = {"variant": ["pre_ln", "lns"], "depth": [2], "width": [16, 32]}
    run_sweep(spec(token_dir, grid), tmp_path / "s", workers=0, progress=False)
    out = grid_report(
        tmp_path / "s", table_path=tmp_path / "t.csv", img_dir=tmp_path / "img", points=[(2, 16)]
    )
    table = pd.read_csv(tmp_path / "t.csv")
    assert list(table.columns[: len(TABLE_COLUMNS)]) == TABLE_COLUMNS and len(table) == 4
    assert out["fit"] is None  # 2 Pre-LN rows cannot identify 7 parameters
    summary = out["variants"]
    assert len(summary) == 4 and set(summary["variant"]) == {"pre_ln", "lns"}
    assert np.isfinite(summary[["loss", "var_growth", "ad_deep", "prune_deep"]]).all().all()
    names = sorted(p.name for p in out["figures"])
    assert names == ["lm_loss_grid.png", "lm_preln_vs_lns_d2_w16.png"]
    for png in out["figures"]:
        assert_png(png)
    with pytest.raises(ScaleFitError, match="only 2 pre_ln rows"):
        fit_decomposed(table)
