"""``scalefit isoflop``: Chinchilla's Approaches 1, 2 and 3 side by side on one table of runs."""

from __future__ import annotations

import argparse

from ..errors import ScaleFitError
from . import Subcommands
from ._common import add_table_args, check_paths, load_table_arg, seed_arg

#: Named datasets that hold the runs Hoffmann et al.'s published exponents were fitted on.
PUBLISHED_FOR = frozenset({"chinchilla", "chinchilla_epoch"})


def register(sub: Subcommands) -> None:
    """Add the ``isoflop`` command."""
    p = sub.add_parser(
        "isoflop",
        help="IsoFLOP approaches 1, 2 (parabola, weighted parabola, profile) and 3 side by side",
        description="Group runs by training budget, fit an IsoFLOP curve per budget (Hoffmann's "
        "parabola with its unweighted line as published, the same parabolas with a weighted "
        "line, and the law's asymmetric profile, which corrects off-centre sampling), fit "
        "N* ∝ C^a and T* ∝ C^b through the optima, optionally add Approach 1 (envelope of loss "
        "curves from a long table) and Approach 3 (a saved law fit), and print one table; "
        "Hoffmann et al.'s published exponents are added only for the Chinchilla datasets "
        "they were published for.",
    )
    add_table_args(p)
    p.add_argument(
        "--budgets",
        default=None,
        metavar="C1,C2,...",
        help="nominal budgets in FLOPs (default: detected clusters of runs)",
    )
    p.add_argument("--tol", type=float, default=0.06, help="budget half-width in dex")
    p.add_argument(
        "--interval", default="analytic", choices=["analytic", "bootstrap"], help="exponent CI"
    )
    p.add_argument("--prob", type=float, default=0.95, help="interval probability")
    p.add_argument("--curves", default=None, metavar="LONG.csv", help="Approach 1: long table")
    p.add_argument(
        "--run-column",
        default="run",
        help="run id column of the long table ('params' groups the TABLE's rows by model size)",
    )
    p.add_argument(
        "--tokens-per-step",
        type=float,
        default=None,
        help="tokens per step, when the long table has 'step' but no 'tokens'/'flops'",
    )
    p.add_argument("--result", default=None, metavar="RESULT.json", help="Approach 3: a law fit")
    p.add_argument("--seed", type=seed_arg, default=0)
    p.add_argument("--out", default=None, metavar="CSV", help="write the comparison table")
    p.add_argument("--plot", default=None, metavar="PNG", help="write the IsoFLOP figure")
    p.set_defaults(func=run)


def _budgets(text: str | None):
    if not text:
        return None
    try:
        return [float(v) for v in text.split(",")]
    except ValueError as exc:
        raise ScaleFitError(
            f"The '--budgets' option must be comma-separated FLOP counts. Got {text!r} instead."
        ) from exc


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    import pandas as pd

    from .._io import atomic_savefig, atomic_write_csv
    from ..isoflop import approach1, approach2, compare_approaches
    from ..isoflop.approach2 import METHODS

    check_paths(
        inputs={"long table (CSV)": args.curves, "fit result (JSON)": args.result},
        files={"--out": args.out},
        figures={"--plot": args.plot},
    )
    result = None
    if args.result:  # checked before any work
        from ..fit import FitResult

        result = FitResult.load(args.result)
    from ..table import read_csv

    long = read_csv(args.curves) if args.curves else None  # read before any work
    table = load_table_arg(args)
    budgets = _budgets(args.budgets)
    kw = dict(budgets=budgets, tol=args.tol, prob=args.prob, interval=args.interval, seed=args.seed)
    isos = [approach2(table, method=m, **kw) for m in METHODS]
    envelope = None
    if args.curves or args.run_column == "params":
        if long is None:
            long = table.assign(run=table["params"])
        col = "run" if args.run_column == "params" else args.run_column
        envelope = approach1(
            long, run=col, prob=args.prob, seed=args.seed, tokens_per_step=args.tokens_per_step
        )
    published = args.table in PUBLISHED_FOR
    frame = compare_approaches(envelope=envelope, isoflops=isos, result=result, published=published)
    with pd.option_context("display.width", 140, "display.max_columns", 20):
        print(isos[-1].budgets.drop(columns=["tokens_opt"]).to_string(index=False))
        print()
        print(frame.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for iso in isos:
        for w in iso.warnings:
            print(f"warning ({iso.method}): {w}")
    if args.out:
        atomic_write_csv(args.out, frame)
    if args.plot:
        fig = isos[-1].plot(table)
        atomic_savefig(fig, args.plot, dpi=120)
    return 0
