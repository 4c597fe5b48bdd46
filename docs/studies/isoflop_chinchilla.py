"""Chinchilla's three approaches on one table of runs, beside Hoffmann et al.'s published values.

Data: Epoch AI's replication of Hoffmann et al.'s runs (``chinchilla_epoch``), with their outlier
rule (drop the 5 highest losses: 240 rows). All three approaches see the same 240 rows:

* Approach 1: envelope of the loss curves, a run = one model size (1–5 points per size in this
  digitised table), interval from 200 bootstrap resamples of runs;
* Approach 2: budgets detected as clusters of runs (±0.06 dex), Hoffmann's parabola with his
  unweighted line (OLS interval), the same parabolas with the weighted line, and the corrected law
  profile (shape fitted, and shape held at Approach 3's alpha, beta), analytic intervals (delta
  method + generalised least squares for the weighted lines);
* Approach 3: the Chinchilla law fitted with Epoch's conventions (Huber δ = 1e-3 on log loss,
  summed), 200 bootstrap resamples; exponents of N* and T* over 6e18 … 3e21 FLOPs.

Run::

    nice -n 10 python docs/studies/isoflop_chinchilla.py --out docs/studies/results

Writes ``isoflop_chinchilla.csv`` (the comparison) and ``isoflop_chinchilla_budgets.csv`` and the
figures ``docs/img/isoflop_chinchilla.png`` and ``docs/img/isoflop_approaches.png``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from scalefit import datasets, fit
from scalefit.core._io import atomic_savefig, atomic_write_csv
from scalefit.isoflop import approach1, approach2, compare_approaches
from scalefit.plot.isoflop import plot_comparison, plot_isoflops


def main() -> None:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/studies/results")
    ap.add_argument("--img", default="docs/img")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    tab = datasets.load("chinchilla_epoch", drop_highest=5)
    env = approach1(tab.assign(run=tab["params"]), n_boot=200, seed=args.seed)
    isos = [approach2(tab, method=m) for m in ("parabola", "parabola_weighted", "profile")]
    res = fit(tab, "chinchilla", loss="huber", bootstrap=200, seed=args.seed, progress=False)
    shape = (res.params["alpha"], res.params["beta"])  # the profile's shape from Approach 3
    isos.append(approach2(tab, method="profile", shape=shape))
    frame = compare_approaches(envelope=env, isoflops=isos, result=res, published=True)
    out, img = Path(args.out), Path(args.img)
    atomic_write_csv(out / "isoflop_chinchilla.csv", frame)
    atomic_write_csv(out / "isoflop_chinchilla_budgets.csv", isos[-1].budgets)
    fig = plot_isoflops(
        isos[-1],
        tab,
        title="Chinchilla (Epoch AI's 240 rows): IsoFLOP profiles of the Chinchilla law "
        "(shape from Approach 3), optima and N* ∝ C^a",
    )
    atomic_savefig(fig, img / "isoflop_chinchilla.png", dpi=110, bbox_inches="tight")
    fig = plot_comparison(
        frame, title="Chinchilla (Epoch AI's 240 rows): compute-optimal exponents by approach"
    )
    atomic_savefig(fig, img / "isoflop_approaches.png", dpi=110, bbox_inches="tight")
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(frame.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print()
        print(isos[-1].budgets.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        for iso in isos:
            for w in iso.warnings:
                print(f"warning ({iso.method}): {w}")
        print(f"approach 3 fit: {res.params}, converged {res.converged}")


if __name__ == "__main__":
    main()
