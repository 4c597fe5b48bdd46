"""Training loop of the toy: one teacher forward per step feeds every student.

Resumable: with a ``run_dir`` the full state (students, Adam moments, data generator, recorded
rows) is saved atomically at every evaluation step and every ``checkpoint_every`` steps, with its
SHA-256 in the folder's ``checksums.json`` (:mod:`scalefit.core._manifest`), and a restarted run
continues from the last save with the same numbers it would have produced. A ``state.pt`` that
does not match its checksums is refused before it is read.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..core._manifest import load_torch, save_torch
from ..core._torch import pick_device, seed_all
from ..core.errors import ScaleFitError
from .config import ToyConfig
from .model import StudentStack, Teacher, _stream

STATE_FILE = "state.pt"
CURVE_EVERY = 100
_BETAS, _EPS = (0.9, 0.999), 1e-8


@dataclass
class ToyRun:
    """Everything a finished toy run produced.

    Attributes
    ----------
    config : ToyConfig
    teacher : Teacher
    students : StudentStack
    rows : list of dict
        One per (student, evaluation step): ``depth, replica, steps, train_loss, test_loss``.
    curve : list of dict
        Mean training loss per student over each block of ``CURVE_EVERY`` steps.
    teacher_entropy : float
        Mean entropy of the tempered teacher on the test set (NaN for the MSE loss).
    wall_s : float
        Seconds spent in this process (a resumed run counts only its own part).
    start_step : int
        Step this process started from (> 0 when resumed from ``state.pt``).
    """

    config: ToyConfig
    teacher: Teacher
    students: StudentStack
    rows: list = field(default_factory=list)
    curve: list = field(default_factory=list)
    teacher_entropy: float = math.nan
    wall_s: float = 0.0
    start_step: int = 0


def lr_factor(config: ToyConfig, step: int) -> float:
    """Learning-rate multiplier at ``step`` (1-based): 1, then linear to ``decay_to``."""
    start = config.steps * (1.0 - config.decay_frac)
    if config.decay_frac <= 0 or step <= start:
        return 1.0
    frac = (step - start) / (config.steps - start)
    return 1.0 + frac * (config.decay_to - 1.0)


class _Adam:
    """Adam over the stacked students with a per-student learning rate (torch's Adam math).

    A student's rows sit in many layer tensors, and each row has its student's learning rate,
    which ``torch.optim.Adam`` (one rate per tensor) cannot express. So the parameters are moved
    (``Tensor.set_``, in place: every holder of a parameter sees the move) into one flat buffer,
    the moments and the per-element learning rate are flat buffers of the same layout, and a step
    is a few vectorised operations on the whole buffer, whatever the number of tensors. The update
    is ``torch.optim.Adam``'s (tested against it): ``m`` lerps to the gradient, ``v`` to its
    square, and ``p -= lr * factor / (1 - b1**t) * m / (sqrt(v) / sqrt(1 - b2**t) + eps)``.
    """

    def __init__(self, students: StudentStack, config: ToyConfig) -> None:
        self.params = students.params
        first = self.params[0]
        self.sizes = [p.numel() for p in self.params]
        flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        offset = 0
        for p, size in zip(self.params, self.sizes, strict=True):
            p.set_(flat.untyped_storage(), offset, p.shape)  # now a view of the flat buffer
            offset += size
        self.flat = flat
        self.m_flat = torch.zeros_like(flat)
        self.v_flat = torch.zeros_like(flat)
        # the gathered gradient and one scratch buffer, reused by every step (no allocation)
        self.g_flat = torch.empty_like(flat)
        self.scratch = torch.empty_like(flat)
        self.m = self._views(self.m_flat)
        self.v = self._views(self.v_flat)
        self.t = 0
        depth = torch.tensor(students.student_depths, dtype=first.dtype)
        scale = depth.rsqrt() if config.lr_depth_scaling else torch.ones_like(depth)
        scale = (scale * config.lr).to(first.device)
        self.lr_flat = torch.cat(
            [
                scale[: p.shape[0]].view(-1, *([1] * (p.dim() - 1))).expand(p.shape).reshape(-1)
                for p in self.params
            ]
        )

    def _views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        return [
            part.view(p.shape)
            for part, p in zip(torch.split(flat, self.sizes), self.params, strict=True)
        ]

    def step(self, factor: float) -> None:
        self.t += 1
        b1, b2 = _BETAS
        with torch.no_grad():
            grad = torch.cat([p.grad.reshape(-1) for p in self.params], out=self.g_flat)
            self.m_flat.lerp_(grad, 1 - b1)
            self.v_flat.mul_(b2).addcmul_(grad, grad, value=1 - b2)
            step = torch.sqrt(self.v_flat, out=self.scratch)  # the denominator, then the step
            step.div_(math.sqrt(1 - b2**self.t)).add_(_EPS)
            torch.div(self.m_flat, step, out=step).mul_(self.lr_flat)
            self.flat.add_(step, alpha=-factor / (1 - b1**self.t))
        for p in self.params:
            p.grad = None

    def state(self) -> dict:
        return {"m": self.m, "v": self.v, "t": self.t}

    def load(self, state: dict) -> None:
        for dst, src in zip(self.m + self.v, state["m"] + state["v"], strict=True):
            dst.copy_(src)
        self.t = int(state["t"])


def _test_set(config: ToyConfig, teacher: Teacher, device):
    gen = torch.Generator().manual_seed(_stream(config.seed, 4))
    x = torch.randn(config.test_size, config.width, generator=gen, dtype=teacher.head.dtype)
    x = x.to(device)
    target = torch.cat([teacher.target(c, config.loss) for c in x.split(8192)])
    entropy = math.nan
    if config.loss == "kl":
        entropy = float(-(target.exp() * target).sum(-1).mean())
    return x, target, entropy


@torch.no_grad()
def evaluate(students: StudentStack, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-student mean loss on a fixed test set (chunked), shape ``(S,)``."""
    total = torch.zeros(len(students.students), dtype=torch.float64)
    for xc, tc in zip(x.split(8192), target.split(8192), strict=True):
        total += students.losses(xc, tc).double().cpu() * xc.shape[0]
    return total / x.shape[0]


def train_toy(config: ToyConfig, run_dir: str | Path | None = None) -> ToyRun:
    """Train every student of ``config`` against one teacher.

    Parameters
    ----------
    config : ToyConfig
    run_dir : path-like, optional
        Where to keep the resumable ``state.pt``; if it holds a state for the same config, the
        run continues from there.

    Returns
    -------
    ToyRun
    """
    t_start = time.perf_counter()
    device = pick_device(None if config.device == "auto" else config.device)
    seed_all(config.seed)
    teacher, students = Teacher(config, device), StudentStack(config, device)
    adam = _Adam(students, config)
    x_test, y_test, entropy = _test_set(config, teacher, device)
    run = ToyRun(config, teacher, students, teacher_entropy=entropy)
    data = torch.Generator().manual_seed(_stream(config.seed, 3))
    n = len(students.students)
    acc = {
        "eval": torch.zeros(n, dtype=torch.float64, device=device),
        "curve": torch.zeros(n, dtype=torch.float64, device=device),
    }
    start = _resume(run_dir, config, students, adam, data, run, acc)
    run.start_step = start
    evals = set(config.evaluation_steps())
    dtype = teacher.head.dtype
    last_eval = max([0] + [s for s in evals if s <= start])
    micro = config.micro_batch if device.type == "cpu" else 0  # a cache trick for CPUs only
    for step in range(start + 1, config.steps + 1):
        x = torch.randn(config.batch, config.width, generator=data, dtype=dtype).to(device)
        target = teacher.target(x, config.loss)
        losses = students.loss_and_grad(x, target, micro_batch=micro)
        adam.step(lr_factor(config, step))
        detached = losses.detach().double()  # stays on the device: no sync per step
        acc["eval"] += detached
        acc["curve"] += detached
        if step % CURVE_EVERY == 0 or step == config.steps:
            count = step - (step - 1) // CURVE_EVERY * CURVE_EVERY
            run.curve.extend(_records(students, step, train=acc["curve"] / count))
            acc["curve"].zero_()
        if step in evals:
            test = evaluate(students, x_test, y_test)
            run.rows.extend(
                _records(students, step, train=acc["eval"] / (step - last_eval), test=test)
            )
            acc["eval"].zero_()
            last_eval = step
        save = step in evals or (config.checkpoint_every and step % config.checkpoint_every == 0)
        if run_dir is not None and save and step < config.steps:
            _save(run_dir, config, students, adam, data, run, acc, step)
    run.wall_s = time.perf_counter() - t_start
    return run


def _records(students: StudentStack, step: int, *, train, test=None) -> list[dict]:
    train = train.cpu()
    out = []
    for i, (depth, replica) in enumerate(students.students):
        row = {"depth": depth, "replica": replica, "steps": step, "train_loss": float(train[i])}
        if test is not None:
            row["test_loss"] = float(test[i])
        out.append(row)
    return out


def _save(run_dir, config, students, adam, data, run, acc, step) -> None:
    state = {
        "config": config.to_dict(),
        "step": step,
        "students": students.state_dict(),
        "adam": adam.state(),
        "data": data.get_state(),
        "rows": run.rows,
        "curve": run.curve,
        "acc": acc,
    }
    save_torch(run_dir, STATE_FILE, state)


def _resume(run_dir, config, students, adam, data, run, acc) -> int:
    path = None if run_dir is None else Path(run_dir) / STATE_FILE
    if path is None or not os.path.lexists(path):
        return 0
    state = load_torch(
        path,
        what="toy training state",
        map_location=students.params[0].device,
        remedy="delete it to start this run afresh.",
    )
    if not isinstance(state, dict) or state.get("config") != config.to_dict():
        return 0
    try:
        _check_tensors(state["students"], students.params, "students")
        _check_tensors(state["adam"]["m"], students.params, "adam m")
        _check_tensors(state["adam"]["v"], students.params, "adam v")
        _check_tensors([state["acc"][k] for k in acc], list(acc.values()), "acc")
        students.load_state_dict(state["students"])
        adam.load(state["adam"])
        data.set_state(state["data"].cpu())
        run.rows = _checked_records(state["rows"], "rows", test=True)
        run.curve = _checked_records(state["curve"], "curve", test=False)
        for key in acc:
            acc[key].copy_(state["acc"][key])
        step = int(state["step"])
        if not 0 < step < config.steps:
            raise ValueError(f"step {step} outside (0, {config.steps})")
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise ScaleFitError(
            f"{path}: not a resumable toy state ({type(exc).__name__}: {detail}); delete it to "
            f"start this run afresh."
        ) from None
    return step


def _checked_records(records, name: str, *, test: bool) -> list[dict]:
    """Recorded rows of a saved state, each with the keys and types :func:`_records` writes."""
    if type(records) is not list:
        raise TypeError(f"'{name}' is a {type(records).__name__}, expected a list")
    keys = {"depth": int, "replica": int, "steps": int, "train_loss": float}
    if test:
        keys["test_loss"] = float
    for row in records:
        ok = type(row) is dict and set(row) == set(keys)
        if not ok or not all(type(row[k]) is t for k, t in keys.items()):
            raise ValueError(f"a '{name}' entry is {str(row)[:80]}")
    return list(records)


def _check_tensors(saved, like: list, name: str) -> None:
    """Saved tensors of exactly the shapes and dtypes of ``like`` (no silent broadcasting)."""
    if type(saved) is not list or len(saved) != len(like):
        raise ValueError(f"'{name}' is not a list of {len(like)} tensors")
    for got, want in zip(saved, like, strict=True):
        if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
            shown = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            raise ValueError(f"'{name}' holds {shown}, expected {tuple(want.shape)} {want.dtype}")
