"""Synthetic IsoFLOP study: bias and coverage of Approach 2: parabola (OLS, weighted line), profile.

Truth: Hoffmann et al.'s Chinchilla law (E 1.69, A 406.4, B 410.7, alpha 0.34, beta 0.28), so
a = beta/(alpha+beta) = 0.4516, b = 0.5484. Nine budgets (6e18 … 3e21), nine sizes per budget over
1.5 decades, log-normal noise. Sampling scenarios: centred on the true optimum, a constant
off-centre miss (0.5 decades), and a window drifting relative to the optimum (0.4 decades per
decade of compute, as with sizes chosen once for all budgets). Seeds 0 … N-1.

Run (about 3 s per seed and scenario for the profile fit on a shared 2-core machine)::

    nice -n 10 python docs/studies/isoflop_coverage.py --seeds 50 --out docs/studies/results

Writes ``isoflop_coverage.csv`` (one row per seed, scenario and method) and
``isoflop_coverage_summary.csv`` and prints the summary.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from scalefit.core._io import atomic_write_csv
from scalefit.isoflop import approach2, synthetic_isoflops, true_exponents

SCENARIOS = {
    "centred": {},
    "offset 0.5 dex": {"offset": 0.5},
    "drift 0.4 dex/dex": {"drift": 0.4},
}


def run(seeds: int, sigma: float, prob: float) -> pd.DataFrame:
    """One row per (scenario, seed, method)."""
    a_true, b_true = true_exponents()
    rows = []
    for name, kw in SCENARIOS.items():
        for seed in range(seeds):
            runs = synthetic_isoflops(sigma=sigma, seed=seed, **kw)
            for method in ("parabola", "parabola_weighted", "profile"):
                res = approach2(runs, method=method, ci_prob=prob)
                ex = res.exponents
                rows.append(
                    {
                        "scenario": name,
                        "seed": seed,
                        "method": method,
                        "a": ex.loc["params", "exponent"],
                        "a_lo": ex.loc["params", "lo"],
                        "a_hi": ex.loc["params", "hi"],
                        "b": ex.loc["tokens", "exponent"],
                        "b_lo": ex.loc["tokens", "lo"],
                        "b_hi": ex.loc["tokens", "hi"],
                        "a_true": a_true,
                        "b_true": b_true,
                    }
                )
    return pd.DataFrame(rows)


def summarise(frame: pd.DataFrame) -> pd.DataFrame:
    """Bias, spread, interval width and coverage of a and b per scenario and method."""
    f = frame.assign(
        a_cover=(frame["a_lo"] <= frame["a_true"]) & (frame["a_true"] <= frame["a_hi"]),
        b_cover=(frame["b_lo"] <= frame["b_true"]) & (frame["b_true"] <= frame["b_hi"]),
        a_err=frame["a"] - frame["a_true"],
        a_width=frame["a_hi"] - frame["a_lo"],
    )
    return (
        f.groupby(["scenario", "method"], sort=False)
        .agg(
            n=("seed", "size"),
            a_bias=("a_err", "mean"),
            a_sd=("a", "std"),
            a_width=("a_width", "median"),
            a_coverage=("a_cover", "mean"),
            b_coverage=("b_cover", "mean"),
        )
        .reset_index()
    )


def main() -> None:
    """Command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=50)
    p.add_argument("--sigma", type=float, default=0.005, help="noise sd of log loss")
    p.add_argument("--prob", type=float, default=0.95)
    p.add_argument("--out", default="docs/studies/results")
    args = p.parse_args()
    frame = run(args.seeds, args.sigma, args.prob)
    out = Path(args.out)
    atomic_write_csv(out / "isoflop_coverage.csv", frame)
    summary = summarise(frame)
    atomic_write_csv(out / "isoflop_coverage_summary.csv", summary)
    with pd.option_context("display.width", 120):
        print(f"sigma {args.sigma}, {args.seeds} seeds, {100 * args.prob:g}% intervals")
        print(summary.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    np.seterr(all="ignore")


if __name__ == "__main__":
    main()
