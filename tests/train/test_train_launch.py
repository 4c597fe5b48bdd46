"""``scalefit train run --nproc-per-node N``: torch's launcher started by scalefit itself.

The error mapping is tested on torch's own ``ProcessFailure`` records (fast); a normal 2-process
gloo run and a resume from a DCP checkpoint whose metadata is hostile are real launches (slow).
"""

import json
import logging
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from hostile import cli  # noqa: E402
from train_support import _one_torch_thread, make_corpus, tiny_settings, torchrun  # noqa: E402, F401

from scalefit.core._manifest import record  # noqa: E402
from scalefit.train.launch import RankFailure, rank_failure  # noqa: E402
from scalefit.train.loop import config_from_dict, train  # noqa: E402

REFUSED = "scalefit: error: runs/x/checkpoint.dcp: is not DCP checkpoint metadata\n"
OTHER = "scalefit: error: runs/x/checkpoint.dcp: refused by another process; remove it\n"
TEARDOWN = "terminate called without an active exception\n"
CRASH = 'Traceback (most recent call last):\n  File "x.py"\nRuntimeError: boom\n'


def _failure(exitcode: int, rank: int):
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    return ProcessFailure(local_rank=rank, pid=100 + rank, exitcode=exitcode, error_file="<none>")


@pytest.mark.parametrize(
    ("codes", "texts", "rank", "code", "reason"),
    [
        ({0: 2, 1: 2}, {0: OTHER, 1: REFUSED}, 1, 2, "is not DCP checkpoint metadata"),
        ({0: -15, 1: 2}, {0: "", 1: REFUSED}, 1, 2, "is not DCP checkpoint metadata"),
        ({0: -15, 1: -6}, {0: OTHER, 1: REFUSED + TEARDOWN}, 1, 2, "not DCP checkpoint"),
        ({0: 1, 1: -15}, {0: CRASH, 1: ""}, 0, 1, "RuntimeError: boom"),
        ({1: -9}, {1: ""}, 1, 137, "ended by signal SIGKILL"),
        ({0: 3}, {0: TEARDOWN}, 0, 3, "without a message"),
    ],
    ids=["own reason first", "signalled last", "aborted in teardown", "crash", "killed", "silent"],
)
def test_the_failure_that_explains_a_launch(codes, texts, rank, code, reason):
    failures = {r: _failure(c, r) for r, c in codes.items()}
    found = rank_failure(failures, texts, nproc=2)
    assert (found.rank, found.code, found.refused) == (rank, code, code == 2)
    assert reason in found.reason and "scalefit: error" not in found.reason


def test_the_launchers_line():
    assert (
        RankFailure(1, 2, -6, "x: refused", refused=True).line()
        == "rank 1 of 2 refused: x: refused"
    )
    line = RankFailure(0, 2, 1, "RuntimeError: boom", log="/tmp/l").line()
    assert line == "rank 0 of 2 failed (exit 1): RuntimeError: boom; its log: /tmp/l"
    line = RankFailure(-1, 2, 1, "RendezvousError: x").line()
    assert line == "torch's launcher failed (exit 1): RendezvousError: x"


def test_nproc_per_node_is_refused_under_torchrun_and_checked(tmp_path, capsys, monkeypatch):
    config = tmp_path / "a.toml"
    config.write_text('data = "shakespeare"\n')
    code, _, err = cli(capsys, ["train", "run", config, "--nproc-per-node", "0"])
    assert code == 2 and "--nproc-per-node" in err and len(err.strip().splitlines()) == 1
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "x")
    code, _, err = cli(capsys, ["train", "run", config, "--nproc-per-node", "2"])
    assert code == 2 and "under torchrun leave it out" in err
    config.write_text("depth = -1\n")  # refused here, before any process starts
    monkeypatch.delenv("TORCHELASTIC_RUN_ID")
    code, _, err = cli(capsys, ["train", "run", config, "--nproc-per-node", "2"])
    assert code == 2 and "depth" in err and "rank" not in err


