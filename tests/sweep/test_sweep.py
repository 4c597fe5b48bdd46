import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from scalefit.core.errors import ScaleFitError
from scalefit.sweep import (
    SweepError,
    SweepSpec,
    collect_results,
    load_spec,
    register_task,
    registered_tasks,
    run_sweep,
    spec_from_dict,
)

DEMO = "sweep_tasks:demo_task"  # tests/sweep_tasks.py


@pytest.fixture(autouse=True)
def _tests_on_child_path(monkeypatch):
    """Child processes (driver scripts, submitit's jobs) import the task from tests/ too."""
    tests = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))
    )


def _write(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _spec(seeds, sleep_s=0.0, **fixed) -> SweepSpec:
    return SweepSpec(
        "demo", DEMO, {"sleep_s": sleep_s, **fixed}, {"seed": list(seeds), "slope": [1.0, 3.0]}
    )


def test_load_spec_runs_and_stable_ids(tmp_path):
    path = _write(
        tmp_path,
        f"""
        [sweep]
        name = "demo"
        task = "{DEMO}"
        [fixed]
        n = 40
        [grid]
        seed = [0, 1, 2]
        slope = [1.5, 2.5]
        """,
    )
    spec = load_spec(path)
    runs = spec.runs()
    assert len(runs) == 6
    assert runs[0].config == {"n": 40, "seed": 0, "slope": 1.5}
    ids = [r.run_id for r in runs]
    assert len(set(ids)) == 6
    assert ids == [r.run_id for r in load_spec(path).runs()]
    assert ids[0].startswith("seed=0_slope=1.5-")
    # the id depends on the whole config, not only on the grid point
    other = spec_from_dict({**spec.to_dict(), "fixed": {"n": 41}})
    assert other.runs()[0].run_id != ids[0]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('[sweep]\nname="a"\ntask="toy"\n[grid]\nseed=[]\n', "seed.*empty"),
        ('[sweep]\nname="a"\ntask="toy"\n[grid]\nseed=3\n', "seed.*must be a list"),
        ('[sweep]\nname="a"\ntask="toy"\n[grid]\n', r"\[grid\] must be a non-empty"),
        (
            '[sweep]\nname="a"\ntask="toy"\n[grids]\nseed=[1]\n',
            "unknown key 'grids'. Did you mean 'grid'",
        ),
        ('[sweep]\nname="a"\ntask="toy"\nmode="x"\n[grid]\nseed=[1]\n', "unknown key.*mode"),
        ('[sweep]\nname="a"\n[grid]\nseed=[1]\n', "'task'"),
        ('[sweep]\nname="a"\ntask="toy"\n[fixed]\nseed=1\n[grid]\nseed=[1]\n', "both"),
        ('[sweep]\nname="a"\ntask="toy"\n[grid]\nseed=[1, 1]\n', "repeats"),
        ("[sweep\nname=", "not valid TOML"),
    ],
)
def test_bad_specs_raise(tmp_path, text, match):
    path = _write(tmp_path, text)
    with pytest.raises(ScaleFitError, match=match) as info:
        load_spec(path)
    assert str(path) in str(info.value)


def test_missing_file_and_unknown_task(tmp_path):
    with pytest.raises(ScaleFitError, match="not found"):
        load_spec(tmp_path / "nope.toml")
    spec = SweepSpec("x", "no_such_task", {}, {"seed": [0]})
    with pytest.raises(ScaleFitError, match="unknown task 'no_such_task'"):
        run_sweep(spec, tmp_path / "out", progress=False)


def test_task_validation_names_spec_and_key(tmp_path):
    spec = SweepSpec("x", DEMO, {"bogus": 1}, {"seed": [0]}, source="my.toml")
    with pytest.raises(ScaleFitError, match=r"my.toml.*bogus"):
        run_sweep(spec, tmp_path / "out", workers=0, progress=False)
    assert not (tmp_path / "out" / "runs").exists()


def test_registry():
    assert registered_tasks()["toy"] == "scalefit.sim.sweep_task:run_toy"
    assert registered_tasks()["train"] == "scalefit.train.grid:run_train_task"
    register_task("demo_for_test", DEMO)
    assert registered_tasks()["demo_for_test"] == DEMO
    with pytest.raises(ScaleFitError, match="package.module:function"):
        register_task("bad", "no_colon")


def test_local_pool_runs_and_skips_finished(tmp_path):
    out = tmp_path / "out"
    table = run_sweep(_spec([0, 1]), out, workers=2, progress=False)
    assert len(table) == 4
    assert set(table.columns) >= {"seed", "slope", "sleep_s", "slope_hat", "run_id"}
    assert abs(table["slope_hat"] - table["slope"]).max() < 0.05
    assert table["pid"].nunique() >= 1 and os.getpid() not in set(table["pid"])
    on_disk = pd.read_csv(out / "results.csv")
    assert list(on_disk["run_id"]) == list(table["run_id"])
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/result.json")}
    # rerun with one more seed: only the two new runs execute
    table2 = run_sweep(_spec([0, 1, 2]), out, workers=0, progress=False)
    assert len(table2) == 6
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert (table2["pid"] == os.getpid()).sum() == 2


