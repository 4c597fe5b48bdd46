"""Per-batch reduction of hidden states: sums per window, a token reservoir, bootstrap intervals.

A batch's hidden states are reduced as soon as they are computed and then dropped, so memory is
flat in the token budget: what grows is one row of per-layer sums per window (a few hundred
floats) and a fixed-size reservoir of per-token angle vectors for the early-exit split. Angles use
:func:`scalefit.probes.angles.angle` on float64 copies made one layer at a time.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from .._io import (
    MAX_CONFIG_BYTES,
    atomic_write_bytes,
    atomic_write_json,
    check_input_file,
    read_json,
)
from ..errors import ScaleFitError
from ._verdict import CLASSES, increment_indicators, share_key
from .angles import _to_numpy, angle

#: Per-token shares of the increment classes (the means of their 0/1 indicators), shape L.
SHARES = tuple(map(share_key, CLASSES))
#: Quantities kept per window as (sum, count) pairs; shapes in terms of depth L and k.
QUANTITIES = ("norm", "theta", "dtheta", "step", "block", *SHARES)


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


class Accumulator:
    """Running per-window sums, per-batch CR values and a seeded reservoir of token angles.

    Parameters
    ----------
    depth : int
        Number of blocks L.
    max_block : int
        k of the block distances d(l, l+n), n = 1..k.
    reservoir : int
        Tokens kept for the early-exit split (uniform sample of all tokens seen).
    seed : int
        Seeds the reservoir sampling.
    """

    def __init__(self, depth: int, *, max_block: int, reservoir: int, seed: int) -> None:
        self.depth, self.max_block, self.reservoir = depth, max_block, reservoir
        self.rng = np.random.default_rng(seed)
        self.sums: dict[str, list[np.ndarray]] = {q: [] for q in QUANTITIES}
        self.counts: dict[str, list[np.ndarray]] = {q: [] for q in QUANTITIES}
        self.cr: list[np.ndarray] = []
        self.res_theta = np.zeros((0, depth))
        self.res_doc_start = np.zeros(0, dtype=bool)
        self.res_position = np.zeros(0, dtype=np.int64)
        self.tokens_seen = 0
        self.batches = 0

    def add(self, reduced: dict, doc_start: np.ndarray, cr: np.ndarray | None = None) -> None:
        """Add one reduced batch (:func:`reduce_batch`) with its ``(B, T)`` document-start flags."""
        for q in QUANTITIES:
            values = reduced[q]
            finite = np.isfinite(values)
            self.sums[q].append(np.moveaxis(np.where(finite, values, 0.0).sum(-1), -1, 0))
            self.counts[q].append(np.moveaxis(finite.sum(-1), -1, 0))
        if cr is not None:
            self.cr.append(np.asarray(cr, dtype=np.float64))
        bsz, seq = doc_start.shape
        theta = reduced["theta"].reshape(self.depth, -1).T  # (B·T, L)
        position = np.tile(np.arange(seq), bsz)
        self._sample(theta, doc_start.reshape(-1), position)
        self.batches += 1

    def _sample(self, theta: np.ndarray, doc_start: np.ndarray, position: np.ndarray) -> None:
        n = theta.shape[0]
        index = self.tokens_seen + np.arange(n)
        fill = max(0, min(n, self.reservoir - self.tokens_seen))
        if fill:
            self.res_theta = np.concatenate([self.res_theta, theta[:fill]])
            self.res_doc_start = np.concatenate([self.res_doc_start, doc_start[:fill]])
            self.res_position = np.concatenate([self.res_position, position[:fill]])
        if n > fill:
            slot = self.rng.integers(0, index[fill:] + 1)  # Algorithm R, one draw per token
            keep = np.flatnonzero(slot < self.reservoir) + fill
            target = slot[keep - fill]
            self.res_theta[target] = theta[keep]
            self.res_doc_start[target] = doc_start[keep]
            self.res_position[target] = position[keep]
        self.tokens_seen += n

    def totals(self, q: str) -> tuple[np.ndarray, np.ndarray]:
        """Per-window ``(sums, counts)`` of quantity ``q``, shapes ``(windows, …)``."""
        return np.concatenate(self.sums[q]), np.concatenate(self.counts[q])

    def estimate(self, q: str, *, bootstrap: int, seed: int) -> dict[str, np.ndarray]:
        """Token-weighted mean of ``q`` with a percentile bootstrap over windows (95%)."""
        sums, counts = self.totals(q)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = sums.sum(0) / counts.sum(0)
            lo = hi = np.full_like(mean, np.nan)
            if bootstrap and sums.shape[0] >= 2:
                rng = np.random.default_rng(seed)
                w = rng.multinomial(
                    sums.shape[0], np.full(sums.shape[0], 1 / sums.shape[0]), size=bootstrap
                )  # (R, windows)
                flat_s, flat_c = sums.reshape(len(sums), -1), counts.reshape(len(counts), -1)
                draws = (w @ flat_s) / (w @ flat_c)
                lo, hi = (
                    np.nanpercentile(draws, p, axis=0).reshape(mean.shape) for p in (2.5, 97.5)
                )
        return {"mean": mean, "lo": lo, "hi": hi}

    def cr_estimate(self, *, bootstrap: int, seed: int) -> dict[str, np.ndarray]:
        """Mean CR per block over batches, with a bootstrap over batches."""
        if not self.cr:
            nan = np.full(self.depth, np.nan)
            return {"mean": nan, "lo": nan, "hi": nan}
        values = np.stack(self.cr)
        mean = values.mean(0)
        lo = hi = np.full_like(mean, np.nan)
        if bootstrap and len(values) >= 2:
            rng = np.random.default_rng(seed)
            idx = rng.integers(0, len(values), size=(bootstrap, len(values)))
            draws = values[idx].mean(1)
            lo, hi = np.percentile(draws, 2.5, axis=0), np.percentile(draws, 97.5, axis=0)
        return {"mean": mean, "lo": lo, "hi": hi}

    # -- checkpoints: JSON + npz, never pickle ------------------------------------------------
    def save(self, folder: Path, meta: dict) -> None:
        """Write the partial reduction to ``folder/partial.npz`` and ``partial.json`` atomically."""
        import io

        arrays = {
            "res_theta": self.res_theta,
            "res_doc_start": self.res_doc_start,
            "res_position": self.res_position,
        }
        for q in QUANTITIES:
            if self.sums[q]:
                arrays[f"sum_{q}"], arrays[f"count_{q}"] = self.totals(q)
        if self.cr:
            arrays["cr"] = np.stack(self.cr)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        atomic_write_bytes(folder / "partial.npz", buf.getvalue())
        state = {
            "tokens_seen": self.tokens_seen,
            "batches": self.batches,
            "rng": self.rng.bit_generator.state,
        }
        atomic_write_json(folder / "partial.json", {"meta": meta, "state": state})

    @classmethod
    def load(
        cls, folder: Path, meta: dict, *, depth: int, max_block: int, reservoir: int, seed: int
    ) -> Accumulator | None:
        """Return the saved partial reduction if its settings equal ``meta``, else None."""
        jpath, npath = folder / "partial.json", folder / "partial.npz"
        if not (os.path.lexists(jpath) and os.path.lexists(npath)):
            return None
        saved = read_json(
            jpath, what="partial probe state", max_bytes=MAX_CONFIG_BYTES, max_int_digits=40
        )
        if not isinstance(saved, dict) or saved.get("meta") != json.loads(json.dumps(meta)):
            return None
        check_input_file(npath, what="partial probe arrays (.npz)")
        try:
            return cls._restore(npath, saved, depth, max_block, reservoir, seed)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError) as exc:
            msg = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise ScaleFitError(
                f"{folder}: its partial probe state cannot be resumed ({msg}); delete "
                f"partial.json and partial.npz to start again."
            ) from None

    @classmethod
    def _restore(cls, npath, saved, depth, max_block, reservoir, seed) -> Accumulator:
        acc = cls(depth, max_block=max_block, reservoir=reservoir, seed=seed)
        with np.load(npath, allow_pickle=False) as data:
            acc.res_theta = data["res_theta"]
            acc.res_doc_start = data["res_doc_start"]
            acc.res_position = data["res_position"]
            present = [q for q in QUANTITIES if f"sum_{q}" in data]
            if present and len(present) < len(QUANTITIES):
                raise KeyError("saved by an older version without the increment shares")
            for q in QUANTITIES:
                if f"sum_{q}" in data:
                    acc.sums[q], acc.counts[q] = [data[f"sum_{q}"]], [data[f"count_{q}"]]
            if "cr" in data:
                acc.cr = list(data["cr"])
        acc.tokens_seen = int(saved["state"]["tokens_seen"])
        acc.batches = int(saved["state"]["batches"])
        acc.rng.bit_generator.state = saved["state"]["rng"]
        return acc