def _config(root: Path, **overrides) -> Path:
    from scalefit.train.data import build_tokens

    corpus = make_corpus(root / "corpus", vocab=["fa", "so", "la", "ti"], n_docs=4, words=3000)
    settings = tiny_settings(build_tokens(corpus, root / "tokens", val_fraction=0.25), **overrides)
    (root / "settings.json").write_text(json.dumps(settings))
    lines = [f"{k} = {v!r}".replace("'", '"') for k, v in settings.items()]
    (root / "run.toml").write_text("\n".join(lines + ["diagnose = false"]) + "\n")
    return root / "run.toml"


def _state() -> tuple:
    levels = {
        n: lg.level
        for n, lg in logging.root.manager.loggerDict.items()
        if isinstance(lg, logging.Logger) and n.startswith("torch")
    }
    sigs = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    return dict(os.environ), sigs, levels


@pytest.mark.slow
def test_two_processes_launched_by_scalefit_train_and_leave_the_process_as_found(tmp_path, capfd):
    from scalefit.cli import main

    config = _config(tmp_path)
    before = _state()
    code = main(
        ["train", "run", str(config), "--out", str(tmp_path / "run"), "--no-progress"]
        + ["--set", "eval_tokens=1024", "--nproc-per-node", "2"]
    )
    out, err = capfd.readouterr()
    assert code == 0, err
    assert _state() == before
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    row = saved["result"]
    settings = json.loads((tmp_path / "settings.json").read_text())
    single = train(config_from_dict({**settings, "eval_tokens": 1024}))  # --set reached them
    assert row["world"] == 2 and row["loss"] == pytest.approx(single.row["loss"], rel=1e-4)
    assert out.count("wrote ") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_a_hostile_dcp_metadata_is_one_line_from_the_launcher(tmp_path):
    """A 2-process FSDP2 run stopped at step 6, its DCP metadata replaced by a pickle that runs
    a shell command (checksums forged), resumed with --nproc-per-node 2: exit 2, one line."""
    marker = tmp_path / "pwned"

    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    config = _config(tmp_path, parallel="fsdp")
    script = tmp_path / "stop.py"
    script.write_text(
        "import json, sys\nfrom scalefit.train.loop import config_from_dict, train\n"
        "train(config_from_dict(json.load(open(sys.argv[1]))), sys.argv[2], stop_after=6)\n"
    )
    run = tmp_path / "run"
    torchrun(script, tmp_path / "settings.json", run)
    folder = run / "checkpoint.dcp" / "step-000000006"
    (folder / ".metadata").write_bytes(pickle.dumps(Boom()))
    record(run, written=[f"checkpoint.dcp/step-000000006/{p.name}" for p in folder.iterdir()])
    cmd = [sys.executable, "-m", "scalefit", "train", "run", str(config), "--out", str(run)]
    cmd += ["--no-progress", "--nproc-per-node", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("scalefit: error: rank "), proc.stderr
    assert "not DCP checkpoint metadata" in lines[0] and " refused: " in lines[0]
    assert not marker.exists() and not (run / "result.json").exists()


@pytest.mark.slow
def test_a_crashed_process_gives_its_code_and_keeps_its_log(tmp_path, monkeypatch):
    """Rank 1 dies at start-up with exit 5 after a line on stderr (a ``sitecustomize`` module
    on its path); rank 0 runs ``scalefit laws``."""
    from scalefit.train.launch import launch

    (tmp_path / "sitecustomize.py").write_text(
        "import os, sys\nif os.environ.get('RANK') == '1':\n"
        "    sys.stderr.write('Traceback ...\\nRuntimeError: boom\\n'); sys.stderr.flush()\n"
        "    os._exit(5)\n"
    )
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), path])))
    failure = launch(["laws"], nproc_per_node=2)
    assert (failure.rank, failure.code, failure.refused) == (1, 5, False)
    assert failure.line().startswith("rank 1 of 2 failed (exit 5): RuntimeError: boom; its log: ")
    assert Path(failure.log).read_text().endswith("RuntimeError: boom\n")
    Path(failure.log).unlink()
    Path(failure.log).parent.rmdir()
