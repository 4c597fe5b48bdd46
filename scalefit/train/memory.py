"""How much memory a training run needs, estimated from its settings before anything is allocated.

:func:`estimate_memory` counts, in bytes, for one process:

- **weights, gradients and AdamW state**: ``4·N`` bytes each for the weights and the gradients and
  ``8·N`` for AdamW's two moment buffers (fp32; ``N`` from :mod:`scalefit.core.accounting`, the
  count the model is tested to have), plus ``4·N`` for the update's temporaries (the foreach and
  fused implementations build parameter-sized intermediates) and ``4·N`` for DDP's gradient buckets.
  Under FSDP the four are divided by the number of processes and one block's (or the embedding's)
  full weights are gathered at a time;
- **activations** saved for the backward pass, per token of the process's share of the batch
  (``B`` sequences of ``T`` tokens), in fp32 (bf16 autocast stores less, so this is an upper
  bound). A block stores at most ``16·W + 4·H`` floats per token (``W`` the width, ``H`` the MLP's
  hidden size): the residual input, both norms' outputs and their scaled copies, the query-key-value
  projection (``3·W``), the rotated queries and keys (``2·W``), the attention output and its
  re-laid-out copy, the residual sum, and the MLP's hidden layer (``2·H`` for GELU, ``4·H`` for
  SwiGLU, counted as ``4·H``). The head stores the final norm's input and output and the logits
  with their log-softmax (``3·V + 3·W``). A CR-tree merge adds ``3·W``; the CR and orthogonality
  losses add ``40·W`` per token and three ``W × W`` Gram matrices per sequence in each layer they
  touch. Attention is assumed to run through PyTorch's fused kernels (flash or memory-efficient
  ``scaled_dot_product_attention``, CPU and CUDA), which keep ``O(T)`` per head rather than the
  ``T × T`` scores;
- **the backward pass's transients**: one more block's (or the logits') worth of floats per token;
- **evaluation**: the weights and AdamW state plus one batch of 32 sequences without a graph;
- **a checkpoint**: the weights and AdamW state serialised in memory, the buffer and its bytes
  (``24·N``), next to the weights and AdamW state (gradients are released by then).

The peak is the largest of the training step, evaluation and checkpoint totals.
:func:`check_run_memory` compares it with the memory available to the process (CPU: the kernel's
``MemAvailable`` and the cgroup's limit, shared by the processes on one machine; CUDA:
``torch.cuda.mem_get_info``) and refuses the run in one line with the estimate. Setting the
environment variable ``SCALEFIT_MEMORY_CHECK=0`` skips the comparison (the estimate is an upper
bound; swap or a smarter allocator may fit more).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..core._io import cpu_room
from ..core.errors import ScaleFitError

__all__ = [
    "MemoryEstimate",
    "available_memory",
    "check_run_memory",
    "data_vocab",
    "estimate_memory",
]

FLOAT = 4  # bytes of an fp32 value
EVAL_BATCH = 32  # sequences per evaluation batch (scalefit.train.loop.evaluate's default)


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes one training process needs (see the module docstring for what each part counts).

    Attributes
    ----------
    params : int
        Parameter count ``N``.
    states : int
        Weights, gradients, AdamW moments, update temporaries (and DDP buckets), bytes.
    activations : int
        Activations saved for the backward pass, plus its transients, bytes.
    evaluation : int
        Peak of an evaluation pass, bytes.
    checkpoint : int
        Peak while a checkpoint is serialised, bytes (0 without a run folder).
    batch, seq_len : int
        Sequences per process and their length (what the activations scale with).
    """

    params: int
    states: int
    activations: int
    evaluation: int
    checkpoint: int
    batch: int
    seq_len: int

    @property
    def total(self) -> int:
        """The peak: the largest of a training step, an evaluation and a checkpoint."""
        return max(self.states + self.activations, self.evaluation, self.checkpoint)

    def describe(self) -> str:
        """One line: the peak and its parts."""
        return (
            f"about {_gb(self.total)} ({_count(self.params)} parameters: weights, gradients and "
            f"AdamW state {_gb(self.states)}; activations {_gb(self.activations)} for "
            f"{self.batch} sequences of {self.seq_len} tokens)"
        )


