"""Trainer settings: :class:`TrainConfig`, its declared constraints, and config comparison.

Every setting is checked by :func:`scalefit.core._validation.validate_mapping` before any work
starts (types, ranges, choices), then the cross-field rules (width divisible by heads, head sizes
that RoPE can rotate). :func:`config_diff` names the settings in which two configurations differ;
the trainer uses it to refuse resuming a run folder that was started with other settings.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..core._validation import Interval, Matches, Options, validate_mapping
from ..core.accounting import BLOCKS
from ..core.errors import ScaleFitError
from ..core.schedule import KINDS, SHAPES, Schedule, steps_of, trainer_schedule
from .model import VARIANTS, ModelConfig, head_layout

PRECISIONS = ("auto", "fp32", "bf16")
OPTIMIZER_IMPLS = ("auto", "fused", "foreach", "plain")
PARALLEL = ("ddp", "fsdp")
#: Settings that may change between a run and its resumption (they do not change the numbers).
RESUME_FREE = frozenset({"threads", "checkpoint_every", "name", "sync_every", "compile_mode"})
#: ``torch.compile`` modes (``reduce-overhead`` adds CUDA graphs on CUDA).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass
class TrainConfig:
    """Training settings; ``model`` holds the architecture. ``tokens`` is the training budget.

    ``precision`` (``"fp32"`` | ``"bf16"`` autocast | ``"auto"``: bf16 on CUDA, fp32 elsewhere),
    ``compile`` (``True`` | ``False`` | ``"auto"``: on CUDA only) and ``optimizer_impl``
    (``"fused"`` | ``"foreach"`` | ``"plain"`` AdamW | ``"auto"``: fused on CUDA, plain
    elsewhere) work on every device; ``parallel`` chooses DDP or FSDP2 under ``torchrun``.
    ``compile_mode`` is ``torch.compile``'s mode. ``sync_every`` is how many steps run between
    the moments the host reads the loss and gradient norm back from the device (``"auto"``: 16
    on CUDA, every step elsewhere): reading them every step makes the CPU wait for the GPU at
    every step. The history still holds every step (its ``time_s`` is when the step's values were
    read back); a divergence is detected at the next read, and the steps run after the diverged
    one are not recorded.

    ``schedule`` picks the learning-rate schedule (:mod:`scalefit.core.schedule`, the one the curve
    laws read; the default ``"cosine"`` is warm-up then cosine to ``min_lr_ratio·lr``;
    :meth:`lr_schedule` gives it as a :class:`~scalefit.core.schedule.Schedule`); ``decay_frac`` and
    ``decay_shape`` shape the WSD decay. ``cooldowns`` (WSD only) lists token budgets below
    ``tokens`` whose cooldowns branch off this run's stable phase
    (:func:`scalefit.train.branches.train_cooldowns`).
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    data: str = "shakespeare"  # token folder (meta.json), shard folder (manifest.json), text, name
    tokenizer: str = "byte"
    bpe_vocab: int = 1024
    tokens: int = 1_000_000
    batch_size: int = 32  # global, in sequences
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_frac: float = 0.1
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    seed: int = 0
    cr_loss: bool = False
    ortho_loss: bool = False
    eval_tokens: int = 65_536
    checkpoint_every: int = 0  # steps; 0 = only at the end (and when stopped early)
    diverge_ratio: float = 2.0  # loss above ratio × first loss (or non-finite) = diverged
    device: str = "auto"
    precision: str = "auto"
    compile: bool | str = "auto"
    compile_mode: str = "default"
    sync_every: int | str = "auto"
    optimizer_impl: str = "auto"
    parallel: str = "ddp"
    threads: int = 0  # torch threads; 0 = leave as is
    schedule: str = "cosine"  # cosine | constant | linear | wsd (scalefit.core.schedule)
    decay_frac: float = 0.2  # wsd: fraction of the steps spent decaying to the floor
    decay_shape: str = "linear"  # wsd: linear | sqrt | cosine
    warmup_steps: int | None = None  # warm-up steps, overriding warmup_frac (0 or 1: none)
    cooldowns: list = field(default_factory=list)  # wsd: token budgets of cooldown branches

    @property
    def steps(self) -> int:
        """Optimiser steps: the token budget over tokens per step, rounded up."""
        return steps_of(self.tokens, self.batch_size * self.model.seq_len)

    def lr_schedule(self) -> Schedule:
        """The run's learning-rate schedule; update ``k + 1`` is step ``k`` (0-based).

        Examples
        --------
        >>> cfg = config_from_dict({"schedule": "wsd", "tokens": 32 * 128 * 10, "warmup_frac": 0.1})
        >>> [round(cfg.lr_schedule().lr_at(k + 1) / cfg.lr, 2) for k in range(cfg.steps)]
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.55, 0.1]
        """
        return trainer_schedule(self.to_dict())

    def to_dict(self) -> dict:
        """Flat JSON-safe dict (model settings inlined), the inverse of :func:`config_from_dict`."""
        d = {k: v for k, v in asdict(self).items() if k != "model"}
        return {**self.model.to_dict(), **d}


