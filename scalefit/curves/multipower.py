"""Inputs of the multi-power law (Luo et al. 2025): a fixed-size quadrature of each decay history.

The law's loss drop at step ``t`` sums over every earlier update ``k``:

    LD(t) = sum_{k<=t} d_k G(eta_k^-gamma S_k(t)),   d_k = eta_{k-1} - eta_k,
    S_k(t) = eta_k + ... + eta_t,                    G(u) = 1 - (C u + 1)^-beta.

``gamma``, ``C`` and ``beta`` are fitted, so the sum cannot be done once for all; but a fit reads a
fixed number of input columns per row. :func:`quadrature` therefore writes each checkpoint's
history as ``K`` nodes ``(w_j, eta_j, S_j)`` and the law computes
``sum_j w_j G(eta_j^-gamma S_j)``:

* only updates with ``d_k != 0`` count: where the learning rate is constant there is nothing
  to approximate, and a history with at most ``K`` changes (a step schedule) is exact, one node
  per change;
* otherwise the changes are cut into ``K`` groups of consecutive updates, so that each group
  holds at most ``1/K`` of a measure that adds the share of the total ``|d|`` and the share of
  the range of ``log S_k(t)``: a group is either a small part of the decay or a narrow span of
  ``log S``, where ``G`` barely changes. A group's node has ``w_j`` the sum of its ``d_k`` and
  ``log eta_j``, ``log S_j`` the ``|d|``-weighted means of ``log eta_k`` and ``log S_k(t)``.

Drops count from the end of warm-up on (the paper's ``eta_0`` is the peak): the increases of a
warm-up are not decay. Logarithms of zero (an lr that reached 0) are taken at ``1e-300``, where
``G`` is 0 or 1 as the exact sum's limit is.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..core.errors import ScaleFitError
from ..core.schedule import decay_drops
from ..laws import Law
from ..laws.catalogue import MPL_SEGMENTS, mpl_inputs

#: Key of ``DataFrame.attrs`` under which :func:`scalefit.curves.prepare` keeps lr histories.
HISTORY_KEY = "scalefit_lr_history"
_TINY = 1e-300


class LrHistory(Mapping):
    """Each run's learning rates and warm-up, kept by ``prepare`` for the multi-power law.

    Immutable, so pandas copies of a prepared frame share it rather than copying the arrays.
    """

    def __init__(self, runs: Mapping[str, tuple[np.ndarray, int]]) -> None:
        self._runs = {str(k): (np.asarray(v[0], float), int(v[1])) for k, v in runs.items()}

    def __getitem__(self, run: str) -> tuple[np.ndarray, int]:
        return self._runs[str(run)]

    def __iter__(self):
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)

    def __deepcopy__(self, memo) -> LrHistory:
        return self

    def __eq__(self, other) -> bool:
        return self is other

    __hash__ = object.__hash__


def quadrature(
    lr: np.ndarray, steps, *, segments: int = MPL_SEGMENTS, warmup: int | None = None
) -> dict[str, np.ndarray]:
    """The multi-power law's loss-drop nodes at each checkpoint, as input columns.

    Parameters
    ----------
    lr : array, shape (T,)
        Learning rate of updates ``1 .. T``.
    steps : array-like of int
        Checkpoints (``1 .. T``).
    segments : int, default 16
        Nodes per checkpoint, ``K``.
    warmup : int, optional
        As in :func:`scalefit.core.schedule.decay_drops`.

    Returns
    -------
    dict
        ``mpl_w{j}``, ``mpl_loglr{j}``, ``mpl_logs{j}`` for ``j = 1 .. K`` (see
        :func:`scalefit.laws.catalogue.mpl_inputs`), one value per checkpoint.
    """
    eta = np.asarray(lr, dtype=float)
    idx = np.asarray(steps, dtype=int).reshape(-1)
    if idx.size and (idx.min() < 1 or idx.max() > eta.size):
        raise ScaleFitError(f"checkpoint steps must lie in 1 .. {eta.size}.")
    k = int(segments)
    d = decay_drops(eta, warmup)
    nz = np.flatnonzero(d)
    area = np.concatenate([[0.0], np.cumsum(eta)])
    out = np.zeros((3, idx.size, k))
    for row, t in enumerate(idx):
        pos = nz[nz < t]  # 0-based updates k - 1 <= t - 1
        if pos.size:
            out[:, row] = _checkpoint(d[pos], eta[pos], area[t] - area[pos], k)
    cols = {}
    for j in range(k):
        cols[f"mpl_w{j + 1}"], cols[f"mpl_loglr{j + 1}"], cols[f"mpl_logs{j + 1}"] = out[:, :, j]
    return cols


def _checkpoint(d: np.ndarray, eta: np.ndarray, s: np.ndarray, k: int) -> np.ndarray:
    """``(3, k)`` nodes of one checkpoint; decrements to an lr of 0 get the last node alone."""
    zero = eta == 0
    if not zero.any() or zero.all() or d.size <= k:
        return _nodes(d, _log(eta), _log(s), k)
    out = np.empty((3, k))
    out[:, : k - 1] = _nodes(d[~zero], _log(eta[~zero]), _log(s[~zero]), k - 1)
    mass = np.abs(d[zero])
    out[:, k - 1] = d[zero].sum(), np.log(_TINY), np.sum(mass * _log(s[zero])) / mass.sum()
    return out


def _log(x: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(x, _TINY))


def _nodes(d: np.ndarray, log_eta: np.ndarray, log_s: np.ndarray, k: int) -> np.ndarray:
    """``(3, k)`` nodes of one checkpoint's changes (in update order)."""
    out = np.zeros((3, k))
    if d.size <= k:
        out[:, : d.size] = d, log_eta, log_s
        return out
    mass = np.abs(d)
    share = (np.cumsum(mass) - 0.5 * mass) / mass.sum()
    span = log_s[0] - log_s[-1]
    place = (log_s[0] - log_s) / span if span > 0 else np.zeros_like(log_s)
    group = np.minimum((0.5 * (share + place) * k).astype(int), k - 1)
    weight = np.bincount(group, mass, k)
    has = weight > 0
    out[0] = np.bincount(group, d, k)
    for i, v in ((1, log_eta), (2, log_s)):
        out[i, has] = np.bincount(group, mass * v, k)[has] / weight[has]
    return out


