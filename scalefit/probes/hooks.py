"""Capture the residual stream of any torch model with forward hooks."""

from __future__ import annotations

from collections.abc import Sequence


def capture_residual_states(model, blocks: Sequence, *args, **kwargs):
    """Run ``model(*args, **kwargs)`` and return the residual states around ``blocks``.

    Parameters
    ----------
    model : torch.nn.Module
        Any model whose residual blocks run in order.
    blocks : sequence of torch.nn.Module
        The residual blocks (e.g. ``model.blocks``); each must take the residual state as its
        first input and return the updated state (or a tuple whose first item is it).
    *args, **kwargs
        Passed to ``model``.

    Returns
    -------
    torch.Tensor
        float32 (or float64 if the model is) tensor of shape ``(L+1, tokens, width)``: the
        input to the first block, then every block's output; batch and sequence axes are
        flattened into tokens. No final normalisation is applied.

    Examples
    --------
    >>> states = capture_residual_states(model, model.blocks, idx)  # doctest: +SKIP
    """
    import torch

    captured: list = []

    def first_input(_module, inputs):
        captured.append(inputs[0].detach())

    def output(_module, _inputs, out):
        captured.append((out[0] if isinstance(out, tuple) else out).detach())

    handles = [blocks[0].register_forward_pre_hook(first_input)]
    handles += [b.register_forward_hook(output) for b in blocks]
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    width = captured[0].shape[-1]
    dtype = torch.float64 if captured[0].dtype == torch.float64 else torch.float32
    return torch.stack([c.reshape(-1, width).to(dtype) for c in captured])
