"""Per-layer depth diagnostics of a trained model, as a tidy long table.

:func:`diagnose` returns one row per ``(layer, metric)`` with columns :data:`COLUMNS`. Layers are
numbered 1…depth (block l); the metrics are

``angular_distance``       Sun et al.: arccos(cos(h_{l-1}, h_l))/π between the input and output of
                           block l (consecutive residual states), averaged over all tokens;
``angular_distance_last``  the same for the last token of each sequence only;
``increment_angle``        Liu et al.: θ(Δh_{l-1}, Δh_l) in radians, Δh_l = h_l − h_{l-1}
                           (layers 2…depth);
``norm``                   mean ‖h_l‖ over tokens;
``angle_to_final``         θ(h_{l-1}, h_D) in radians (how far block l's input is from the end);
``prune_drop``             validation loss with block l skipped minus the full loss;
``grad_norm_hidden``       ‖∂L/∂h_l‖, the gradient of the loss with respect to block l's output
                           (the hidden state), on a fixed training batch — Depth Delusion's
                           ‖∇_l L‖ (seed 003, Eq. 2 and Eq. 8: ∇_l L = J_{l+1}ᵀ⋯J_Dᵀ ∇_D L with
                           J_k = ∂h_k/∂h_{k−1});
``grad_norm_hidden_rel``   ``grad_norm_hidden`` relative to the last block (Eq. 2's ratio);
``grad_norm_params``       ‖∂L/∂θ_l‖ over block l's *parameters* on the same batch (not the
                           paper's quantity; kept because it is what the optimiser sees);
``grad_norm_params_rel``   ``grad_norm_params`` relative to the last block;
``output_variance``        variance of block l's output h_l over all tokens and channels;
``cr``                     seed 002's coherence-based redundancy (§3.1) of block l's attention
                           sub-layer, between its input h_{l-1} and h_{l-1} + attention output,
                           with batch-mean spectra over the validation batch (its size is the
                           ``batch_size`` of :func:`diagnose`; CR depends on it, see
                           :func:`scalefit.probes.cr.cr_measure`);
``cr_debiased``            the same with the 1/B bias of the batch mean removed (comparable
                           across batch sizes: 0 for unrelated input and output, 1 for coherent).

Angles and norms come from :mod:`scalefit.probes` (float64), computed on the residual states
before the final norm; :func:`mechanism_summary` adds the probes' scalar summary.
:func:`grad_decay_tau` fits ``‖∇_l L‖/‖∇_D L‖ = exp(−(D − l)/τ)`` (Depth Delusion, Eq. 2) and
:func:`tau_width_exponent` fits ``τ = c·W^a`` across widths; the trainer's grid fits τ to
``grad_norm_hidden``, the paper's definition.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from ..probes.cr import cr_measure
from .loop import evaluate

COLUMNS = ["layer", "metric", "value"]
METRICS = (
    "angular_distance",
    "angular_distance_last",
    "increment_angle",
    "norm",
    "angle_to_final",
    "prune_drop",
    "grad_norm_hidden",
    "grad_norm_hidden_rel",
    "grad_norm_params",
    "grad_norm_params_rel",
    "output_variance",
    "cr",
    "cr_debiased",
)


def hidden_state_metrics(hidden: list[torch.Tensor]) -> list[tuple[int, str, float]]:
    """Angles, norms and output variance from residual states ``[h_0 (embedding), …, h_D]``.

    The angles come from the shared probes (:func:`scalefit.probes.layer_table`, float64);
    ``hidden`` holds ``(B, T, W)`` tensors, flattened to tokens for the all-token metrics.
    """
    from ..probes import layer_table

    states = torch.stack([h.detach().double().cpu() for h in hidden])  # (D+1, B, T, W)
    every = layer_table(states.flatten(1, 2))  # rows l = 0…D: θ(h_l, h_{l+1}), …
    last = layer_table(states[:, :, -1, :])
    rows = []
    for layer in range(1, len(hidden)):
        rows.append((layer, "angular_distance", float(every["angular_distance"][layer - 1])))
        rows.append((layer, "angular_distance_last", float(last["angular_distance"][layer - 1])))
        rows.append((layer, "output_variance", float(states[layer].var())))
        rows.append((layer, "norm", float(every["norm"][layer])))
        rows.append((layer, "angle_to_final", float(every["angle_to_final"][layer - 1])))
        if layer >= 2:
            rows.append((layer, "increment_angle", float(every["dtheta"][layer - 2])))
    return rows


def _device_of(model) -> torch.device:
    """The device of a model's parameters (inputs are moved there: data batches live on CPU)."""
    return next(model.parameters()).device


