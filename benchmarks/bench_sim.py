"""Toy simulator speed: stacked students + one teacher forward vs the plain per-student loop.

Both sides train the paper's six student depths against one 128-layer teacher on the same
batches for the same number of steps, in the same process, alternating in rounds so that a
change in machine load hits both. The plain side is what the original scripts do: one
``nn.Module`` and one ``torch.optim.Adam`` per student, the teacher recomputed for every student.

    python benchmarks/bench_sim.py --batch 1024 --steps 20 --threads 1
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per round and side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--teacher-mode", default="independent")
    args = parser.parse_args()

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

    def fast(xs) -> None:
        for x in xs:
            stack.loss_and_grad(x, teacher.target(x, "kl"), micro_batch=cfg.micro_batch)
            adam.step(1.0)

    def plain(xs) -> None:
        for x in xs:
            plain_step(teacher_net, nets, opts, x, cfg.temperature)

    fast_t, plain_t = [], []
    fast(batches[:2]), plain(batches[:2])  # warm-up
    for _ in range(args.rounds):
        for fn, times in ((fast, fast_t), (plain, plain_t)):
            start = time.perf_counter()
            fn(batches)
            times.append(time.perf_counter() - start)
    n = args.steps
    fast_sps = n / min(fast_t)
    plain_sps = n / min(plain_t)
    print(
        f"toy simulator, depths {cfg.depths}, teacher depth {cfg.teacher_depth}, "
        f"batch {cfg.batch}, {n} steps x {args.rounds} rounds, {args.threads} thread(s), "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"  plain per-student loop : {plain_sps:7.2f} steps/s (best round)")
    print(f"  stacked, one teacher   : {fast_sps:7.2f} steps/s (best round)")
    print(f"  speed-up               : {fast_sps / plain_sps:7.2f}x (best rounds)")
    ratios = [p / f for f, p in zip(fast_t, plain_t, strict=True)]
    print(f"  per-round speed-ups    : {', '.join(f'{r:.2f}x' for r in ratios)}")


if __name__ == "__main__":
    main()
