"""Learning-rate schedules of the trainer and the metadata a curve reader needs.

Every schedule starts with a linear warm-up (``lr·(k+1)/W`` at step ``k < W``) and ends at the
floor ``min_lr_ratio·lr``:

* ``"cosine"`` (the default): cosine decay from ``lr`` over the steps after the warm-up. It keeps
  the trainer's original arithmetic bit for bit, including that its progress at step ``k`` is
  ``(k − W)/(N − W)``, so the last step sits one step short of the floor;
* ``"constant"``: ``lr`` after the warm-up (no decay, no floor);
* ``"linear"``: linear decay, ``u = (k + 1 − W)/(N − W)``; the last step is at the floor;
* ``"wsd"`` (warm-up, stable, decay): ``lr`` until the last ``D = max(1, round(decay_frac·N))``
  steps, then a decay of shape ``decay_shape`` over ``u = (k + 1 − (N − D))/D``, reaching the floor
  at the last step. ``"linear"`` is ``1 − u``; ``"sqrt"`` is ``1 − √u``, the cooldown Hägele et al.
  found best (A. Hägele et al., *Scaling Laws and Compute-Optimal Training Beyond Fixed Training
  Durations*, NeurIPS 2024, arXiv:2405.18392); ``"cosine"`` is ``(1 + cos πu)/2``. WSD itself is
  from Hu et al., *MiniCPM*, arXiv:2404.06395 (2024).

``N`` is the run's number of steps and ``W`` its warm-up: ``warmup_steps`` when set, else
``max(1, round(warmup_frac·N))``. A WSD run's first ``N − D`` steps do not depend on ``N`` once
the warm-up is given in steps: that is what lets :mod:`scalefit.train.branches` fork the cooldowns
of shorter budgets from one stable phase. Steps are 0-based; step ``k`` is update ``k + 1``, the
convention of :class:`scalefit.curves.Schedule` (``schedule_text`` writes a run's schedule in
that grammar).
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import ScaleFitError

SCHEDULES = ("cosine", "constant", "linear", "wsd")
DECAY_SHAPES = ("linear", "sqrt", "cosine")

__all__ = [
    "DECAY_SHAPES",
    "SCHEDULES",
    "check_schedule",
    "decay_start",
    "lr_at",
    "run_metadata",
    "steps_of",
    "warmup_steps",
]


def steps_of(tokens: int, batch_size: int, seq_len: int) -> int:
    """Optimiser steps of a token budget: tokens over tokens per step, rounded up (at least 1)."""
    return max(1, math.ceil(tokens / (batch_size * seq_len)))


def warmup_steps(cfg: Any) -> int:
    """Warm-up steps ``W`` of a configuration (``warmup_steps`` or ``warmup_frac·steps``)."""
    fixed = getattr(cfg, "warmup_steps", None)
    if fixed is not None:
        return max(1, int(fixed))
    return max(1, round(cfg.warmup_frac * cfg.steps))


def decay_start(steps: int, decay_frac: float) -> int:
    """First step of a WSD decay over the last ``decay_frac`` of ``steps`` steps."""
    return steps - max(1, round(decay_frac * steps))


def lr_at(step: int, cfg: Any) -> float:
    """Learning rate of step ``step`` (0-based) of the run configured by ``cfg``.

    Examples
    --------
    >>> from scalefit.train.config import config_from_dict
    >>> cfg = config_from_dict({"schedule": "wsd", "tokens": 32 * 128 * 10, "warmup_frac": 0.1})
    >>> [round(lr_at(k, cfg) / cfg.lr, 2) for k in range(10)]
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.55, 0.1]
    """
    warm = warmup_steps(cfg)
    if step < warm:
        return cfg.lr * (step + 1) / warm
    kind = getattr(cfg, "schedule", "cosine")
    floor = cfg.min_lr_ratio * cfg.lr
    if kind == "cosine":  # the original arithmetic, unchanged
        progress = (step - warm) / max(1, cfg.steps - warm)
        return floor + 0.5 * (cfg.lr - floor) * (1 + math.cos(math.pi * min(1.0, progress)))
    if kind == "constant":
        return cfg.lr
    if kind == "linear":
        u = min(1.0, (step + 1 - warm) / max(1, cfg.steps - warm))
        return floor + (cfg.lr - floor) * (1.0 - u)
    start = decay_start(cfg.steps, cfg.decay_frac)
    if step < start:
        return cfg.lr
    u = min(1.0, (step + 1 - start) / (cfg.steps - start))
    return floor + (cfg.lr - floor) * _shape(u, cfg.decay_shape)


def _shape(u: float, shape: str) -> float:
    """Fraction of the way from the floor to ``lr`` at decay progress ``u`` in (0, 1]."""
    if shape == "sqrt":
        return 1.0 - math.sqrt(u)
    if shape == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * u))
    return 1.0 - u


def check_schedule(d: dict, where: str) -> None:
    """Cross-field rules of the schedule settings of a flat trainer configuration.

    WSD needs its decay to start after the warm-up; ``cooldowns`` need ``schedule = "wsd"``,
    budgets no larger than ``tokens`` with distinct step counts, and each cooldown's decay must
    start after the main run's warm-up (its fork is a stable-phase checkpoint).

    Raises
    ------
    ScaleFitError
        One line naming the settings and the values that break the rule.
    """
    from .config import TrainConfig

    base = TrainConfig()
    kind = d.get("schedule", base.schedule)
    frac = float(d.get("decay_frac", base.decay_frac))
    cooldowns = list(d.get("cooldowns", base.cooldowns))
    per_step = int(d.get("batch_size", base.batch_size)) * int(d.get("seq_len", base.model.seq_len))
    tokens = int(d.get("tokens", base.tokens))
    steps = steps_of(tokens, per_step, 1)
    fixed = d.get("warmup_steps")
    warm = (
        max(1, int(fixed))
        if fixed is not None
        else max(1, round(float(d.get("warmup_frac", base.warmup_frac)) * steps))
    )
    if cooldowns and kind != "wsd":
        raise ScaleFitError(
            f"{where}: 'cooldowns' need schedule = 'wsd' (branches fork from its stable phase); "
            f"got schedule = {kind!r}."
        )
    if kind != "wsd":
        return
    start = decay_start(steps, frac)
    if start < warm:
        raise ScaleFitError(
            f"{where}: the WSD decay (last {frac:g} of {steps} steps, from step {start}) must "
            f"start after the warm-up ({warm} steps); lower 'decay_frac' or the warm-up."
        )
    seen: dict[int, int] = {}
    for budget in cooldowns:
        if budget > tokens:
            raise ScaleFitError(
                f"{where}: each of 'cooldowns' must be at most 'tokens' ({tokens}); got {budget}."
            )
        n = steps_of(budget, per_step, 1)
        if n in seen:
            raise ScaleFitError(
                f"{where}: 'cooldowns' {seen[n]} and {budget} both round to {n} steps of "
                f"{per_step} tokens; give distinct budgets."
            )
        seen[n] = budget
        if decay_start(n, frac) < warm:
            raise ScaleFitError(
                f"{where}: the cooldown of {budget} tokens ({n} steps) would start decaying at "
                f"step {decay_start(n, frac)}, inside the {warm}-step warm-up; give a larger "
                "budget or a shorter warm-up."
            )


def schedule_text(cfg: Any) -> str:
    """The run's schedule in the grammar of :func:`scalefit.curves.parse_schedule`.

    Exact for ``constant``, ``linear`` and ``wsd`` with a linear decay. The trainer's cosine is one
    step behind that grammar's cosine (see the module docstring) and a ``sqrt`` or ``cosine`` WSD
    decay has no name there: for those, the ``lr`` column of ``history.csv`` is the exact record.
    """
    warm = min(warmup_steps(cfg), cfg.steps - 1)  # that grammar's warm-up is below the steps
    parts = [f"lr={cfg.lr!r}", f"steps={cfg.steps}"] + ([f"warmup={warm}"] if warm else [])
    if cfg.schedule == "wsd":
        parts.append(f"decay={cfg.decay_frac!r}")
    if cfg.schedule != "constant":
        parts.append(f"final_lr={cfg.min_lr_ratio * cfg.lr!r}")
    return f"{cfg.schedule}:" + ",".join(parts)


def run_metadata(cfg: Any, *, params: int, params_nonembedding: int, branch: dict | None) -> dict:
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
        ``schedule_text``, ``cooldowns`` and ``branch``.
    """
    mc = cfg.model
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
        "min_lr": cfg.min_lr_ratio * cfg.lr,
        "warmup_steps": warmup_steps(cfg),
        "decay_frac": cfg.decay_frac if cfg.schedule == "wsd" else None,
        "decay_shape": cfg.decay_shape if cfg.schedule == "wsd" else None,
        "schedule_text": schedule_text(cfg),
        "cooldowns": list(cfg.cooldowns),
        "branch": branch,
    }
