"""``scalefit multiplier``: two recipes compared as a compute multiplier at a target loss."""

from __future__ import annotations

import argparse

from . import Subcommands
from ._common import add_option, load_table_arg


def register(sub: Subcommands) -> None:
    """Add the ``multiplier`` command."""
    p = sub.add_parser(
        "multiplier",
        description="Fit a law of params and tokens to each of two tables and print the compute "
        "multiplier C_A / C_B: how much more compute recipe A needs than recipe B to reach a "
        "target loss at their compute-optimal allocations (C = 6 params tokens), with a "
        "percentile interval over paired bootstrap draws (scalefit.multiplier).",
    )
    for name, what in (("a", "recipe A"), ("b", "recipe B")):
        p.add_argument(
            name, metavar=name.upper(), help=f"{what}: a CSV path or a dataset name (as fit's)"
        )
        add_option(
            p,
            f"--where-{name}",
            name="where",
            help=f"keep only the rows of {name.upper()} matching a filter (fit's --where grammar)",
        )
    add_option(p, "--law", default="chinchilla", help="a law of params and tokens")
    add_option(p, "--target-loss")
    add_option(p, "--shared-floor")
    add_option(p, "--n-boot", help="bootstrap resamples of each table")
    add_option(p, "--cluster")
    add_option(p, "--ci-prob")
    add_option(p, "--seed")
    for flag in ("--columns", "--data-dir"):
        add_option(p, flag)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    import warnings

    from ..core.errors import ConvergenceWarning
    from ..multiplier import compute_multiplier

    a, b = (
        load_table_arg(args, table=table, where=where, drop_highest=0)
        for table, where in ((args.a, args.where_a), (args.b, args.where_b))
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # printed below, by recipe
        res = compute_multiplier(
            a,
            b,
            law=args.law,
            target_loss=args.target_loss,
            shared_floor=args.shared_floor,
            bootstrap=args.n_boot,
            cluster=args.cluster,
            seed=args.seed,
            ci_prob=args.ci_prob,
        )
    print(res.report())
    for name, result in (("A", res.fit_a), ("B", res.fit_b)):
        for note in result.warnings:
            print(f"warning (fit of {name}): {note}")
    return 0
