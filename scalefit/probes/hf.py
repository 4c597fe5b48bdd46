"""Layer probes for pre-trained Hugging Face language models (optional extra ``hf``).

:func:`probe_hf` streams a local text corpus through a causal LM, a masked LM or a bare encoder,
reduces every batch's residual states at once (memory is flat in the token budget) and returns a
:class:`HFProbeResult`: per-layer angles θ(h_l, h_{l+1}), increment angles θ(Δh_l, Δh_{l+1}),
norms, relative step sizes, Sun et al.'s angular distance and Gromov et al.'s block distances
d(l, l+n), the CR measure of seed 002 on each block's attention sub-layer (raw, and corrected for
its batch-size bias), the early-exit split and the mechanism verdict (the same functions
:mod:`scalefit.probes` applies to the toy, checked against the same architecture at
initialisation; encoders are refused), all with bootstrap intervals over windows, and the
layer-pruning drop. Which final normalisation is excluded per family is documented in
:mod:`scalefit.probes._hfmodel`.

Examples
--------
>>> from scalefit.probes.hf import probe_hf  # doctest: +SKIP
>>> result = probe_hf("path/to/model", "corpus.txt", out="runs/probe")  # doctest: +SKIP
>>> print(result.verdict.report())  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import time
import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..core._progress import progress_bar
from ..core._validation import Interval, constraints, validate
from ..core.errors import ScaleFitError, require
from ._assemble import HFProbeResult, assemble, with_pruning
from ._hfmodel import FAMILIES, LoadedModel, blocks_of, load_model, wrap_model
from ._prune import prune_variants, run_pruning
from ._reduce import Accumulator
from ._text import DatasetDocuments, iter_documents, iter_windows
from .angles import reduce_batch
from .hooks import run_with_states

__all__ = [
    "FAMILIES",
    "DatasetDocuments",
    "HFProbeResult",
    "LoadedModel",
    "load_model",
    "probe_hf",
    "wrap_model",
]

_CONSTRAINTS = {
    "tokens": [Interval(int, 1, None)],
    "seq_len": [Interval(int, 4, None)],
    "batch_size": [Interval(int, 1, None)],
    "max_block": [Interval(int, 1, None)],
    "prune_tokens": [Interval(int, 0, None)],
    "reservoir": [Interval(int, 4, None)],
    **constraints("bootstrap", "seed"),
}
CHECKPOINT_SECONDS = 20.0
#: Windows of the corpus run through the same architecture at initialisation (the verdict's
#: "trained" check).
INIT_WINDOWS = 32


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
    init_reference: bool = True,
) -> HFProbeResult:
    """Probe every layer of a pre-trained language model on a local text corpus.

    Parameters
    ----------
    model : str or LoadedModel
        A local model folder or a cached hub name (see :func:`load_model`), or a model already
        wrapped by :func:`load_model` / :func:`wrap_model`.
    text : path or iterable of str
        A ``.txt`` file (documents separated by blank lines), a ``.jsonl`` file (``text``
        field), or documents as strings in a re-iterable (a list, or
        :class:`~scalefit.probes._text.DatasetDocuments` for a ``datasets`` dataset); the
        pruning sweep reads the first windows again.
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
        Compute seed 002's coherence-based redundancy per block, on its attention sub-layer
        (:data:`FAMILIES`; the paper's choice), per batch of ``batch_size`` windows, in float64:
        columns ``cr`` (the paper's measure, which depends on the batch size: see
        :mod:`scalefit.probes.cr`) and ``cr_debiased`` (batch-size independent; NaN when
        ``batch_size`` is 1). Batches with fewer windows (the last one) are skipped unless the
        whole budget is one batch; ``summary["cr_batch"]`` records the B used.
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
    init_reference : bool, default True
        Build the same architecture at initialisation (from the model's config, seeded by
        ``seed``; needs memory for a second copy of the model) and probe it on the first
        :data:`INIT_WINDOWS` windows, so that the verdict can tell a trained model from an
        untrained one. Without it the verdict is ``undetermined``.

    Returns
    -------
    HFProbeResult
    """
    validate("probe_hf", locals(), _CONSTRAINTS)
    require("torch", "torch")
    if not isinstance(text, str | Path) and iter(text) is text:
        raise ScaleFitError(
            "The 'text' parameter of probe_hf must be a file path or an iterable that can be "
            "iterated more than once (a list, DatasetDocuments). Got a one-shot iterator instead."
        )
    lm = model if isinstance(model, LoadedModel) else load_model(model, dtype=dtype, device=device)
    max_block, prune_blocks = _check_settings(lm, seq_len, max_block, prune_blocks)
    n_windows = max(1, tokens // seq_len)
    cr_batch = min(batch_size, n_windows)
    acc = _reduce_corpus(
        lm,
        text,
        n_windows=n_windows,
        seq_len=seq_len,
        batch_size=batch_size,
        max_block=max_block,
        reservoir=reservoir,
        seed=seed,
        cr_batch=cr_batch if cr else 0,
        folder=Path(out) if out is not None else None,
        progress=progress,
    )
    init = None
    if init_reference and not lm.encoder:
        init = _init_reference(lm, text, seq_len=seq_len, batch_size=batch_size, seed=seed)
    with warnings.catch_warnings():  # all-NaN rows (e.g. zero increments) are expected: NaN out
        warnings.simplefilter("ignore", RuntimeWarning)
        result = assemble(
            lm, acc, bootstrap=bootstrap, seed=seed, init=init, cr_batch=cr_batch if cr else None
        )
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
    return with_pruning(result, pruning, lm, tokens_requested=tokens, seq_len=seq_len)


def _check_settings(lm: LoadedModel, seq_len: int, max_block: int, prune_blocks) -> tuple:
    """Validate the settings that depend on the model; return (max_block, prune_blocks)."""
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
    return max_block, prune_blocks


def _reduce_corpus(
    lm, text, n_windows, seq_len, batch_size, max_block, reservoir, seed, cr_batch, folder, progress
) -> Accumulator:
    """Stream the windows through the model, reducing batch by batch (resumed from ``folder``)."""
    meta = _meta(lm, text, seq_len, batch_size, max_block, reservoir, seed, cr_batch > 0)
    kw = {"max_block": max_block, "reservoir": reservoir, "seed": seed}
    acc = Accumulator.load(folder, meta, depth=lm.depth, **kw) if folder is not None else None
    acc = acc or Accumulator(lm.depth, **kw)
    done = acc.tokens_seen // seq_len
    bar = progress_bar(
        progress,
        total=n_windows * seq_len,
        initial=min(done, n_windows) * seq_len,
        desc="probe",
        unit="tok",
    )
    last_save = time.monotonic()
    for ids, doc_start in _batches(lm, text, seq_len, batch_size, done, n_windows):
        measure_cr = cr_batch > 0 and len(ids) == cr_batch
        hidden, attn_io = _hidden_states(lm, ids, attention=measure_cr)
        cr_values = _cr(attn_io) if measure_cr else None
        acc.add(reduce_batch(hidden, max_block=max_block), doc_start, cr_values)
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
    return acc


def _meta(lm, text, seq_len, batch_size, max_block, reservoir, seed, cr) -> dict:
    if isinstance(text, str | Path):
        p = Path(text)
        source = {"text": str(p), "bytes": p.stat().st_size if p.exists() else None}
    else:
        first = next(iter(text), "")
        digest = hashlib.sha256(first.encode("utf-8", "replace")).hexdigest()[:16]
        source = {
            "text": repr(text) if isinstance(text, DatasetDocuments) else "<documents>",
            "first_document_sha256": digest,
        }
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
        "cr": "attention sub-layer, raw and debiased" if cr else False,
    }


def _batches(lm: LoadedModel, text, seq_len: int, batch_size: int, start: int, stop: int):
    """Windows ``start`` to ``stop`` of the corpus in batches: ``(ids, doc_start)``.

    ``ids`` is a ``(B, seq_len)`` tensor on the model's device, ``doc_start`` the ``(B, seq_len)``
    document-start flags (see :func:`~scalefit.probes._text.iter_windows`).
    """
    import torch

    docs = iter_documents(text) if isinstance(text, str | Path) else iter(text)
    windows = iter_windows(docs, lm.tokenizer, seq_len=seq_len, encoder=lm.encoder)
    windows = itertools.islice(windows, start, stop)
    device = next(lm.model.parameters()).device
    while batch := list(itertools.islice(windows, batch_size)):
        ids = torch.from_numpy(np.stack([w[0] for w in batch])).to(device)
        yield ids, np.stack([w[1] for w in batch])


def _hidden_states(lm: LoadedModel, ids, *, attention: bool = False) -> tuple[list, list]:
    """Return the residual states and (with ``attention``) the attention sub-layers' in/out.

    The states are ``[h_0, …, h_L]`` as ``(B, T, W)`` tensors, caught by forward hooks: the first
    block's input, then every block's output, so without any final norm (HF's last
    ``hidden_states`` entry has it for the decoder families). The pairs are each block's input
    and its attention sub-layer's output, with the residual added (see :data:`FAMILIES`).
    """
    from ._prune import forward_kwargs

    blocks = blocks_of(lm.model, lm.family)
    name, adds_residual = FAMILIES[lm.family][3:]
    watch = [getattr(block, name) for block in blocks] if attention else []
    states, outputs = run_with_states(
        lm.model, blocks, input_ids=ids, watch=watch, **forward_kwargs(lm)
    )
    if len(states) != lm.depth + 1 or len(outputs) != (lm.depth if attention else 0):
        raise ScaleFitError(
            f"{lm.name}: expected {lm.depth + 1} residual states and one attention sub-layer per "
            f"block, saw {len(states)} and {len(outputs)}; unsupported '{lm.family}' layout."
        )
    pairs = [(h, h + o if adds_residual else o) for h, o in zip(states, outputs, strict=False)]
    return states, pairs


def _cr(attn_io) -> np.ndarray:
    """``(2, L)``: the raw CR and (batches of ≥ 2 windows) the debiased CR of every block."""
    from .cr import cr_measure

    raw = [cr_measure(h_in, h_out) for h_in, h_out in attn_io]
    batch = attn_io[0][0].shape[0]
    debiased = [
        cr_measure(h_in, h_out, debias=True) if batch >= 2 else np.nan for h_in, h_out in attn_io
    ]
    return np.array([raw, debiased], dtype=np.float64)


def _init_reference(lm: LoadedModel, text, *, seq_len: int, batch_size: int, seed: int) -> dict:
    """The same architecture at initialisation, probed on the first :data:`INIT_WINDOWS`.

    Returns ``{"summary": …}`` (scalar summary of its residual stream) and, for causal LMs,
    ``"nll"``: ``(model's NLL, initial model's NLL)`` on the same windows, in nats per token.
    """
    import torch

    from ._assemble import summary_of

    param = next(lm.model.parameters())
    with torch.random.fork_rng(devices=[]):  # leave the caller's random state as it was
        torch.manual_seed(seed)
        fresh = type(lm.model)(lm.model.config)
    fresh = fresh.to(device=param.device, dtype=param.dtype).eval()
    ref = dataclasses.replace(lm, model=fresh)
    acc = _reduce_corpus(
        ref, text, INIT_WINDOWS, seq_len, batch_size, max_block=1, reservoir=4, seed=seed,
        cr_batch=0, folder=None, progress=False,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = {"summary": summary_of(acc), "windows": int(acc.tokens_seen // seq_len)}
    if lm.task == "causal":
        nll, count = np.zeros(2), 0
        for ids, _ in _batches(lm, text, seq_len, batch_size, 0, INIT_WINDOWS):
            with torch.no_grad():
                for i, model in enumerate((lm.model, fresh)):
                    loss = model(input_ids=ids, labels=ids, use_cache=False).loss
                    nll[i] += float(loss) * len(ids)
            count += len(ids)
        out["nll"] = (float(nll[0] / count), float(nll[1] / count))
    return out


def _pruning(
    lm, text, result, *, seq_len, batch_size, prune_tokens, prune_blocks, seed, progress
) -> dict:
    if prune_tokens <= 0:
        return {}

    n_windows = max(1, prune_tokens // seq_len)
    dist = {n: g["distance"].to_numpy() for n, g in result.distances.groupby("n")}
    variants = prune_variants(lm.depth, prune_blocks, dist)
    batches = [ids for ids, _ in _batches(lm, text, seq_len, batch_size, 0, n_windows)]
    bar = progress_bar(progress, total=len(batches), desc="prune", unit="batch")
    totals = run_pruning(lm, batches, variants, seed=seed, progress=bar)
    bar.close()
    return {"totals": totals, "variants": variants}