def estimate_memory(
    cfg,
    *,
    vocab: int | None = None,
    world: int = 1,
    checkpoint: bool = True,
) -> MemoryEstimate:
    """Upper bound of the memory one training process needs, from the settings alone.

    Parameters
    ----------
    cfg : TrainConfig
        The run's settings.
    vocab : int, optional
        Vocabulary of the data (the model's vocabulary is replaced by it); default the config's.
    world : int, default 1
        Processes sharing the global batch (``torchrun``).
    checkpoint : bool, default True
        Whether the run writes checkpoints (a run folder is given).

    Returns
    -------
    MemoryEstimate

    Examples
    --------
    >>> from scalefit.train.config import config_from_dict
    >>> est = estimate_memory(config_from_dict({"depth": 2, "width": 64, "batch_size": 8}))
    >>> est.params, est.total > 16 * est.params
    (115008, True)
    """
    from .model import ModelConfig, tree_parents

    m = cfg.model
    if vocab is not None and vocab != m.vocab:
        m = ModelConfig(**{**m.to_dict(), "vocab": int(vocab)})
    n = m.expected_params()
    depth, width, hidden, vocab_, seq = m.depth, m.width, m.hidden, m.vocab, m.seq_len
    world = max(1, int(world))
    batch = -(-cfg.batch_size // world)
    sharded = world > 1 and cfg.parallel == "fsdp"
    per_param = 5 * FLOAT + (FLOAT if world > 1 and not sharded else 0)
    states = per_param * n
    if sharded:
        largest = max(m.expected_params("excluded") // depth, vocab_ * width)
        states = -(-states // world) + 2 * FLOAT * largest
    merges = len(tree_parents(depth)) if m.variant == "cr_tree" else 0
    per_block = 16 * width + 4 * hidden
    per_token = depth * per_block + merges * 3 * width + 3 * vocab_ + 3 * width
    per_token += max(per_block, 3 * vocab_)  # the backward pass's transients
    aux_layers = depth if (cfg.cr_loss or cfg.ortho_loss) else 0
    per_token += aux_layers * 40 * width
    tokens = batch * seq
    activations = FLOAT * (tokens * per_token + aux_layers * 3 * batch * width * width)
    activations += 2 * 8 * tokens  # the batch's token ids and targets (int64)
    kept = 3 * FLOAT * n if not sharded else -(-3 * FLOAT * n // world)
    evaluation = kept + FLOAT * EVAL_BATCH * seq * (3 * vocab_ + 4 * hidden + 8 * width)
    ckpt = kept + 6 * FLOAT * n if checkpoint else 0
    return MemoryEstimate(n, states, activations, evaluation, ckpt, batch, seq)


def available_memory(device) -> int | None:
    """Bytes this process may still allocate on ``device`` (None when it cannot be told).

    CPU: the smaller of ``MemAvailable`` (``/proc/meminfo``, else ``os.sysconf``) and the room
    left under the cgroup's memory limit. CUDA: the free memory of the device.
    """
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        try:
            return int(torch.cuda.mem_get_info(device)[0])
        except (RuntimeError, AssertionError):
            return None
    return cpu_room() if device.type == "cpu" else None


def data_vocab(cfg) -> int:
    """The vocabulary the model will get from ``cfg.data``, read without building anything.

    A token or shard folder states it in its ``meta.json`` / ``manifest.json``; a corpus still
    to be tokenised gets 256 (bytes) or at most ``bpe_vocab``. Unreadable metadata falls back to
    the config's ``vocab`` (the data loader reports the fault itself).
    """
    from ._tokenfiles import read_token_meta

    for name in ("manifest.json", "meta.json"):
        path = Path(cfg.data) / name
        try:
            if path.is_file():
                return read_token_meta(path, what="token metadata")["vocab"]
        except (ScaleFitError, OSError):
            return cfg.model.vocab
    return 256 if cfg.tokenizer == "byte" else cfg.bpe_vocab


def check_run_memory(
    cfg, *, checkpoint: bool = True, where: str = "", processes: int | None = None
) -> None:
    """Refuse a run whose estimated memory exceeds what its device has free, in one line.

    Called by :func:`scalefit.train.loop.train` before the run folder is touched and before
    the model is built, and for every run of a ``train grid`` before the sweep starts. The
    device is ``cfg.device`` (a CUDA device this machine lacks is refused here too), the
    vocabulary that of ``cfg.data`` (:func:`data_vocab`).

    Parameters
    ----------
    cfg : TrainConfig
        The run's settings.
    checkpoint : bool, default True
        Whether checkpoints are written.
    where : str
        Prefix for the message (the configuration's name).
    processes : int, optional
        Processes of this size that share the machine's memory (CPU only); default
        ``LOCAL_WORLD_SIZE`` (set by ``torchrun``) or 1.

    Raises
    ------
    ScaleFitError
        ``... needs about 51.3 GB (...) but 21.2 GB is available on cpu; lower ...``.
    """
    import torch

    from ..core._torch import pick_device

    device = pick_device(cfg.device)
    if device.type == "cuda":  # refused here, before the run folder is touched
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (device.index or 0) >= count:
            raise ScaleFitError(
                f"{where}device {cfg.device!r}: this machine has {count} CUDA device(s)."
            )
        if device.index is None:
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0") or 0))
    if os.environ.get("SCALEFIT_MEMORY_CHECK", "1").strip() == "0":
        return
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    est = estimate_memory(cfg, vocab=data_vocab(cfg), world=world, checkpoint=checkpoint)
    need, sharing = est.total, 1
    if device.type == "cpu":  # the processes of one machine share its memory
        if processes is None:
            processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
        sharing = max(1, processes)
        need *= sharing
    free = available_memory(device)
    if free is None or need <= free:
        return
    each = f" for each of {sharing} processes" if sharing > 1 else ""
    m = cfg.model
    sizes = f"depth {m.depth}, width {m.width}, batch_size {cfg.batch_size}, seq_len {m.seq_len}"
    raise ScaleFitError(
        f"{where}the run ({sizes}) needs {est.describe()}{each}, but {_gb(free)} is available on "
        f"{device}; lower width, depth, batch_size or seq_len (SCALEFIT_MEMORY_CHECK=0 skips "
        "this check)."
    )


def _gb(n: float) -> str:
    for scale, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB")):
        if n >= scale or unit == "MB":
            v = n / scale
            return f"{v:.3g} {unit}" if v < 1000 else f"{v:,.0f} {unit}"
    raise AssertionError  # pragma: no cover


def _count(n: int) -> str:
    for scale, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(n)
