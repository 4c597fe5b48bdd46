"""CPU throughput of the scalefit trainer against a plain PyTorch reference, same model and batch.

Both sides train the same decoder-only model (pre-norm RMSNorm, RoPE, causal attention, GELU
MLP, tied embeddings) from the same initial weights on the same batches with AdamW (decay on
matrices), gradient clipping and the same schedule. "Ours" is ``scalefit.train.loop.train`` end to
end (data loading, schedule, clipping, loss bookkeeping included). The reference is the textbook
way: attention written out (QKᵀ/√d, causal mask, softmax, ·V), RMSNorm and RoPE written out, a
plain loop. The two are checked to give the same initial loss before timing. Repeats alternate
(ours, reference, ours, …). Throughput is reported per CPU-second of this process
(``time.process_time``, robust to other processes on a shared machine; with one thread it is the
work done) and per wall-clock second. Both sides run under the same pinned thread settings
(``--threads``: torch, BLAS, OpenMP; printed with the date, machine and load average), the order
alternates between repeats (ours, reference; reference, ours; ...), and the median of the
per-repeat ratios is printed with its min-max.

    nice -n 10 python benchmarks/bench_train.py --threads 1 --depth 4 --width 128 --steps 10 \
        --repeats 5
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
from pathlib import Path

from _harness import alternate, argv_threads, header, loadavg, pin_threads, word_tokens

# Pin the thread settings before numpy and torch are imported (they read them at import).
_THREADS = pin_threads(argv_threads())

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from scalefit.train.loop import config_from_dict, train  # noqa: E402
from scalefit.train.model import Transformer  # noqa: E402


class PlainBlock(nn.Module):
    def __init__(self, width, heads, hidden):
        super().__init__()
        self.heads = heads
        self.g1 = nn.Parameter(torch.ones(width))
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        self.g2 = nn.Parameter(torch.ones(width))
        self.fc = nn.Linear(width, hidden, bias=False)
        self.down = nn.Linear(hidden, width, bias=False)

    @staticmethod
    def rms(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g

    @staticmethod
    def rope(x, cos, sin):
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        hd = C // self.heads
        q, k, v = self.qkv(self.rms(x, self.g1)).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.heads, hd).transpose(1, 2) for t in (q, k, v))
        q, k = self.rope(q, cos[:T], sin[:T]), self.rope(k, cos[:T], sin[:T])
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.down(F.gelu(self.fc(self.rms(x, self.g2))))


class PlainGPT(nn.Module):
    def __init__(self, ours: Transformer):
        super().__init__()
        cfg = ours.cfg
        self.emb = nn.Embedding(cfg.vocab, cfg.width)
        self.blocks = nn.ModuleList(
            PlainBlock(cfg.width, cfg.heads, cfg.hidden) for _ in range(cfg.depth)
        )
        self.gf = nn.Parameter(torch.ones(cfg.width))
        self.register_buffer("cos", ours.rope_cos.clone())
        self.register_buffer("sin", ours.rope_sin.clone())
        with torch.no_grad():  # same initial weights as ours
            self.emb.weight.copy_(ours.tok_emb.weight)
            for mine, theirs in zip(self.blocks, ours.blocks, strict=True):
                mine.qkv.weight.copy_(theirs.attn.qkv.weight)
                mine.proj.weight.copy_(theirs.attn.proj.weight)
                mine.fc.weight.copy_(theirs.mlp.fc.weight)
                mine.down.weight.copy_(theirs.mlp.proj.weight)

    def forward(self, idx, targets):
        x = self.emb(idx)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        logits = PlainBlock.rms(x, self.gf) @ self.emb.weight.T
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def plain_train(cfg, data) -> float:
    torch.manual_seed(cfg.seed)
    model = PlainGPT(Transformer(cfg.model))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": other, "weight_decay": 0.0},
        ],
        lr=cfg.lr,
        betas=(cfg.beta1, cfg.beta2),
    )
    for step in range(cfg.steps):
        for group in opt.param_groups:
            group["lr"] = cfg.lr_schedule().lr_at(step + 1)
        x, y = data.batch(step, cfg.batch_size)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return float(loss.detach())


WORDS = ["to", "be", "or", "not", "that", "is", "the", "question", "whether", "tis", "nobler"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", default=None, help="token folder (default: a generated corpus)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    header("trainer: scalefit.train.loop.train vs a plain PyTorch loop", _THREADS)
    with tempfile.TemporaryDirectory() as tmp:
        tokens = args.data or str(
            word_tokens(Path(tmp), WORDS, n_docs=6, words_per_doc=40_000, end="\n")
        )
        cfg = config_from_dict(
            dict(
                data=tokens,
                depth=args.depth,
                width=args.width,
                seq_len=args.seq_len,
                batch_size=args.batch_size,
                tokens=args.steps * args.batch_size * args.seq_len,
                eval_tokens=args.seq_len,
                device="cpu",
                seed=0,
            )
        )
        warm = train(cfg)  # warm-up, and the data object for the reference
        torch.manual_seed(0)
        ref_model = PlainGPT(Transformer(cfg.model))
        x, y = warm.data.batch(0, cfg.batch_size)
        torch.manual_seed(0)
        with torch.no_grad():
            ours0 = float(Transformer(cfg.model)(x, y).loss)
            ref0 = float(ref_model(x, y))
        print(f"initial loss: ours {ours0:.6f}, reference {ref0:.6f} (must agree)")
        assert abs(ours0 - ref0) < 1e-4
        n_tok = cfg.steps * cfg.batch_size * cfg.model.seq_len
        runs = alternate(
            {"ours": lambda: train(cfg), "reference": lambda: plain_train(cfg, warm.data)},
            args.repeats,
        )
    print(
        f"depth {args.depth} width {args.width} seq {args.seq_len} batch {args.batch_size}, "
        f"{args.steps} steps x {args.repeats} alternating repeats, "
        f"{torch.get_num_threads()} torch thread(s); "
        f"ours includes set-up and a {args.seq_len}-token evaluation"
    )
    for clock in ("CPU", "wall"):
        attr = clock.lower()
        a = [n_tok / t for t in getattr(runs["ours"], attr)]
        b = [n_tok / t for t in getattr(runs["reference"], attr)]
        ratio = [x / y for x, y in zip(a, b, strict=True)]
        print(
            f"tokens per {clock}-second: ours median {statistics.median(a):,.0f}, reference "
            f"median {statistics.median(b):,.0f}; ratio median {statistics.median(ratio):.3f} "
            f"(min {min(ratio):.3f}, max {max(ratio):.3f})"
        )
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
