"""Copy a finished toy sweep's results into small CSVs under toy/ (the recorded results).

    scalefit toy run toy/cpu.toml --out results/toy-cpu
    scalefit toy fit results/toy-cpu --bootstrap 200
    python toy/record_cpu.py results/toy-cpu toy/cpu

writes toy/cpu_results.csv (tidy rows), toy/cpu_alpha.csv (α_ℓ per teacher and checkpoint, from
`scalefit toy fit`), toy/cpu_curves.csv (mean training loss per 100 steps) and toy/cpu_runs.csv
(one row per run: wall time, speed, teacher entropy and probes).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from scalefit.core._io import atomic_write_csv

ROW_COLUMNS = [
    "teacher_mode", "rho", "temperature", "seed", "depth", "width", "steps", "total_steps",
    "batch", "lr", "final", "train_loss", "test_loss", "theta_mid", "dtheta_mid",
]  # fmt: skip
RUN_COLUMNS = [
    "teacher_mode", "rho", "temperature", "seed", "total_steps", "teacher_entropy",
    "teacher_theta_mid", "teacher_dtheta_mid", "wall_s", "steps_per_s", "resumed_from", "run_id",
]  # fmt: skip


def main(src: str, prefix: str) -> None:
    src_dir = Path(src)
    table = pd.read_csv(src_dir / "results.csv")
    rows = table[[c for c in ROW_COLUMNS if c in table.columns]]
    atomic_write_csv(f"{prefix}_results.csv", rows.round(8))
    runs = table.drop_duplicates("run_id")[[c for c in RUN_COLUMNS if c in table.columns]]
    atomic_write_csv(f"{prefix}_runs.csv", runs)
    curves = pd.concat(
        pd.read_csv(p).assign(run_id=p.parent.name)
        for p in sorted(src_dir.glob("runs/*/curves.csv"))
    )
    keep = ["teacher_mode", "rho", "temperature", "seed", "depth", "steps", "train_loss"]
    atomic_write_csv(f"{prefix}_curves.csv", curves[keep].round(8))
    alpha = src_dir / "alpha.csv"
    if alpha.is_file():
        atomic_write_csv(f"{prefix}_alpha.csv", pd.read_csv(alpha))


if __name__ == "__main__":
    main(*sys.argv[1:3])
