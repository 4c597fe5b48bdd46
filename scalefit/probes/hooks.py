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

    states, _ = run_with_states(model, blocks, *args, **kwargs)
    width = states[0].shape[-1]
    dtype = torch.float64 if states[0].dtype == torch.float64 else torch.float32
    return torch.stack([c.detach().reshape(-1, width).to(dtype) for c in states])


def run_with_states(model, blocks: Sequence, *args, watch: Sequence = (), **kwargs):
    """Run ``model(*args, **kwargs)`` without gradients; return its states and watched outputs.

    The states are ``[h_0, …, h_L]`` as the model holds them: the first block's input (positional
    or the keyword ``hidden_states``), then every block's output. The outputs are those of the
    modules in ``watch``, in call order (the first item of a tuple output).
    """
    import torch

    def first(out):
        return out[0] if isinstance(out, tuple) else out

    states: list = []
    outputs: list = []
    handles = [
        blocks[0].register_forward_pre_hook(
            lambda _m, a, kw: states.append(a[0] if a else kw["hidden_states"]), with_kwargs=True
        )
    ]
    handles += [b.register_forward_hook(lambda _m, _i, o: states.append(first(o))) for b in blocks]
    handles += [m.register_forward_hook(lambda _m, _i, o: outputs.append(first(o))) for m in watch]
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    return states, outputs
