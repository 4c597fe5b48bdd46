"""Layer pruning without fine-tuning: remove blocks, measure the change in held-out loss.

One forward of the full model per batch, then one per removed set of blocks, on the same tokens
(and, for masked LMs, the same seeded mask). The block list is swapped in place and always
restored.
"""

from __future__ import annotations

import math

import numpy as np

from ._hfmodel import LoadedModel, blocks_of, set_blocks
from .angles import _to_numpy, angle

MASK_RATE = 0.15


def forward_kwargs(lm: LoadedModel) -> dict:
    """Keyword arguments for a plain forward (no KV cache for decoders)."""
    return {} if lm.encoder else {"use_cache": False}


def masked_inputs(lm: LoadedModel, ids, *, seed: int):
    """Mask 15% of the non-special positions with a seeded generator; return (inputs, targets)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    pick = torch.rand(ids.shape, generator=gen) < MASK_RATE
    pick[:, 0] = pick[:, -1] = False  # [CLS] and [SEP]
    pick = pick.to(ids.device)
    inputs = ids.masked_fill(pick, lm.tokenizer.mask_token_id if lm.tokenizer else 0)
    targets = ids.masked_fill(~pick, -100)
    return inputs, targets


def batch_metric(lm: LoadedModel, ids, *, seed: int, reference=None) -> tuple[float, int, object]:
    """Sum of the pruning metric over one batch, its count, and the output used as reference.

    ``causal``: next-token negative log-likelihood (nats); ``masked``: masked-token NLL;
    ``representation``: angular distance θ/π between this model's final hidden state and
    ``reference`` (the full model's, returned when ``reference`` is None).
    """
    import torch
    import torch.nn.functional as F

    with torch.no_grad():
        if lm.task != "representation":
            if lm.task == "causal":
                logits = lm.model(input_ids=ids, **forward_kwargs(lm)).logits[:, :-1]
                targets = ids[:, 1:]
            else:
                inputs, targets = masked_inputs(lm, ids, seed=seed)
                logits = lm.model(input_ids=inputs).logits
            nll = F.cross_entropy(
                logits.float().reshape(-1, logits.shape[-1]),
                targets.reshape(-1),
                reduction="sum",
                ignore_index=-100,
            )
            return float(nll), int((targets != -100).sum()), None
        final = _to_numpy(lm.model(input_ids=ids).last_hidden_state)
        if reference is None:
            return 0.0, final.shape[0] * final.shape[1], final
        dist = angle(reference, final) / math.pi
        return float(np.nansum(dist)), int(np.isfinite(dist).sum()), None


def prune_variants(depth: int, block_sizes, distances: dict[int, np.ndarray]) -> list[tuple]:
    """Removed-block sets: every single block, then Gromov et al.'s most similar spans.

    For each n in ``block_sizes``, the n consecutive blocks starting where d(l, l+n) is smallest.
    """
    variants = [(layer,) for layer in range(1, depth + 1)]
    for n in block_sizes:
        if n < 2 or n >= depth or n not in distances:
            continue
        start = int(np.nanargmin(distances[n][: depth - n + 1])) + 1
        variants.append(tuple(range(start, start + n)))
    return variants


def run_pruning(lm: LoadedModel, batches, variants, *, seed: int, progress=None) -> dict:
    """Accumulate the metric of the full model and of every variant over ``batches``.

    Returns
    -------
    dict
        ``{"full": [sum, count], "1": [...], "3-4": [...], ...}`` (keys: removed blocks).
    """
    blocks = blocks_of(lm.model, lm.family)
    import torch

    totals = {"full": [0.0, 0]} | {_key(v): [0.0, 0] for v in variants}
    for index, ids in enumerate(batches):
        s, c, ref = batch_metric(lm, ids, seed=seed + index)
        totals["full"][0] += s
        totals["full"][1] += c
        for v in variants:
            kept = torch.nn.ModuleList([b for i, b in enumerate(blocks, start=1) if i not in v])
            set_blocks(lm.model, lm.family, kept)
            try:
                s, c, _ = batch_metric(lm, ids, seed=seed + index, reference=ref)
            finally:
                set_blocks(lm.model, lm.family, blocks)
            totals[_key(v)][0] += s
            totals[_key(v)][1] += c
        if progress is not None:
            progress.update(1)
    return totals


def _key(variant: tuple) -> str:
    return str(variant[0]) if len(variant) == 1 else f"{variant[0]}-{variant[-1]}"
