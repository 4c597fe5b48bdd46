"""``scalefit fit`` and ``scalefit laws``."""

from __future__ import annotations

import argparse
import warnings

from . import Subcommands
from ._common import (
    add_option,
    add_table_args,
    check_outputs,
    law_options_arg,
    load_table_arg,
    plots_dir,
)


def register(sub: Subcommands) -> None:
    """Add the ``fit`` and ``laws`` commands."""
    p = sub.add_parser(
        "fit",
        help="fit a scaling law by robust least squares",
        description="Fit a scaling law to a loss table (multi-start, converged, "
        "optional bootstrap and held-out check).",
    )
    add_table_args(p)
    which = p.add_mutually_exclusive_group(required=True)
    add_option(which, "--law")
    which.add_argument(
        "--formula",
        metavar="EXPR",
        help='a law written as a formula, e.g. "E + A/params**alpha + B/tokens**beta"; '
        "any numeric column may be an input, every other name is a parameter",
    )
    add_option(p, "--law-option")
    p.add_argument(
        "--loss",
        default="mse",
        choices=["mse", "huber", "lad"],
        help="loss of the residuals: squared (mse), Huber, or absolute (lad)",
    )
    p.add_argument("--delta", type=float, default=1e-3, help="Huber threshold (residual units)")
    p.add_argument(
        "--residuals",
        default="log",
        choices=["log", "linear"],
        help="residuals on log loss (log y - log f) or on loss (y - f)",
    )
    p.add_argument(
        "--weights",
        default=None,
        metavar="COLUMN",
        help="per-row weights column",
        shown="every row weighs the same",
    )
    p.add_argument("--starts", type=int, default=256, help="random starts of the optimiser")
    p.add_argument(
        "--bootstrap", type=int, default=0, metavar="B", help="bootstrap resamples (0: none)"
    )
    p.add_argument(
        "--cluster",
        default=None,
        metavar="COLUMN",
        help="resample whole groups sharing this column's value",
        shown="rows resampled one by one",
    )
    p.add_argument(
        "--ci-method",
        default="percentile",
        choices=["percentile", "bca"],
        help="bootstrap interval: percentile or bias-corrected and accelerated (bca)",
    )
    add_option(p, "--holdout")
    p.add_argument(
        "--predictive",
        choices=["law", "calibrated"],
        default="law",
        help="predictive that scores the --holdout rows: bootstrap draws with the training "
        "RMSE's noise (law) or the calibrated one (see docs/extrapolation.md)",
    )
    p.add_argument(
        "--method",
        default="jax",
        choices=["jax", "lmfit"],
        help="optimiser: scalefit's own (jax) or lmfit's least squares",
    )
    add_option(p, "--seed", help="seed of the random starts and the bootstrap")
    p.add_argument("--out", default=None, metavar="RESULT.json", help="write the result as JSON")
    add_option(p, "--plots")
    add_option(p, "--no-progress")
    p.set_defaults(func=run_fit)

    q = sub.add_parser("laws", help="list the registered laws with their formulas")
    q.set_defaults(func=run_laws)


def run_fit(args: argparse.Namespace) -> int:
    """Run ``scalefit fit``; exit code 3 when the fit did not converge."""
    from ..errors import ConvergenceWarning
    from ..fit import fit
    from . import EXIT_NOT_CONVERGED, cli_terms

    check_outputs(files={"--out": args.out}, folders={"--plots": args.plots})
    table = load_table_arg(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the report lists them
        res = fit(
            table,
            args.law,
            formula=args.formula,
            loss=args.loss,
            delta=args.delta,
            residuals=args.residuals,
            weights=args.weights,
            starts=args.starts,
            seed=args.seed,
            method=args.method,
            bootstrap=args.bootstrap,
            cluster=args.cluster,
            ci_method=args.ci_method,
            holdout=args.holdout,
            predictive=args.predictive,
            law_options=law_options_arg(args.law_option),
            progress=False if args.no_progress else None,
        )
    print(cli_terms(res.report()))
    if args.out:
        res.save(args.out)
        print(f"\nwrote {args.out}")
    out = plots_dir(args.plots)
    if out is not None:
        written = write_fit_plots(res, table, out)
        for path in written:
            print(f"wrote {path}")
    return 0 if res.converged else EXIT_NOT_CONVERGED


def write_fit_plots(res, table, folder) -> list:
    """Write the standard figures of a fit into ``folder``; returns the paths."""
    from .._io import atomic_savefig
    from ..plot.fit import plot_draws, plot_fit

    paths = []
    fig = plot_fit(res, table)
    paths.append(atomic_savefig(fig, folder / f"fit_{res.law_name}.png", dpi=120))
    if res.draws is not None:
        fig = plot_draws(res)
        paths.append(atomic_savefig(fig, folder / f"draws_{res.law_name}.png", dpi=120))
    return paths


def run_laws(args: argparse.Namespace) -> int:
    """Print every registered law with its formula and parameters."""
    from ..laws import get_law, list_laws

    for name in list_laws():
        print(get_law(name).describe())
        print()
    return 0
