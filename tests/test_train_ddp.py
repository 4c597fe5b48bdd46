import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from train_support import _one_torch_thread, free_port  # noqa: E402, F401 - autouse fixture
from train_support import make_corpus as _make_corpus  # noqa: E402

from scalefit.train.data import build_tokens  # noqa: E402
from scalefit.train.loop import config_from_dict, train  # noqa: E402


def make_corpus(folder):
    return _make_corpus(
        folder,
        vocab=["to", "be", "or", "not", "that", "is", "the", "question", "whether", "tis"],
        n_docs=4,
        words=3000,
        seed=1,
    )


def test_two_process_gloo_torchrun_matches_single_process(tmp_path):
    tokens = build_tokens(make_corpus(tmp_path / "corpus"), tmp_path / "tokens", val_fraction=0.25)
    settings = dict(
        data=str(tokens),
        depth=2,
        width=32,
        seq_len=32,
        batch_size=8,
        tokens=8 * 32 * 12,
        lr=3e-3,
        eval_tokens=2048,
        device="cpu",
        seed=3,
    )
    lines = [f"{k} = {v!r}".replace("'", '"') for k, v in settings.items()]
    config = tmp_path / "ddp.toml"
    config.write_text("\n".join(lines + ["diagnose = false"]) + "\n")
    out = tmp_path / "ddp_run"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        "-m",
        "scalefit",
        "train",
        "run",
        str(config),
        "--out",
        str(out),
        "--no-progress",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ddp = pd.read_csv(out / "history.csv")
    single = train(config_from_dict(settings))
    ref = np.array([h["loss"] for h in single.history])
    assert len(ddp) == len(ref) == 12
    np.testing.assert_allclose(ddp["loss"].to_numpy(), ref, rtol=1e-4, atol=1e-5)
    assert ref[-1] < ref[0]
    import json

    row = json.loads((out / "result.json").read_text())["result"]
    assert row["world"] == 2 and row["tokens"] == single.row["tokens"]
    assert row["loss"] == pytest.approx(single.row["loss"], rel=1e-4)
