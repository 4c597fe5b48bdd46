"""Angles, norms and per-layer summaries of residual hidden states (float64 internally).

Every function takes the residual stream of one model as ``states``: an array-like of shape
``(L+1, tokens, width)`` — the input to the first block followed by the output of every block —
or a list of ``L+1`` arrays of shape ``(tokens, width)``. Torch tensors (any dtype, any device)
and NumPy arrays are accepted; the final normalisation must not be applied to the last state.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.errors import ScaleFitError
from ._verdict import CLASSES, increment_indicators, share_key

#: Per-token shares of the increment classes (the means of their 0/1 indicators), shape L.
SHARES = tuple(map(share_key, CLASSES))


def as_states(states) -> np.ndarray:
    """Convert hidden states to a float64 array of shape ``(L+1, tokens, width)``.

    Raises
    ------
    ScaleFitError
        Fewer than two states, wrong number of dimensions, or non-finite values.
    """
    if isinstance(states, list | tuple):
        states = [_to_numpy(s) for s in states]
        try:
            arr = np.stack(states)
        except ValueError as exc:
            raise ScaleFitError(f"hidden states must all have the same shape ({exc}).") from exc
    else:
        arr = _to_numpy(states)
    if arr.ndim == 2:
        arr = arr[:, None, :]
    if arr.ndim != 3:
        raise ScaleFitError(
            f"hidden states must have shape (L+1, tokens, width), got {tuple(arr.shape)}."
        )
    if arr.shape[0] < 2:
        raise ScaleFitError(f"need at least 2 hidden states (L ≥ 1), got {arr.shape[0]}.")
    if not np.isfinite(arr).all():
        raise ScaleFitError("hidden states contain NaN or inf.")
    return arr


def _to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor: upcast on its device, then move
        x = x.detach()
        x = x.double() if x.is_floating_point() else x
        return x.cpu().numpy().astype(np.float64)
    return np.asarray(x, dtype=np.float64)


def angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle between vectors along the last axis, in radians, accurate at all angles.

    Uses θ = 2·atan2(‖â − b̂‖, ‖â + b̂‖) instead of arccos, which loses precision near 0 and π.
    A zero vector gives NaN.

    Examples
    --------
    >>> float(angle(np.array([1.0, 0.0]), np.array([0.0, 2.0])))  # doctest: +ELLIPSIS
    1.5707963...
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    na = np.linalg.norm(a, axis=-1, keepdims=True)
    nb = np.linalg.norm(b, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        ua, ub = a / na, b / nb
        theta = 2.0 * np.arctan2(np.linalg.norm(ua - ub, axis=-1), np.linalg.norm(ua + ub, axis=-1))
    return np.where((na[..., 0] > 0) & (nb[..., 0] > 0), theta, np.nan)


def token_angles(states) -> np.ndarray:
    """Per-token step angles θ(h_l, h_{l+1}), shape ``(tokens, L)``."""
    h = as_states(states)
    return angle(h[:-1], h[1:]).T


def layer_table(states):
    """Per-layer probes as a DataFrame (averages over tokens).

    Columns: ``layer`` (0…L), ``norm`` (mean ‖h_l‖), ``theta`` (θ(h_l, h_{l+1}), NaN at l = L),
    ``angular_distance`` (θ/π, Sun et al.), ``dtheta`` (θ(Δh_l, Δh_{l+1}) with Δh_l =
    h_{l+1} − h_l; NaN for the last two rows), ``angle_to_final`` (θ(h_l, h_L)), and, on the
    rows of ``dtheta``, the shares of tokens whose increment pair is orthogonal, correlated or
    anti-correlated (``share_orthogonal``, ``share_correlated``, ``share_anticorrelated``; the
    bounds are :data:`scalefit.probes._verdict.THRESHOLDS`).
    """
    h = as_states(states)
    reduced = reduce_batch(h[:, None], max_block=1)  # one batch of all the tokens
    table = state_table({q: nanmean_rows(v[..., 0, :]) for q, v in reduced.items()})
    table.insert(3, "angular_distance", table["theta"] / math.pi)
    table.insert(5, "angle_to_final", nanmean_rows(angle(h, h[-1:])))
    return table


def state_table(mean: dict):
    """Rows 0…L (columns as :func:`layer_table`) from per-block means of :func:`reduce_batch`.

    NaN (without a warning) where a mean is undefined, e.g. every increment zero.
    """
    import pandas as pd

    depth = len(mean["theta"])
    return pd.DataFrame(
        {
            "layer": np.arange(depth + 1),
            "norm": mean["norm"],
            "theta": np.append(mean["theta"], np.nan),
            **{q: np.append(mean[q][1:], [np.nan, np.nan]) for q in ("dtheta", *SHARES)},
        }
    )


def reduce_batch(hidden, *, max_block: int) -> dict[str, np.ndarray]:
    """Reduce one batch of residual states to per-token values.

    Parameters
    ----------
    hidden : sequence of torch.Tensor or numpy.ndarray
        ``L+1`` states of shape ``(B, T, W)``: the input of block 1, then every block's output
        (no final normalisation).
    max_block : int
        Largest n of the block angular distance d(l, l+n).

    Returns
    -------
    dict
        Arrays over ``(…, B, T)`` tokens: ``norm`` (L+1), ``theta`` (L), ``dtheta`` (L; row 0
        NaN), ``step`` (L, ‖Δh‖/‖h_in‖), ``block`` (k, L; θ/π, NaN where l+n > L), and the
        increment-class indicators of ``dtheta`` (:data:`SHARES`, 1.0 or 0.0, NaN with it).
    """
    depth = len(hidden) - 1
    bsz, seq, _ = hidden[0].shape
    shape = (bsz, seq)
    out = {
        "norm": np.empty((depth + 1, *shape)),
        "theta": np.empty((depth, *shape)),
        "dtheta": np.full((depth, *shape), np.nan),
        "step": np.empty((depth, *shape)),
        "block": np.full((max_block, depth, *shape), np.nan),
    }
    window: list[np.ndarray] = []  # the last max_block states, float64 (B, T, W)
    prev_delta = None
    for layer, state in enumerate(hidden):
        cur = _to_numpy(state)
        out["norm"][layer] = np.linalg.norm(cur, axis=-1)
        for n in range(1, min(max_block, layer) + 1):
            out["block"][n - 1, layer - n] = angle(window[-n], cur) / math.pi
        if layer >= 1:
            prev = window[-1]
            out["theta"][layer - 1] = out["block"][0, layer - 1] * math.pi
            delta = cur - prev
            with np.errstate(invalid="ignore", divide="ignore"):
                out["step"][layer - 1] = np.linalg.norm(delta, axis=-1) / out["norm"][layer - 1]
            if prev_delta is not None:
                out["dtheta"][layer - 1] = angle(prev_delta, delta)
            prev_delta = delta
        window.append(cur)
        if len(window) > max_block:
            window.pop(0)
    out.update(increment_indicators(out["dtheta"]))
    return out


def nanmean_rows(values: np.ndarray) -> np.ndarray:
    """Mean over the last axis ignoring NaN; NaN (without a warning) where a row is all NaN."""
    finite = np.isfinite(values)
    count = finite.sum(axis=-1)
    total = np.where(finite, values, 0.0).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def middle_layers(depth: int) -> slice:
    """Return the 'middle' blocks used for summaries: [⌊L/4⌋, L − ⌊L/4⌋), at least one block."""
    lo = depth // 4
    hi = max(depth - depth // 4, lo + 1)
    return slice(lo, hi)


def summarize_states(states) -> dict[str, float]:
    """Scalar summaries of one model's residual stream.

    Returns
    -------
    dict
        ``depth`` (L), ``theta_mid`` (mean step angle over the middle blocks, see
        :func:`middle_layers`), ``dtheta_mid`` (mean increment angle over the middle pairs),
        ``theta_first``, ``theta_last``, ``norm_ratio`` (‖h_L‖ / ‖h_0‖), and the per-token
        increment shares over the middle pairs (``share_orthogonal``, ``share_correlated``,
        ``share_anticorrelated``) with their spread over those pairs (``…_sd``).
    """
    return summarize_table(layer_table(states))


def summarize_table(table) -> dict[str, float]:
    """Scalar summaries (see :func:`summarize_states`) of an already reduced per-layer table.

    ``table`` has the columns of :func:`layer_table` (``layer``, ``norm``, ``theta``, ``dtheta``;
    the share columns are optional) with rows 0…L; streaming probes that reduce states batch by
    batch use this directly.
    """
    depth = len(table) - 1
    mid = middle_layers(depth)
    theta = table["theta"].to_numpy()[:depth]
    norms = table["norm"].to_numpy()
    out = {
        "depth": depth,
        "theta_mid": float(np.nanmean(theta[mid])),
        "dtheta_mid": _middle_pairs(table, "dtheta", depth)[0],
        "theta_first": float(theta[0]),
        "theta_last": float(theta[-1]),
        "norm_ratio": float(norms[-1] / norms[0]) if norms[0] > 0 else math.nan,
    }
    for k in map(share_key, CLASSES):
        out[k], out[k + "_sd"] = _middle_pairs(table, k, depth)
    return out


def _middle_pairs(table, column: str, depth: int) -> tuple[float, float]:
    """Mean and standard deviation of a per-pair column over the middle pairs (NaN if none)."""
    if column not in table or depth < 2:
        return math.nan, math.nan
    values = table[column].to_numpy(dtype=np.float64)[: depth - 1]
    mid = values[middle_layers(depth)]
    mid = mid if mid.size else values
    mid = mid[np.isfinite(mid)]
    return (float(mid.mean()), float(mid.std())) if mid.size else (math.nan, math.nan)
