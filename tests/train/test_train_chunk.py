"""A trainer grid in chunks (issue 45): missing runs only, most informative first, merged rows."""

import platform

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from train_support import _one_torch_thread, make_corpus  # noqa: E402, F401 - autouse fixture

from scalefit.cli import main  # noqa: E402
from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.sweep import spec_from_dict  # noqa: E402
from scalefit.train.chunk import _estimate, information_order, point_key, run_chunk  # noqa: E402
from scalefit.train.data import build_tokens  # noqa: E402


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("chunk")
    corpus = make_corpus(root / "c", vocab=["a", "b", "c", "d"], n_docs=4, words=1500, seed=3)
    return str(build_tokens(corpus, root / "t", val_fraction=0.25))


def spec(token_dir, grid=None):
    fixed = dict(
        data=token_dir, seq_len=16, batch_size=4, eval_tokens=128, diagnose=False, device="cpu"
    )
    grid = grid or {"depth": [1, 2], "width": [16], "tokens": [256]}
    return spec_from_dict({"sweep": {"name": "c", "task": "train"}, "fixed": fixed, "grid": grid})


def test_information_order_starts_at_opposite_corners():
    grid = {"depth": [2, 4, 8], "width": [64, 128, 256], "tokens": [1e6, 2e6, 4e6]}
    runs = spec_from_dict({"sweep": {"name": "o", "task": "toy"}, "grid": grid}).runs()
    order = information_order(runs, [])
    assert sorted(r.run_id for r in order) == sorted(r.run_id for r in runs)
    first, second = order[0].config, order[1].config
    assert (first["depth"], first["width"], first["tokens"]) == (2, 64, 1e6)  # the cheapest corner
    assert (second["depth"], second["width"], second["tokens"]) == (8, 256, 4e6)
    for key, levels in grid.items():  # five runs already span every level of every key
        assert {r.config[key] for r in order[:5]} == set(levels)
    # with the opposite corners done, the next run is not one of them
    later = information_order(runs[1:-1], [runs[0], runs[-1]])
    assert later[0].run_id not in (runs[0].run_id, runs[-1].run_id)


def test_point_key_matches_numbers_written_differently():
    keys = ["depth", "tokens"]
    assert point_key({"depth": 2, "tokens": 6e6}, keys) == point_key(
        {"depth": 2.0, "tokens": 6000000}, keys
    )


def test_killed_chunk_is_redone_and_never_counted_twice(token_dir, tmp_path):
    table = tmp_path / "grid.csv"
    trained = []

    class Killed(Exception):
        pass

    def dies_on_second(run):  # the real trainer; the second run is "killed" before its row
        if len(trained) == 1:
            raise Killed
        from scalefit.sweep import run_sweep

        trained.append(run.run_id)
        only = {run.run_id}
        return run_sweep(spec(token_dir), tmp_path / "a", workers=0, progress=False, only=only)

    with pytest.raises(Killed):
        run_chunk(spec(token_dir), tmp_path / "a", table, run=dies_on_second)
    first = pd.read_csv(table)
    assert len(first) == 1 and first["host"].iloc[0] == platform.node()
    # the next chunk runs on "another machine": a new run folder; the table's row is kept
    first.assign(host="other-machine").to_csv(table, index=False)
    report = run_chunk(spec(token_dir), tmp_path / "b", table)
    assert report.stopped == "all" and len(report.ran) == 1 and report.remaining == 0
    assert trained[0] not in report.ran
    merged = pd.read_csv(table)
    assert len(merged) == 2 and merged[["depth", "tokens"]].drop_duplicates().shape[0] == 2
    assert (merged["host"] == "other-machine").sum() == 1
    assert {"device_name", "torch", "cuda", "chunk", "wall_s"} <= set(merged.columns)
    again = run_chunk(spec(token_dir), tmp_path / "b", table)
    assert again.stopped == "complete" and again.ran == [] and len(pd.read_csv(table)) == 2


def test_chunk_stops_before_a_run_that_would_not_fit(token_dir, tmp_path):
    table = tmp_path / "grid.csv"
    # two runs timed on this device in 100 s and 280 s: the third, deeper one needs > 5 minutes
    rows = [
        {"depth": d, "width": 16, "tokens": 256, "seq_len": 16, "run_s": t, "device_name": "cpu"}
        for d, t in ((1, 100.0), (2, 280.0))
    ]
    pd.DataFrame(rows).to_csv(table, index=False)
    grid = {"depth": [1, 2, 3], "width": [16], "tokens": [256]}
    report = run_chunk(spec(token_dir, grid), tmp_path / "o", table, max_minutes=5)
    assert report.stopped == "time" and report.ran == [] and report.remaining == 1
    assert not (tmp_path / "o").exists()
    # with room for it, the same chunk runs it, and times it
    report = run_chunk(spec(token_dir, grid), tmp_path / "o", table, max_minutes=10)
    assert report.stopped == "all" and len(report.ran) == 1
    assert pd.read_csv(table)["run_s"].iloc[-1] > 0


def test_time_estimate_separates_fixed_cost_from_cost_per_flop():
    assert _estimate([(1e9, 10.0)], 1e12) is None  # one size: cannot tell; the run starts
    est = _estimate([(1e9, 20.0), (3e9, 40.0)], 2e9)  # 10 s + 10 s per 1e9 FLOPs
    assert est == pytest.approx(30.0)


def test_cli_chunk_and_its_refusals(token_dir, tmp_path, capsys):
    spec_file = tmp_path / "grid.toml"
    spec_file.write_text(
        f'[sweep]\nname = "cli"\ntask = "train"\n[fixed]\ndata = "{token_dir}"\nseq_len = 16\n'
        "batch_size = 4\neval_tokens = 128\ndiagnose = false\n[grid]\ndepth = [1]\nwidth = [16]\n"
        "tokens = [256, 512]\n"
    )
    table = tmp_path / "t.csv"
    args = ["train", "grid", str(spec_file), "--out", str(tmp_path / "o"), "--workers", "0"]
    assert main([*args, "--resume-from", str(table)]) == 0
    assert "2 runs added by this chunk, 0 of 2 still missing" in capsys.readouterr().out
    assert main([*args, "--resume-from", str(table)]) == 0
    assert "already holds every run" in capsys.readouterr().out
    assert main([*args, "--max-minutes", "3"]) == 2
    assert "--max-minutes needs --resume-from" in capsys.readouterr().err
    pd.DataFrame({"x": [1]}).to_csv(tmp_path / "other.csv", index=False)
    assert main([*args, "--resume-from", str(tmp_path / "other.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lacks the grid's column(s)" in err[0]


def test_table_of_another_grid_is_refused(token_dir, tmp_path):
    pd.DataFrame({"loss": [1.0]}).to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ScaleFitError, match="not this grid's loss table"):
        run_chunk(spec(token_dir), tmp_path / "o", tmp_path / "t.csv")


def test_hand_edited_table_cells_do_not_break_a_chunk(token_dir, tmp_path):
    table = tmp_path / "grid.csv"
    rows = [
        {
            "depth": 1,
            "width": 16,
            "tokens": 256,
            "seq_len": 16,
            "run_s": "fast",
            "device_name": "cpu",
        },
        {
            "depth": "two",
            "width": 16,
            "tokens": 256,
            "seq_len": 16,
            "run_s": 5,
            "device_name": "cpu",
        },
    ]
    pd.DataFrame(rows).to_csv(table, index=False)
    report = run_chunk(spec(token_dir), tmp_path / "o", table, max_minutes=10)
    assert report.ran and report.remaining == 0  # depth 2 was not in the table: it ran
