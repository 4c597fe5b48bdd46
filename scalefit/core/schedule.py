"""Learning-rate schedules: ONE definition for the trainer and the loss-curve laws.

A :class:`Schedule` gives the learning rate ``eta_s`` of every optimiser update ``s = 1 .. steps``
(update ``s`` is the trainer's 0-based step ``s - 1``). Every kind starts with a linear warm-up,
``eta_s = lr * s / W`` for ``s <= W``; after it:

* ``"constant"``: ``lr``;
* ``"cosine"``: ``final_lr + (lr - final_lr) (1 + cos(pi p)) / 2`` with progress
  ``p = (s - 1 - W) / (T - W)``: update ``W + 1`` is at ``lr`` and the last update one step short
  of ``final_lr`` (the trainer's arithmetic since its first version, and that of nanoGPT and
  Hugging Face's ``get_cosine_schedule_with_warmup``);
* ``"linear"``: ``final_lr + (lr - final_lr)(1 - u)``, ``u = (s - W) / (T - W)``: the last update
  is at ``final_lr``;
* ``"wsd"`` (warm-up, stable, decay; Hu et al., *MiniCPM*, arXiv:2404.06395): ``lr`` until the
  last ``D = max(1, round(decay T))`` updates, then ``final_lr + (lr - final_lr) f(u)`` with
  ``u = (s - (T - D)) / D`` and ``f`` the decay ``shape``: ``"linear"`` ``1 - u``, ``"sqrt"``
  ``1 - sqrt(u)`` (the cooldown A. Hägele et al. found best, arXiv:2405.18392) or ``"cosine"``
  ``(1 + cos(pi u)) / 2``. The last update is at ``final_lr``.

The text grammar ``"kind:key=value,..."`` (:func:`parse_schedule`) names the same settings, e.g.
``"wsd:lr=3e-3,steps=2000,warmup=100,decay=0.2,shape=sqrt"``; the trainer writes each run's
schedule in it and the curve readers read it back. A *template* names columns of a curve table in
place of numbers (``lr={peak_lr}``, :func:`template_fields`, :func:`fill_template`).

The schedule quantities of H. Tissue, V. Wang, L. Wang, *Scaling Law with Learning Rate
Annealing* (arXiv:2408.11029, 2024), ``L(s) = L0 + A S1^-alpha - C S2`` (:func:`areas`):
``S1(s) = sum_{k<=s} eta_k`` and ``S2(s) = sum_{k<=s} m_k`` with
``m_k = lam m_{k-1} + d_k``. One convention is ours: the drops ``d_k = eta_{k-1} - eta_k`` of the
``W`` warm-up updates are zero (:func:`decay_drops`), so the drop from the peak (update ``W``)
into update ``W + 1`` counts, and ``d_1 = 0`` (``eta_0 = eta_1``). A declared warm-up and one read
from logged rates (the updates up to the first at the peak, when the rate rises to it) give the
same ``W`` for every schedule above, so a fit on logged rates and a forecast from the declared
schedule see the same ``S2``. The multi-power law reads the same drops. ``lam = 0.999`` is our
default (:data:`MOMENTUM`), not a value checked against the paper; the fitted ``C`` depends
strongly on it.

This module sits in the package's bottom layer: it imports numpy, the standard library and the
core errors and validation only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ._validation import Interval, Options, validate
from .errors import ScaleFitError

KINDS = ("constant", "cosine", "linear", "wsd")
#: Shapes of a WSD decay (the trainer's ``decay_shape``, the grammar's ``shape``).
SHAPES = ("linear", "sqrt", "cosine")
#: Our default decay factor of the annealing momentum (not checked against Tissue et al.).
MOMENTUM = 0.999
#: Most updates whose learning rates are evaluated (2**24, about 14 times the ~1.2M updates of
#: the longest published pre-training runs): a longer schedule or checkpoint is refused before
#: anything is allocated (a schedule is a small text; its length is not taken on trust).
MAX_STEPS = 2**24
_CHUNK = 2**16  # updates per block when a schedule is walked for its areas at a few steps

__all__ = [
    "KINDS",
    "MAX_STEPS",
    "MOMENTUM",
    "SHAPES",
    "Schedule",
    "areas",
    "areas_at",
    "check_steps",
    "decay_drops",
    "fill_template",
    "parse_schedule",
    "steps_of",
    "template_fields",
    "trainer_schedule",
    "warmup_count",
    "warmup_of",
]


@dataclass(frozen=True)
class _Ops:
    """The few operations of :meth:`Schedule.lr_at`, for Python floats or numpy arrays."""

    cos: Any
    sqrt: Any
    clip: Any
    where: Any


_SCALAR = _Ops(
    math.cos, math.sqrt, lambda x, lo, hi: min(hi, max(lo, x)), lambda c, a, b: a if c else b
)
_ARRAY = _Ops(np.cos, np.sqrt, np.clip, np.where)


@dataclass(frozen=True)
class Schedule:
    """A learning-rate schedule (the module docstring gives each kind's formula).

    Parameters
    ----------
    kind : {"constant", "cosine", "linear", "wsd"}
        Shape after the warm-up.
    lr : float
        Peak learning rate (> 0).
    steps : int
        Optimiser updates of the run, ``T``, in ``1 .. MAX_STEPS``.
    warmup : int, default 0
        Linear warm-up updates ``W`` from ``lr / W`` to ``lr`` (may reach or pass ``steps``: then
        the whole run is warm-up).
    decay : float, default 0.2
        WSD only: fraction of ``steps`` spent decaying, in (0, 1].
    final_lr : float, default 0
        The floor the decay heads to (cosine, linear, WSD), ``0 <= final_lr <= lr``.
    shape : {"linear", "sqrt", "cosine"}, default "linear"
        WSD only: shape of the decay.

    Examples
    --------
    >>> s = Schedule("cosine", lr=1.0, steps=10, warmup=2, final_lr=0.1)
    >>> [round(float(x), 3) for x in s.sequence()]
    [0.5, 1.0, 1.0, 0.966, 0.868, 0.722, 0.55, 0.378, 0.232, 0.134]
    """

    kind: str
    lr: float
    steps: int
    warmup: int = 0
    decay: float = 0.2
    final_lr: float = 0.0
    shape: str = "linear"

    def __post_init__(self) -> None:
        for name, cons in (
            ("kind", Options(set(KINDS))),
            ("lr", Interval(float, 0, None, closed="neither", finite=True)),
            ("steps", Interval(int, 1, MAX_STEPS)),
            ("warmup", Interval(int, 0, None)),
            ("decay", Interval(float, 0, 1, closed="right")),
            ("final_lr", Interval(float, 0, self.lr, finite=True)),
            ("shape", Options(set(SHAPES))),
        ):
            validate("the schedule", {name: getattr(self, name)}, {name: [cons]}, noun="setting")

    @property
    def decay_start(self) -> int:
        """WSD: the last update before the decay, ``T - max(1, round(decay T))``."""
        return self.steps - max(1, round(self.decay * self.steps))

    def lr_at(self, step):
        """Learning rate of update ``step`` (1-based): a float for an int, else an array.

        A Python int gives the trainer's float arithmetic exactly (``math``, no numpy).
        """
        if isinstance(step, int | np.integer):
            return float(self._rate(int(step), _SCALAR))
        s = np.asarray(step, dtype=float)
        return np.broadcast_to(self._rate(s, _ARRAY), s.shape).astype(float)

    def _rate(self, s, op: _Ops):
        peak, fin, warm, total = self.lr, self.final_lr, self.warmup, self.steps
        if self.kind == "constant":
            out = peak
        elif self.kind == "cosine":
            p = op.clip((s - 1 - warm) / max(1, total - warm), 0.0, 1.0)
            out = fin + 0.5 * (peak - fin) * (1 + op.cos(math.pi * p))
        elif self.kind == "linear":
            u = op.clip((s - warm) / max(1, total - warm), 0.0, 1.0)
            out = fin + (peak - fin) * (1.0 - u)
        else:
            start = self.decay_start
            u = op.clip((s - start) / (total - start), 0.0, 1.0)
            if self.shape == "sqrt":
                f = 1.0 - op.sqrt(u)
            elif self.shape == "cosine":
                f = 0.5 * (1.0 + op.cos(math.pi * u))
            else:
                f = 1.0 - u
            out = op.where(s <= start, peak, fin + (peak - fin) * f)
        if warm:
            out = op.where(s <= warm, peak * s / warm, out)
        return out

    def sequence(self, steps: int | None = None) -> np.ndarray:
        """Learning rates of updates ``1 .. steps`` (default: the schedule's length).

        At most :data:`MAX_STEPS` updates; past ``self.steps`` the rate stays at its last value.
        """
        n = check_steps(self.steps if steps is None else steps, where=str(self))
        return self.lr_at(np.arange(1, n + 1))

    def to_dict(self) -> dict:
        """JSON-safe settings."""
        return asdict(self)

    def __str__(self) -> str:
        keys = ["lr", "steps"] + (["warmup"] if self.warmup else [])
        if self.kind == "wsd":
            keys += ["decay"] + (["shape"] if self.shape != "linear" else [])
        if self.kind != "constant":
            keys.append("final_lr")

        def text(k: str) -> str:
            v = getattr(self, k)
            if k == "shape":
                return v
            return str(int(v)) if k in ("steps", "warmup") else repr(float(v))

        return self.kind + ":" + ",".join(f"{k}={text(k)}" for k in keys)


def check_steps(steps, *, where: str = "schedule") -> int:
    """``steps`` as an int in ``1 .. MAX_STEPS``, else one line naming ``where``."""
    n = float(steps)
    if not (math.isfinite(n) and 1 <= n <= MAX_STEPS and n == int(n)):
        raise ScaleFitError(
            f"{where}: learning rates are evaluated for 1 .. {MAX_STEPS} updates (whole "
            f"numbers); {steps:g} asked for."
        )
    return int(n)


# ------------------------------------------------------------------------------ the trainer's
def steps_of(tokens: int, tokens_per_step: int) -> int:
    """Optimiser steps of a token budget: tokens over tokens per step, rounded up (at least 1)."""
    return max(1, -(-int(tokens) // int(tokens_per_step)))


def warmup_count(steps: int, *, warmup_steps: int | None = None, warmup_frac: float = 0.0) -> int:
    """The trainer's warm-up ``W``: ``warmup_steps`` when set, else ``round(warmup_frac·steps)``.

    At least 1 (a one-update warm-up starts at ``lr``, the same rates as none).
    """
    if warmup_steps is not None:
        return max(1, int(warmup_steps))
    return max(1, round(float(warmup_frac) * steps))


def trainer_schedule(settings: Mapping[str, Any]) -> Schedule:
    """The schedule of a flat trainer configuration (``train_config.json``, ``TrainConfig``).

    Reads ``lr``, ``min_lr_ratio``, ``tokens``, ``batch_size``, ``seq_len``, ``warmup_steps`` or
    ``warmup_frac``, and ``schedule``, ``decay_frac``, ``decay_shape`` (defaults ``"cosine"``,
    0.2, ``"linear"``: configurations written before schedules were settings are cosine).

    Examples
    --------
    >>> str(trainer_schedule({"lr": 1e-3, "min_lr_ratio": 0.1, "tokens": 40960, "batch_size": 32,
    ...                       "seq_len": 128, "warmup_frac": 0.1, "schedule": "wsd"}))
    'wsd:lr=0.001,steps=10,warmup=1,decay=0.2,final_lr=0.0001'
    """
    per = int(settings["batch_size"]) * int(settings["seq_len"])
    steps = steps_of(settings["tokens"], per)
    check_steps(
        steps, where=f"the trainer's schedule ({settings['tokens']} tokens, {per} per step)"
    )
    lr = float(settings["lr"])
    warm = warmup_count(
        steps,
        warmup_steps=settings.get("warmup_steps"),
        warmup_frac=float(settings.get("warmup_frac", 0.0)),
    )
    return Schedule(
        str(settings.get("schedule", "cosine")),
        lr=lr,
        steps=steps,
        warmup=warm,
        decay=float(settings.get("decay_frac", 0.2)),
        final_lr=float(settings["min_lr_ratio"]) * lr,
        shape=str(settings.get("decay_shape", "linear")),
    )


# ------------------------------------------------------------------------------ the grammar
_NUM = {
    "lr": float,
    "steps": int,
    "warmup": int,
    "decay": float,
    "final_lr": float,
    "final_lr_ratio": float,
}


def parse_schedule(text: str, *, steps: int | None = None, where: str = "schedule") -> Schedule:
    """Parse ``"kind:key=value,..."`` (e.g. ``"wsd:lr=3e-3,warmup=100,decay=0.2,shape=sqrt"``).

    Parameters
    ----------
    text : str
        Schedule kind and settings: ``lr``, ``steps``, ``warmup``, ``decay``, ``final_lr`` (or
        ``final_lr_ratio``, the final learning rate as a fraction of ``lr`` in [0, 1]) and
        ``shape`` (WSD decay: linear, sqrt or cosine).
    steps : int, optional
        Length used when ``text`` gives none (e.g. the run's last logged step).
    where : str
        What the text belongs to, for messages.

    Returns
    -------
    Schedule
    """
    m = re.fullmatch(r"\s*([a-z]+)\s*(?::(.*))?", str(text))
    if m is None or m.group(1) not in KINDS:
        raise ScaleFitError(
            f"{where}: expected a schedule such as 'cosine:lr=3e-3,warmup=100' with kind one of "
            f"{', '.join(KINDS)}. Got {str(text)[:80]!r} instead."
        )
    settings: dict = {}
    for part in filter(None, (p.strip() for p in (m.group(2) or "").split(","))):
        key, _, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if key == "shape" and value in SHAPES:
            settings[key] = value
            continue
        if key == "shape":
            raise ScaleFitError(
                f"{where}: schedule shape must be one of {', '.join(SHAPES)}. Got {value!r}."
            )
        if key not in _NUM or not value:
            raise ScaleFitError(
                f"{where}: schedule settings are key=value with key one of "
                f"{', '.join([*_NUM, 'shape'])}. Got {part!r} instead."
            )
        try:
            number = float(value)
            settings[key] = int(number) if _NUM[key] is int and number.is_integer() else number
        except ValueError:
            raise ScaleFitError(
                f"{where}: schedule {key} must be a number. Got {value!r}."
            ) from None
    if "lr" not in settings:
        raise ScaleFitError(f"{where}: the schedule needs a peak learning rate, e.g. 'lr=3e-3'.")
    if "final_lr_ratio" in settings:
        ratio = settings.pop("final_lr_ratio")
        if "final_lr" in settings:
            raise ScaleFitError(f"{where}: give final_lr or final_lr_ratio, not both.")
        if not 0 <= ratio <= 1:
            raise ScaleFitError(
                f"{where}: schedule final_lr_ratio must be a number in [0, 1]. Got {ratio!r}."
            )
        settings["final_lr"] = ratio * float(settings["lr"])
    if "steps" not in settings:
        if steps is None:
            raise ScaleFitError(f"{where}: the schedule needs its length, e.g. 'steps=1000'.")
        settings["steps"] = int(steps)
    try:
        return Schedule(m.group(1), **settings)
    except ScaleFitError as exc:  # say whose schedule it is
        raise ScaleFitError(f"{where}: {exc}") from None


_FIELD = re.compile(r"\{\s*([^{}]*?)\s*\}")


def template_fields(text: str, *, where: str = "schedule") -> tuple[str, ...]:
    """The column names a schedule template reads, in order (empty for a plain schedule).

    Parameters
    ----------
    text : str
        A schedule in the grammar of :func:`parse_schedule` whose setting values may be
        ``{column}`` fields (a field is a whole value: ``lr={peak_lr}``, not ``lr=1{x}``).
    where : str
        What the text belongs to, for messages.

    Returns
    -------
    tuple of str
        Field names, each once.

    Examples
    --------
    >>> template_fields("cosine:lr={peak_lr},steps={total_steps},warmup=50")
    ('peak_lr', 'total_steps')
    """
    kind, _, rest = str(text).partition(":")
    if "{" in kind or "}" in kind:
        raise ScaleFitError(f"{where}: the schedule kind cannot be a {{column}} field.")
    names: list[str] = []
    for part in filter(None, (p.strip() for p in rest.split(","))):
        value = part.partition("=")[2].strip()
        m = _FIELD.fullmatch(value)
        if m is None and ("{" in value or "}" in value):
            raise ScaleFitError(
                f"{where}: a {{column}} field must be a whole setting value, e.g. "
                f"'lr={{peak_lr}}'. Got {part!r} instead."
            )
        if m is not None:
            if not m.group(1):
                raise ScaleFitError(f"{where}: empty field {{}} in {part!r}; name a column.")
            if m.group(1) not in names:
                names.append(m.group(1))
    return tuple(names)


def fill_template(
    text: str, values: dict[str, float], *, steps: int | None = None, where: str = "schedule"
) -> Schedule:
    """The schedule of one run: ``text`` with each ``{column}`` field replaced by its value.

    Parameters
    ----------
    text : str
        A schedule template (:func:`template_fields`).
    values : dict
        ``{column: number}`` for every field of the template.
    steps : int, optional
        Length used when the template gives none.
    where : str
        What the schedule belongs to (e.g. the file and run), for messages.

    Returns
    -------
    Schedule

    Examples
    --------
    >>> str(fill_template("cosine:lr={peak},steps={n},final_lr_ratio=0.1", {"peak": 1e-3, "n": 90}))
    'cosine:lr=0.001,steps=90,final_lr=0.0001'
    """
    fields = template_fields(text, where=where)
    missing = [f for f in fields if f not in values]
    if missing:
        raise ScaleFitError(f"{where}: no value for the schedule field {{{missing[0]}}}.")

    def value(m: re.Match) -> str:
        return repr(float(values[m.group(1)]))

    return parse_schedule(_FIELD.sub(value, str(text)), steps=steps, where=where)


# ------------------------------------------------------------------------------ the areas
def warmup_of(lr: np.ndarray) -> int:
    """The warm-up read from rates: updates up to the first at the peak, when the rate rises to it.

    0 when the first update is at the peak or the rate does not rise monotonically to it.
    """
    eta = np.asarray(lr, dtype=float)
    peak = int(np.argmax(eta))
    return peak + 1 if peak and np.all(np.diff(eta[: peak + 1]) >= 0) else 0


def decay_drops(lr: np.ndarray, warmup: int | None = None) -> np.ndarray:
    """``d_k = eta_{k-1} - eta_k`` of updates ``k = 1 .. T``, zero for the ``warmup`` updates.

    Parameters
    ----------
    lr : array, shape (T,)
        Learning rate of each update.
    warmup : int, optional
        Warm-up updates ``W`` (update ``W`` is at the peak; the drop into ``W + 1`` counts).
        Default or negative: :func:`warmup_of`.

    Returns
    -------
    ndarray, shape (T,)
        ``d_1 = 0`` (``eta_0 = eta_1``).
    """
    eta = np.asarray(lr, dtype=float)
    w = warmup_of(eta) if warmup is None or warmup < 0 else int(warmup)
    d = np.concatenate([[0.0], eta[:-1] - eta[1:]])
    d[:w] = 0.0
    return d


def areas(
    lr: np.ndarray, *, momentum: float = MOMENTUM, warmup: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Forward area ``S1`` and annealing area ``S2`` after each update.

    Parameters
    ----------
    lr : array, shape (T,)
        Learning rate of updates ``1 .. T`` (finite, >= 0).
    momentum : float, default 0.999
        Decay factor ``lam`` of the annealing momentum, in [0, 1) (0.999: our default).
    warmup : int, optional
        Warm-up updates whose drops do not feed the momentum (:func:`decay_drops`). Default: read
        from the rates (:func:`warmup_of`).

    Returns
    -------
    (S1, S2) : tuple of arrays, shape (T,)
        ``S1[s-1]`` and ``S2[s-1]`` are the areas after update ``s``.

    Examples
    --------
    >>> s1, s2 = areas(np.array([1.0, 1.0, 0.5, 0.5]), momentum=0.5)
    >>> s1.tolist(), s2.tolist()
    ([1.0, 2.0, 2.5, 3.0], [0.0, 0.0, 0.5, 0.75])
    """
    eta = np.asarray(lr, dtype=float)
    if eta.ndim != 1 or eta.size == 0 or not np.all(np.isfinite(eta)) or np.any(eta < 0):
        raise ScaleFitError("learning rates must be a non-empty sequence of finite numbers >= 0.")
    validate("the annealing area", locals(), {"momentum": [Interval(float, 0, 1, closed="left")]})
    w = warmup_of(eta) if warmup is None or warmup < 0 else int(warmup)
    s1, s2, _ = _advance(eta, (eta[0], 0.0, 0.0, 0.0), momentum, w, 1)
    return s1, s2


def _advance(eta: np.ndarray, state: tuple, lam: float, warmup: int, first: int):
    """``S1``, ``S2`` of updates ``first ..`` (rates ``eta``) after ``state`` and the next state.

    ``state`` is (rate, momentum, S1, S2) after update ``first - 1`` (the first block: the
    first rate and zeros, so ``d_1 = 0``). Blocks give the same floats as one pass.
    """
    from scipy.signal import lfilter

    prev, m0, s1, s2 = state
    d = np.concatenate([[prev], eta[:-1]]) - eta
    d[: max(0, warmup - first + 1)] = 0.0  # the drops of updates k <= W
    m = lfilter([1.0], [1.0, -lam], d, zi=[lam * m0])[0]
    a1 = np.cumsum(np.concatenate([[s1], eta]))[1:]
    a2 = np.cumsum(np.concatenate([[s2], m]))[1:]
    return a1, a2, (eta[-1], m[-1], a1[-1], a2[-1])


def areas_at(
    schedule: Schedule, steps, *, momentum: float = MOMENTUM
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Learning rate, ``S1`` and ``S2`` of ``schedule`` after each of ``steps``.

    The schedule is walked in blocks up to the largest step asked for, keeping only the values
    asked for: the same numbers as :func:`areas`
    over :meth:`Schedule.sequence`, without holding the whole schedule.

    Parameters
    ----------
    schedule : Schedule
        The schedule (its warm-up zeroes the drops of its first updates).
    steps : array-like of int
        Updates, in ``1 .. schedule.steps``.
    momentum : float, default 0.999
        Decay factor of the annealing momentum, in [0, 1).

    Returns
    -------
    (lr, S1, S2) : tuple of arrays, shape of ``steps``

    Examples
    --------
    >>> s = Schedule("linear", lr=1.0, steps=4)
    >>> [a.tolist() for a in areas_at(s, [2, 4], momentum=0.5)]
    [[0.5, 0.0], [1.25, 1.5], [0.25, 1.0625]]
    """
    validate("the annealing area", locals(), {"momentum": [Interval(float, 0, 1, closed="left")]})
    idx = np.asarray(steps, dtype=float).reshape(-1)
    if idx.size == 0 or not np.all(np.isfinite(idx)) or idx.min() < 1 or idx.max() > schedule.steps:
        raise ScaleFitError(f"{schedule}: steps must lie in 1 .. {schedule.steps}.")
    idx = idx.astype(np.int64)
    last = int(idx.max())
    out, state = np.empty((3, idx.size)), None
    for first in range(1, last + 1, _CHUNK):
        eta = schedule.lr_at(np.arange(first, min(first + _CHUNK, last + 1)))
        state = state or (eta[0], 0.0, 0.0, 0.0)
        s1, s2, state = _advance(eta, state, momentum, schedule.warmup, first)
        sel = (idx >= first) & (idx < first + eta.size)
        pos = idx[sel] - first
        out[:, sel] = eta[pos], s1[pos], s2[pos]
    shape = np.shape(steps)
    return tuple(a.reshape(shape) for a in out)
