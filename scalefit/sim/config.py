"""Settings of the teacher–student toy (Liu et al., exp-9 family) and the two presets.

This module is torch-free so that specs can be validated without importing torch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

from ..errors import ScaleFitError

TEACHER_MODES = ("independent", "tied", "correlated")
LOSSES = ("kl", "mse")
BLOCKS = ("euler", "midpoint")
PAPER_DEPTHS = [6, 12, 16, 24, 32, 48]


@dataclass
class ToyConfig:
    """One toy experiment: a teacher and every student depth trained together on it.

    The defaults are the paper's recipe (the ``paper`` preset).

    Parameters
    ----------
    teacher_mode : {"independent", "tied", "correlated"}
        Independent layers (random walk), one shared layer (smooth dynamics), or a mix:
        ``correlated`` uses layer weights √ρ·shared + √(1−ρ)·own (our addition, not the paper's).
    rho : float
        Correlation for ``correlated`` (0 = independent, 1 = tied); ignored otherwise.
    temperature : float
        τ: the teacher's logits are divided by τ.
    teacher_depth : int
        ℓ* (128); every teacher W_proj is multiplied by 1/√ℓ*.
    width : int
        Residual width (32); the MLP is 4× wide and the output has ``classes`` classes.
    classes : int
        Number of output classes (128).
    depths : list of int
        Student depths, all trained together against one teacher forward per step.
    replicas : int
        Student initialisations per depth (trained together, same batches).
    steps, batch, lr : int, int, float
        Adam steps, batch size and learning rate (40k, 1024, 6e-4).
    lr_depth_scaling : bool
        Scale each student's learning rate by ℓ^(−1/2) (a later variant of the paper's code).
    decay_frac, decay_to : float
        Linear decay of the learning rate to ``decay_to``·lr over the last ``decay_frac`` of
        steps (0 = constant, the paper's default).
    loss : {"kl", "mse"}
        KL(teacher ‖ student), batch mean; or MSE between the final normalised states (no head).
    block : {"euler", "midpoint"}
        Student block: h + f(h), or the second-order midpoint rule h + f(h + f(h)/2).
    test_size : int
        Size of the fixed test set (drawn once from the seed; the teacher's test outputs are
        computed once).
    eval_steps : list of int
        Steps at which train and test loss are recorded (empty: 12 log-spaced points).
    seed : int
        Seeds the teacher, the student initialisation, the data and the test set.
    device, dtype : str
        ``"cpu"``, ``"cuda"`` or ``"auto"``; ``"float32"`` or ``"float64"``.
    checkpoint_every : int
        Save a resumable state every this many steps (0: only at evaluation steps).
    micro_batch : int
        Run each batch through the students in chunks of this size and sum the gradients (same
        numbers up to rounding, faster on CPUs because the activations stay in cache; 0: off;
        ignored on GPUs).
    """

    teacher_mode: str = "independent"
    rho: float = 0.0
    temperature: float = 1.0
    teacher_depth: int = 128
    width: int = 32
    classes: int = 128
    depths: list = field(default_factory=lambda: list(PAPER_DEPTHS))
    replicas: int = 1
    steps: int = 40_000
    batch: int = 1024
    lr: float = 6e-4
    lr_depth_scaling: bool = False
    decay_frac: float = 0.0
    decay_to: float = 0.1
    loss: str = "kl"
    block: str = "euler"
    test_size: int = 10_240
    eval_steps: list = field(default_factory=list)
    seed: int = 0
    device: str = "cpu"
    dtype: str = "float32"
    checkpoint_every: int = 0
    micro_batch: int = 256

    def __post_init__(self) -> None:
        self.depths = sorted({int(d) for d in self.depths}) if _intlist(self.depths) else None
        self.eval_steps = (
            sorted({int(s) for s in self.eval_steps}) if _intlist(self.eval_steps) else None
        )
        _validate(self)

    @property
    def effective_rho(self) -> float:
        """ρ actually used: 0 for independent, 1 for tied, ``rho`` for correlated."""
        return {"independent": 0.0, "tied": 1.0}.get(self.teacher_mode, float(self.rho))

    def evaluation_steps(self) -> list[int]:
        """Return the evaluation steps: ``eval_steps`` or 12 log-spaced points, plus the last."""
        if self.eval_steps:
            return sorted({*self.eval_steps, self.steps})
        pts = {int(round(self.steps * 10 ** (k / 4 - 2.75))) for k in range(12)}
        return sorted({p for p in pts if 1 <= p < self.steps} | {self.steps})

    def to_dict(self) -> dict:
        """JSON-safe dict of every setting."""
        return asdict(self)

    @classmethod
    def from_dict(cls, config: dict, *, where: str = "toy config") -> ToyConfig:
        """Build from a dict, rejecting unknown keys.

        Raises
        ------
        ScaleFitError
            Unknown keys or bad values (the message names the key and what was expected).
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ScaleFitError(f"{where}: unknown setting(s) {unknown}; known: {sorted(known)}.")
        try:
            return cls(**config)
        except ScaleFitError as exc:
            raise ScaleFitError(f"{where}: {exc}") from exc
        except (TypeError, ValueError) as exc:
            raise ScaleFitError(f"{where}: bad value ({exc}).") from exc


def _intlist(value) -> bool:
    return isinstance(value, list | tuple) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    )


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ScaleFitError(message)


