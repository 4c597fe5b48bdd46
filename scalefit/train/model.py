"""A small decoder-only transformer, readable in one sitting.

Pre-norm RMSNorm blocks with rotary position embeddings (RoPE), causal attention through
``F.scaled_dot_product_attention(is_causal=True)`` and a GELU or SwiGLU MLP. Variants:

``pre_ln``       x ← x + attn(norm(x)); x ← x + mlp(norm(x)); logits = head(norm_f(x)).
``post_ln``      x ← norm(x + attn(x)); x ← norm(x + mlp(x)); the final norm is kept.
``lns``          LayerNorm Scaling (Sun et al.): the outputs of *both* pre-norms of block l are
                 multiplied by 1/√l, l counted from 1; the final norm is not scaled; plain init.
``scaled_init``  pre_ln with the output projections (attention out, MLP down) initialised with
                 std 0.02/√(2·depth) (GPT-2 style).
``cr_tree``      pre_ln blocks joined by the CR-guided tree residual path (seed 002, Listing 1),
                 generalised to any depth by :func:`tree_parents`.

All variants have the parameter count of :func:`scalefit.core.accounting.param_count` (with
``tree_merges=len(tree_parents(depth))`` for ``cr_tree``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from ..core._validation import Options, validate
from ..core.accounting import mlp_hidden, param_count
from ..core.errors import ScaleFitError

VARIANTS = ("pre_ln", "post_ln", "lns", "scaled_init", "cr_tree")


def head_layout(width: int, heads: int | None = None, head_dim: int | None = None):
    """``(heads, head_dim)`` of a width.

    ``heads`` if given, else ``width // head_dim`` heads with ``head_dim`` defaulting to
    ``min(32, width)``; the head dimension is ``width // heads``.
    """
    if heads is None:
        heads = max(1, width // (head_dim or min(32, width)))
    return heads, width // heads


@dataclass
class ModelConfig:
    """Architecture settings; see the module docstring for the variants."""

    depth: int = 2
    width: int = 64
    heads: int | None = None  # default: width // head_dim
    head_dim: int | None = None  # default: 32 (or the width, when smaller)
    vocab: int = 256
    seq_len: int = 128
    block: str = "standard"  # "standard" (GELU) or "swiglu"
    mlp_ratio: float = 4.0
    ffn_hidden: int | None = None
    embeddings: str = "tied"  # "tied" or "untied"
    variant: str = "pre_ln"
    rope_base: float = 10000.0
    init_std: float = 0.02

    def __post_init__(self) -> None:
        validate(
            "ModelConfig",
            {"variant": self.variant, "embeddings": self.embeddings},
            {"variant": [Options(set(VARIANTS))], "embeddings": [Options({"tied", "untied"})]},
        )
        if self.heads is None:
            self.heads = head_layout(self.width, None, self.head_dim)[0]
        if self.width % self.heads:
            raise ScaleFitError(f"width {self.width} is not divisible by heads {self.heads}.")
        self.head_dim = self.width // self.heads
        if self.head_dim % 2:
            raise ScaleFitError(f"RoPE needs an even head dimension; got {self.head_dim}.")
        self.hidden = mlp_hidden(
            self.width, block=self.block, mlp_ratio=self.mlp_ratio, ffn_hidden=self.ffn_hidden
        )

    def to_dict(self) -> dict:
        """Plain dict of the settings (JSON-safe)."""
        d = asdict(self)
        d.pop("hidden", None)
        return d

    def expected_params(self, embeddings: str | None = None) -> int:
        """Parameter count from the shared accounting (``"excluded"``: non-embedding)."""
        merges = len(tree_parents(self.depth)) if self.variant == "cr_tree" else 0
        return param_count(
            self.depth,
            self.width,
            vocab=self.vocab,
            block=self.block,
            embeddings=embeddings or self.embeddings,
            mlp_ratio=self.mlp_ratio,
            ffn_hidden=self.hidden,
            tree_merges=merges,
        )


def tree_parents(depth: int) -> dict[int, int]:
    """Tree residual path of seed 002 generalised to any depth: ``{layer: parent}``.

    Layers are 0-indexed; parent ``-1`` is the embedding. The tree's nodes in breadth-first (heap)
    order are the embedding, layers 0 and 1, then the even layers 2, 4, …, 2m with
    ``2m ≤ depth − 4`` (three or more plain serial layers always follow the last tree node, and the
    odd layers between tree nodes are buffers). Node i of that order has parent ``(i − 1) // 2``.
    A tree layer l > 0 receives ``norm_a(h_parent) + norm_b(h_{l-1})`` instead of ``h_{l-1}``;
    layer 0 is the embedding's direct child and needs no merge. For depth 12 this gives exactly
    Listing 1: 1←E, 2←0, 4←0, 6←1, 8←1; for depth 24 the tree grows a level (10, 12←2; …; 20←6).

    Examples
    --------
    >>> tree_parents(12)
    {1: -1, 2: 0, 4: 0, 6: 1, 8: 1}
    """
    nodes = [-1, 0] + ([1] if depth >= 2 else [])
    nodes += list(range(2, depth - 3, 2))
    return {layer: nodes[(i - 1) // 2] for i, layer in enumerate(nodes) if i >= 2}


def _rope_tables(seq_len: int, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv)  # (T, hd/2)
    return angles.cos(), angles.sin()


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: (B, H, T, hd); rotate the two halves of each head as complex pairs
    x1, x2 = x.chunk(2, dim=-1)  # (B, H, T, hd/2) each
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).type_as(x)


class Attention(nn.Module):
    """Multi-head causal self-attention with RoPE."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.heads, self.head_dim = cfg.heads, cfg.head_dim
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width, bias=False)
        self.proj = nn.Linear(cfg.width, cfg.width, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Attend causally over ``x`` (B, T, C)."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = _apply_rope(q, cos[:T], sin[:T]), _apply_rope(k, cos[:T], sin[:T])  # (B, H, T, hd)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, hd)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))  # (B, T, C)


class MLP(nn.Module):
    """GELU MLP (``standard``) or SwiGLU; ``proj`` is the output (down) projection."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.swiglu = cfg.block == "swiglu"
        self.fc = nn.Linear(cfg.width, (2 if self.swiglu else 1) * cfg.hidden, bias=False)
        self.proj = nn.Linear(cfg.hidden, cfg.width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the MLP to ``x`` (B, T, C)."""
        h = self.fc(x)  # (B, T, H) or (B, T, 2H)
        if self.swiglu:
            gate, up = h.chunk(2, dim=-1)
            return self.proj(F.silu(gate) * up)
        return self.proj(F.gelu(h))


class Block(nn.Module):
    """One transformer block; ``ln_scale`` is 1/√l for LayerNorm Scaling, else 1."""

    def __init__(self, cfg: ModelConfig, index: int) -> None:
        super().__init__()
        self.post_ln = cfg.variant == "post_ln"
        self.ln_scale = 1.0 / math.sqrt(index + 1) if cfg.variant == "lns" else 1.0
        self.norm1 = nn.RMSNorm(cfg.width, eps=1e-6)
        self.attn = Attention(cfg)
        self.norm2 = nn.RMSNorm(cfg.width, eps=1e-6)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, attn_io: list | None = None) -> torch.Tensor:
        """Apply the block; appends the attention sub-layer's (input, output) to ``attn_io``."""
        if self.post_ln:
            h = x + self.attn(x, cos, sin)
            if attn_io is not None:
                attn_io.append((x, h))
            h = self.norm1(h)
            return self.norm2(h + self.mlp(h))
        h = x + self.attn(self.norm1(x) * self.ln_scale, cos, sin)
        if attn_io is not None:
            attn_io.append((x, h))  # input and output of the attention sub-layer (CR)
        return h + self.mlp(self.norm2(h) * self.ln_scale)


