"""Extrapolation validation: today's predictive intervals against the calibrated ones.

For each table and each cut (share of rows held out by compute: 0.1, 0.2, 0.3), the law is fitted
on the rows below the cut (least squares, 100 bootstrap resamples, seed 0) and the held-out rows
are scored with :func:`scalefit.experimental.extrapolation.extrapolation_check` (coverage at
50/80/95 %, mean interval width on log loss, mean log predictive density, MAE):

* ``chinchilla`` (Liu's 203 rows, ``drop_highest=40``), law ``decomposed``;
* ``chinchilla_epoch`` (Epoch's 240 rows, ``drop_highest=5``), law ``chinchilla``, Huber δ = 1e-3;
* ``lm_grid_shakespeare`` (our 36 Pre-LN runs), law ``chinchilla``;
* synthetic misspecified: Chinchilla-law sweeps (9 budgets 1e18–1e22, 7 sizes, noise sd 0.004)
  whose truth bends away from the law, ``× exp(0.0015 · ln(C/1e18)^1.5)``.

Run::

    nice -n 10 python docs/studies/extrapolation_study.py --out docs/studies/results

Writes ``extrapolation.csv`` and prints the 95 % rows.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from scalefit import datasets
from scalefit.core._io import atomic_write_csv
from scalefit.experimental.extrapolation import extrapolation_check
from scalefit.isoflop import synthetic_isoflops


def misspecified(seed: int = 0) -> pd.DataFrame:
    """Chinchilla-law sweeps with a misfit that grows with compute."""
    runs = synthetic_isoflops(
        budgets=np.geomspace(1e18, 1e22, 9), n_per_budget=7, sigma=0.004, seed=seed
    ).drop(columns="budget")
    lc = np.clip(np.log(runs["flops"].to_numpy() / 1e18), 0, None)
    runs["loss"] = runs["loss"] * np.exp(0.0015 * lc**1.5)
    return runs


def cases():
    """(name, table, law, fit options)."""
    lm = datasets.load("lm_grid_shakespeare")
    lm = lm[lm["variant"] == "pre_ln"].reset_index(drop=True)
    return [
        ("chinchilla", datasets.load("chinchilla", drop_highest=40), "decomposed", {}),
        (
            "chinchilla_epoch",
            datasets.load("chinchilla_epoch", drop_highest=5),
            "chinchilla",
            {"loss": "huber"},
        ),
        ("lm_grid_shakespeare (pre_ln)", lm, "chinchilla", {}),
        ("synthetic misspecified", misspecified(), "chinchilla", {}),
    ]


def main() -> None:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/studies/results")
    ap.add_argument("--cuts", default="0.1,0.2,0.3")
    args = ap.parse_args()
    cuts = tuple(float(c) for c in args.cuts.split(","))
    frames = []
    for name, tab, law, kw in cases():
        f = extrapolation_check(tab, law, cuts=cuts, n_boot=100, seed=0, **kw)
        frames.append(f.assign(dataset=name, law=law))
        print(name, "done", flush=True)
        atomic_write_csv(Path(args.out) / "extrapolation.csv", pd.concat(frames))
    frame = pd.concat(frames, ignore_index=True)
    show = frame[frame["prob"] == 0.95][
        ["dataset", "cut", "n_test", "predictive", "coverage", "width_log", "lpd", "kappa"]
    ]
    with pd.option_context("display.width", 160):
        print(show.to_string(index=False, float_format=lambda v: f"{v:.4f}"))


if __name__ == "__main__":
    main()
