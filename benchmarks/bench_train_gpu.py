"""GPU throughput and model FLOPs utilisation (MFU) of the scalefit trainer.

Trains the given configuration with the trainer's CUDA path (bf16 autocast, TF32, fused AdamW,
``torch.compile``) on random token windows of a real token folder and prints tokens/s and MFU,
with MFU = flops_per_token · tokens/s / peak, flops_per_token = 6·N + 12·ℓ·W·seq_len
(:func:`scalefit.core.accounting.flops_per_token`). The first ``--warmup`` steps (compilation) are
not timed (step end times come from the training history). Under
``torchrun --nproc_per_node=G`` it reports the global rate and MFU over G GPUs.

    scalefit data prepare shakespeare
    python benchmarks/bench_train_gpu.py --depth 12 --width 768 --seq-len 1024 --batch-size 32
    torchrun --nproc_per_node=8 benchmarks/bench_train_gpu.py --depth 12 --width 768

Peak defaults to 989e12 (H100 SXM dense bf16); pass --peak-flops for other GPUs (A100: 312e12,
H200: 989e12).
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from scalefit.core.accounting import flops_per_token
from scalefit.train.loop import config_from_dict, train


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", default="shakespeare", help="token folder or corpus name")
    ap.add_argument("--depth", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--block", default="swiglu")
    ap.add_argument("--variant", default="pre_ln")
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batch-size", type=int, default=32, help="global batch in sequences")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--peak-flops", type=float, default=989e12, help="per GPU")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument(
        "--compile-mode",
        default="default",
        choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
        help="torch.compile mode (reduce-overhead: CUDA graphs)",
    )
    ap.add_argument(
        "--sync-every",
        type=int,
        default=10,
        help="steps between host reads of the loss (must divide --warmup and --steps)",
    )
    args = ap.parse_args()
    if args.warmup % args.sync_every or args.steps % args.sync_every:
        raise SystemExit("--sync-every must divide --warmup and --steps (timed window edges).")
    if not torch.cuda.is_available():
        raise SystemExit("bench_train_gpu.py needs a CUDA GPU; use bench_train.py on CPU.")
    settings = dict(
        data=args.data,
        depth=args.depth,
        width=args.width,
        heads=args.heads,
        block=args.block,
        variant=args.variant,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        eval_tokens=args.seq_len,
        device="cuda",
        compile=not args.no_compile,
        compile_mode=args.compile_mode,
        sync_every=args.sync_every,
    )
    per_step = args.batch_size * args.seq_len
    t0 = time.perf_counter()
    res = train(config_from_dict({**settings, "tokens": (args.warmup + args.steps) * per_step}))
    wall = time.perf_counter() - t0
    world = res.row["world"]
    if int(os.environ.get("RANK", "0")) != 0:
        return
    # a step's time_s is when its loss was read back (a device sync every --sync-every steps);
    # the window's edges are read-back steps, so its length is honest
    times = [h["time_s"] for h in res.history]
    tok_s = args.steps * per_step / (times[-1] - times[args.warmup - 1])
    fpt = flops_per_token(
        res.row["params"], depth=args.depth, width=args.width, seq_len=args.seq_len
    )
    mfu = fpt * tok_s / (args.peak_flops * world)
    print(
        f"{torch.cuda.get_device_name()} x {world}: depth {args.depth} width {args.width} "
        f"params {res.row['params']:,} seq {args.seq_len} global batch {args.batch_size}"
    )
    print(
        f"first {args.warmup} steps (compilation) {times[args.warmup - 1]:.1f} s; "
        f"whole run {wall:.1f} s end to end"
    )
    print(f"tokens/s {tok_s:,.0f}  flops/token {fpt:.3e}  MFU {100 * mfu:.1f} %")


if __name__ == "__main__":
    main()