def _validate(c: ToyConfig) -> None:
    _check(c.teacher_mode in TEACHER_MODES, f"'teacher_mode' must be one of {TEACHER_MODES}.")
    _check(c.loss in LOSSES, f"'loss' must be one of {LOSSES}, got {c.loss!r}.")
    _check(c.block in BLOCKS, f"'block' must be one of {BLOCKS}, got {c.block!r}.")
    _check(c.dtype in ("float32", "float64"), f"'dtype' must be float32/float64, got {c.dtype!r}.")
    _check(c.depths is not None and len(c.depths) > 0, "'depths' must be a list of integers.")
    _check(min(c.depths) >= 1, f"'depths' must be ≥ 1, got {c.depths}.")
    _check(c.eval_steps is not None, "'eval_steps' must be a list of integers.")
    for name in ("teacher_depth", "width", "classes", "replicas", "steps", "batch", "test_size"):
        value = getattr(c, name)
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        _check(ok, f"'{name}' must be an integer ≥ 1, got {value!r}.")
    _check(c.classes >= 2, f"'classes' must be ≥ 2, got {c.classes}.")
    _check(all(1 <= s <= c.steps for s in c.eval_steps), "'eval_steps' must lie in [1, steps].")
    _check(isinstance(c.seed, int) and c.seed >= 0, f"'seed' must be an integer ≥ 0, got {c.seed}.")
    for name in ("checkpoint_every", "micro_batch"):
        value = getattr(c, name)
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        _check(ok, f"'{name}' must be an integer ≥ 0, got {value!r}.")
    for name, lo, hi in (("rho", 0, 1), ("decay_frac", 0, 1), ("decay_to", 0, 1)):
        value = getattr(c, name)
        ok = isinstance(value, int | float) and math.isfinite(value) and lo <= value <= hi
        _check(ok, f"'{name}' must be a number in [{lo}, {hi}], got {value!r}.")
    for name in ("temperature", "lr"):
        value = getattr(c, name)
        ok = isinstance(value, int | float) and math.isfinite(value) and value > 0
        _check(ok, f"'{name}' must be a positive number, got {value!r}.")
    _check(isinstance(c.lr_depth_scaling, bool), "'lr_depth_scaling' must be true or false.")
    _check(isinstance(c.device, str), f"'device' must be a string, got {c.device!r}.")


PRESETS: dict[str, dict] = {
    "paper": {},
    # Measured on 2 shared cores; see toy/README.md and docs/toy.md for what it changes.
    "cpu": {
        "batch": 256,
        "steps": 12_000,
        "lr": 1.2e-3,
        "decay_frac": 0.25,
        "decay_to": 0.1,
        "test_size": 32_768,
        "eval_steps": [500, 1000, 1500, 2000, 3000, 4000, 6000, 8000, 9000, 10_000, 11_000],
        "checkpoint_every": 1000,
    },
}


def preset(name: str, **overrides) -> ToyConfig:
    """Return the ``paper`` or ``cpu`` preset, with optional overrides.

    When ``steps`` is overridden but ``eval_steps`` is not, the preset's evaluation steps beyond
    the new ``steps`` are dropped (the last step is always evaluated).

    Examples
    --------
    >>> preset("cpu", teacher_mode="tied").batch
    256
    >>> preset("cpu", steps=2000).evaluation_steps()
    [500, 1000, 1500, 2000]
    """
    return ToyConfig.from_dict(merge_preset(name, overrides), where=f"preset {name!r}")


def merge_preset(name: str, overrides: dict) -> dict:
    """Return the settings of preset ``name`` updated with ``overrides`` (see :func:`preset`)."""
    if name not in PRESETS:
        raise ScaleFitError(f"unknown preset {name!r}; expected one of {sorted(PRESETS)}.")
    base = dict(PRESETS[name])
    steps = overrides.get("steps")
    if isinstance(steps, int) and "eval_steps" not in overrides and "eval_steps" in base:
        base["eval_steps"] = [s for s in base["eval_steps"] if s < steps]
    return {**base, **overrides}
