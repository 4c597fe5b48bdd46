"""Learning-rate schedules and the schedule quantities of Tissue et al. (2024).

A :class:`Schedule` gives the learning rate of every optimiser update ``s = 1 .. steps``. From the
sequence ``eta_1 .. eta_T`` :func:`areas` computes, per step ``s``,

* the forward area ``S1(s) = sum_{k<=s} eta_k``;
* the annealing area ``S2(s) = sum_{k<=s} m_k`` with the momentum form
  ``m_k = lam * m_{k-1} + (eta_{k-1} - eta_k)`` (``m_0 = 0``, ``eta_0 = eta_1``), ``lam`` the
  decay factor (0.999 by default, the value Tissue et al. use).

Source: H. Tissue, V. Wang, L. Wang, *Scaling Law with Learning Rate Annealing*, arXiv:2408.11029
(2024), ``L(s) = L0 + A S1^-alpha - C S2``.

One convention is ours: the lr increases of a warm-up are not annealing, so the momentum is fed
only from the step after warm-up (``warmup`` steps, declared or read as the steps before the
first step at peak lr). For a schedule without warm-up the definition is the paper's, unchanged.

A schedule *template* names columns of a curve table in place of numbers,
``"cosine:lr={peak_lr},steps={total_steps},warmup=50,final_lr_ratio=0.1"``: each run's schedule
is the template with every ``{column}`` replaced by that run's value (:func:`template_fields`,
:func:`fill_template`). A field is a whole setting value; nothing in it is evaluated.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np

from .._validation import Interval, Options, validate
from ..errors import ScaleFitError

KINDS = ("constant", "cosine", "linear", "wsd")
#: Default decay factor of the annealing momentum (Tissue et al. 2024).
MOMENTUM = 0.999


@dataclass(frozen=True)
class Schedule:
    """A declared learning-rate schedule.

    Parameters
    ----------
    kind : {"constant", "cosine", "linear", "wsd"}
        Shape after warm-up: constant; cosine or linear decay from ``lr`` to ``final_lr`` over the
        remaining steps; warm-up–stable–decay (constant, then a linear decay to ``final_lr`` over
        the last ``decay`` fraction of the steps).
    lr : float
        Peak learning rate (> 0).
    steps : int
        Total optimiser steps of the schedule (> 0).
    warmup : int, default 0
        Linear warm-up steps from ``lr / warmup`` to ``lr``.
    decay : float, default 0.2
        WSD only: fraction of ``steps`` spent decaying, in (0, 1].
    final_lr : float, default 0
        Learning rate reached at the last step (cosine, linear, WSD), ``0 <= final_lr <= lr``.
    """

    kind: str
    lr: float
    steps: int
    warmup: int = 0
    decay: float = 0.2
    final_lr: float = 0.0

    def __post_init__(self) -> None:
        for name, cons in (
            ("kind", Options(set(KINDS))),
            ("lr", Interval(float, 0, None, closed="neither", finite=True)),
            ("steps", Interval(int, 1, None)),
            ("warmup", Interval(int, 0, self.steps, closed="left")),  # steps checked first
            ("decay", Interval(float, 0, 1, closed="right")),
            ("final_lr", Interval(float, 0, self.lr, finite=True)),
        ):
            validate("the schedule", {name: getattr(self, name)}, {name: [cons]}, noun="setting")

    def lr_at(self, step) -> np.ndarray:
        """Learning rate of update ``step`` (1-based; array-like)."""
        s = np.asarray(step, dtype=float)
        peak, fin, warm, total = self.lr, self.final_lr, self.warmup, self.steps
        out = np.full(s.shape, peak)
        if self.kind in ("cosine", "linear"):
            u = np.clip((s - warm) / max(1, total - warm), 0.0, 1.0)
            shape = 0.5 * (1 + np.cos(np.pi * u)) if self.kind == "cosine" else 1 - u
            out = fin + (peak - fin) * shape
        elif self.kind == "wsd":
            n_decay = max(1, round(self.decay * total))
            start = total - n_decay
            u = np.clip((s - start) / n_decay, 0.0, 1.0)
            out = peak - (peak - fin) * u
        if warm:
            out = np.where(s <= warm, peak * s / warm, out)
        return out

    def sequence(self, steps: int | None = None) -> np.ndarray:
        """Learning rates of updates ``1 .. steps`` (default: the schedule's length)."""
        n = self.steps if steps is None else int(steps)
        return self.lr_at(np.arange(1, n + 1))

    def to_dict(self) -> dict:
        """JSON-safe settings."""
        return asdict(self)

    def __str__(self) -> str:
        keys = ["lr", "steps"] + (["warmup"] if self.warmup else [])
        if self.kind == "wsd":
            keys.append("decay")
        if self.kind != "constant":
            keys.append("final_lr")

        def text(k: str) -> str:
            v = getattr(self, k)
            return str(int(v)) if k in ("steps", "warmup") else repr(float(v))

        return self.kind + ":" + ",".join(f"{k}={text(k)}" for k in keys)


_NUM = {
    "lr": float,
    "steps": int,
    "warmup": int,
    "decay": float,
    "final_lr": float,
    "final_lr_ratio": float,
}


def parse_schedule(text: str, *, steps: int | None = None, where: str = "schedule") -> Schedule:
    """Parse ``"kind:key=value,..."`` (e.g. ``"wsd:lr=3e-3,warmup=100,decay=0.2"``).

    Parameters
    ----------
    text : str
        Schedule kind and settings (``lr``, ``steps``, ``warmup``, ``decay``, ``final_lr``;
        or ``final_lr_ratio``, the final learning rate as a fraction of ``lr`` in [0, 1]).
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
        key = key.strip()
        if key not in _NUM or not value.strip():
            raise ScaleFitError(
                f"{where}: schedule settings are key=value with key one of "
                f"{', '.join(_NUM)}. Got {part!r} instead."
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
    return Schedule(m.group(1), **settings)


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


def areas(
    lr: np.ndarray, *, momentum: float = MOMENTUM, warmup: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Forward area ``S1`` and annealing area ``S2`` after each update.

    Parameters
    ----------
    lr : array, shape (T,)
        Learning rate of updates ``1 .. T`` (finite, >= 0).
    momentum : float, default 0.999
        Decay factor ``lam`` of the annealing momentum, in [0, 1).
    warmup : int, optional
        Warm-up steps whose lr increases do not feed the momentum. Default: the steps before the
        first update at the peak lr, when the lr rises to that peak.

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
    from scipy.signal import lfilter

    eta = np.asarray(lr, dtype=float)
    if eta.ndim != 1 or eta.size == 0 or not np.all(np.isfinite(eta)) or np.any(eta < 0):
        raise ScaleFitError("learning rates must be a non-empty sequence of finite numbers >= 0.")
    validate("the annealing area", locals(), {"momentum": [Interval(float, 0, 1, closed="left")]})
    if warmup is None:
        peak = int(np.argmax(eta))
        warmup = peak if peak and np.all(np.diff(eta[: peak + 1]) >= 0) else 0
    drops = np.concatenate([[0.0], eta[:-1] - eta[1:]])
    drops[: int(warmup) + 1] = 0.0
    m = lfilter([1.0], [1.0, -momentum], drops)
    return np.cumsum(eta), np.cumsum(m)
