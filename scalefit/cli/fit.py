"""``scalefit fit`` and ``scalefit laws``."""

from __future__ import annotations

import argparse
import warnings

from ..core.errors import ScaleFitError
from . import Subcommands
from ._common import (
    add_option,
    add_table_args,
    check_paths,
    law_options_arg,
    load_table_arg,
    number,
    parse_mapping,
)

#: The options of :func:`scalefit.fit` the command offers (declared once, in the vocabulary).
_OPTIONS = (
    "loss", "delta", "residuals", "weights", "starts", "bootstrap", "cluster", "ci_method",
    "holdout", "predictive", "method",
)  # fmt: skip


def register(sub: Subcommands) -> None:
    """Add the ``fit`` and ``laws`` commands."""
    p = sub.add_parser(
        "fit",
        description="Fit a scaling law to a loss table (multi-start, converged, "
        "optional bootstrap and held-out check).",
    )
    add_table_args(p)
    _add_law_options(p)
    for name in _OPTIONS:
        add_option(p, "--" + name.replace("_", "-"))
    add_option(p, "--seed", help="seed of the random starts and the bootstrap")
    add_option(p, "--out", metavar="RESULT.json", help="write the result as JSON")
    for flag in ("--plots", "--no-progress"):
        add_option(p, flag)
    p.set_defaults(func=run_fit)

    q = sub.add_parser("laws")
    q.set_defaults(func=run_laws)


def _add_law_options(p) -> None:
    """The law (a name or a formula), its options, starting values, ranges and kinds."""
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
        "--start",
        default=None,
        metavar="NAME=VALUE,...",
        help="starting values: NAME=VALUE is tried first (with --law: an extra start in the "
        "law's units); with --formula, NAME=LO:HI sets the range random starts are drawn from",
    )
    p.add_argument(
        "--bound",
        default=None,
        metavar="NAME=LO:HI,...",
        help="with --formula: a range the fit keeps a parameter inside (LO or HI may be "
        "-inf/inf); a fit that ends on it says 'at bound'",
    )
    p.add_argument(
        "--kind",
        default=None,
        metavar="NAME=KIND,...",
        help="with --formula: how a parameter is fitted: free (as is), positive (in log space) "
        "or exponent; a parameter not named is free",
    )


def run_fit(args: argparse.Namespace) -> int:
    """Run ``scalefit fit``; exit code 3 when the fit did not converge."""
    from ..core.errors import ConvergenceWarning
    from ..fit import fit
    from . import EXIT_NOT_CONVERGED

    check_paths(files={"--out": args.out}, folders={"--plots": args.plots})
    table = load_table_arg(args)
    law, formula, x0 = formula_law_args(args, table)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the report lists them
        res = fit(
            table,
            law,
            formula=formula,
            x0=x0,
            seed=args.seed,
            law_options=law_options_arg(args.law_option),
            progress=False if args.no_progress else None,
            **{name: getattr(args, name) for name in _OPTIONS},
        )
    print(res.report())
    line = published_line(res, table)
    if line:
        print(line)
    if args.out:
        res.save(args.out)
        print(f"\nwrote {args.out}")
    if args.plots:
        for path in write_fit_plots(res, table, args.plots):
            print(f"wrote {path}")
    return 0 if res.converged else EXIT_NOT_CONVERGED


