"""``scalefit demo``: fit a depth/width/tokens table, then recommend what the fit can support.

It prints the two commands it runs (``scalefit fit`` and ``scalefit allocate``) so they can be
rerun or adapted; the choice of table and the recommendation are :mod:`scalefit.workflows.demo`.
"""

from __future__ import annotations

import argparse
import shlex

from ..workflows.demo import (
    CHINCHILLA,
    allocation,
    choose_data,
    recommendation_table,
    recommendation_text,
    unpinned_reasons,
)
from . import Subcommands
from ._common import add_option, int_at_least, positive_flops, tidy_table


def _budget_text(text: str) -> str:
    """A budget checked like any FLOP count, kept as typed (commands are printed verbatim)."""
    positive_flops(text)
    return text


def register(sub: Subcommands) -> None:
    """Add the ``demo`` command."""
    p = sub.add_parser(
        "demo",
        description="Fits Liu et al.'s decomposed law (width, depth, tokens) to the Chinchilla "
        "depth/width table when it is found (--data-dir, SCALEFIT_DATA_DIR, "
        "the user cache or a checksummed download), else to a bundled table, and "
        "recommends per budget only what the fit pins down: no value for a quantity the data "
        "leave open, no shape at a boundary solution. Prints each command it runs so you can "
        "rerun or adapt it.",
    )
    p.add_argument(
        "--budget",
        action="append",
        type=_budget_text,
        default=None,
        metavar="FLOPS",
        help="training budget in FLOPs; repeat the option for several budgets",
        shown="1e19 1e20 1e21 on Chinchilla, 1e19 3e19 1e20 on the bundled Gemstones grid",
    )
    add_option(p, "--bootstrap", type=int_at_least(2), default=100, help="bootstrap resamples")
    add_option(p, "--seed", help="seed of the bootstrap")
    add_option(
        p,
        "--data-dir",
        shown=None,
        help="folder holding chinchilla_depth_width.csv (else SCALEFIT_DATA_DIR, "
        "the user cache, a download)",
    )
    p.add_argument(
        "--no-download",
        action="store_true",
        help="never download the Chinchilla table; use the bundled Gemstones grid when it is "
        "not local",
    )
    p.add_argument(
        "--bundled",
        action="store_true",
        help="use the bundled Gemstones grid even if Chinchilla is here",
    )
    add_option(
        p,
        "--out",
        default="results/demo",
        metavar="DIR",
        help="folder for fit.json, allocation.csv, recommendation.csv and the figures",
    )
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Fit, allocate, and print a recommendation limited to what the data pin down."""
    from ..core._io import ensure_folder
    from . import EXIT_OK, main
    from ._common import check_paths

    check_paths(folders={"--out": args.out})
    spec, why = choose_data(args.data_dir, not args.no_download, args.bundled)
    out = ensure_folder(args.out)
    budgets = list(args.budget or spec["budgets"])
    data = ["--data-dir", args.data_dir] if args.data_dir and spec is CHINCHILLA else []
    print(f"data     {spec['table']}: {spec['about']}")
    print("\n".join(f"         {line}" for line in why.splitlines()) + "\n")
    fit_cmd = ["fit", spec["table"], *spec["args"], *data, "--law", "decomposed"]
    fit_cmd += ["--bootstrap", str(args.bootstrap), "--seed", str(args.seed)]
    fit_cmd += ["--out", str(out / "fit.json"), "--plots", str(out)]
    print(f"$ scalefit {shlex.join(fit_cmd)}\n", flush=True)
    code = main(fit_cmd)
    if code != EXIT_OK:
        return code
    from ..fit import FitResult

    result = FitResult.load(out / "fit.json")
    unknown = tuple(getattr(result, "not_identified", ()) or ())
    alloc_cmd = ["allocate", str(out / "fit.json")]
    for b in budgets:
        alloc_cmd += ["--budget", b]
    alloc_cmd += ["--head-dim", str(spec["head_dim"])]
    for key, value in (spec["accounting"] or {}).items():
        alloc_cmd += ["--" + key.replace("_", "-"), str(value)]
    alloc_cmd += ["--out", str(out / "allocation.csv"), "--plots", str(out)]
    alloc = allocation(result, budgets, spec)
    table = recommendation_table(alloc, unknown)
    settled = bool(table["recommended"].all() and table.filter(like="_determined").all().all())
    if not settled:  # the allocate report calls its best shape "recommended": not for this fit
        alloc_cmd += ["--quiet"]
    print(f"\n$ scalefit {shlex.join(alloc_cmd)}\n", flush=True)
    code = main(alloc_cmd)
    if code != EXIT_OK:
        return code
    from ..core._io import atomic_write_csv

    atomic_write_csv(out / "recommendation.csv", tidy_table(table))
    print()
    print(recommendation_text(table, alloc, spec, unknown, unpinned_reasons(result)))
    print(f"\nwrote {out / 'recommendation.csv'}")
    print(f"results and figures are in {out}/")
    return EXIT_OK