def layer_gradients(model, x: torch.Tensor, y: torch.Tensor) -> dict[str, np.ndarray]:
    """Both per-block gradient norms from one backward pass: ``{"hidden": …, "params": …}``.

    ``"hidden"`` is ‖∂L/∂h_l‖ for the output h_l of each block l = 1…D, Depth Delusion's
    per-layer gradient (seed 003, Eq. 2; Eq. 8 writes it as the backward product of block
    Jacobians ∂h_k/∂h_{k−1}): the norm over the whole ``(B, T, W)`` gradient of the batch-mean
    loss with respect to the residual state after block l (before the final norm).
    ``"params"`` is the gradient norm with respect to each block's *parameters* (not the
    paper's quantity). Both have shape ``(depth,)``; ``x`` and ``y`` are moved to the model's
    device.
    """
    device = _device_of(model)
    model.zero_grad(set_to_none=True)
    out = model(x.to(device), y.to(device), return_hidden=True)
    states = out.hidden[1:]  # block outputs h_1…h_D
    for h in states:
        h.retain_grad()
    out.loss.backward()
    params, hidden = [], []
    for block, h in zip(model.blocks, states, strict=True):
        sq = sum(
            float(p.grad.double().pow(2).sum()) for p in block.parameters() if p.grad is not None
        )
        params.append(math.sqrt(sq))
        hidden.append(float(h.grad.double().norm()) if h.grad is not None else 0.0)
    model.zero_grad(set_to_none=True)
    return {"hidden": np.asarray(hidden), "params": np.asarray(params)}


def grad_decay_rate(grad_norms) -> float:
    """Return the decay rate 1/τ of ``log(g_l/g_D) = −(D − l)/τ`` (least squares, no intercept).

    Positive when gradients shrink towards the input, negative when they grow; NaN for depth 1.

    Examples
    --------
    >>> round(grad_decay_rate(np.exp(-(4 - np.arange(1, 5)) / 2.5)), 6)
    0.4
    """
    g = np.asarray(grad_norms, dtype=float)
    if g.size < 2 or not np.all(g > 0):
        return math.nan
    dist = g.size - np.arange(1, g.size + 1)  # D − l
    return -float(np.sum(dist * np.log(g / g[-1])) / np.sum(dist**2))


def grad_decay_tau(grad_norms) -> float:
    """Return the persistence length τ (Depth Delusion, Eq. 2); ``inf`` when there is no decay.

    Examples
    --------
    >>> round(grad_decay_tau(np.exp(-(4 - np.arange(1, 5)) / 2.5)), 6)
    2.5
    """
    rate = grad_decay_rate(grad_norms)
    if math.isnan(rate):
        return math.nan
    return math.inf if rate <= 0 else 1.0 / rate


