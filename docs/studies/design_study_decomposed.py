"""Design study, decomposed law: designed runs against a standard IsoFLOP grid (shapes included).

The same protocol as ``design_study.py`` (shared steps in ``design_common.py``) with truths around
Liu et al.'s decomposed law (``L = c_W/W^a_W + c_l/l^a_l + c_T/T^a_T + L0``):

1. The decomposed law is fitted to Liu's 203 Chinchilla rows (``drop_highest=40``) with 100
   bootstrap resamples; ``--truths`` draws are the truths; a run's noise is a resampled residual.
2. Pilot: the table's own shapes (depth, width, params, tokens) below 3e19 FLOPs (45 rows),
   with losses simulated from the truth; fitted with 100 bootstrap resamples.
3. Target log N*(1e24) (continuous optimum of ``scalefit.allocate``, default accounting).
   Grid: budgets b, 3b, 10b (b = 1e21/56), four sizes over 1.5 decades around the pilot's N*,
   each at the pilot's optimal depth scaled by (N/N*)^(1/3), width a multiple of 8 (exact count).
   Designed: ``next_runs`` with the default shape candidates (free) or confined to the grid's
   range (1.5 decades, no run below 1e18 FLOPs).
4. Score: Fisher-information sd of log N*(1e24) at the truth (log-parameter coordinates).

Run::

    nice -n 10 python docs/studies/design_study_decomposed.py --truths 20 --mc-truths 2 --mc 10 \
        --out docs/studies/results
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from scalefit import datasets, fit
from scalefit.allocate.solve import solve
from scalefit.allocate.space import Space
from scalefit.core.accounting import tokens_for_budget, training_flops
from scalefit.laws import get_law

sys.path.insert(0, str(Path(__file__).parent))
from design_common import TARGET, R, Study, parse_args, run  # noqa: E402  (same folder)

LAW = get_law("decomposed")
SPACE = Space.of(LAW)


def log_nstar(p: dict) -> float:
    """log N* at the target budget (continuous optimum)."""
    one = {k: np.array([float(v)]) for k, v in p.items()}
    return float(np.log(solve(SPACE, one, [TARGET], sets=False)["params"].iloc[0]))


STUDY = Study(
    name="design_study_decomposed",
    law=LAW,
    fit_law=LAW,
    log_nstar=log_nstar,
    fractions=(1.0, 0.5, 0.3, 0.2, 0.1, 0.05, 0.02, 0.002),
    log_names=tuple(LAW.param_names),  # every parameter in log coordinates
    grad_step=1e-2,  # log N* from the solver, differenced over ±0.01 in log coordinates
    pinv=True,
    keep=("depth", "width", "params", "tokens"),
    pilot_bootstrap=100,
    mc_starts=64,
)


def grid_runs(pilot_fit) -> pd.DataFrame:
    """Standard grid with shapes around the pilot's optimum (see the module docstring)."""
    b = R / 56.0
    budgets = np.array([b, 3 * b, 10 * b])
    one = {k: np.array([v]) for k, v in pilot_fit.params.items()}
    opt = solve(SPACE, one, budgets, sets=False)
    rows = []
    for c, (_, o) in zip(budgets, opt.iterrows(), strict=True):
        for s in 10.0 ** np.linspace(-0.75, 0.75, 4):
            n = o["params"] * s
            depth = max(1, int(round(o["depth"] * s ** (1 / 3))))
            width = max(8, int(round(float(SPACE.accounting.width(depth, n)) / 8)) * 8)
            p = float(SPACE.accounting.params(depth, width, exact=True))
            rows.append({"depth": depth, "width": width, "params": p, "budget": c})
    frame = pd.DataFrame(rows)
    frame["tokens"] = tokens_for_budget(frame["budget"], frame["params"])
    frame["flops"] = training_flops(frame["params"], frame["tokens"])
    return frame.drop(columns="budget")


def main() -> None:
    """Command line."""
    args = parse_args(__doc__, mc_truths=0, mc=10)
    rng = np.random.default_rng(args.seed)
    table = datasets.load("chinchilla", drop_highest=40)
    base = fit(table, LAW, bootstrap=100, seed=args.seed, progress=False)
    pilot_shapes = table[table["flops"] < 3e19].reset_index(drop=True)
    run(STUDY, base, table, pilot_shapes, grid_runs, args, rng)


if __name__ == "__main__":
    main()
