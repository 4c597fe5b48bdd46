"""Layer probes for pre-trained Hugging Face language models (optional extra ``hf``).

:func:`probe_hf` streams a local text corpus through a causal LM, a masked LM or a bare encoder,
reduces every batch's residual states at once (memory is flat in the token budget) and returns a
:class:`HFProbeResult`: per-layer angles θ(h_l, h_{l+1}), increment angles θ(Δh_l, Δh_{l+1}),
norms, relative step sizes, Sun et al.'s angular distance and Gromov et al.'s block distances
d(l, l+n), the CR measure of seed 002, the early-exit split and the mechanism verdict (the same
functions :mod:`scalefit.probes` applies to the toy), all with bootstrap intervals over windows,
and the layer-pruning drop. Which final normalisation is excluded per family is documented in
:mod:`scalefit.probes._hfmodel`.

Examples
--------
>>> from scalefit.probes.hf import probe_hf  # doctest: +SKIP
>>> result = probe_hf("path/to/model", "corpus.txt", out="runs/probe")  # doctest: +SKIP
>>> print(result.verdict.report())  # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._validation import Interval, IsType, validate
from ..errors import ScaleFitError, require
from ._hfmodel import FAMILIES, LoadedModel, blocks_of, load_model, wrap_model
from ._prune import _key, prune_variants, run_pruning
from ._reduce import Accumulator, reduce_batch
from ._text import iter_documents, iter_windows
from .angles import middle_layers, summarize_table
from .mechanism import Verdict, split_token_angles, verdict_from_evidence

__all__ = ["FAMILIES", "HFProbeResult", "LoadedModel", "load_model", "probe_hf", "wrap_model"]

_CONSTRAINTS = {
    "tokens": [Interval(int, 1, None)],
    "seq_len": [Interval(int, 4, None)],
    "batch_size": [Interval(int, 1, None)],
    "max_block": [Interval(int, 1, None)],
    "prune_tokens": [Interval(int, 0, None)],
    "bootstrap": [Interval(int, 0, None)],
    "reservoir": [Interval(int, 4, None)],
    "seed": [IsType(int)],
}
CHECKPOINT_SECONDS = 20.0


@dataclass(frozen=True)
class HFProbeResult:
    """Everything :func:`probe_hf` measured.

    Attributes
    ----------
    layers : pandas.DataFrame
        One row per block ``layer`` = 1…L (block l maps h_{l-1} to h_l): ``theta`` (rad),
        ``angular_distance`` (θ/π), ``dtheta`` (θ between the increments of blocks l−1 and l,
        l ≥ 2), ``step`` (‖Δh‖/‖h_{l-1}‖), ``norm_in``/``norm_out``, ``cr``, each with ``_lo``/
        ``_hi`` 95% bootstrap bounds, and ``prune_drop`` (metric with block l removed minus the
        full model's).
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

    def save(self, out: str | Path, *, figures: bool = True) -> list[Path]:
        """Write the CSVs, ``summary.json`` and (with ``figures``) PNG figures into ``out``.

        Files: ``layers.csv``, ``block_distance.csv``, ``pruning.csv``, ``summary.json``,
        ``angles.png``, ``split.png``, ``pruning.png``. Returns the paths written.
        """
        from .._io import atomic_write_csv, atomic_write_json

        out = Path(out)
        paths = [
            atomic_write_csv(out / "layers.csv", self.layers),
            atomic_write_csv(out / "block_distance.csv", self.distances),
            atomic_write_csv(out / "pruning.csv", self.pruning),
            atomic_write_json(out / "summary.json", self.to_dict()),
        ]
        if figures:
            from ._figures import save_figures

            paths += save_figures(self, out)
        return paths


def probe_hf(
    model: str | LoadedModel,
    text: str | Path | Iterable[str],
    *,
    tokens: int = 65_536,
    seq_len: int = 256,
    batch_size: int = 8,
    max_block: int = 4,
    prune: bool = True,
    prune_tokens: int = 8_192,
    prune_blocks: Iterable[int] = (),
    cr: bool = True,
    bootstrap: int = 200,
    reservoir: int = 20_000,
    seed: int = 0,
    dtype: str = "float32",
    device: str = "cpu",
    out: str | Path | None = None,
    progress: bool = False,
) -> HFProbeResult:
    """Probe every layer of a pre-trained language model on a local text corpus.

    Parameters
    ----------
    model : str or LoadedModel
        A local model folder or a cached hub name (see :func:`load_model`), or a model already
        wrapped by :func:`load_model` / :func:`wrap_model`.
    text : path or iterable of str
        A ``.txt`` file (documents separated by blank lines), a ``.jsonl`` file (``text``
        field), or documents as strings.
    tokens : int
        Token budget of the probes (whole windows of ``seq_len``; at least one window).
    seq_len, batch_size : int
        Window length and windows per forward pass.
    max_block : int
        Largest n of the block distances d(l, l+n).
    prune : bool
        Run the layer-pruning sweep on the first ``prune_tokens`` tokens.
    prune_tokens : int
        Token budget of the pruning sweep (its cost is L+1 forwards per batch).
    prune_blocks : iterable of int
        Also remove, for each n given, the n consecutive blocks with the smallest d(l, l+n).
    cr : bool
        Compute seed 002's coherence-based redundancy per block (per batch, float64).
    bootstrap : int
        Bootstrap resamples over windows (CR: over batches); 0 gives no intervals.
    reservoir : int
        Tokens sampled (uniformly, seeded) for the early-exit split.
    seed : int
        Seeds the reservoir, the masked-LM masks and the bootstrap.
    dtype, device : str
        Passed to :func:`load_model` when ``model`` is a name.
    out : path, optional
        Folder for checkpoints: the partial reduction is saved atomically (JSON + npz) every
        ~20 s and at the end, so a rerun with the same settings resumes, and a rerun with a
        larger ``tokens`` continues where the last one stopped.
    progress : bool
        Show a progress bar (tqdm) over tokens.

    Returns
    -------
    HFProbeResult
    """
    validate(
        "probe_hf",
        {
            "tokens": tokens,
            "seq_len": seq_len,
            "batch_size": batch_size,
            "max_block": max_block,
            "prune_tokens": prune_tokens,
            "bootstrap": bootstrap,
            "reservoir": reservoir,
            "seed": seed,
        },
        _CONSTRAINTS,
    )
    torch = require("torch", "torch")
    from tqdm.auto import tqdm

    lm = model if isinstance(model, LoadedModel) else load_model(model, dtype=dtype, device=device)
    if lm.tokenizer is None:
        raise ScaleFitError("the model has no tokenizer; pass one to wrap_model.")
    depth = lm.depth
    max_block = min(max_block, depth)
    limit = getattr(lm.model.config, "max_position_embeddings", None)
    if isinstance(limit, int) and seq_len > limit:
        raise ScaleFitError(
            f"The 'seq_len' parameter of probe_hf must be an int <= {limit} (the model's "
            f"max_position_embeddings). Got {seq_len} instead."
        )
    prune_blocks = tuple(prune_blocks)
    for n in prune_blocks:
        if not isinstance(n, int) or not 1 <= n <= max_block or n >= depth:
            raise ScaleFitError(
                f"The 'prune_blocks' parameter of probe_hf must hold ints in [1, "
                f"min(max_block, depth - 1)] = [1, {min(max_block, depth - 1)}]. Got {n!r} instead."
            )
    folder = Path(out) if out is not None else None
    meta = _meta(lm, text, seq_len, batch_size, max_block, reservoir, seed, cr)
    acc = None
    if folder is not None:
        acc = Accumulator.load(
            folder, meta, depth=depth, max_block=max_block, reservoir=reservoir, seed=seed
        )
    acc = acc or Accumulator(depth, max_block=max_block, reservoir=reservoir, seed=seed)
    n_windows = max(1, tokens // seq_len)
    done = acc.tokens_seen // seq_len
    windows = _windows(lm, text, seq_len)
    device_ = next(lm.model.parameters()).device
    bar = tqdm(
        total=n_windows * seq_len,
        initial=min(done, n_windows) * seq_len,
        disable=not progress,
        unit="tok",
        desc="probe",
    )
    last_save = time.monotonic()
    for batch in _batched(itertools.islice(windows, done, n_windows), batch_size):
        ids = torch.from_numpy(np.stack([w[0] for w in batch])).to(device_)
        hidden = _hidden_states(lm, ids)
        cr_values = _cr(hidden) if cr else None
        acc.add(
            reduce_batch(hidden, max_block=max_block), np.stack([w[1] for w in batch]), cr_values
        )
        del hidden
        bar.update(ids.numel())
        if folder is not None and time.monotonic() - last_save > CHECKPOINT_SECONDS:
            acc.save(folder, meta)
            last_save = time.monotonic()
    bar.close()
    if acc.tokens_seen == 0:
        raise ScaleFitError(f"the text holds fewer than seq_len = {seq_len} tokens.")
    if folder is not None:
        acc.save(folder, meta)
    with warnings.catch_warnings():  # all-NaN rows (e.g. zero increments) are expected: NaN out
        warnings.simplefilter("ignore", RuntimeWarning)
        result = _assemble(lm, acc, bootstrap=bootstrap, seed=seed)
    pruning = _pruning(
        lm,
        text,
        result,
        seq_len=seq_len,
        batch_size=batch_size,
        prune_tokens=prune_tokens if prune else 0,
        prune_blocks=prune_blocks,
        seed=seed,
        progress=progress,
    )
    return _with_pruning(result, pruning, lm, tokens_requested=tokens, seq_len=seq_len)


def _meta(lm, text, seq_len, batch_size, max_block, reservoir, seed, cr) -> dict:
    if isinstance(text, str | Path):
        p = Path(text)
        source = {"text": str(p), "bytes": p.stat().st_size if p.exists() else None}
    else:
        source = {"text": "<documents>"}
    return {
        "model": lm.name,
        "family": lm.family,
        "depth": lm.depth,
        "dtype": str(next(lm.model.parameters()).dtype),
        **source,
        "seq_len": seq_len,
        "batch_size": batch_size,
        "max_block": max_block,
        "reservoir": reservoir,
        "seed": seed,
        "cr": cr,
    }


def _windows(lm: LoadedModel, text, seq_len: int):
    docs = iter_documents(text) if isinstance(text, str | Path) else iter(text)
    return iter_windows(docs, lm.tokenizer, seq_len=seq_len, encoder=lm.encoder)


def _batched(iterable, n: int):
    it = iter(iterable)
    while batch := list(itertools.islice(it, n)):
        yield batch


def _hidden_states(lm: LoadedModel, ids) -> list:
    """Return ``[h_0, …, h_L]`` as ``(B, T, W)`` tensors, without any final norm.

    HF's hidden states give h_0…h_{L-1}; a forward hook on the last block gives h_L (HF's last
    entry has the final norm applied for the decoder families).
    """
    import torch

    from ._prune import forward_kwargs

    last: list = []
    block = blocks_of(lm.model, lm.family)[-1]
    handle = block.register_forward_hook(
        lambda _m, _i, o: last.append(o[0] if isinstance(o, tuple) else o)
    )
    try:
        with torch.no_grad():
            out = lm.model(input_ids=ids, output_hidden_states=True, **forward_kwargs(lm))
    finally:
        handle.remove()
    states = list(out.hidden_states)
    if len(states) != lm.depth + 1 or len(last) != 1:
        raise ScaleFitError(
            f"{lm.name}: expected {lm.depth + 1} hidden states, got {len(states)}; "
            f"unsupported architecture '{lm.family}' layout."
        )
    return states[:-1] + [last[0]]


def _cr(hidden) -> np.ndarray:
    from ..train.cr import cr_measure

    return np.array([cr_measure(hidden[i], hidden[i + 1]) for i in range(len(hidden) - 1)])


def _assemble(lm: LoadedModel, acc: Accumulator, *, bootstrap: int, seed: int) -> HFProbeResult:
    depth = lm.depth
    est = {
        q: acc.estimate(q, bootstrap=bootstrap, seed=seed)
        for q in ("norm", "theta", "dtheta", "step", "block")
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
        layers["cr" + ("" if part == "mean" else f"_{part}")] = crs[part]
    rows = []
    for n in range(1, acc.max_block + 1):
        for start in range(1, depth - n + 2):
            rows.append(
                {
                    "layer": start,
                    "n": n,
                    **{
                        f"distance{'' if p == 'mean' else '_' + p}": est["block"][p][
                            n - 1, start - 1
                        ]
                        for p in ("mean", "lo", "hi")
                    },
                }
            )
    distances = pd.DataFrame(rows)
    # the toy's per-state table (rows 0…L) feeds the shared summaries and verdict
    state_table = pd.DataFrame(
        {
            "layer": np.arange(depth + 1),
            "norm": est["norm"]["mean"],
            "theta": np.append(est["theta"]["mean"], np.nan),
            "dtheta": np.append(est["dtheta"]["mean"][1:], [np.nan, np.nan]),
        }
    )
    summary = summarize_table(state_table)
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
    verdict = verdict_from_evidence({depth: summary}, split)
    info = {
        "model": lm.name,
        "family": lm.family,
        "task": lm.task,
        "depth": depth,
        "final_norm_excluded": lm.final_norm,
        "tokens": int(acc.tokens_seen),
        "seed": seed,
        "bootstrap": bootstrap,
        **{k: v for k, v in summary.items()},
        "theta_layer_slope": _layer_slope(layers["theta"].to_numpy()),
    }
    return HFProbeResult(layers, distances, pd.DataFrame(), split, verdict, info)


def _layer_slope(theta: np.ndarray) -> float:
    """Slope of log θ_l against log l over the middle blocks (within one model)."""
    depth = theta.size
    idx = np.arange(1, depth + 1)[middle_layers(depth)]
    vals = theta[idx - 1]
    ok = np.isfinite(vals) & (vals > 0)
    if ok.sum() < 2:
        return math.nan
    return float(np.polyfit(np.log(idx[ok]), np.log(vals[ok]), 1)[0])


def _pruning(
    lm, text, result, *, seq_len, batch_size, prune_tokens, prune_blocks, seed, progress
) -> dict:
    if prune_tokens <= 0:
        return {}
    import torch
    from tqdm.auto import tqdm

    n_windows = max(1, prune_tokens // seq_len)
    dist = {n: g["distance"].to_numpy() for n, g in result.distances.groupby("n")}
    variants = prune_variants(lm.depth, prune_blocks, dist)
    device = next(lm.model.parameters()).device
    batches = [
        torch.from_numpy(np.stack([w[0] for w in b])).to(device)
        for b in _batched(itertools.islice(_windows(lm, text, seq_len), n_windows), batch_size)
    ]
    bar = tqdm(total=len(batches), disable=not progress, unit="batch", desc="prune")
    totals = run_pruning(lm, batches, variants, seed=seed, progress=bar)
    bar.close()
    return {"totals": totals, "variants": variants}


def _with_pruning(result, pruning, lm, *, tokens_requested, seq_len) -> HFProbeResult:
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