def published_line(res, table) -> str | None:
    """McLeish et al.'s fit scored under this fit's objective, for the decomposed law on their grid.

    Only for the whole bundled ``gemstones`` table (``hot_100b+``, no filter, no weights): their
    published parameters (:func:`scalefit.datasets.gemstones.published_params`, at the Huber
    threshold nearest this fit's) go through the same residuals, loss and sum as the fit, so
    the two objectives compare like for like. None otherwise.
    """
    dataset = table.attrs.get("scalefit", {}).get("dataset") or ""
    if not dataset.startswith("gemstones:"):  # the common case: nothing more to import
        return None
    import numpy as np

    from ..datasets.gemstones import BUNDLED_FILE, FILES, PUBLISHED, published_params
    from ..fit.engine import robust_rho
    from ..fit.observation import residual, response

    conv = res.conventions
    if (
        dataset != f"gemstones:{BUNDLED_FILE}"
        or res.law_name != "decomposed"
        or res.n_rows != FILES[BUNDLED_FILE].n_rows
        or conv.get("weights") is not None
        or conv.get("weight_column")
    ):
        return None
    loss, delta, scale = conv["loss"], float(conv["delta"]), conv["residuals"]
    theirs = min(PUBLISHED, key=lambda d: abs(np.log(d / delta)))
    rho, _, _ = robust_rho(np, loss, delta)
    y = response(table["loss"].to_numpy(dtype=float), scale)
    pred = np.asarray(res.law.evaluate(published_params(theirs), table), dtype=float)
    value = float(np.sum(rho(residual(np, y, pred, scale))))
    how = "lower" if res.objective <= value else "HIGHER"
    return (
        f"published  McLeish et al.'s fit (Huber delta {theirs:g}) scores {value:.10g} under this "
        f"objective; this fit is {how} by {abs(value - res.objective):.3g}"
    )


def _range(text: str, option: str, name: str) -> tuple[float, float]:
    lo, _, hi = text.partition(":")
    a, b = number(lo, option, name), number(hi, option, name)
    if not a < b:
        raise ScaleFitError(f"{option}: {name}={text!r} needs LO < HI.")
    return a, b


def formula_law_args(args: argparse.Namespace, table) -> tuple:
    """Turn ``--start/--bound/--kind`` into ``(law, formula, x0)`` for :func:`scalefit.fit`.

    With ``--formula`` and any of them, the formula law is built here (with the table's columns
    as its possible inputs); with ``--law``, ``--start NAME=VALUE`` becomes ``x0`` and
    ``--bound``/``--kind`` are refused.
    """
    from ..laws import Law, get_law

    starts_text = parse_mapping(args.start, "--start")
    bounds_text = parse_mapping(args.bound, "--bound")
    kinds = parse_mapping(args.kind, "--kind")
    if args.formula is None:
        for option, given in (("--bound", bounds_text), ("--kind", kinds)):
            if given:
                raise ScaleFitError(f"{option} applies to --formula laws only.")
        if not starts_text:
            return args.law, None, None
        names = get_law(args.law, **law_options_arg(args.law_option)).param_names
        x0 = {}
        for name, text in starts_text.items():
            if name not in names:
                raise ScaleFitError(
                    f"--start: law {args.law!r} has no parameter {name!r}; its parameters: "
                    f"{', '.join(names)}."
                )
            if ":" in text:
                raise ScaleFitError(
                    f"--start: {name}={text!r}: a range LO:HI applies to --formula laws; give "
                    "one value for --law."
                )
            x0[name] = number(text, "--start", name)
        return args.law, None, x0
    if not (starts_text or bounds_text or kinds):
        return None, args.formula, None
    starts = {
        name: _range(text, "--start", name) if ":" in text else number(text, "--start", name)
        for name, text in starts_text.items()
    }
    bounds = {name: _range(text, "--bound", name) for name, text in bounds_text.items()}
    law = Law.from_formula(
        args.formula,
        columns=[str(c) for c in table.columns],
        kinds=kinds,
        bounds=bounds,
        starts=starts,
        range_kind="constraint",
    )
    return law, None, None


def write_fit_plots(res, table, folder) -> list:
    """Write the standard figures of a fit into ``folder``; returns the paths."""
    from ..plot import write_figures
    from ..plot.fit import plot_draws, plot_fit

    figures = {f"fit_{res.law_name}.png": plot_fit(res, table)}
    if res.draws is not None:
        figures[f"draws_{res.law_name}.png"] = plot_draws(res)
    return write_figures(folder, figures)


def run_laws(args: argparse.Namespace) -> int:
    """Print every registered law with its formula and parameters."""
    from ..laws import get_law, list_laws

    for name in list_laws():
        print(get_law(name).describe())
        print()
    return 0
