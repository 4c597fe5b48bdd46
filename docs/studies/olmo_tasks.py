"""Task accuracy from the OLMo ladder, on the paper's own protocol (issue 43).

Data: ``scalefit.datasets.load("olmo_ladder")`` (Bhagia et al. 2024, Apache-2.0). For each of the
ten tasks, :func:`scalefit.tasks.fit_task` fits the two steps on the 190M-1B rungs (20 runs and
their 4 reruns; step 1 on each run's final row, step 2 on its checkpoints) with ``--boot``
resamples of whole runs, then predicts

* the 7B-4T target (``peteish7_eval_anneal``: the paper's prediction target), and
* the final row of each of the six 3B runs (an extra held-out rung).

One row per task and predicted run: actual and predicted bits-per-byte and accuracy, the 90 %
interval, the single-step baseline, absolute errors, whether the interval covers the actual
accuracy, and step 1's convergence warnings. ``paper_task`` marks the eight tasks of the paper's
main table (BoolQ and WinoGrande are extra). Coverage on the held-out rungs is printed at the end.

Run (about 3 minutes on 2 cores)::

    SCALEFIT_DATA_DIR=/path/to/data nice -n 10 python docs/studies/olmo_tasks.py \\
        --out docs/studies/results/olmo_tasks.csv
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from scalefit import datasets, tasks

TRAIN = ["190M", "370M", "760M", "1B"]
PAPER_TASKS = [
    "mmlu",
    "hellaswag",
    "arc_challenge",
    "arc_easy",
    "piqa",
    "csqa",
    "socialiqa",
    "openbookqa",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/studies/results/olmo_tasks.csv")
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    ladder = datasets.load("olmo_ladder")
    train = ladder[ladder["size"].isin(TRAIN)]
    held = ladder[ladder["target"] | (ladder["size"] == "3B")]
    t0 = time.perf_counter()
    res = tasks.predict(train, held, bootstrap=args.boot, seed=args.seed, ci_prob=0.9)
    res.insert(2, "size", res["run"].map(held.groupby("run")["size"].first()))
    res.insert(3, "paper_task", res["task"].isin(PAPER_TASKS))
    res.round(5).to_csv(args.out, index=False)
    print(f"wrote {args.out} ({len(res)} rows, {time.perf_counter() - t0:.0f} s)")
    seven = res[res["size"] == "7B"].set_index("task")
    cols = ["acc", "acc_pred", "acc_lo", "acc_hi", "abs_err", "acc_single", "abs_err_single"]
    print((seven[cols] * 100).round(1).to_string())
    for size, g in res.groupby("size"):
        print(
            f"{size}: covered {int(g['covered'].sum())}/{len(g)}; mean abs error two-step "
            f"{100 * g['abs_err'].mean():.1f} points, single-step "
            f"{100 * g['abs_err_single'].mean():.1f}; within 2 points "
            f"{int((g['abs_err'] <= 0.02).sum())}/{len(g)}"
        )
    print(pd.Series(dict(n_runs_train=train["run"].nunique())).to_string())


if __name__ == "__main__":
    main()
