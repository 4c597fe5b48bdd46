"""Probe a saved toy run (``model.pt``): per-layer angles and mechanism verdicts."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..core.errors import ScaleFitError


def load_model(path: str | os.PathLike) -> dict:
    """Load a toy run's ``model.pt`` (a run folder or the file itself).

    The file must match the run folder's ``checksums.json`` (written with it); anything else is
    refused before it is parsed, and then only tensors and plain data are loaded.

    Returns
    -------
    dict
        ``config`` (:class:`~scalefit.sim.config.ToyConfig`), ``teacher``
        (:class:`~scalefit.sim.model.Teacher` with the saved weights) and ``students``
        (``{(depth, replica): weights}``).
    """
    from ..core._manifest import load_torch
    from .config import ToyConfig
    from .model import Teacher
    from .sweep_task import MODEL_FILE

    path = Path(path)
    if path.is_dir():
        path = path / MODEL_FILE
    if not os.path.lexists(path):
        raise ScaleFitError(
            f"{path}: no saved toy model (expected a run folder with {MODEL_FILE})."
        )
    payload = load_torch(
        path, what="toy model", remedy="run the toy sweep again to write a model scalefit trusts."
    )
    try:
        config = ToyConfig.from_dict({**payload["config"], "device": "cpu"}, where=str(path))
        teacher_state = payload["teacher"]
        students_state = dict(payload["students"])
    except (KeyError, TypeError, AttributeError) as exc:
        raise ScaleFitError(
            f"{path}: not a toy model file (expected the keys config, teacher, students; "
            f"{type(exc).__name__}: {exc})."
        ) from None
    students = _check_payload(path, config, teacher_state, students_state)
    teacher = Teacher(config)
    teacher.layers = dict(teacher_state["layers"])
    teacher.head = teacher_state["head"]
    return {"config": config, "teacher": teacher, "students": students}


def _check_payload(path: Path, config, teacher_state, students_state) -> dict:
    """Every tensor present, floating, finite and of the shape the config implies."""
    width, hidden, classes = config.width, 4 * config.width, config.classes

    def shapes(depth: int) -> dict:
        return {
            "fc_w": (depth, width, hidden),
            "fc_b": (depth, 1, hidden),
            "proj_w": (depth, hidden, width),
        }

    def check(where: str, weights, expected: dict) -> None:
        if not isinstance(weights, dict):
            raise ScaleFitError(f"{path}: {where} must be a table of tensors. Got {weights!r:.60}.")
        for name, shape in expected.items():
            t = weights.get(name)
            ok = isinstance(t, torch.Tensor) and t.is_floating_point() and tuple(t.shape) == shape
            if not ok:
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ScaleFitError(
                    f"{path}: {where} '{name}' must be a float tensor of shape {shape} (from the "
                    f"saved config). Got {got} instead."
                )
            if not bool(torch.isfinite(t).all()):
                raise ScaleFitError(f"{path}: {where} '{name}' holds NaN or infinite values.")

    import torch

    if not isinstance(teacher_state, dict):
        raise ScaleFitError(f"{path}: 'teacher' must be a table with 'layers' and 'head'.")
    check("teacher layers", teacher_state.get("layers"), shapes(config.teacher_depth))
    check("teacher", teacher_state, {"head": (width, classes)})
    if not students_state:
        raise ScaleFitError(f"{path}: the file holds no student; expected one per depth.")
    students = {}
    for key, weights in students_state.items():
        m = re.fullmatch(r"(\d+)_(\d+)", str(key))
        if m is None or int(m[1]) not in config.depths or int(m[2]) >= config.replicas:
            raise ScaleFitError(
                f"{path}: student key {key!r} must be '<depth>_<replica>' with a depth of "
                f"{config.depths} and a replica below {config.replicas}."
            )
        check(f"student {key}", weights, shapes(int(m[1])))
        students[(int(m[1]), int(m[2]))] = weights
    dtypes = {t.dtype for w in [teacher_state["layers"], *students.values()] for t in w.values()}
    if len(dtypes | {teacher_state["head"].dtype}) > 1:
        raise ScaleFitError(f"{path}: the tensors mix dtypes {sorted(map(str, dtypes))}.")
    return students


def probe_saved_model(path: str | os.PathLike, *, tokens: int = 1024, seed: int = 0) -> dict:
    """Hidden-state probes of a saved toy run's teacher and students on fresh inputs.

    Parameters
    ----------
    path : path-like
        Run folder or ``model.pt``.
    tokens : int, default 1024
        Number of fresh Gaussian inputs.
    seed : int, default 0
        Seed of the probe inputs.

    Returns
    -------
    dict
        ``layers`` (per-layer table with a ``model`` column: ``teacher`` or ``student_<depth>``),
        ``summary`` (one row per model), ``teacher_verdict`` and ``student_verdict``
        (:class:`~scalefit.probes.Verdict`, the latter over all student depths, replica 0,
        checked against the same students at initialisation and their loss there; the teacher,
        a random network that is never trained, comes out ``undetermined``).
    """
    import pandas as pd
    import torch

    from ..probes import layer_table, mechanism_verdict, summarize_states
    from .config import ToyConfig
    from .model import Teacher, student_hidden

    model = load_model(path)
    cfg, teacher = model["config"], model["teacher"]
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, cfg.width, generator=gen, dtype=teacher.head.dtype)
    states = {"teacher": teacher.hidden(x, all_states=True)}
    for (depth, replica), weights in sorted(model["students"].items()):
        name = f"student_{depth}" + (f"_r{replica}" if replica else "")
        states[name] = student_hidden(weights, x, block=cfg.block)
    layers, summary = [], []
    for name, st in states.items():
        layers.append(layer_table(st).assign(model=name))
        summary.append({"model": name, **summarize_states(st)})
    by_depth = {d: states[f"student_{d}"] for d, r in model["students"] if r == 0}
    init, losses = _student_references(cfg, teacher, model["students"], x)
    # the teacher is a random network that is never trained: its reference at initialisation is
    # a teacher drawn with another seed, so its verdict abstains (its increments still show)
    fresh = Teacher(ToyConfig.from_dict({**cfg.to_dict(), "seed": cfg.seed + 1}))
    return {
        "layers": pd.concat(layers, ignore_index=True),
        "summary": pd.DataFrame(summary),
        "teacher_verdict": mechanism_verdict(
            states["teacher"], init=fresh.hidden(x, all_states=True)
        ),
        "student_verdict": mechanism_verdict(by_depth, init=init, losses=losses),
    }


def _student_references(cfg, teacher, students: dict, x) -> tuple[dict, dict]:
    """Replica-0 students at initialisation (states) and their loss now and at initialisation."""
    import torch

    from .model import StudentStack, rmsnorm, student_hidden, toy_loss

    fresh = StudentStack(cfg)
    init, losses = {}, {}
    target = teacher.target(x, cfg.loss)
    for i, (depth, replica) in enumerate(fresh.students):
        if replica or (depth, 0) not in students:
            continue
        start = fresh.student_weights(i)
        init[depth] = student_hidden(start, x, block=cfg.block)
        pair = []
        for weights in (students[(depth, 0)], start):
            out = rmsnorm(student_hidden(weights, x, block=cfg.block, all_states=False))
            if cfg.loss != "mse":
                out = torch.log_softmax(out @ weights["head"], dim=-1)
            pair.append(float(toy_loss(out, target, mse=cfg.loss == "mse")))
        losses[depth] = tuple(pair)
    return init, losses