class ModelOutput(NamedTuple):
    """What the model returns.

    ``logits`` (B, T, V); ``loss`` mean cross-entropy in nats (or None); ``hidden`` the
    residual states [embedding, block 0 out, …] before the final norm (or None); ``attn_io`` the
    (input, output) pairs of each attention sub-layer (or None).
    """

    logits: torch.Tensor
    loss: torch.Tensor | None
    hidden: list[torch.Tensor] | None
    attn_io: list[tuple[torch.Tensor, torch.Tensor]] | None


class Transformer(nn.Module):
    """Decoder-only language model; see :class:`ModelConfig`.

    Examples
    --------
    >>> model = Transformer(ModelConfig(depth=2, width=32, vocab=256, seq_len=16))
    >>> model(torch.zeros(3, 16, dtype=torch.long)).logits.shape
    torch.Size([3, 16, 256])
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.depth))
        self.norm_f = nn.RMSNorm(cfg.width, eps=1e-6)
        self.head = nn.Linear(cfg.width, cfg.vocab, bias=False)
        if cfg.embeddings == "tied":
            self.head.weight = self.tok_emb.weight
        self.parents = tree_parents(cfg.depth) if cfg.variant == "cr_tree" else {}
        self.merge = nn.ModuleDict(
            {
                str(layer): nn.ModuleList([nn.RMSNorm(cfg.width, eps=1e-6) for _ in range(2)])
                for layer in self.parents
            }
        )
        cos, sin = _rope_tables(cfg.seq_len, cfg.head_dim, cfg.rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self._init_weights()

    def _init_weights(self) -> None:
        std = self.cfg.init_std
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=std)
        if self.cfg.variant == "scaled_init":
            for block in self.blocks:
                for proj in (block.attn.proj, block.mlp.proj):
                    nn.init.normal_(proj.weight, mean=0.0, std=std / math.sqrt(2 * self.cfg.depth))

    def forward(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        *,
        return_hidden: bool = False,
        return_attn_io: bool = False,
        skip: frozenset[int] = frozenset(),
    ) -> ModelOutput:
        """Run the model on token ids ``idx`` (B, T); ``skip`` drops blocks (pruning probe)."""
        x = self.tok_emb(idx)  # (B, T, C)
        outs = [x]  # residual states, embedding first
        attn_io: list | None = [] if return_attn_io else None
        for i, block in enumerate(self.blocks):
            inp = outs[-1]
            if i in self.parents:  # tree merge: parent output + serial predecessor
                norm_a, norm_b = self.merge[str(i)]
                inp = norm_a(outs[self.parents[i] + 1]) + norm_b(inp)
            outs.append(inp if i in skip else block(inp, self.rope_cos, self.rope_sin, attn_io))
        logits = self.head(self.norm_f(outs[-1]))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        return ModelOutput(logits, loss, outs if return_hidden else None, attn_io)

    def num_params(self, embeddings: bool = True) -> int:
        """Exact number of distinct parameters (tied weights counted once)."""
        n = sum(p.numel() for p in self.parameters())
        return (
            n
            if embeddings
            else n - self.tok_emb.weight.numel() * (1 if self.cfg.embeddings == "tied" else 2)
        )
