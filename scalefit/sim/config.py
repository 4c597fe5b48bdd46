"""Settings of the teacher–student toy (Liu et al., exp-9 family) and the two presets.

This module is torch-free so that specs can be validated without importing torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..core._validation import (
    Interval,
    Matches,
    Options,
    fmt_value,
    validate,
    validate_mapping,
)
from ..core.errors import ScaleFitError

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
        _validate(asdict(self), "ToyConfig", noun="parameter")
        self.depths = sorted({int(d) for d in self.depths})
        self.eval_steps = sorted({int(s) for s in self.eval_steps})

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

    def memory_bytes(self, *, device_type: str = "cpu") -> int:
        """Upper bound of the bytes one run of this configuration allocates.

        Counted in the run's dtype: the teacher's layers (``8·W² + 4·W`` values each, three
        copies while they are drawn) and head; every student layer (``k`` active students, the
        same size each) and head four times over (weights, gradients, Adam's two moments); the
        hand-written backward pass's caches (``2·4W + 2·W`` values per example, student and
        layer, twice for the midpoint block) and logits for one chunk of the batch
        (``micro_batch`` on CPUs, else the whole batch); the test set with the teacher's
        targets, and one evaluation chunk of at most 8192 examples.

        Examples
        --------
        >>> preset("cpu").memory_bytes() < 2e9
        True
        """
        size = 8 if self.dtype == "float64" else 4
        w, hidden, c = self.width, 4 * self.width, self.classes
        layer = 2 * w * hidden + hidden
        students = self.replicas * len(self.depths)
        student_layers = self.replicas * sum(self.depths)
        teacher = 3 * self.teacher_depth * layer + w * c
        states = 4 * (student_layers * layer + (0 if self.loss == "mse" else students * w * c))
        chunk = self.batch
        if device_type == "cpu" and 0 < self.micro_batch < self.batch:
            chunk = self.micro_batch
        branches = 2 if self.block == "midpoint" else 1
        caches = chunk * (student_layers * branches * (2 * hidden + 2 * w) + students * 4 * c)
        batch = self.batch * (3 * hidden + 2 * w + 2 * c)
        evaluation = min(self.test_size, 8192) * students * (4 * c + 4 * w)
        test = self.test_size * (w + c)
        return size * (teacher + states + caches + batch + evaluation + test)

    @classmethod
    def from_dict(cls, config: dict, *, where: str = "toy config") -> ToyConfig:
        """Build from a dict, rejecting unknown keys and bad values before any work starts.

        Raises
        ------
        ScaleFitError
            ``The 'width' key of <where> must be an int in the range [1, 65536]. Got 'two'
            instead.`` (unknown keys get a "did you mean").
        """
        validate_mapping(where, config, CONSTRAINTS)
        _validate({**asdict(cls()), **config}, where, noun="key")
        return cls(**config)


@dataclass(frozen=True)
class _IntList:
    """A non-empty list of integers in [lo, hi]."""

    lo: int
    hi: int
    allow_empty: bool = False

    def accepts(self, value) -> bool:  # noqa: D102
        return (
            isinstance(value, list | tuple)
            and (self.allow_empty or len(value) > 0)
            and all(Interval(int, self.lo, self.hi).accepts(v) for v in value)
        )

    def describe(self) -> str:  # noqa: D102
        empty = "a list" if self.allow_empty else "a non-empty list"
        return f"{empty} of ints in the range [{self.lo}, {self.hi}]"


#: Declared constraints of every toy setting. Upper bounds keep a typo from asking for terabytes.
CONSTRAINTS: dict[str, list] = {
    "teacher_mode": [Options(TEACHER_MODES)],
    "rho": [Interval(float, 0, 1)],
    "temperature": [Interval(float, 0, None, closed="neither", finite=True)],
    "teacher_depth": [Interval(int, 1, 4096)],
    "width": [Interval(int, 1, 65536)],
    "classes": [Interval(int, 2, 1 << 20)],
    "depths": [_IntList(1, 4096)],
    "replicas": [Interval(int, 1, 1024)],
    "steps": [Interval(int, 1, 10**9)],
    "batch": [Interval(int, 1, 1 << 24)],
    "lr": [Interval(float, 0, None, closed="neither", finite=True)],
    "lr_depth_scaling": ["boolean"],
    "decay_frac": [Interval(float, 0, 1)],
    "decay_to": [Interval(float, 0, 1)],
    "loss": [Options(LOSSES)],
    "block": [Options(BLOCKS)],
    "test_size": [Interval(int, 1, 1 << 24)],
    "eval_steps": [_IntList(1, 10**9, allow_empty=True)],
    "seed": [Interval(int, 0, 2**63 - 1)],
    "device": [
        Matches(r"auto|cpu|mps|cuda(:\d+)?", "one of 'auto', 'cpu', 'cuda', 'cuda:N', 'mps'")
    ],
    "dtype": [Options(("float32", "float64"))],
    "checkpoint_every": [Interval(int, 0, None)],
    "micro_batch": [Interval(int, 0, None)],
}


def _validate(values: dict, owner: str, *, noun: str) -> None:
    """Declared constraints, then the cross-field rules."""
    validate(owner, values, CONSTRAINTS, noun=noun)
    late = [s for s in values["eval_steps"] if s > values["steps"]]
    if late:
        raise ScaleFitError(
            f"The 'eval_steps' {noun} of {owner} must lie in [1, steps={values['steps']}]. "
            f"Got {fmt_value(late[0])} instead."
        )
    if values["teacher_mode"] != "correlated" and values["rho"] not in (0, 0.0):
        raise ScaleFitError(
            f"The 'rho' {noun} of {owner} only applies to teacher_mode 'correlated'. Got "
            f"rho={fmt_value(values['rho'])} with teacher_mode {values['teacher_mode']!r} instead."
        )


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
    validate("the toy config", {"preset": name}, {"preset": [Options(set(PRESETS))]}, noun="key")
    base = dict(PRESETS[name])
    steps = overrides.get("steps")
    if isinstance(steps, int) and "eval_steps" not in overrides and "eval_steps" in base:
        base["eval_steps"] = [s for s in base["eval_steps"] if s < steps]
    return {**base, **overrides}
