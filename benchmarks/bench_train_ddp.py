"""A real 2-process gloo ``torchrun`` run against single-process training on the same batches.

Prints the largest step-loss difference and both validation losses.

    scalefit data prepare shakespeare
    python benchmarks/bench_train_ddp.py --steps 30
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from scalefit.train.data import cache_dir
from scalefit.train.loop import config_from_dict, train


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", default=str(cache_dir() / "tokens" / "shakespeare-byte"))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--nproc", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    settings = dict(
        data=args.data,
        depth=4,
        width=64,
        seq_len=64,
        batch_size=16,
        tokens=16 * 64 * args.steps,
        lr=2e-3,
        eval_tokens=8192,
        device="cpu",
        seed=7,
    )
    tmp = Path(tempfile.mkdtemp())
    lines = [f"{k} = {json.dumps(v)}" for k, v in settings.items()] + ["diagnose = false"]
    (tmp / "c.toml").write_text("\n".join(lines) + "\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        f"--nproc_per_node={args.nproc}",
        "--master_addr=127.0.0.1",
        f"--master_port={port}",
        "-m",
        "scalefit",
        "train",
        "run",
        str(tmp / "c.toml"),
        "--out",
        str(tmp / "o"),
        "--no-progress",
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    ddp = pd.read_csv(tmp / "o" / "history.csv")["loss"].to_numpy()
    single = train(config_from_dict(settings))
    ref = np.array([h["loss"] for h in single.history])
    diff = np.abs(ddp - ref)
    row = json.loads((tmp / "o" / "result.json").read_text())["result"]
    print(
        f"{args.nproc}-process gloo vs 1 process, {len(ref)} steps: largest step-loss difference "
        f"{diff.max():.2e} nats (relative {(diff / ref).max():.1e})"
    )
    print(
        f"validation loss: {args.nproc} processes {row['loss']:.5f}, one {single.row['loss']:.5f}"
    )


if __name__ == "__main__":
    main()
