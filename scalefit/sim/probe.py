"""Probe a saved toy run (``model.pt``): per-layer angles and mechanism verdicts."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ScaleFitError


def load_model(path: str | os.PathLike) -> dict:
    """Load a toy run's ``model.pt`` (a run folder or the file itself).

    Returns
    -------
    dict
        ``config`` (:class:`~scalefit.sim.config.ToyConfig`), ``teacher``
        (:class:`~scalefit.sim.model.Teacher` with the saved weights) and ``students``
        (``{(depth, replica): weights}``).
    """
    from .._io import load_torch
    from .config import ToyConfig
    from .model import Teacher
    from .sweep_task import MODEL_FILE

    path = Path(path)
    if path.is_dir():
        path = path / MODEL_FILE
    if not path.is_file():
        raise ScaleFitError(
            f"{path}: no saved toy model (expected a run folder with {MODEL_FILE})."
        )
    payload = load_torch(path, what="toy model")
    try:
        config = ToyConfig.from_dict({**payload["config"], "device": "cpu"}, where=str(path))
        teacher_state = payload["teacher"]
        students_state = dict(payload["students"])
    except (KeyError, TypeError, AttributeError) as exc:
        raise ScaleFitError(
            f"{path}: not a toy model file (expected the keys config, teacher, students; "
            f"{type(exc).__name__}: {exc})."
        ) from None
    teacher = Teacher(config)
    try:
        teacher.layers = teacher_state["layers"]
        teacher.head = teacher_state["head"]
        students = {}
        for key, weights in students_state.items():
            depth, replica = (int(v) for v in key.split("_"))
            students[(depth, replica)] = weights
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ScaleFitError(
            f"{path}: not a toy model file (bad teacher or student entry: {exc})."
        ) from None
    return {"config": config, "teacher": teacher, "students": students}


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
        (:class:`~scalefit.probes.Verdict`, the latter over all student depths, replica 0).
    """
    import pandas as pd
    import torch

    from ..probes import layer_table, mechanism_verdict, summarize_states
    from .model import student_hidden

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
    return {
        "layers": pd.concat(layers, ignore_index=True),
        "summary": pd.DataFrame(summary),
        "teacher_verdict": mechanism_verdict(states["teacher"]),
        "student_verdict": mechanism_verdict(by_depth),
    }
