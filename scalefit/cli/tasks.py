"""``scalefit tasks``: downstream task accuracy from a model ladder, in two steps."""

from __future__ import annotations

import argparse

from . import Subcommands
from ._common import add_option, add_table_args, check_paths, load_table_arg, rows_where


def register(sub: Subcommands) -> None:
    """Add the ``tasks`` command."""
    p = sub.add_parser(
        "tasks",
        description="Fit (params, tokens) -> task bits-per-byte (Chinchilla law, final row of "
        "each run) and bits-per-byte -> accuracy (bounded sigmoid, every checkpoint) on the "
        "--where rows, then predict the final row of each --target run, with a bootstrap "
        "interval over whole runs and a single-step baseline (scalefit.tasks). The table needs "
        "run, params, tokens and bpb_TASK, acc_TASK columns, e.g. the olmo_ladder dataset.",
    )
    add_table_args(p)
    p.add_argument(
        "--target",
        required=True,
        metavar="EXPR",
        help="filter of the rows to predict, e.g. \"size == '7B'\" (the --where filter's "
        "grammar); without --where the fit uses every other row",
    )
    p.add_argument(
        "--task",
        action="append",
        default=None,
        help="a task (its bpb_TASK and acc_TASK columns); repeat for several",
        shown="every task with both columns",
    )
    add_option(p, "--n-boot", help="bootstrap resamples of whole runs")
    add_option(p, "--ci-prob", default=0.9)
    add_option(p, "--seed", help="seed of the bootstrap")
    add_option(p, "--out", metavar="CSV", help="write the prediction table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from ..core._io import atomic_write_csv
    from ..tasks import predict

    check_paths(files={"--out": args.out})
    table = load_table_arg(args, where=None)
    target = rows_where(table, args.target, "--target")
    train = rows_where(table, args.where) if args.where else table.drop(index=target.index)
    res = predict(
        train, target, args.task, bootstrap=args.n_boot, seed=args.seed, ci_prob=args.ci_prob
    )
    cols = ["task", "run", "acc", "acc_pred", "acc_lo", "acc_hi", "acc_single", "abs_err"]
    print(res[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for task, notes in res.groupby("task", sort=False)["warnings"].first().items():
        for note in filter(None, notes.split(" | ")):
            print(f"warning (step 1, {task}): {note}")
    if args.out:
        print(f"wrote {atomic_write_csv(args.out, res)}")
    return 0
