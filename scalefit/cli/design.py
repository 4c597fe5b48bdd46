"""``scalefit design``: which runs to train next to pin down the recommendation at a budget."""

from __future__ import annotations

import argparse

from . import Subcommands
from ._common import check_paths, int_at_least, positive_flops


def register(sub: Subcommands) -> None:
    """Add the ``design`` command."""
    p = sub.add_parser(
        "design",
        help="choose the next runs that most shrink the uncertainty at a target budget",
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
    p.add_argument("--k", type=int_at_least(1), default=12, help="most runs to choose (default 12)")
    p.add_argument(
        "--quantity",
        default="log_params",
        choices=["log_params", "log_tokens", "log_depth", "log_width", "loss"],
        help="what to pin down at the target budget (default log_params = log N*)",
    )
    p.add_argument("--noise", type=float, default=None, help="noise sd of log loss per run")
    p.add_argument("--candidates", default=None, metavar="CSV", help="candidate runs")
    p.add_argument("--search", default="greedy", choices=["greedy", "exhaustive"])
    p.add_argument("--out", default=None, metavar="CSV", help="write the runs to train")
    p.add_argument("--plot", default=None, metavar="PNG", help="write the design figure")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    import pandas as pd

    from .._io import atomic_savefig
    from ..design import next_runs
    from ..fit import FitResult
    from ..table import read_csv

    check_paths(
        inputs={"fit result (JSON)": args.result, "candidates CSV file": args.candidates},
        files={"--out": args.out},
        figures={"--plot": args.plot},
    )
    cand = read_csv(args.candidates) if args.candidates else None
    result = FitResult.load(args.result)
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
    with pd.option_context("display.width", 120):
        print(d.runs.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if args.out:
        d.save_csv(args.out)
    if args.plot:
        atomic_savefig(d.plot(), args.plot, dpi=120)
    return 0
