"""The toy trainer's Adam step: this tree's optimiser against an older tree's, alternating.

Both optimisers step two identical student stacks (the default toy: six depths, one teacher)
on the same gradients, step by step, the order alternating; each step's CPU time
(``time.process_time``) is recorded and the medians are printed, with whether the two stacks'
parameters are still bit-identical at the end (the update is the same arithmetic).

    nice -n 10 python benchmarks/bench_sim_adam.py --before DIR [--batch 256 --steps 30]

``DIR`` holds an older ``scalefit`` package (e.g. ``git archive <commit> scalefit | tar -x -C
DIR``); its ``scalefit/sim/train.py`` is loaded beside this tree's.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

from _harness import header, loadavg, pin_threads, pin_torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="folder holding an older scalefit package")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    threads = pin_threads(args.threads)
    header("toy trainer: Adam step of this tree vs an older tree", threads)
    pin_torch()
    import torch

    from scalefit.sim import ToyConfig
    from scalefit.sim.model import StudentStack, Teacher
    from scalefit.sim.train import _Adam as New

    path = Path(args.before).resolve() / "scalefit" / "sim" / "train.py"
    spec = importlib.util.spec_from_file_location("scalefit.sim._before_train", path)
    old = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = old  # its dataclasses look their module up
    spec.loader.exec_module(old)

    cfg = ToyConfig(batch=args.batch)
    teacher = Teacher(cfg)
    stacks = {"before": StudentStack(cfg), "this tree": StudentStack(cfg)}
    opts = {"before": old._Adam(stacks["before"], cfg), "this tree": New(stacks["this tree"], cfg)}
    params = stacks["before"].params
    print(
        f"before: {path}; depths {cfg.depths}, batch {cfg.batch}, {len(params)} parameter "
        f"tensors, {sum(p.numel() for p in params):,} elements"
    )
    gen = torch.Generator().manual_seed(0)
    cpu: dict[str, list[float]] = {name: [] for name in opts}
    for step in range(args.steps):
        x = torch.randn(cfg.batch, cfg.width, generator=gen)
        target = teacher.target(x, "kl")
        for stack in stacks.values():
            stack.loss_and_grad(x, target)
        names = list(opts) if step % 2 == 0 else list(opts)[::-1]
        for name in names:
            c0 = time.process_time()
            opts[name].step(1.0)
            cpu[name].append(time.process_time() - c0)
    for name, v in cpu.items():
        v = v[2:]  # the first two steps allocate
        print(
            f"  {name:9s}: Adam step {1e3 * statistics.median(v):.2f} ms CPU median "
            f"({1e3 * min(v):.2f}-{1e3 * max(v):.2f}, {len(v)} steps)"
        )
    same = all(
        torch.equal(a, b)
        for a, b in zip(stacks["before"].params, stacks["this tree"].params, strict=True)
    )
    print(f"  parameters bit-identical after {args.steps} steps: {same}")
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
