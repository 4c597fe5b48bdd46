"""Extrapolation validation with the Bayesian fitter on Liu's 203 Chinchilla rows (law decomposed).

The split is the one ``scalefit bayes chinchilla --law decomposed --drop-highest 40 --holdout 0.2``
uses (:func:`scalefit.fit.holdout.split_by_compute`); the posterior is the same (defaults, seed 0).
Today's predictive is the posterior predictive (Student-t noise); the calibrated one combines the
same posterior draws with :mod:`scalefit.fit.discrepancy`.

Run (about 4 minutes per cut on a loaded 2-core machine)::

    nice -n 10 python docs/studies/extrapolation_bayes.py 0.1,0.2,0.3 \
        docs/studies/results/extrapolation_bayes_chinchilla.csv
"""

from __future__ import annotations

import sys
import time

import pandas as pd

from scalefit.core._io import atomic_write_csv
from scalefit.experimental.extrapolation import extrapolation_check


def main() -> None:
    """Command line: CUTS (comma-separated) and the output CSV."""
    t0 = time.time()
    cuts = tuple(float(c) for c in sys.argv[1].split(","))
    frame = extrapolation_check(
        "chinchilla", "decomposed", drop_highest=40, cuts=cuts, method="bayes"
    )
    with pd.option_context("display.width", 200):
        print(frame.to_string())
    print(f"{time.time() - t0:.0f} s")
    atomic_write_csv(sys.argv[2], frame)


if __name__ == "__main__":
    main()