#: A finite float > 0, and >= 0.
_POSITIVE = [Interval(float, 0, None, closed="neither", finite=True)]
_NON_NEGATIVE = [Interval(float, 0, None, finite=True)]
_DEVICE = Matches(r"auto|cpu|cuda(:\d+)?", "one of 'auto', 'cpu', 'cuda', 'cuda:<index>'")


def _text(what: str) -> list:
    """A one-line string: no control characters (Unicode's Cc: newlines, tabs, NUL), <= 4096."""
    return [
        Matches(r"[^\x00-\x1f\x7f-\x9f]{0,4096}", f"{what} on one line, without control characters")
    ]


@dataclass(frozen=True)
class _Budgets:
    """A list of at most 64 token budgets, each an int in [1, LIMITS['tokens']]."""

    def accepts(self, value: Any) -> bool:
        return (
            isinstance(value, list)
            and len(value) <= 64
            and all(Interval(int, 1, LIMITS["tokens"]).accepts(v) for v in value)
        )

    def describe(self) -> str:
        return f"a list of at most 64 token budgets, each an int in [1, {LIMITS['tokens']}]"


def _up_to(limit: int) -> list:
    """A positive int no larger than ``limit``: sizes beyond it are typing slips, not runs."""
    return [Interval(int, 1, limit)]


_UNIT = [Interval(float, 0, 1)]
#: Upper bounds of the sizes: far beyond any run this trainer serves, small enough that a slip
#: (``width = 1e12``, ``batch_size = 1000000000``) is named here; whether a run within them fits
#: in memory is checked before it starts (:mod:`scalefit.train.memory`).
LIMITS = {
    "depth": 4096,
    "width": 1 << 18,
    "heads": 1 << 16,
    "vocab": 1 << 24,
    "seq_len": 1 << 20,
    "ffn_hidden": 1 << 20,
    "batch_size": 1 << 24,
    "tokens": 10**14,
    "eval_tokens": 10**12,
    "threads": 4096,
}
CONSTRAINTS: dict[str, list] = {
    # model
    "depth": _up_to(LIMITS["depth"]),
    "width": _up_to(LIMITS["width"]),
    "heads": [None, *_up_to(LIMITS["heads"])],
    "head_dim": [None, Interval(int, 2, LIMITS["width"])],
    "vocab": [Interval(int, 2, LIMITS["vocab"])],
    "seq_len": _up_to(LIMITS["seq_len"]),
    "block": [Options(frozenset(BLOCKS))],
    "mlp_ratio": [Interval(float, 0, 1024, closed="right")],
    "ffn_hidden": [None, *_up_to(LIMITS["ffn_hidden"])],
    "embeddings": [Options(frozenset({"tied", "untied"}))],
    "variant": [Options(frozenset(VARIANTS))],
    "rope_base": _POSITIVE,
    "init_std": _POSITIVE,
    # training
    "data": _text("a string (token folder, shard folder, text file/folder or corpus)"),
    "tokenizer": [Options(frozenset({"byte", "bpe"}))],
    "bpe_vocab": [Interval(int, 257, 65_535)],
    "tokens": _up_to(LIMITS["tokens"]),
    "batch_size": _up_to(LIMITS["batch_size"]),
    "lr": _POSITIVE,
    "min_lr_ratio": _UNIT,
    "warmup_frac": _UNIT,
    "weight_decay": _NON_NEGATIVE,
    "beta1": [Interval(float, 0, 1, closed="left")],
    "beta2": [Interval(float, 0, 1, closed="left")],
    "grad_clip": [Interval(float, 0, None)],
    "seed": [Interval(int, 0, 2**63 - 1)],
    "cr_loss": ["boolean"],
    "ortho_loss": ["boolean"],
    "eval_tokens": _up_to(LIMITS["eval_tokens"]),
    "checkpoint_every": [Interval(int, 0, None)],
    "diverge_ratio": [Interval(float, 1, None, closed="neither")],
    "device": [_DEVICE],
    "precision": [Options(frozenset(PRECISIONS))],
    "compile": ["boolean", Options(frozenset({"auto"}))],
    "compile_mode": [Options(frozenset(COMPILE_MODES))],
    "sync_every": [Interval(int, 1, 100_000), Options(frozenset({"auto"}))],
    "optimizer_impl": [Options(frozenset(OPTIMIZER_IMPLS))],
    "parallel": [Options(frozenset(PARALLEL))],
    "threads": [Interval(int, 0, LIMITS["threads"])],
    "name": _text("a string"),
    "schedule": [Options(frozenset(KINDS))],
    "decay_frac": [Interval(float, 0, 1, closed="neither")],
    "decay_shape": [Options(frozenset(SHAPES))],
    "warmup_steps": [None, Interval(int, 0, LIMITS["tokens"])],
    "cooldowns": [_Budgets()],
}


