"""Toy simulator speed: stacked students + one teacher forward vs the plain per-student loop.

Both sides train the paper's six student depths against one 128-layer teacher on the same
batches for the same number of steps, in the same process, under the same pinned thread
settings (``--threads``: torch, BLAS, OpenMP). The plain side is what the original scripts do:
one ``nn.Module`` and one ``torch.optim.Adam`` per student, the teacher recomputed for every
student.

Each repeat runs ``--steps`` batches, interleaved step by step so that a change in machine load
hits both sides alike, and the order within each step pair alternates (project first on even
steps, plain first on odd ones). Every step is timed in wall and CPU seconds
(``time.process_time``); a repeat's ratio is plain / project over its steps. The medians over
repeats are printed with their min-max and the load average; on a shared machine the CPU-time
ratio is the figure to trust.

    nice -n 10 python benchmarks/bench_sim.py --batch 1024 --steps 10 --repeats 3 --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time

from _harness import header, loadavg, pin_threads, pin_torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=10, help="batches per repeat")
    parser.add_argument("--repeats", "--rounds", type=int, default=3, dest="repeats")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--teacher-mode", default="independent")
    args = parser.parse_args()
    threads = pin_threads(args.threads)
    header("toy simulator: stacked students + one teacher vs the plain per-student loop", threads)

    import torch

    pin_torch()
    from _sim_baseline import plain_setup, plain_step

    from scalefit.sim import ToyConfig
    from scalefit.sim.model import StudentStack, Teacher
    from scalefit.sim.train import _Adam

    cfg = ToyConfig(batch=args.batch, teacher_mode=args.teacher_mode)
    teacher, stack = Teacher(cfg), StudentStack(cfg)
    adam = _Adam(stack, cfg)
    teacher_net, nets, opts = plain_setup(cfg)
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randn(cfg.batch, cfg.width, generator=gen) for _ in range(args.steps)]

    def project(x) -> None:
        stack.loss_and_grad(x, teacher.target(x, "kl"), micro_batch=cfg.micro_batch)
        adam.step(1.0)

    def plain(x) -> None:
        plain_step(teacher_net, nets, opts, x, cfg.temperature)

    for x in batches[:2]:  # warm-up
        project(x), plain(x)
    print(
        f"depths {cfg.depths}, teacher depth {cfg.teacher_depth}, batch {cfg.batch}, "
        f"{args.steps} interleaved steps per side per repeat, {args.repeats} repeats, "
        f"torch threads {torch.get_num_threads()}"
    )
    ratios: dict[str, list[float]] = {"wall": [], "cpu": []}
    rates: dict[str, list[float]] = {"project": [], "plain": []}
    for r in range(args.repeats):
        tot = {(side, clock): 0.0 for side in ("project", "plain") for clock in ("wall", "cpu")}
        for i, x in enumerate(batches):
            pair = (("project", project), ("plain", plain))
            for side, fn in pair if i % 2 == 0 else pair[::-1]:
                w0, c0 = time.perf_counter(), time.process_time()
                fn(x)
                tot[side, "wall"] += time.perf_counter() - w0
                tot[side, "cpu"] += time.process_time() - c0
        for clock in ("wall", "cpu"):
            ratios[clock].append(tot["plain", clock] / tot["project", clock])
        for side in rates:
            rates[side].append(args.steps / tot[side, "cpu"])
        print(
            f"  repeat {r}: project {args.steps / tot['project', 'wall']:.2f} steps/s wall "
            f"({args.steps / tot['project', 'cpu']:.2f} per CPU-s), plain "
            f"{args.steps / tot['plain', 'wall']:.2f} steps/s wall "
            f"({args.steps / tot['plain', 'cpu']:.2f} per CPU-s); speed-up wall "
            f"{ratios['wall'][-1]:.2f}x, CPU {ratios['cpu'][-1]:.2f}x (load {loadavg()})",
            flush=True,
        )
    for side, label in (("plain", "plain per-student loop"), ("project", "stacked, one teacher")):
        v = rates[side]
        print(
            f"  {label:23s}: {statistics.median(v):7.2f} steps per CPU-s, median "
            f"({min(v):.2f}-{max(v):.2f})"
        )
    for clock in ("cpu", "wall"):
        v = ratios[clock]
        print(
            f"  speed-up, {clock:4s} time : {statistics.median(v):5.2f}x median of "
            f"{len(v)} repeats ({min(v):.2f}-{max(v):.2f})"
        )
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
