"""torch.compile (inductor, CPU) against eager for the scalefit trainer, and MFU on CPU.

Both sides are ``scalefit.train.loop.train`` on the same model, batches and seed, differing only
in ``compile``. The compiled side is run once first to compile (its wall and CPU time are reported
as the compilation cost) and then timed on a second, identical run that reuses the compiled code;
repeats alternate eager/compiled. Throughput is tokens per CPU-second of this process
(``time.process_time``: with one thread that is the work done, robust to other processes on a
shared machine); the median ratio compiled/eager is printed. MFU is reported against the best
float32 matmul rate this process reaches (``_harness.measure_matmul_peak``; a CPU has no
datasheet peak in the table). Both sides run under the same pinned thread settings
(``--threads``: torch, BLAS, OpenMP; printed with the date, machine and load average), the order
alternates between repeats (eager, compiled; compiled, eager; ...), and the median of the
per-repeat ratios is printed with its min-max. Inductor keeps its compiled kernels in its own
on-disk cache, so a second run of this script compiles much faster than the first.

    nice -n 10 python benchmarks/bench_train_compile.py --threads 1 --depth 4 --width 64 \
        --steps 20 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _harness import argv_threads, header, loadavg, measure_matmul_peak, pin_threads, word_tokens

# Pin the thread settings before numpy and torch are imported (they read them at import).
_THREADS = pin_threads(argv_threads())

import torch  # noqa: E402

from scalefit.core.accounting import flops_per_token  # noqa: E402
from scalefit.train.loop import config_from_dict, train  # noqa: E402

WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    header("trainer: torch.compile (inductor, CPU) vs eager", _THREADS)
    with tempfile.TemporaryDirectory() as tmp:
        tokens = word_tokens(Path(tmp), WORDS, n_docs=4, words_per_doc=20000, val_fraction=0.25)
        base = dict(
            data=str(tokens),
            depth=args.depth,
            width=args.width,
            seq_len=args.seq_len,
            batch_size=args.batch,
            tokens=args.batch * args.seq_len * args.steps,
            eval_tokens=args.seq_len,
            device="cpu",
        )
        eager, compiled = (config_from_dict({**base, "compile": c}) for c in (False, True))
        w0, c0 = time.perf_counter(), time.process_time()
        first = train(compiled)
        print(
            f"compilation run: {time.perf_counter() - w0:.1f} s wall, "
            f"{time.process_time() - c0:.1f} CPU-s ({args.steps} steps included)",
            flush=True,
        )
        rates = {"eager": [], "compiled": []}
        ways = (("eager", eager), ("compiled", compiled))
        for r in range(args.repeats):
            for name, cfg in ways if r % 2 == 0 else ways[::-1]:
                res = train(cfg)
                rates[name].append(res.row["tokens"] / res.row["cpu_s"])
                print(
                    f"  repeat {r}: {name}: {rates[name][-1]:,.0f} tokens per CPU-s, "
                    f"{res.row['tokens'] / res.row['wall_s']:,.0f} per wall-s (load {loadavg()})",
                    flush=True,
                )
        peak = measure_matmul_peak()
    params = first.row["params"]
    fpt = flops_per_token(params, depth=args.depth, width=args.width, seq_len=args.seq_len)
    ratios = [c / e for c, e in zip(rates["compiled"], rates["eager"], strict=True)]
    for name, r in rates.items():
        med = statistics.median(r)
        print(
            f"{name}: {med:,.0f} tokens per CPU-s (median of {len(r)}), "
            f"{fpt * med / 1e9:.2f} GFLOP per CPU-s, MFU {100 * fpt * med / peak:.1f} % "
            f"of the measured matmul peak {peak / 1e9:.1f} GFLOP/s"
        )
    print(
        f"compiled / eager: {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}); depth {args.depth} width {args.width} "
        f"seq {args.seq_len} batch {args.batch}, {args.threads} thread(s)"
    )
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
