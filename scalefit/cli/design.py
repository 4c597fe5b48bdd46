"""``scalefit design``: which runs to train next to pin down the recommendation at a budget."""

from __future__ import annotations

import argparse

from ..core.errors import ScaleFitError
from . import Subcommands
from ._common import (
    add_option,
    check_paths,
    positive_flops,
    tidy_table,
)

#: The file name of the figure in the --plots folder.
FIGURE = "design.png"


def register(sub: Subcommands) -> None:
    """Add the ``design`` command."""
    p = sub.add_parser(
        "design",
        description="Pick up to K runs (depth, width, params, tokens) from a candidate set whose "
        "total compute 6·N·T stays within --compute and that minimise the expected variance of "
        "the recommendation at --target (log N* by default), using the fit's draws and a "
        "linearised update. Writes the runs to train as CSV with the expected gain of each.",
    )
    p.add_argument("result", metavar="RESULT.json", help="a saved fit result with draws")
    p.add_argument(
        "--target", type=positive_flops, required=True, metavar="FLOPS", help="target budget"
    )
    p.add_argument(
        "--compute",
        type=positive_flops,
        required=True,
        metavar="FLOPS",
        help="total compute for the runs",
    )
    add_option(p, "--k")
    p.add_argument(
        "--quantity",
        default="log_params",
        choices=["log_params", "log_tokens", "log_depth", "log_width", "loss"],
        help="what to pin down at the target budget (log_params is log N*)",
    )
    p.add_argument(
        "--noise",
        type=float,
        default=None,
        metavar="SD",
        help="noise sd of log loss per run",
        shown="the fit's RMSE of log loss",
    )
    p.add_argument(
        "--candidates",
        default=None,
        metavar="CSV",
        help="candidate runs",
        shown="a grid around the fit's compute-optimal sizes",
    )
    p.add_argument(
        "--search",
        default="greedy",
        choices=["greedy", "exhaustive"],
        help="greedy choice, or every subset of the candidates (small cases only)",
    )
    add_option(p, "--out", metavar="CSV", help="write the runs to train")
    add_option(p, "--plots", help=f"write the design figure into DIR as {FIGURE}")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    import pandas as pd

    from ..core._io import atomic_write_csv
    from ..core.table import read_csv
    from ..design import next_runs
    from ..fit import FitResult
    from ..plot import write_figures
    from ..plot.design import plot_design

    check_paths(
        inputs={"fit result (JSON)": args.result, "candidates CSV file": args.candidates},
        files={"--out": args.out},
        folders={"--plots": args.plots},
    )
    cand = read_csv(args.candidates) if args.candidates else None
    result = FitResult.load(args.result)
    if args.quantity in ("log_depth", "log_width") and "depth" not in result.law.inputs:
        raise ScaleFitError(
            f"--quantity {args.quantity}: the law {result.law_name!r} has no depth or width; "
            f"choose log_params, log_tokens or loss."
        )
    d = next_runs(
        result,
        args.target,
        args.compute,
        candidates=cand,
        k=args.k,
        quantity=args.quantity,
        noise=args.noise,
        search=args.search,
    )
    print(d.report())
    runs = d.runs
    shape = [c for c in ("depth", "width") if c in runs.columns]
    if shape and runs[shape].isna().all().all():
        runs = runs.drop(columns=shape)
        print(f"the law {d.law} has no depth or width: each run is given by params and tokens")
    with pd.option_context("display.width", 120):
        print(tidy_table(runs).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if args.out:
        # every column kept (one schema for every law); a law without shapes leaves depth empty
        print(f"wrote {atomic_write_csv(args.out, tidy_table(d.runs))}")
    if args.plots:
        for path in write_figures(args.plots, {FIGURE: plot_design(d)}):
            print(f"wrote {path}")
    return 0