def validate_config(d: dict, *, source: str = "config") -> None:
    """Check a flat settings dict against :data:`CONSTRAINTS` and the cross-field rules.

    Raises
    ------
    ScaleFitError
        ``The 'lr' key of trainer config 'run.toml' must be a finite float > 0. Got nan instead.``
    """
    where = f"trainer config {source!r}" if source != "config" else "trainer config"
    validate_mapping(where, d, CONSTRAINTS)
    width, heads, head_dim = d.get("width", 64), d.get("heads"), d.get("head_dim")
    if heads is not None and width % heads:
        raise ScaleFitError(f"{where}: 'width' ({width}) must be divisible by 'heads' ({heads}).")
    if heads is not None and head_dim is not None and heads * head_dim != width:
        raise ScaleFitError(
            f"{where}: 'heads' × 'head_dim' ({heads} × {head_dim}) must equal 'width' ({width})."
        )
    if heads is None and head_dim is not None and width % head_dim:
        raise ScaleFitError(
            f"{where}: 'width' ({width}) must be divisible by 'head_dim' ({head_dim})."
        )
    n_heads, dim = head_layout(width, heads, head_dim)
    if width % n_heads == 0 and dim % 2:
        raise ScaleFitError(
            f"{where}: 'width' ({width}) with {n_heads} head(s) gives a head dimension of {dim}; "
            "RoPE needs an even one (choose 'width', 'heads' or 'head_dim' to make it even)."
        )
    _check_schedule(d, where)


def _check_schedule(d: dict, where: str) -> None:
    """Cross-field schedule rules of a flat trainer configuration.

    A WSD decay starts after the warm-up; ``cooldowns`` need WSD, budgets up to ``tokens`` with
    distinct step counts, each decaying after the main warm-up.
    """
    m = {**TrainConfig().to_dict(), **d}  # the settings with their defaults
    kind, cooldowns = m["schedule"], list(m["cooldowns"])
    if cooldowns and kind != "wsd":
        raise ScaleFitError(
            f"{where}: 'cooldowns' need schedule = 'wsd' (branches fork from its stable phase); "
            f"got schedule = {kind!r}."
        )
    if kind != "wsd":
        return
    main = trainer_schedule(m)
    steps, warm, frac, tokens = main.steps, main.warmup, main.decay, int(m["tokens"])
    if main.decay_start < warm:
        raise ScaleFitError(
            f"{where}: the WSD decay (last {frac:g} of {steps} steps, from step "
            f"{main.decay_start}) must start after the warm-up ({warm} steps); lower "
            "'decay_frac' or the warm-up."
        )
    per_step = int(m["batch_size"]) * int(m["seq_len"])
    seen: dict[int, int] = {}
    for budget in cooldowns:
        if budget > tokens:
            raise ScaleFitError(
                f"{where}: each of 'cooldowns' must be at most 'tokens' ({tokens}); got {budget}."
            )
        n = steps_of(budget, per_step)
        if n in seen:
            raise ScaleFitError(
                f"{where}: 'cooldowns' {seen[n]} and {budget} both round to {n} steps of "
                f"{per_step} tokens; give distinct budgets."
            )
        seen[n] = budget
        start = dataclasses.replace(main, steps=n).decay_start
        if start < warm:
            raise ScaleFitError(
                f"{where}: the cooldown of {budget} tokens ({n} steps) would start decaying at "
                f"step {start}, inside the {warm}-step warm-up; give a larger budget or a "
                "shorter warm-up."
            )


