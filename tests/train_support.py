"""Shared pieces of the trainer tests: a one-thread torch fixture and a synthetic corpus."""

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


def free_port() -> int:
    """A free TCP port on the loopback address (for torchrun's rendezvous)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