def test_same_seed_same_numbers(tmp_path):
    a = run_sweep(_spec([5]), tmp_path / "a", workers=0, progress=False)
    b = run_sweep(_spec([5]), tmp_path / "b", workers=0, progress=False)
    assert list(a["slope_hat"]) == list(b["slope_hat"])


def test_failures_are_reported_and_others_kept(tmp_path):
    spec = SweepSpec("f", DEMO, {}, {"seed": [0, 1], "fail": [False, True]})
    with pytest.raises(SweepError, match="2 of 4 runs failed"):
        run_sweep(spec, tmp_path / "out", workers=0, progress=False)
    errors = list((tmp_path / "out").glob("runs/*/error.txt"))
    assert len(errors) == 2 and "asked to fail" in errors[0].read_text()
    assert len(pd.read_csv(tmp_path / "out" / "results.csv")) == 2


def test_rows_expand_into_tidy_lines(tmp_path):
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    payload = {
        "run_id": "r1",
        "config": {"seed": 0, "depths": [2, 4]},
        "result": {"wall_s": 1.0, "rows": [{"depth": 2, "loss": 0.5}, {"depth": 4, "loss": 0.2}]},
    }
    (run / "result.json").write_text(json.dumps(payload))
    table = collect_results(tmp_path)
    assert list(table["depth"]) == [2, 4]
    assert list(table["wall_s"]) == [1.0, 1.0]
    assert table["depths"].iloc[0] == "[2, 4]"


def test_submitit_local_executor(tmp_path):
    pytest.importorskip("submitit")
    out = tmp_path / "out"
    spec = SweepSpec("demo", DEMO, {}, {"seed": [0]})
    table = run_sweep(
        spec,
        out,
        executor="slurm",
        slurm={"cluster": "local", "timeout_min": 5},
        progress=False,
    )
    assert len(table) == 1
    assert table["slope_hat"].iloc[0] == pytest.approx(2.0, abs=0.05)
    assert os.getpid() not in set(table["pid"])
    assert (out / "submitit").is_dir()


def test_bad_options(tmp_path):
    with pytest.raises(ScaleFitError, match="executor"):
        run_sweep(_spec([0]), tmp_path, executor="mpi", progress=False)
    with pytest.raises(ScaleFitError, match="workers"):
        run_sweep(_spec([0]), tmp_path, workers=-1, progress=False)


_DRIVER = """
import sys
from scalefit.sweep import SweepSpec, run_sweep
if __name__ == "__main__":  # required by the spawn start method
    spec = SweepSpec("kill", "{demo}", {{"sleep_s": 0.4}}, {{"seed": list(range(8))}})
    run_sweep(spec, sys.argv[1], workers=2, progress=False)
"""


def test_sigkill_mid_sweep_then_restart(tmp_path):
    out = tmp_path / "out"
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER.format(demo=DEMO))
    proc = subprocess.Popen([sys.executable, str(script), str(out)], start_new_session=True)
    deadline = time.monotonic() + 300
    while len(list(out.glob("runs/*/result.json"))) < 2:
        assert proc.poll() is None, "sweep ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its workers, mid-run
    proc.wait()
    before = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("runs/*/result.json")}
    assert 2 <= len(before) < 8
    assert not (out / "results.csv").exists()
    # restart (in this process, to keep the test fast): only the missing runs execute
    spec = SweepSpec("kill", DEMO, {"sleep_s": 0.4}, {"seed": list(range(8))})
    table = run_sweep(spec, out, workers=0, progress=False)
    assert (table["pid"] == os.getpid()).sum() == 8 - len(before)
    table = pd.read_csv(out / "results.csv")
    assert sorted(table["seed"]) == list(range(8))
    assert table["run_id"].is_unique
    assert len(list(out.glob("runs/*/result.json"))) == 8
    after = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("runs/*/result.json")}
    assert all(after[k] == v for k, v in before.items())
    assert not list(out.glob("runs/*/.*.tmp"))


def test_sweep_name_cannot_leave_the_output_folder(tmp_path):
    for name in ("../../x", "a/b", "..", ".hidden", ""):
        with pytest.raises(ScaleFitError, match="'name' key of \\[sweep\\].*plain folder name"):
            SweepSpec(name, DEMO, {}, {"seed": [0]})
    path = _write(tmp_path, '[sweep]\nname = "../../x"\ntask = "toy"\n[grid]\nseed = [0]\n')
    with pytest.raises(
        ScaleFitError, match=r"spec.toml must be a plain folder name.*'\.\./\.\./x'"
    ):
        load_spec(path)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ("name = 'é'".encode("latin-1"), r"line 1: byte 0xe9 is not valid UTF-8"),
        ("[sweep]".encode("utf-16"), "binary, compressed or UTF-16"),
        (b"\x1f\x8b\x08\x00binary", "binary, compressed or UTF-16"),
        (b"[sweep\nname=", "not valid TOML"),
    ],
)
def test_undecodable_specs_are_one_clear_error(tmp_path, data, match):
    path = tmp_path / "spec.toml"
    path.write_bytes(data)
    with pytest.raises(ScaleFitError, match=match):
        load_spec(path)