def config_from_dict(d: dict, *, source: str = "config") -> TrainConfig:
    """Validate a flat dict (model and training keys side by side) and build a :class:`TrainConfig`.

    Examples
    --------
    >>> config_from_dict({"depth": 4, "width": 64, "lr": 1e-3}).model.depth
    4
    """
    validate_config(d, source=source)
    model_keys = {f.name for f in fields(ModelConfig)}
    train_keys = {f.name for f in fields(TrainConfig)} - {"model"}
    model = ModelConfig(**{k: v for k, v in d.items() if k in model_keys})
    return TrainConfig(model=model, **{k: v for k, v in d.items() if k in train_keys})


def _normalised(d: dict) -> dict:
    defaults = TrainConfig().to_dict()
    return {k: d.get(k, defaults.get(k)) for k in set(d) | set(defaults)}


def config_diff(saved: dict, current: dict, *, ignore=RESUME_FREE) -> list[str]:
    """Keys whose values differ between two flat configurations (missing keys take defaults).

    ``vocab`` is compared only when both sides set it explicitly (the trainer replaces it with
    the tokenizer's vocabulary).
    """
    a, b = _normalised(saved), _normalised(current)
    skip = set(ignore) | {"vocab"}
    return sorted(k for k in set(a) | set(b) if k not in skip and a.get(k) != b.get(k))


def runtime_choices(cfg: TrainConfig, device_type: str) -> dict:
    """Resolve the ``"auto"`` settings for a device: precision, compile, AdamW implementation.

    ``"auto"`` means the fast path on CUDA (bf16, compiled, fused AdamW) and the plain fp32 eager
    path elsewhere, so CPU runs keep the numbers of the reference grids; any explicit choice is
    honoured on every device.

    Examples
    --------
    >>> runtime_choices(TrainConfig(), "cpu")
    {'precision': 'fp32', 'compile': False, 'optimizer_impl': 'plain', 'sync_every': 1}
    """
    cuda = device_type == "cuda"
    precision = cfg.precision if cfg.precision != "auto" else ("bf16" if cuda else "fp32")
    compiled = cfg.compile if cfg.compile != "auto" else cuda
    impl = cfg.optimizer_impl if cfg.optimizer_impl != "auto" else ("fused" if cuda else "plain")
    sync = cfg.sync_every if cfg.sync_every != "auto" else (16 if cuda else 1)
    return {
        "precision": precision,
        "compile": bool(compiled),
        "optimizer_impl": impl,
        "sync_every": int(sync),
    }


def run_metadata(
    cfg: TrainConfig, *, params: int, params_nonembedding: int, branch: dict | None
) -> dict:
    """The JSON metadata of a run folder (``run.json``) that a curve reader picks up.

    Parameters
    ----------
    cfg : TrainConfig
        The run's settings.
    params, params_nonembedding : int
        Parameter counts of the model.
    branch : dict or None
        For a cooldown branch: ``{"main": folder of the main run, "fork_step": step}``.

    Returns
    -------
    dict
        ``params``, ``width``, ``depth``, ``tokens`` (the budget), ``steps``, ``tokens_per_step``,
        ``schedule``, ``lr``, ``min_lr``, ``warmup_steps``, ``decay_frac``, ``decay_shape``,
        ``schedule_text`` (the exact schedule in the grammar of
        :func:`scalefit.core.schedule.parse_schedule`), ``cooldowns`` and ``branch``.
    """
    mc, sched = cfg.model, cfg.lr_schedule()
    wsd = cfg.schedule == "wsd"
    return {
        "format": "scalefit-train-run",
        "version": 1,
        "params": int(params),
        "params_nonembedding": int(params_nonembedding),
        "width": mc.width,
        "depth": mc.depth,
        "variant": mc.variant,
        "seed": cfg.seed,
        "tokens": cfg.tokens,
        "steps": cfg.steps,
        "tokens_per_step": cfg.batch_size * mc.seq_len,
        "batch_size": cfg.batch_size,
        "seq_len": mc.seq_len,
        "schedule": cfg.schedule,
        "lr": cfg.lr,
        "min_lr": sched.final_lr,
        "warmup_steps": sched.warmup,
        "decay_frac": cfg.decay_frac if wsd else None,
        "decay_shape": cfg.decay_shape if wsd else None,
        "schedule_text": str(sched),
        "cooldowns": list(cfg.cooldowns),
        "branch": branch,
    }
