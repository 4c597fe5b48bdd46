"""The CR and channel-orthogonality losses of seed 002 (the trainer's regulariser).

The CR measure itself (``cr_measure``, ``coherence``) lives in :mod:`scalefit.probes.cr`. The
losses follow the paper's Listing 2: depth-aware clipping bound ``2 + L/2``, sharpening factor
``√(depth − L)``, target 0.35, scale ``(depth − L)·0.1``, an energy-ratio penalty during the
first 800 iterations, ``λ_CR = λ_ortho = 0.01``. The paper fixes depth 12; we replace its
constant 12 by the model's depth (identical at depth 12) and choose the layers by
:func:`aux_layers`.
"""

from __future__ import annotations

import math

import torch

from ..probes.cr import EPS, coherence_of, ecf, standardise

CR_TARGET = 0.35
LAMBDA_CR = 0.01
LAMBDA_ORTHO = 0.01
ENERGY_ITERS = 800


def aux_layers(depth: int) -> tuple[list[int], list[int]]:
    """Layers (0-indexed) that get the CR loss and the orthogonality loss.

    Seed 002 (depth 12) uses the tree leaves {2, 4, 6, 8} for CR and {3, 5, 7, 9, 10} for
    orthogonality. Generalised: CR on the even layers ``2 … 2m`` with ``2m ≤ depth − 4`` (the tree
    leaves of :func:`scalefit.train.model.tree_parents`), orthogonality on every other layer in
    ``3 … depth − 2``.

    Examples
    --------
    >>> aux_layers(12)
    ([2, 4, 6, 8], [3, 5, 7, 9, 10])
    """
    cr = list(range(2, depth - 3, 2))
    ortho = [layer for layer in range(3, depth - 1) if layer not in cr]
    return cr, ortho


def cr_loss(
    h_in: torch.Tensor, h_out: torch.Tensor, layer: int, depth: int, iteration: int
) -> torch.Tensor:
    """CR loss of one layer (Listing 2, without λ): ``mean((coh − 0.35)²)·(depth − L)·0.1``."""
    z_in, z_out = standardise(h_in.float()), standardise(h_out.float())
    bound = 2.0 + layer / 2
    sharpen = math.sqrt(max(depth - layer, 1))
    fac_in = (z_in.abs().amax(dim=1, keepdim=True) / bound).clamp(min=1.0)
    fac_out = (z_out.abs().amax(dim=1, keepdim=True) / bound).clamp(min=1.0)
    p_in = (z_in * sharpen / fac_in).softmax(dim=1)
    p_out = (z_out * sharpen / fac_out).softmax(dim=1)
    coh = coherence_of(p_in, p_out)  # (D, K)
    penalty = ((coh - CR_TARGET) ** 2 * (depth - layer) * 0.1).mean(-1)  # (D,)
    if iteration <= ENERGY_ITERS:
        re_in, im_in = ecf(p_in)
        re_out, im_out = ecf(p_out)
        amp_in = ((re_in**2 + im_in**2 + EPS).sqrt() + EPS).sum(-1)  # (B, D)
        amp_out = ((re_out**2 + im_out**2 + EPS).sqrt() + EPS).sum(-1)
        ratio = amp_out / (amp_in + EPS)
        energy = torch.relu(ratio.log() ** 2 - math.log(2.0) ** 2)  # (B, D)
        return (penalty.unsqueeze(0) + energy).mean()
    return penalty.mean()


def ortho_loss(h_out: torch.Tensor) -> torch.Tensor:
    """Channel-orthogonality loss (Listing 2, without λ): ``mean((G − I)²)`` of the channel Gram.

    Each channel is L2-normalised along the sequence; ``G = h̃ᵀh̃`` per batch element (D, D).
    """
    h = h_out.float()
    h = h / (h.norm(dim=1, keepdim=True) + EPS)  # (B, T, D)
    gram = h.transpose(1, 2) @ h  # (B, D, D)
    eye = torch.eye(h.shape[-1], device=h.device, dtype=h.dtype)
    return ((gram - eye) ** 2).mean()


def regulariser(
    attn_io: list[tuple[torch.Tensor, torch.Tensor]],
    iteration: int,
    *,
    use_cr: bool = True,
    use_ortho: bool = True,
) -> torch.Tensor:
    """``λ_CR·Σ CR loss + λ_ortho·Σ ortho loss`` over :func:`aux_layers` (0 when none apply)."""
    depth = len(attn_io)
    cr_layers, ortho_layers = aux_layers(depth)
    total = attn_io[0][1].new_zeros((), dtype=torch.float32)
    if use_cr:
        for layer in cr_layers:
            total = total + LAMBDA_CR * cr_loss(*attn_io[layer], layer, depth, iteration)
    if use_ortho:
        for layer in ortho_layers:
            total = total + LAMBDA_ORTHO * ortho_loss(attn_io[layer][1])
    return total
