"""Per-batch reduction of hidden states: sums per window, a token reservoir, bootstrap intervals.

A batch's hidden states are reduced as soon as they are computed and then dropped, so memory is
flat in the token budget: what grows is one row of per-layer sums per window (a few hundred
floats) and a fixed-size reservoir of per-token angle vectors for the early-exit split. Each batch
is reduced by :func:`scalefit.probes.angles.reduce_batch`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..core._io import (
    MAX_CONFIG_BYTES,
    atomic_write_bytes,
    atomic_write_json,
    check_input_file,
    read_json,
)
from ..core.errors import ScaleFitError, one_line
from .angles import SHARES

#: Quantities kept per window as (sum, count) pairs; shapes in terms of depth L and k.
QUANTITIES = ("norm", "theta", "dtheta", "step", "block", *SHARES)


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
        return _bootstrap_mean(*self.totals(q), bootstrap=bootstrap, seed=seed)

    def cr_estimate(self, *, bootstrap: int, seed: int) -> dict[str, np.ndarray]:
        """Mean CR per block over batches, with a bootstrap over batches."""
        if not self.cr:
            nan = np.full(self.depth, np.nan)
            return {"mean": nan, "lo": nan, "hi": nan}
        values = np.stack(self.cr)
        return _bootstrap_mean(values, np.ones_like(values), bootstrap=bootstrap, seed=seed)

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
            raise ScaleFitError(
                f"{folder}: its partial probe state cannot be resumed ({one_line(exc, 200)}); "
                f"delete partial.json and partial.npz to start again."
            ) from None

    @classmethod
    def _restore(cls, npath, saved, depth, max_block, reservoir, seed) -> Accumulator:
        acc = cls(depth, max_block=max_block, reservoir=reservoir, seed=seed)
        with np.load(npath, allow_pickle=False) as data:
            acc.res_theta = data["res_theta"]
            acc.res_doc_start = data["res_doc_start"]
            acc.res_position = data["res_position"]
            for q in QUANTITIES if "sum_norm" in data else ():  # none before the first batch
                acc.sums[q], acc.counts[q] = [data[f"sum_{q}"]], [data[f"count_{q}"]]
            if "cr" in data:
                acc.cr = list(data["cr"])
        acc.tokens_seen = int(saved["state"]["tokens_seen"])
        acc.batches = int(saved["state"]["batches"])
        acc.rng.bit_generator.state = saved["state"]["rng"]
        return acc


def _bootstrap_mean(sums, counts, *, bootstrap: int, seed: int) -> dict[str, np.ndarray]:
    """``sums.sum(0) / counts.sum(0)`` with a 95% percentile bootstrap over the first axis."""
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums.sum(0) / counts.sum(0)
        lo = hi = np.full_like(mean, np.nan)
        if bootstrap and sums.shape[0] >= 2:
            rng = np.random.default_rng(seed)
            n = sums.shape[0]
            w = rng.multinomial(n, np.full(n, 1 / n), size=bootstrap)  # (R, rows)
            draws = (w @ sums.reshape(n, -1)) / (w @ counts.reshape(n, -1))
            lo, hi = (np.nanpercentile(draws, p, axis=0).reshape(mean.shape) for p in (2.5, 97.5))
    return {"mean": mean, "lo": lo, "hi": hi}
