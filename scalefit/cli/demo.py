"""``scalefit demo``: the README's main job — fit a bundled table, recommend shapes, write plots."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

DEFAULT_TABLE = "depth_delusion"
DEFAULT_LAW = "decomposed"
DEFAULT_BUDGETS = ("1e19", "1e20", "1e21")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``demo`` command."""
    p = sub.add_parser(
        "demo",
        help="fit a bundled loss table and print compute-optimal shapes (writes plots)",
        description="Runs `scalefit fit` with a bootstrap and then `scalefit allocate` on its "
        "result, printing each command first so you can rerun or adapt it.",
    )
    p.add_argument("--table", default=DEFAULT_TABLE, help=f"table (default {DEFAULT_TABLE})")
    p.add_argument("--law", default=DEFAULT_LAW, help=f"law (default {DEFAULT_LAW})")
    p.add_argument(
        "--budget",
        action="append",
        default=None,
        metavar="FLOP",
        help=f"budget(s) (default {', '.join(DEFAULT_BUDGETS)})",
    )
    p.add_argument("--bootstrap", type=int, default=200, metavar="B")
    p.add_argument(
        "--vocab",
        type=int,
        default=None,
        help="vocabulary for the parameter accounting (default: the table's own)",
    )
    p.add_argument(
        "--out",
        default="results/demo",
        metavar="DIR",
        help="folder for the result JSON, the allocation CSV and the plots",
    )
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Run the fit, then the allocation, exactly as their own commands would."""
    from . import EXIT_OK, main

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    vocab = args.vocab or (50257 if args.table == "depth_delusion" else None)
    fit_cmd = [
        "fit",
        args.table,
        "--law",
        args.law,
        "--bootstrap",
        str(args.bootstrap),
        "--seed",
        "0",
        "--out",
        str(out / "fit.json"),
        "--plots",
        str(out),
    ]
    alloc_cmd = [
        "allocate",
        str(out / "fit.json"),
        "--out",
        str(out / "allocation.csv"),
        "--plots",
        str(out),
    ]
    for b in args.budget or DEFAULT_BUDGETS:
        alloc_cmd += ["--budget", b]
    if vocab:
        alloc_cmd += ["--vocab", str(vocab)]
    if args.table == "depth_delusion":  # that paper counts untied input and output embeddings
        alloc_cmd += ["--embeddings", "untied"]
    for cmd in (fit_cmd, alloc_cmd):
        print(f"$ scalefit {shlex.join(cmd)}\n", flush=True)
        code = main(cmd)
        print(flush=True)
        if code != EXIT_OK:
            return code
    print(f"results and plots are in {out}/")
    return EXIT_OK
