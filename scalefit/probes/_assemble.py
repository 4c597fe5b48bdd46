"""Assemble a language-model probe's result: per-layer tables, split, verdict, pruning rows."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..core._readonly import ReadOnlyMappings
from ._hfmodel import LoadedModel
from ._prune import _key
from ._reduce import Accumulator
from ._verdict import loglog_slope
from .angles import SHARES, middle_layers, state_table, summarize_table
from .mechanism import Verdict, split_token_angles, verdict_from_evidence


@dataclass(frozen=True)
class HFProbeResult(ReadOnlyMappings):
    """Everything :func:`probe_hf` measured.

    Attributes
    ----------
    layers : pandas.DataFrame
        One row per block ``layer`` = 1…L (block l maps h_{l-1} to h_l): ``theta`` (rad),
        ``angular_distance`` (θ/π), ``dtheta`` (θ between the increments of blocks l−1 and l,
        l ≥ 2), ``step`` (‖Δh‖/‖h_{l-1}‖), ``norm_in``/``norm_out``, ``cr`` and
        ``cr_debiased`` (seed 002's CR on block l's attention sub-layer, raw at the batch size
        ``summary["cr_batch"]`` and batch-size independent), each with ``_lo``/``_hi`` 95%
        bootstrap bounds, and ``prune_drop`` (metric with block l removed minus the full
        model's).
    distances : pandas.DataFrame
        Block distances d(l, l+n) = θ(h_{l-1}, h_{l-1+n})/π: ``layer`` (first block of the
        span), ``n``, ``distance``, ``distance_lo``, ``distance_hi``.
    pruning : pandas.DataFrame
        ``removed`` (e.g. ``"3"`` or ``"4-6"``), ``n_removed``, ``metric``, ``drop``.
    split : dict
        Early-exit split of the token reservoir, with document-start shares.
    verdict : Verdict
        Mechanism verdict with its evidence.
    summary : dict
        JSON-safe settings and scalar results.
    """

    layers: pd.DataFrame
    distances: pd.DataFrame
    pruning: pd.DataFrame
    split: dict
    verdict: Verdict
    summary: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Return a JSON-safe summary (settings, scalars, split shares, verdict)."""
        split = {k: v for k, v in self.split.items() if np.ndim(v) == 0}
        return {**self.summary, "split": split, "verdict": self.verdict.to_dict()}

    def save(self, out: str | Path) -> list[Path]:
        """Write ``layers.csv``, ``block_distance.csv``, ``pruning.csv`` and ``summary.json``.

        Returns the paths written; :func:`scalefit.plot.probes.write_probe_plots` draws the figures.
        """
        from ..core._io import atomic_write_csv, atomic_write_json

        out = Path(out)
        return [
            atomic_write_csv(out / "layers.csv", self.layers),
            atomic_write_csv(out / "block_distance.csv", self.distances),
            atomic_write_csv(out / "pruning.csv", self.pruning),
            atomic_write_json(out / "summary.json", self.to_dict()),
        ]


def refusal_of(lm: LoadedModel) -> str | None:
    """Why the mechanism signatures do not apply to this model (None when they do)."""
    if lm.encoder:
        return (
            f"'{lm.family}' is a bidirectional encoder with post-LN blocks (each block normalises "
            "the stream, so consecutive states are not one residual stream updated in small "
            "steps); Liu et al. measured the signatures on decoders (Pythia) and a residual toy "
            "(seed 000 l. 19-20, 71)"
        )
    return None


def summary_of(acc: Accumulator) -> dict:
    """Scalar summary (:func:`~scalefit.probes.angles.summarize_table`) of a reduction."""
    est = {q: acc.estimate(q, bootstrap=0, seed=0) for q in ("norm", "theta", "dtheta", *SHARES)}
    return summarize_table(state_table({q: e["mean"] for q, e in est.items()}))


def assemble(
    lm: LoadedModel,
    acc: Accumulator,
    *,
    bootstrap: int,
    seed: int,
    init: dict | None = None,
    cr_batch: int | None = None,
) -> HFProbeResult:
    """The probe result of a finished reduction: tables, early-exit split, verdict, summary."""
    depth = lm.depth
    est = {
        q: acc.estimate(q, bootstrap=bootstrap, seed=seed)
        for q in ("norm", "theta", "dtheta", "step", "block", *SHARES)
    }
    crs = acc.cr_estimate(bootstrap=bootstrap, seed=seed)
    layers = pd.DataFrame({"layer": np.arange(1, depth + 1)})
    for name, q, scale in (
        ("theta", "theta", 1.0),
        ("angular_distance", "theta", 1 / math.pi),
        ("dtheta", "dtheta", 1.0),
        ("step", "step", 1.0),
    ):
        for part in ("mean", "lo", "hi"):
            layers[name + ("" if part == "mean" else f"_{part}")] = est[q][part] * scale
    layers["norm_in"] = est["norm"]["mean"][:-1]
    layers["norm_out"] = est["norm"]["mean"][1:]
    for part in ("mean", "lo", "hi"):
        values = np.broadcast_to(crs[part], (2, depth))  # rows: raw, debiased
        layers["cr" + ("" if part == "mean" else f"_{part}")] = values[0]
        layers["cr_debiased" + ("" if part == "mean" else f"_{part}")] = values[1]
    distances = pd.DataFrame(
        [
            {
                "layer": start,
                "n": n,
                **{
                    f"distance{'' if p == 'mean' else '_' + p}": est["block"][p][n - 1, start - 1]
                    for p in ("mean", "lo", "hi")
                },
            }
            for n in range(1, acc.max_block + 1)
            for start in range(1, depth - n + 2)
        ]
    )
    summary = summarize_table(state_table({q: e["mean"] for q, e in est.items()}))
    split = _early_exit_split(acc)
    verdict = verdict_from_evidence(
        {depth: summary},
        split,
        init=None if init is None else {depth: init["summary"]},
        losses=None if init is None or "nll" not in init else {depth: init["nll"]},
        loss_kind="nll",
        refusal=refusal_of(lm),
    )
    info = {
        "model": lm.name,
        "family": lm.family,
        "task": lm.task,
        "depth": depth,
        "final_norm_excluded": lm.final_norm,
        "tokens": int(acc.tokens_seen),
        "seed": seed,
        "bootstrap": bootstrap,
        "cr_on": "attention sub-layer" if cr_batch else None,
        "cr_batch": cr_batch,
        "init_reference": init,
        **{k: v for k, v in summary.items()},
        "theta_layer_slope": _layer_slope(layers["theta"].to_numpy()),
    }
    return HFProbeResult(layers, distances, pd.DataFrame(), split, verdict, info)


def _early_exit_split(acc: Accumulator) -> dict:
    """The early-exit split of the reservoir's tokens, with where its early tokens sit."""
    split = split_token_angles(acc.res_theta)
    early = split["labels"].astype(bool)
    split["tokens"] = int(early.size)
    split["doc_start_share_of_early"] = (
        float(acc.res_doc_start[early].mean()) if early.any() else math.nan
    )
    split["early_share_of_doc_starts"] = (
        float(early[acc.res_doc_start].mean()) if acc.res_doc_start.any() else math.nan
    )
    split["window_start_share_of_early"] = (
        float((acc.res_position[early] == 0).mean()) if early.any() else math.nan
    )
    return split


def _layer_slope(theta: np.ndarray) -> float:
    """Slope of log θ_l against log l over the middle blocks (within one model)."""
    idx = np.arange(1, theta.size + 1)[middle_layers(theta.size)]
    return loglog_slope(idx, theta[idx - 1])


def with_pruning(result, pruning, lm, *, tokens_requested, seq_len) -> HFProbeResult:
    layers = result.layers.copy()
    summary = dict(
        result.summary,
        tokens_requested=tokens_requested,
        seq_len=seq_len,
        windows=int(result.summary["tokens"] // seq_len),
    )
    frame = pd.DataFrame(columns=["removed", "n_removed", "metric", "drop"])
    if pruning:
        totals = pruning["totals"]
        full = totals["full"][0] / max(totals["full"][1], 1)
        rows = []
        for v in pruning["variants"]:
            s, c = totals[_key(v)]
            metric = s / max(c, 1)
            drop = metric - full if lm.task != "representation" else metric
            rows.append({"removed": _key(v), "n_removed": len(v), "metric": metric, "drop": drop})
        frame = pd.DataFrame(rows)
        single = frame[frame["n_removed"] == 1]
        layers["prune_drop"] = single["drop"].to_numpy()
        summary["prune_metric"] = {
            "causal": "next-token NLL (nats)",
            "masked": "masked-token NLL (nats)",
            "representation": "angular distance of the final hidden state",
        }[lm.task]
        summary["full_metric"] = full
        summary["prune_tokens"] = int(totals["full"][1])
    else:
        layers["prune_drop"] = np.nan
    return HFProbeResult(layers, result.distances, frame, result.split, result.verdict, summary)
