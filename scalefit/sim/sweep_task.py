"""The ``toy`` sweep task: one teacher, every student depth, tidy rows per depth and checkpoint."""

from __future__ import annotations

from pathlib import Path

from ..core._io import atomic_write_csv
from ..core._manifest import forget_files, save_torch
from ..core.errors import ScaleFitError
from .config import ToyConfig, merge_preset

MODEL_FILE = "model.pt"
CURVE_FILE = "curves.csv"


def build_config(config: dict) -> ToyConfig:
    """Turn a sweep config into a :class:`ToyConfig`.

    A ``preset`` key (``"paper"`` or ``"cpu"``) selects the starting point; every other key
    overrides it.

    Raises
    ------
    ScaleFitError
        Unknown preset, unknown settings or bad values.
    """
    config = dict(config)
    name = config.pop("preset", "paper")
    settings = merge_preset(name, config)
    return ToyConfig.from_dict(settings, where=f"toy config (preset {name!r})")


def run_toy(config: dict, run_dir: Path) -> dict:
    """Train one teacher's students and report one tidy row per (depth, replica, checkpoint).

    Parameters
    ----------
    config : dict
        :class:`~scalefit.sim.config.ToyConfig` settings, optionally with ``preset``.
    run_dir : pathlib.Path
        Receives ``curves.csv`` (mean training loss per 100 steps per student), ``model.pt``
        (teacher and student weights, for ``scalefit probe``) and, while running, the resumable
        ``state.pt``.

    Returns
    -------
    dict
        Run-level values (``teacher_entropy``, ``wall_s``, ``steps_per_s``) and ``rows``: one per
        student and evaluation step with ``teacher_mode, rho, temperature, seed, depth, width,
        replica, steps, total_steps, final, train_loss, test_loss`` and hidden-state probes of the
        trained students at the final step (``theta_mid``, ``dtheta_mid``).
    """
    import pandas as pd
    import torch

    from ..probes import summarize_states
    from .model import student_hidden
    from .train import STATE_FILE, train_toy

    cfg = build_config(config)
    run = train_toy(cfg, run_dir)
    run_dir = Path(run_dir)
    _check_finite(run, cfg)
    base = {
        "teacher_mode": cfg.teacher_mode,
        "rho": cfg.effective_rho,
        "temperature": cfg.temperature,
        "seed": cfg.seed,
        "width": cfg.width,
        "loss_kind": cfg.loss,
        "block": cfg.block,
        "batch": cfg.batch,
        "total_steps": cfg.steps,
    }
    atomic_write_csv(run_dir / CURVE_FILE, pd.DataFrame([{**base, **r} for r in run.curve]))
    probe_x = torch.randn(
        1024, cfg.width, generator=torch.Generator().manual_seed(cfg.seed + 17)
    ).to(run.teacher.head)
    probes = {}
    for i, key in enumerate(run.students.students):
        states = student_hidden(run.students.student_weights(i), probe_x, block=cfg.block)
        probes[key] = summarize_states(states)
    teacher_probe = summarize_states(run.teacher.hidden(probe_x, all_states=True))
    rows = []
    for r in run.rows:
        final = r["steps"] == cfg.steps
        extra = probes[(r["depth"], r["replica"])] if final else {}
        rows.append({**base, **r, "final": final, **extra})
    _save_model(run_dir / MODEL_FILE, cfg, run)
    forget_files(run_dir, [STATE_FILE])
    steps_done = cfg.steps - run.start_step
    return {
        "teacher_entropy": run.teacher_entropy,
        "teacher_theta_mid": teacher_probe["theta_mid"],
        "teacher_dtheta_mid": teacher_probe["dtheta_mid"],
        "wall_s": run.wall_s,
        "resumed_from": run.start_step,
        "steps_per_s": steps_done / run.wall_s if run.wall_s > 0 else float("nan"),
        "rows": rows,
    }


def _check_finite(run, cfg) -> None:
    """A diverged run is an error that says so, not NaN rows or a probe failure."""
    import math

    for r in run.rows:
        values = [r["train_loss"], r.get("test_loss", 0.0)]
        if not all(math.isfinite(v) for v in values):
            raise ScaleFitError(
                f"toy run diverged: the loss of the depth-{r['depth']} student is not finite at "
                f"step {r['steps']} (lr={cfg.lr:g}); use a smaller 'lr'."
            )


run_toy.validate_config = build_config  # the sweep checks every run's config before any runs


def _save_model(path: Path, cfg: ToyConfig, run) -> None:
    students = {
        f"{depth}_{replica}": run.students.student_weights(i)
        for i, (depth, replica) in enumerate(run.students.students)
    }
    payload = {
        "config": cfg.to_dict(),
        "teacher": {"layers": run.teacher.layers, "head": run.teacher.head},
        "students": students,
    }
    save_torch(path.parent, path.name, payload)