def test_changed_spec_on_a_folder_is_refused_unless_overwrite(tmp_path):
    out = tmp_path / "out"
    run_sweep(_spec([0, 1]), out, workers=0, progress=False)
    assert len(list(out.glob("runs/*/result.json"))) == 4
    with pytest.raises(ScaleFitError, match=r"other settings \(fixed.n: <unset> -> 20; grid.seed"):
        run_sweep(_spec([0], n=20), out, workers=0, progress=False)
    with pytest.raises(
        ScaleFitError,
        match=r"grid.seed: \[0, 1\] -> \[1, 2\]\); use overwrite=True \(--overwrite on",
    ):
        run_sweep(_spec([1, 2]), out, workers=0, progress=False)
    grown = run_sweep(_spec([0, 1, 2]), out, workers=0, progress=False)  # a grid may grow
    assert len(grown.attrs["sweep"]["ran"]) == 2 and len(grown) == 6
    # a partial folder too: the record is written before any run starts
    table = run_sweep(_spec([0], n=20), out, workers=0, progress=False, overwrite=True)
    assert sorted(table.attrs["sweep"]["ran"]) == sorted(r.run_id for r in _spec([0], n=20).runs())
    assert len(list(out.glob("runs/*/result.json"))) == 2  # the old spec's runs were removed
    # another spec name shares the folder without conflict; the same spec skips everything
    other = SweepSpec("other", DEMO, {}, {"seed": [5]})
    run_sweep(other, out, workers=0, progress=False)
    again = run_sweep(_spec([0], n=20), out, workers=0, progress=False)
    assert again.attrs["sweep"]["ran"] == [] and len(again) == 2


def test_output_path_that_is_a_file_is_named(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(ScaleFitError, match="is a file; expected an output folder"):
        run_sweep(_spec([0]), path, workers=0, progress=False)


def test_a_locked_folder_waits_or_raises(tmp_path):
    from scalefit.core._io import folder_lock

    out = tmp_path / "out"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom scalefit.core._io import folder_lock\n"
            "with folder_lock(sys.argv[1]):\n    print('locked', flush=True)\n    time.sleep(60)\n",
            str(out),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ScaleFitError, match=f"in use by pid {holder.pid}"):
            run_sweep(_spec([0]), out, workers=0, progress=False, wait=False)
        holder.kill()  # the kernel releases the lock of a killed process
        holder.wait()
        with folder_lock(out, wait=False):
            pass
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


_CONCURRENT = """
import sys
from scalefit.sweep import SweepSpec, run_sweep
if __name__ == "__main__":
    spec = SweepSpec("conc", "{demo}", {{"sleep_s": 0.3, "log": sys.argv[2]}},
                     {{"seed": list(range(6))}})
    table = run_sweep(spec, sys.argv[1], workers=0, progress=False)  # runs in this process
    print(len(table.attrs["sweep"]["ran"]))
"""


def test_two_concurrent_sweeps_on_one_folder_run_every_run_once(tmp_path):
    out, log = tmp_path / "out", tmp_path / "executions.log"
    script = tmp_path / "driver.py"
    script.write_text(_CONCURRENT.format(demo=DEMO))
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(out), str(log)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert sorted(int(o.strip()) for o, _ in outputs) == [0, 6]  # one ran all, one waited
    seeds = [line.split()[0] for line in log.read_text().splitlines()]
    assert sorted(seeds) == [str(s) for s in range(6)]  # every run executed exactly once
    assert len(pd.read_csv(out / "results.csv")) == 6
    assert not list(out.glob("runs/*/.*.tmp"))


def test_stale_temporary_files_of_dead_writers_only_are_removed(tmp_path):
    from scalefit.core._io import _host, remove_stale_temps

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(dead.stdout)
    stale = tmp_path / f".result.json.{dead_pid}@{_host()}.abc123.tmp"
    live = tmp_path / f".result.json.{os.getpid()}@{_host()}.def456.tmp"
    other = tmp_path / ".notours.tmp"
    for p in (stale, live, other):
        p.write_text("x")
    assert remove_stale_temps(tmp_path) == [stale]
    assert live.exists() and other.exists() and not stale.exists()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states in /proc")
def test_a_killed_writer_not_yet_reaped_counts_as_gone(tmp_path):
    # A zombie (exited, not yet waited for by its parent: here, this test) still answers
    # kill(pid, 0); its temporary file must be cleaned all the same.
    from scalefit.core._io import _host, remove_stale_temps

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 60
        stat = Path(f"/proc/{child.pid}/stat")
        while stat.read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child did not exit"
            time.sleep(0.05)
        stale = tmp_path / f".result.json.{child.pid}@{_host()}.abc123.tmp"
        stale.write_text("x")
        assert remove_stale_temps(tmp_path) == [stale]
    finally:
        child.wait()
