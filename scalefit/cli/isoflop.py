"""``scalefit isoflop``: Chinchilla's Approaches 1, 2 and 3 side by side on one table of runs."""

from __future__ import annotations

import argparse

from . import Subcommands
from ._common import (
    add_option,
    add_table_args,
    check_paths,
    load_table_arg,
    tidy_table,
)

#: Named datasets that hold the runs Hoffmann et al.'s published exponents were fitted on.
PUBLISHED_FOR = frozenset({"chinchilla", "chinchilla_epoch"})
#: The file name of the figure in the --plots folder.
FIGURE = "isoflop.png"


def register(sub: Subcommands) -> None:
    """Add the ``isoflop`` command."""
    p = sub.add_parser(
        "isoflop",
        description="Group runs by training budget, fit an IsoFLOP curve per budget (Hoffmann's "
        "parabola with its unweighted line as published, the same parabolas with a weighted "
        "line, and the law's asymmetric profile), fit N* ∝ C^a and T* ∝ C^b through the "
        "optima (the per-budget table and figure show the parabola), optionally add Approach "
        "1 (envelope of loss curves from a long table) and Approach 3 (a saved law fit), and "
        "print one table; Hoffmann et al.'s published exponents are added only for the "
        "Chinchilla datasets they were published for.",
    )
    add_table_args(p)
    add_option(
        p,
        "--budget",
        help="nominal budget in FLOPs, e.g. 1e21; repeat the option for several budgets",
        shown="clusters of runs detected in the table",
    )
    p.add_argument("--tol", type=float, default=0.06, help="budget half-width in dex")
    p.add_argument(
        "--interval",
        default="analytic",
        choices=["analytic", "bootstrap"],
        help="interval of the exponents",
    )
    add_option(p, "--ci-prob")
    p.add_argument("--curves", default=None, metavar="LONG.csv", help="Approach 1: long table")
    p.add_argument(
        "--run-column",
        default="run",
        help="run id column of the long table ('params' groups the TABLE's rows by model size)",
    )
    add_option(
        p,
        "--tokens-per-step",
        help="tokens per step, when the long table has 'step' but no 'tokens'/'flops'",
    )
    p.add_argument("--result", default=None, metavar="RESULT.json", help="Approach 3: a law fit")
    add_option(p, "--seed", help="seed of the bootstrap intervals")
    add_option(p, "--out", metavar="CSV", help="write the comparison table")
    add_option(p, "--plots", help=f"write the IsoFLOP figure into DIR as {FIGURE}")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    import pandas as pd

    from ..core._io import atomic_write_csv
    from ..isoflop import approach1, approach2, compare_approaches
    from ..isoflop.approach2 import METHODS
    from ..plot import write_figures
    from ..plot.isoflop import plot_isoflops

    check_paths(
        inputs={"long table (CSV)": args.curves, "fit result (JSON)": args.result},
        files={"--out": args.out},
        folders={"--plots": args.plots},
    )
    from ..core.table import read_csv
    from ..fit import FitResult

    result = FitResult.load(args.result) if args.result else None  # read before any work

    long = read_csv(args.curves) if args.curves else None  # read before any work
    table = load_table_arg(args)
    budgets = args.budget or None
    kw = dict(
        budgets=budgets, tol=args.tol, ci_prob=args.ci_prob, interval=args.interval, seed=args.seed
    )
    isos = [approach2(table, method=m, **kw) for m in METHODS]
    envelope = None
    if args.curves or args.run_column == "params":
        if long is None:
            long = table.assign(run=table["params"])
        col = "run" if args.run_column == "params" else args.run_column
        envelope = approach1(
            long,
            run=col,
            ci_prob=args.ci_prob,
            seed=args.seed,
            tokens_per_step=args.tokens_per_step,
        )
    published = args.table in PUBLISHED_FOR
    frame = compare_approaches(envelope=envelope, isoflops=isos, result=result, published=published)
    with pd.option_context("display.width", 140, "display.max_columns", 20):
        per_budget = tidy_table(isos[0].budgets.drop(columns=["tokens_opt"]))
        print(per_budget.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        print()
        print(frame.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for iso in isos:
        for w in iso.warnings:
            print(f"warning ({iso.method}): {w}")
    if args.out:
        print(f"wrote {atomic_write_csv(args.out, frame)}")
    if args.plots:
        fig = plot_isoflops(isos[0], table)
        for path in write_figures(args.plots, {FIGURE: fig}):
            print(f"wrote {path}")
    return 0
