"""Simulation study: designed runs (``scalefit.design.next_runs``) against a standard IsoFLOP grid.

Protocol (seeded, one script; the steps shared with ``design_study_decomposed.py`` are in
``design_common.py``):

1. Fit the Chinchilla law to Epoch AI's replication of Hoffmann et al.'s data (``chinchilla_epoch``,
   their rule: drop the 5 highest losses, Huber δ = 1e-3) with 200 bootstrap resamples. The
   *truths* are ``--truths`` bootstrap draws picked at random (seeded); the *noise* of a simulated
   run is a residual of that fit on log loss, resampled.
2. Per truth, a pilot sweep is simulated: three budgets (1e18, 3e18, 1e19 FLOPs), five sizes each
   over 1.5 decades around 20 tokens per parameter. The pilot is fitted (least squares, 200
   bootstrap resamples): this is what a lab knows before planning.
3. Target: log N* at 1e24 FLOPs. Runs compute R = 1e21 FLOPs.
   * **grid**: a standard IsoFLOP grid of the same total compute: budgets b, 3b, 10b with
     b = R/56, four sizes each over 1.5 decades centred on the pilot's estimate of N*(budget).
   * **designed**: ``next_runs(pilot, 1e24, f·R, k=12)`` for f in ``FRACTIONS``.
4. Score: the asymptotic sd of the refitted log N*(1e24) at the truth, from the Fisher
   information of all runs (pilot + new): ``sd² = gᵀ (JᵀJ/σ²)⁻¹ g`` with J the Jacobian of log
   loss in the law's parameters and g the gradient of log N*; σ the residual sd. The smallest
   compute share f at which the designed runs reach the grid's sd (interpolated in log f) is the
   truth's compute ratio; the study reports its median over truths.

Run::

    nice -n 10 python docs/studies/design_study.py --truths 20 --mc-truths 3 --mc 20 \
        --out docs/studies/results
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from scalefit import datasets, fit
from scalefit.allocate.closed_form import chinchilla_optimum
from scalefit.design import isoflop_grid
from scalefit.laws import get_law

sys.path.insert(0, str(Path(__file__).parent))
from design_common import TARGET, R, Study, parse_args, run  # noqa: E402  (same folder)

PILOT_BUDGETS = (1e18, 3e18, 1e19)


def log_nstar(p: dict) -> float:
    """log N* at the target budget (closed form)."""
    n, _ = chinchilla_optimum(p["E"], p["A"], p["B"], p["alpha"], p["beta"], TARGET)
    return float(np.log(n))


STUDY = Study(
    name="design_study",
    law=get_law("chinchilla"),
    fit_law="chinchilla",
    log_nstar=log_nstar,
    fractions=(1.0, 0.5, 0.3, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002),
    log_names=("E", "A", "B"),  # coordinates: log E, log A, log B, alpha, beta
    grad_step=1e-5,
    pinv=False,
    keep=("params", "tokens"),
    pilot_bootstrap=200,
    mc_starts=32,
    columns=("sd", "flops", "pred_sd"),
)


def pilot_runs() -> pd.DataFrame:
    """Three budgets, five sizes over 1.5 decades around 20 tokens per parameter."""
    budgets = np.asarray(PILOT_BUDGETS)
    centre = np.sqrt(budgets / 120.0)  # N with T = 20 N and C = 6 N T
    return isoflop_grid(centre, budgets, n_sizes=5, span=1.5)


def grid_runs(pilot_fit) -> pd.DataFrame:
    """Budgets b, 3b, 10b (b = R/56), four sizes over 1.5 decades around the pilot's N*."""
    b = R / 56.0
    budgets = np.array([b, 3 * b, 10 * b])
    p = pilot_fit.params
    centre, _ = chinchilla_optimum(p["E"], p["A"], p["B"], p["alpha"], p["beta"], budgets)
    return isoflop_grid(centre, budgets, n_sizes=4, span=1.5)


def main() -> None:
    """Command line."""
    args = parse_args(__doc__, mc_truths=2, mc=20)
    rng = np.random.default_rng(args.seed)
    table = datasets.load("chinchilla_epoch", drop_highest=5)
    base = fit(table, "chinchilla", loss="huber", bootstrap=200, seed=args.seed, progress=False)
    run(STUDY, base, table, pilot_runs(), grid_runs, args, rng)


if __name__ == "__main__":
    main()
