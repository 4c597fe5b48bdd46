"""Bootstrap interval coverage per parameter, with the reasons a replicate misses.

The design of ``tests/fit/test_fit_recovery.py::test_bootstrap_coverage`` (50 tables from
``simulate_table(law, n=200, noise=0.01, seed=1000 + rep)``, ``fit(..., starts=64, seed=rep,
bootstrap=200, boot_starts=3)``), printed per parameter: coverage, intervals wholly below
(``miss_low``) or above (``miss_high``) the truth, replicates with no interval (``nan``), the
mean relative bias of the estimate and its t statistic, and the median relative width against
``2 x 1.96`` times the spread of the estimates. Replicates without an interval, or whose fit
did not converge, are listed on stderr with their warnings. See ``bootstrap_kink.md``.

The last line gives the share of failed resamples per replicate (mean and largest), the
replicates without an interval, the single fits that did not converge and the mean number of
resamples certified on a kink. Any law of ``simulate_table`` works (``critical_depth_power``
too). Run from the repository root::

    SCALEFIT_DATA_DIR=... PYTHONPATH=. python docs/studies/bootstrap_kink.py critical_depth
"""

import argparse
import sys
import time
import warnings

import numpy as np
import pandas as pd

from scalefit.core.errors import ConvergenceWarning
from scalefit.fit import fit
from scalefit.fit.synthetic import simulate_table

ap = argparse.ArgumentParser()
ap.add_argument("law", nargs="?", default="critical_depth")
ap.add_argument("--n-rep", type=int, default=50)
ap.add_argument("--boot-starts", type=int, default=3)
ap.add_argument("--ci-method", default="percentile")
ap.add_argument("--n-boot", type=int, default=200)
ap.add_argument("--dump", default=None)
args = ap.parse_args()

t0 = time.time()
rows = []
for rep in range(args.n_rep):
    table = simulate_table(args.law, n=200, noise=0.01, seed=1000 + rep)
    truth = table.attrs["truth"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = fit(
            table,
            args.law,
            starts=64,
            seed=rep,
            bootstrap=args.n_boot,
            boot_starts=args.boot_starts,
            ci_prob=0.95,
            ci_method=args.ci_method,
            progress=False,
        )
    d = res.diagnostics
    for k in res.params:
        lo, hi = res.ci[k]
        rows.append(
            dict(
                rep=rep,
                param=k,
                truth=truth[k],
                est=res.params[k],
                lo=lo,
                hi=hi,
                converged=res.converged,
                share=d.get("boot_converged_share"),
                failed=d.get("boot_failed"),
                oor=d.get("boot_out_of_range"),
                on_kink=d.get("boot_on_kink"),
                warm_best=d.get("boot_warm_start_best"),
                at_bound=",".join(d.get("at_bound", ()) or ()),
                nwarn=len(res.warnings),
            )
        )
    if np.isnan(res.ci[k][0]) or not res.converged:
        print(
            f"rep {rep}: converged={res.converged} share={d.get('boot_converged_share')} "
            f"failed={d.get('boot_failed')} oor={d.get('boot_out_of_range')}",
            file=sys.stderr,
        )
        for w in res.warnings:
            print("   ", w[:200], file=sys.stderr)
df = pd.DataFrame(rows)
if args.dump:
    df.to_csv(args.dump, index=False)
df["nan"] = df.lo.isna() | df.hi.isna()
df["low"] = df.hi < df.truth  # interval entirely below truth
df["high"] = df.lo > df.truth  # interval entirely above truth
df["cover"] = (df.lo <= df.truth) & (df.truth <= df.hi)
df["relbias"] = (df.est - df.truth) / df.truth.abs()
df["relw"] = (df.hi - df.lo) / df.truth.abs()
g = df.groupby("param", sort=False)
out = pd.DataFrame(
    {
        "coverage": g.cover.mean(),
        "miss_low": g.low.sum(),
        "miss_high": g.high.sum(),
        "nan": g.nan.sum(),
        "mean_relbias": g.relbias.mean(),
        "relbias_t": g.relbias.mean() / (g.relbias.std() / np.sqrt(g.size())),
        "sd_est_rel": g.relbias.std(),
        "median_relw": g.relw.median(),
        "relw/(2*1.96*sd)": g.relw.median() / (2 * 1.96 * g.relbias.std()),
    }
)
print(
    f"law={args.law} boot_starts={args.boot_starts} ci={args.ci_method} n_rep={args.n_rep} "
    f"time={time.time() - t0:.0f}s"
)
print(out.to_string(float_format=lambda x: f"{x:.3f}"))
print("mean coverage", round(df.groupby("param").cover.mean().mean(), 4))
per_rep = df.groupby("rep").first()
fail = 1.0 - per_rep.share.astype(float)
print(
    f"failed resamples: mean {fail.mean():.4f} max {fail.max():.4f}; replicates without an "
    f"interval {int(per_rep.lo.isna().sum())}; single fits not converged "
    f"{int((~per_rep.converged.astype(bool)).sum())}; resamples on a kink per replicate "
    f"{per_rep.on_kink.astype(float).mean():.1f}"
)
