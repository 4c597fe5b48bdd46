"""``scalefit allocate``: compute-optimal depth, width and tokens for FLOP budgets."""

from __future__ import annotations

import argparse
import warnings

from ..core._validation import VOCABULARY
from ..core.errors import NoRecommendationWarning, ScaleFitError
from . import Subcommands
from ._common import (
    add_option,
    check_paths,
    law_options_arg,
    number,
    parse_mapping,
    tidy_table,
)

#: Options of the search over depth and width: refused for a law of params alone.
SHAPE_OPTIONS = (
    "vocab", "embeddings", "mlp_ratio", "head_dim", "min_depth", "max_depth", "aspect_max", "audit",
)  # fmt: skip

SUMMARY_FIRST = ["budget", "depth", "width", "tokens", "params", "loss", "loss_lo", "loss_hi"]


def register(sub: Subcommands) -> None:
    """Add the ``allocate`` command."""
    p = sub.add_parser(
        "allocate",
        description="Compute-optimal allocation of FLOP budgets (C = 6 params tokens) under a "
        "fitted law (RESULT.json from `scalefit fit --out`) or a law with explicit parameters "
        "(--law NAME --params k=v,...). Prints, per budget, the recommended practical shape, "
        "the continuous optimum with intervals from the result's draws, and the runner-up "
        "shapes whose loss lies within the recommended shape's interval.",
    )
    p.add_argument(
        "result", nargs="?", metavar="RESULT.json", help="a saved fit result (or --law NAME)"
    )
    add_option(p, "--law", help="law name, with --params (instead of RESULT.json)")
    p.add_argument("--params", default=None, metavar="K=V,...", help="parameter values for --law")
    add_option(p, "--law-option", help="options for --law, e.g. form=power")
    add_option(p, "--budget", required=True)
    _add_shape_options(p)
    p.add_argument(
        "--eps", type=float, default=1e-3, help="loss tolerance (nats) of the near-optimal set"
    )
    add_option(p, "--ci-prob", later=True, shown="or the fit's own interval probability")
    p.add_argument("--show", type=int, default=5, metavar="K", help="runner-ups to print")
    p.add_argument("--no-draws", action="store_true", help="ignore the result's draws")
    add_option(p, "--interval")
    p.add_argument(
        "--exponents",
        action="store_true",
        help="also fit q* ∝ C^a between the smallest and largest budget",
    )
    p.add_argument(
        "--audit",
        default=None,
        metavar="NAME=DxW,...",
        help="critical-depth audit of shapes, e.g. 7B-32L=32x4096,7B-64L=64x2816",
    )
    add_option(p, "--out", metavar="FILE.csv", help="one row per budget")
    p.add_argument(
        "--shapes-out",
        default=None,
        metavar="FILE.csv",
        help="every practical candidate shape with its loss interval",
    )
    add_option(p, "--plots")
    add_option(p, "--quiet", help="print no report, only the names of the files written")
    p.set_defaults(func=run_allocate)


def _add_shape_options(p) -> None:
    """The options of the search over depth and width (:data:`SHAPE_OPTIONS`, ``--block``)."""
    shape = p.add_argument_group(
        "shape options", "for laws of depth and width only (refused for a law of params alone)"
    )
    shape.add_argument(
        "--vocab",
        type=int,
        default=None,
        help="vocabulary size for the parameter accounting",
        fallback=32000,
        shown="or the law's own vocab option",
    )
    shape.add_argument(
        "--embeddings",
        default=None,
        choices=["tied", "untied", "excluded"],
        help="how embedding parameters count in params",
        fallback="tied",
        shown="or the law's own embeddings option",
    )
    shape.add_argument(
        "--block",
        default="standard",
        choices=["standard", "swiglu"],
        help="transformer block of the parameter accounting",
    )
    add_option(shape, "--mlp-ratio", later=True)
    for flag in ("--head-dim", "--min-depth"):
        add_option(shape, flag, later=True)
    shape.add_argument(
        "--max-depth",
        type=int,
        default=None,
        help="largest depth searched",
        shown="no bound beyond the search's own range",
    )
    add_option(shape, "--aspect-max")


def _source(args: argparse.Namespace):
    """The FitResult, or the law name with its parameter values."""
    from ..fit import FitResult

    if (args.result is None) == (args.law is None):
        raise ScaleFitError("give either RESULT.json or --law NAME --params k=v,... (not both).")
    if args.result is not None:
        if args.params or args.law_option:
            raise ScaleFitError("--params/--law-option go with --law, not with RESULT.json.")
        from ..allocate.api import resolve

        res = FitResult.load(args.result)
        try:
            resolve(res)
        except ScaleFitError as exc:
            raise ScaleFitError(f"{args.result}: {exc}") from None
        return res, None, None
    values = {
        k: number(v, "--params", k) for k, v in parse_mapping(args.params, "--params").items()
    }
    return args.law, values, law_options_arg(args.law_option)


