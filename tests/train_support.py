"""Shared pieces of the trainer tests: a one-thread torch fixture, a synthetic corpus, torchrun."""

import os
import subprocess
import sys

import numpy as np
import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny models: one thread is faster and steadier on a shared 2-core machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def make_corpus(folder, *, vocab, n_docs=4, words=3000, seed=0):
    """Write ``n_docs`` text files of random words from ``vocab`` into ``folder``."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for d in range(n_docs):
        (folder / f"doc{d}.txt").write_text(" ".join(rng.choice(vocab, size=words)) + "\n")
    return folder


def token_folder(root, *, vocab, seed, words=3000) -> str:
    """A byte-level token folder of a 4-document random corpus under ``root`` (val 25 %)."""
    from scalefit.train.data import build_tokens

    corpus = make_corpus(root / "corpus", vocab=vocab, n_docs=4, words=words, seed=seed)
    return str(build_tokens(corpus, root / "tokens", val_fraction=0.25))


def tiny_settings(data, **overrides) -> dict:
    """Settings of a tiny CPU language model (2 x 32, 12 steps of 8 x 32 tokens), overridable."""
    base = dict(
        data=str(data),
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
    return {**base, **overrides}


def free_port() -> int:
    """A free TCP port on the loopback address (for torchrun's rendezvous)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(*target, nproc: int = 2, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``target`` (a script and its arguments, or ``-m module ...``) under a real ``torchrun``.

    One node, ``nproc`` processes, rendezvous on 127.0.0.1 at a free port (the default address
    aborted once), one OpenMP thread per process. Fails the test with the tail of stderr when
    the launch does not exit 0.
    """
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        f"--nproc_per_node={nproc}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        *map(str, target),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return proc
