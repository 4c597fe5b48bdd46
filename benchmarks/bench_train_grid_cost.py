"""Projected CPU cost of a trainer grid from short timed runs of each (depth, width) shape.

For every distinct shape of the given sweep specs, trains ``--steps`` steps with the spec's own
settings and measures tokens per CPU-second of this process (``time.process_time``; with one
thread this is the work done and is robust to other processes on a shared machine). The projected
cost of the grid is Σ tokens / rate over its runs, plus each run's evaluation and diagnostics
(timed the same way on the short run). On an idle machine with W single-thread workers the
wall-clock time is about that total divided by W. Threads are pinned (``--threads``: torch,
BLAS, OpenMP; printed with the date, machine and load average); each shape is timed
``--repeats`` times and the median rate (with its min-max) is used.

    nice -n 10 python benchmarks/bench_train_grid_cost.py configs/grid_shakespeare_cpu.toml \
        configs/grid_shakespeare_cpu_long.toml --steps 8 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time

from _harness import argv_threads, header, loadavg, pin_threads

# Pin the thread settings before numpy and torch are imported (they read them at import).
_THREADS = pin_threads(argv_threads())

import torch  # noqa: E402

from scalefit.sweep import load_spec  # noqa: E402
from scalefit.train.diagnostics import diagnose  # noqa: E402
from scalefit.train.grid import TASK_KEYS  # noqa: E402
from scalefit.train.loop import config_from_dict, train  # noqa: E402


def shape_rates(config: dict, steps: int) -> tuple[float, float]:
    """Tokens per CPU-second of training, and CPU seconds of evaluation + diagnostics."""
    settings = {k: v for k, v in config.items() if k not in TASK_KEYS}
    per_step = settings["batch_size"] * settings["seq_len"]
    cfg = config_from_dict({**settings, "tokens": steps * per_step})
    c0 = time.process_time()
    res = train(cfg)
    c1 = time.process_time()
    diagnose(res.model, res.data, eval_tokens=int(config.get("diag_tokens", 16_384)))
    c2 = time.process_time()
    train_cpu = res.row["cpu_s"]  # the training loop only
    return steps * per_step / train_cpu, (c1 - c0 - train_cpu) + (c2 - c1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=1, help="timed runs per shape (median used)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    header("trainer grid: projected CPU cost from short timed runs per shape", _THREADS)
    runs = [r.config for s in args.specs for r in load_spec(s).runs()]
    shapes = {}
    for config in runs:
        key = (config["depth"], config["width"])
        if key not in shapes:
            got = [shape_rates(config, args.steps) for _ in range(args.repeats)]
            rates = [g[0] for g in got]
            shapes[key] = (statistics.median(rates), statistics.median(g[1] for g in got))
            rate, extra = shapes[key]
            print(
                f"depth {key[0]} width {key[1]}: {rate:,.0f} tokens per CPU-second "
                f"(median of {len(rates)}, {min(rates):,.0f}-{max(rates):,.0f}), "
                f"evaluation + diagnostics {extra:.1f} CPU-s (load {loadavg()})",
                flush=True,
            )
    total = 0.0
    for config in runs:
        rate, extra = shapes[(config["depth"], config["width"])]
        total += config["tokens"] / rate + extra
    print(
        f"{len(runs)} runs: projected {total / 60:.1f} CPU-minutes at {args.threads} thread(s); "
        f"≈ {total / 120:.1f} min with 2 single-thread workers on an idle 2-core machine"
    )
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