def _refuse_shape_options(args: argparse.Namespace, source, law_options) -> None:
    """Refuse the depth/width options for a law of params alone: they would change nothing."""
    from ..allocate.space import Space

    given = [o for o in SHAPE_OPTIONS if getattr(args, o) is not None]
    given += ["block"] if args.block != "standard" else []
    if not given:
        return
    law = _law_of(source, law_options)
    try:
        kind = Space.of(law).kind
    except ScaleFitError:
        return  # allocate names what is wrong with the law itself
    if kind == "params":
        flags = ", ".join("--" + o.replace("_", "-") for o in given)
        raise ScaleFitError(
            f"{flags}: the law {law.name!r} has no depth or width (its inputs are params and "
            f"tokens), so {'this option does' if len(given) == 1 else 'these options do'} not "
            f"apply; leave {'it' if len(given) == 1 else 'them'} out."
        )


def _law_of(source, law_options):
    """The law of a FitResult, or the named law with its options."""
    from ..laws import get_law

    return source.law if hasattr(source, "law") else get_law(source, **(law_options or {}))


def _accounting(args, source, law_options):
    from ..allocate import Accounting, default_accounting

    given = (args.vocab, args.embeddings, args.mlp_ratio)
    if all(v is None for v in given) and args.block == "standard":
        return None
    base = default_accounting(_law_of(source, law_options))
    return Accounting(
        vocab=args.vocab if args.vocab is not None else base.vocab,
        embeddings=args.embeddings or base.embeddings,
        block=args.block,
        mlp_ratio=args.mlp_ratio if args.mlp_ratio is not None else base.mlp_ratio,
    )


def run_allocate(args: argparse.Namespace) -> int:
    """Run ``scalefit allocate``."""
    from ..allocate import allocate
    from ..allocate.report import audit_text, budget_text, exponents_text, header_text
    from ..core._io import atomic_write_csv

    check_paths(
        inputs={"fit result (JSON)": args.result},
        files={"--out": args.out, "--shapes-out": args.shapes_out},
        folders={"--plots": args.plots},
    )
    source, values, law_options = _source(args)
    _refuse_shape_options(args, source, law_options)
    acc = _accounting(args, source, law_options)
    kw = {"params": values, "law_options": law_options, "accounting": acc, "ci_prob": args.ci_prob}
    with warnings.catch_warnings():  # the report prints the reasons (alloc.warnings)
        warnings.simplefilter("ignore", NoRecommendationWarning)
        alloc = allocate(
            source,
            args.budget,
            head_dim=args.head_dim or VOCABULARY["head_dim"].default,
            min_depth=args.min_depth or VOCABULARY["min_depth"].default,
            max_depth=args.max_depth,
            aspect_max=args.aspect_max,
            eps=args.eps,
            use_draws=not args.no_draws,
            interval=args.interval,
            **kw,
        )
    if not args.quiet:
        print(header_text(alloc))
        for i, budget in enumerate(alloc.budgets):
            print()
            print(budget_text(alloc, i, budget, args.show))
        for w in alloc.warnings:
            print(f"\nwarning: {w}")
        if args.exponents:
            print()
            print(exponents_text(source, alloc, **kw))
        if args.audit:
            print()
            print(audit_text(source, _parse_audit(args.audit), **kw))
    if args.out:
        cols = SUMMARY_FIRST + [c for c in alloc.summary.columns if c not in SUMMARY_FIRST]
        frame = alloc.summary[cols].copy()
        frame.insert(1, "law", alloc.law)
        atomic_write_csv(args.out, tidy_table(frame))
        print(f"wrote {args.out}" if args.quiet else f"\nwrote {args.out}")
    if args.shapes_out and alloc.shapes:
        import pandas as pd

        frame = pd.concat([f.assign(budget=b) for b, f in alloc.shapes.items()])
        atomic_write_csv(args.shapes_out, tidy_table(frame[["budget"] + list(frame.columns[:-1])]))
        print(f"wrote {args.shapes_out}")
    if args.plots:
        from ..plot.allocate import write_allocation_plots

        for path in write_allocation_plots(source, alloc, args.plots, **kw):
            print(f"wrote {path}")
    return 0


def _parse_audit(text: str) -> list[tuple[str, int, int]]:
    out = []
    for name, shape in parse_mapping(text, "--audit").items():
        try:
            depth, width = (int(v) for v in shape.lower().split("x"))
        except ValueError:
            raise ScaleFitError(f"--audit: {name}={shape!r} is not DEPTHxWIDTH.") from None
        out.append((name, depth, width))
    return out
