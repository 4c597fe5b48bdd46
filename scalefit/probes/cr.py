"""Coherence-based redundancy (CR) measure of a layer (seed 002, §3.1).

The measure treats each channel of a layer's input and output hidden states
``(B, T, D)`` as a distribution over the sequence index: standardise along T, softmax along T, take
the empirical characteristic function at the ``K = T//2 + 1`` non-negative DFT frequencies, and
compute the magnitude-squared coherence ``|S_xy|² / (S_xx·S_yy)`` with batch-mean spectra. It lies
in [0, 1]: near 1 means an insufficient (almost linear) transformation, near 0 an irrelevant one.
The paper applies it to the attention sub-layer of each block (its Listing 2 reads
``attention_sub_layer_inputs/outputs``; §3.2 discusses attention sub-layers 1-10).

**CR depends on the batch size B.** The spectra are means over the B sequences of the batch, and the
coherence of a B-sample mean is biased towards 1/B: for an output unrelated to its input,
E[coherence] = 1/B at every frequency but k = 0 (where it is exactly 1), so CR ≈ (1 + (K−1)/B)/K.
With T = 128 (K = 65) that is ≈ 1 / 0.51 / 0.14 / 0.031 at B = 1 / 2 / 8 / 64; we measure 0.998 /
0.518 / 0.137 / 0.030 on independent Gaussian noise with D = 32 channels. At B = 1 CR is ≈ 1 for any
layer. The paper's [0.3, 0.7] band (§3.2) and its target 0.35 were read at the paper's (unstated)
batch, so they do not transfer to other batch sizes. :func:`cr_measure` with ``debias=True`` removes
the bias: per channel and frequency it returns (B·C − 1)/(B − 1), which is 0 in expectation for
unrelated input and output and 1 for perfectly coherent ones at every B ≥ 2 (for a true coherence γ²
the batch-mean estimate has expectation ≈ γ² + (1 − γ²)/B, which the correction maps back to γ²).
The k = 0 frequency stays 1 by construction (every distribution's characteristic function is 1
there), so unrelated layers read ≈ 1/K rather than 0, as in the paper's mean. The correction is
first order, so a little dependence on B is left at small B. Measured (D = 32, T = 128, output =
input + equal-power noise, 5 seeds): raw ≈ 0.50 / 0.40 / 0.385, debiased ≈ 0.33 / 0.36 / 0.375 at B
= 4 / 16 / 64. It is our addition, not the paper's measure; report it beside the raw CR and say
which B the raw value used.
"""

from __future__ import annotations

import math

import torch

EPS = 1e-8


def ecf(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Real and imaginary parts of the empirical characteristic function at ``K = T//2 + 1``."""
    # p: (B, T, D) distributions over t → real and imaginary parts (B, D, K)
    T = p.shape[1]
    k = torch.arange(T // 2 + 1, device=p.device, dtype=p.dtype)
    t = torch.arange(T, device=p.device, dtype=p.dtype)
    ang = 2 * math.pi * torch.outer(k, t) / T  # (K, T)
    pt = p.transpose(1, 2)  # (B, D, T)
    return pt @ ang.cos().T, pt @ ang.sin().T


def standardise(h: torch.Tensor) -> torch.Tensor:
    """Each channel of ``(B, T, D)`` standardised along the sequence."""
    return (h - h.mean(dim=1, keepdim=True)) / (h.std(dim=1, keepdim=True) + EPS)


def coherence_of(p_in: torch.Tensor, p_out: torch.Tensor) -> torch.Tensor:
    """Coherence ``(D, K)`` of two ``(B, T, D)`` distributions over ``t`` (batch-mean spectra)."""
    re_in, im_in = ecf(p_in)
    re_out, im_out = ecf(p_out)
    # S_xy = mean_B(C_in · conj(C_out)) with C = Re + i·Im
    sxy_re = (re_in * re_out + im_in * im_out).mean(0)
    sxy_im = (im_in * re_out - re_in * im_out).mean(0)
    sxx = (re_in**2 + im_in**2).mean(0) + EPS
    syy = (re_out**2 + im_out**2).mean(0) + EPS
    return (sxy_re**2 + sxy_im**2) / (sxx * syy + EPS)  # (D, K) in [0, 1]


def coherence(h_in: torch.Tensor, h_out: torch.Tensor) -> torch.Tensor:
    """Magnitude-squared coherence per channel and frequency, shape ``(D, K)`` (seed 002 §3.1).

    Computed in float64 (a diagnostic; the loss uses float32 and keeps the graph).
    """
    h_in, h_out = h_in.double(), h_out.double()
    return coherence_of(standardise(h_in).softmax(dim=1), standardise(h_out).softmax(dim=1))


def cr_measure(h_in: torch.Tensor, h_out: torch.Tensor, *, debias: bool = False) -> float:
    """CR of one layer: the mean coherence over channels and frequencies.

    Parameters
    ----------
    h_in, h_out : torch.Tensor
        ``(B, T, D)`` input and output of the layer (the paper: of the attention sub-layer).
    debias : bool, default False
        False: the paper's measure, in [0, 1], biased towards 1/B by the batch mean (see the
        module docstring). True: (B·C − 1)/(B − 1) per channel and frequency before the mean,
        0 in expectation for unrelated input and output at any B; needs B ≥ 2 and can be
        slightly negative by chance.

    Examples
    --------
    >>> x = torch.randn(8, 32, 16)
    >>> round(cr_measure(x, x), 3)  # the ε of Listing 2 keeps it a hair below 1
    1.0
    >>> round(cr_measure(x, x, debias=True), 3)
    1.0
    """
    with torch.no_grad():
        coh = coherence(h_in, h_out)
        if debias:
            batch = h_in.shape[0]
            if batch < 2:
                raise ValueError(f"the debiased CR needs a batch of at least 2, got {batch}.")
            coh = (batch * coh - 1.0) / (batch - 1.0)
        return float(coh.mean())