def tau_width_exponent(taus: pd.DataFrame) -> dict:
    """Fit ``τ = c·W^a`` in log space over rows with ``width`` and finite positive ``tau``.

    Parameters
    ----------
    taus : pandas.DataFrame
        Columns ``width`` and ``tau`` (several rows per width are averaged in log space).

    Returns
    -------
    dict
        ``a``, ``c``, ``r2`` and ``n_widths`` (NaN values when fewer than two widths).
    """
    ok = taus[np.isfinite(taus["tau"]) & (taus["tau"] > 0)]
    per = ok.groupby("width")["tau"].apply(lambda s: float(np.exp(np.log(s).mean())))
    if len(per) < 2:
        return {"a": math.nan, "c": math.nan, "r2": math.nan, "n_widths": len(per)}
    lx, ly = np.log(per.index.to_numpy(float)), np.log(per.to_numpy(float))
    a, b = np.polyfit(lx, ly, 1)
    resid = ly - (a * lx + b)
    ss = float(np.sum((ly - ly.mean()) ** 2))
    r2 = 1 - float(np.sum(resid**2)) / ss if ss > 0 else math.nan
    return {"a": float(a), "c": float(np.exp(b)), "r2": r2, "n_widths": len(per)}


@torch.no_grad()
def mechanism_summary(model, x: torch.Tensor) -> dict[str, float]:
    """Return the probes' scalar summary of the residual stream (see the module docstring).

    Keys are prefixed ``probe_`` (e.g. ``probe_theta_mid``, ``probe_dtheta_mid``). ``x`` (token
    ids, on any device) is moved to the model's device.
    """
    from ..probes import summarize_states

    hidden = model(x.to(_device_of(model)), return_hidden=True).hidden
    states = torch.stack([h.double().cpu() for h in hidden]).flatten(1, 2)
    return {f"probe_{k}": float(v) for k, v in summarize_states(states).items() if k != "depth"}


@torch.no_grad()
def _forward_metrics(model, x: torch.Tensor) -> list[tuple[int, str, float]]:
    out = model(x, return_hidden=True, return_attn_io=True)
    rows = hidden_state_metrics(out.hidden)
    for i, (h_in, h_out) in enumerate(out.attn_io):
        rows.append((i + 1, "cr", cr_measure(h_in, h_out)))
        if h_in.shape[0] >= 2:
            rows.append((i + 1, "cr_debiased", cr_measure(h_in, h_out, debias=True)))
    return rows


def diagnose(model, data, *, eval_tokens: int = 16_384, batch_size: int = 16, step: int = 0):
    """All per-layer metrics of a trained model on held-out text; a tidy long DataFrame.

    Parameters
    ----------
    model : scalefit.train.model.Transformer
        The trained model (left in its current mode and device).
    data : scalefit.train.data.TokenData
        Token data: validation windows for the probes and pruning, a training batch (drawn at
        ``step``) for the gradient norms.
    eval_tokens : int
        Validation tokens used for pruning and the hidden-state probes.
    batch_size : int
        Sequences per batch (also the B of the CR's batch-mean spectra; ``cr_debiased`` needs
        B ≥ 2).

    Returns
    -------
    pandas.DataFrame
        Columns ``layer, metric, value``; see the module docstring for the metrics.
    """
    device = _device_of(model)
    was_training = model.training
    model.eval()
    x_val, _ = next(iter(data.val_batches(eval_tokens, batch_size)))
    rows = _forward_metrics(model, x_val.to(device))
    full = evaluate(model, data, max_tokens=eval_tokens, batch_size=batch_size)
    for i in range(model.cfg.depth):
        pruned = evaluate(
            model, data, max_tokens=eval_tokens, batch_size=batch_size, skip=frozenset({i})
        )
        rows.append((i + 1, "prune_drop", pruned - full))
    x, y = data.batch(step, batch_size)
    for kind, norms in layer_gradients(model, x, y).items():
        for i, g in enumerate(norms):
            rel = float(g / norms[-1]) if norms[-1] > 0 else math.nan
            rows.append((i + 1, f"grad_norm_{kind}", float(g)))
            rows.append((i + 1, f"grad_norm_{kind}_rel", rel))
    model.train(was_training)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.sort_values(["metric", "layer"], kind="stable").reset_index(drop=True)