def segments_of(law: Law) -> int | None:
    """Quadrature nodes a law reads (``None`` for a law without the multi-power inputs)."""
    k = law.options.get("segments")
    if not isinstance(k, int) or not set(mpl_inputs(k)) <= set(law.inputs):
        return None
    return k


def with_quadrature(frame: pd.DataFrame, law: Law) -> pd.DataFrame:
    """``frame`` with the quadrature columns ``law`` reads, from the lr histories of ``prepare``.

    A law without them, or a frame that has them already, comes back unchanged.
    """
    k = segments_of(law)
    if k is None or set(mpl_inputs(k)) <= set(frame.columns):
        return frame
    history = frame.attrs.get(HISTORY_KEY)
    if history is None:
        raise ScaleFitError(
            f"law {law.name!r} needs each run's learning-rate history: pass the output of "
            "scalefit.curves.prepare (or add the columns of scalefit.curves.multipower.quadrature)."
        )
    cols = np.zeros((len(frame), 3 * k))
    names = mpl_inputs(k)
    for run, rows in frame.groupby("run", sort=False).indices.items():
        eta, warm = history[run]
        q = quadrature(eta, frame["step"].to_numpy()[rows], segments=k, warmup=warm)
        cols[rows] = np.column_stack([q[n] for n in names])
    out = pd.concat([frame, pd.DataFrame(cols, columns=list(names), index=frame.index)], axis=1)
    out.attrs = dict(frame.attrs)
    return out
