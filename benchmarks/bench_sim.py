"""Toy simulator speed: stacked students + one teacher forward vs the plain per-student loop.

Both sides train the paper's six student depths against one 128-layer teacher on the same
batches for the same number of steps, in the same process, interleaved step by step so that a
change in machine load hits both. The plain side is what the original scripts do: one
``nn.Module`` and one ``torch.optim.Adam`` per student, the teacher recomputed for every student.

    python benchmarks/bench_sim.py --batch 1024 --steps 10 --rounds 3 --threads 1
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=10, help="batches per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--teacher-mode", default="independent")
    args = parser.parse_args()

    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    from scalefit.sim import ToyConfig
    from scalefit.sim.baseline import plain_setup, plain_step
    from scalefit.sim.model import StudentStack, Teacher
    from scalefit.sim.train import _Adam

    cfg = ToyConfig(batch=args.batch, teacher_mode=args.teacher_mode)
    teacher, stack = Teacher(cfg), StudentStack(cfg)
    adam = _Adam(stack, cfg)
    teacher_net, nets, opts = plain_setup(cfg)
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randn(cfg.batch, cfg.width, generator=gen) for _ in range(args.steps)]

    def fast(x) -> None:
        stack.loss_and_grad(x, teacher.target(x, "kl"), micro_batch=cfg.micro_batch)
        adam.step(1.0)

    def plain(x) -> None:
        plain_step(teacher_net, nets, opts, x, cfg.temperature)

    for x in batches[:2]:  # warm-up
        fast(x), plain(x)
    # Interleave step by step so that a change in machine load hits both sides alike.
    fast_t, plain_t = [], []
    for _ in range(args.rounds):
        for x in batches:
            for fn, times in ((fast, fast_t), (plain, plain_t)):
                start = time.perf_counter()
                fn(x)
                times.append(time.perf_counter() - start)
    fast_t, plain_t = np.array(fast_t), np.array(plain_t)
    print(
        f"toy simulator, depths {cfg.depths}, teacher depth {cfg.teacher_depth}, "
        f"batch {cfg.batch}, {len(fast_t)} interleaved steps per side, {args.threads} thread(s), "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"  plain per-student loop : {1 / plain_t.mean():7.2f} steps/s (mean step time)")
    print(f"  stacked, one teacher   : {1 / fast_t.mean():7.2f} steps/s (mean step time)")
    print(f"  speed-up (total time)  : {plain_t.sum() / fast_t.sum():7.2f}x")
    print(f"  speed-up (median step) : {np.median(plain_t) / np.median(fast_t):7.2f}x")
    print(f"  speed-up (fastest step): {plain_t.min() / fast_t.min():7.2f}x")


if __name__ == "__main__":
    main()
