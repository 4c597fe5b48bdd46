"""``scalefit curves fit``: fit a schedule-aware law to loss curves and forecast from it."""

from __future__ import annotations

import argparse
import warnings

from . import EXIT_NOT_CONVERGED, Subcommands
from ._common import add_option, check_paths, parse_mapping

FORMATS = ("auto", "csv", "jsonl", "tensorboard", "wandb", "trainer")


def register(sub: Subcommands) -> None:
    """Add the ``curves`` command group."""
    group = sub.add_parser(
        "curves",
        description="Loss curves: read training logs, fit a schedule-aware law, forecast.",
    )
    cmds = group.add_subparsers(dest="curves_command", metavar="COMMAND")
    p = cmds.add_parser(
        "fit",
        help="fit a law to loss curves",
        description="Read curves (long CSV/JSONL, TensorBoard folder, W&B export or trainer "
        "run folders), compute each checkpoint's forward area S1 and annealing area S2, drop "
        "warm-up and early checkpoints, thin long curves, fit, and forecast.",
    )
    _add_reading_args(p)
    p.add_argument("--momentum", type=float, default=0.999, help="annealing-area decay factor")
    p.add_argument("--early", type=float, default=0.1, help="drop this first fraction of each run")
    p.add_argument("--max-points", type=int, default=100, help="checkpoints kept per run")
    p.add_argument("--keep-warmup", action="store_true", help="keep warm-up checkpoints")
    p.add_argument(
        "--fit-fraction",
        type=float,
        default=None,
        metavar="F",
        help="fit on each run's first F of steps and predict its final loss",
    )
    p.add_argument(
        "--forecast",
        action="append",
        default=[],
        metavar="SPEC",
        help="predict the loss along this schedule (repeatable)",
    )
    p.add_argument("--params", type=float, default=None, help="model size for --forecast")
    _add_allocation_args(p)
    add_option(
        p,
        "--bootstrap",
        default=None,
        help="resamples of whole runs for the intervals (0: none, printed as n/a)",
        shown="200 with two runs or more",
    )
    add_option(
        p,
        "--cluster",
        default="run",
        shown=None,
        help="resample (or, with --bayes, offset) the runs sharing a value of this column "
        "together, e.g. a main run with its cooldown branches",
    )
    add_option(p, "--starts", default=64)
    p.add_argument(
        "--bayes",
        action="store_true",
        help="Bayesian fit (NUTS) with a random log-loss offset per run",
    )
    add_option(p, "--draws", help="with --bayes: draws and warm-up per chain")
    p.add_argument(
        "--errors",
        default="ar1",
        choices=("ar1", "independent"),
        help="with --bayes: errors within a run, AR(1) in step order or independent "
        "(besides the offset per run)",
    )
    add_option(p, "--seed")
    add_option(p, "--out", metavar="RESULT.json", help="write the result as JSON")
    add_option(p, "--plots")
    p.set_defaults(func=run_curves_fit)
    _register_holdout(cmds)


def _forecasts(args, res, curves, forecasts, extra) -> dict:
    """Print each run's predicted final loss (``--fit-fraction``) and every ``--forecast``."""
    from ..core._validation import interval_text
    from ..curves import final_losses, forecast

    if args.fit_fraction:
        table = final_losses(res, curves, schedule=args.schedule)
        print(f"\nfinal loss of each run from its first {args.fit_fraction:g}:")
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    frames = {}
    for sched in forecasts:
        frames[str(sched)] = forecast(res, sched, momentum=args.momentum, **extra)
        end = frames[str(sched)].iloc[-1]
        band = (
            interval_text(end["loss"], end["lo"], end["hi"], "{:.4f}".format) if "lo" in end else ""
        )
        print(f"forecast {sched}: loss at step {int(end['step'])} = {end['loss']:.4f}{band}")
    return frames


def _register_holdout(cmds) -> None:
    """``scalefit curves holdout``: the held-out protocol across sizes."""
    from ..curves.holdout import CURVE_LAWS

    p = cmds.add_parser(
        "holdout",
        help="predict the larger models' final losses from the smaller models' curves",
        description="Fit curve laws to every checkpoint of the runs below --held-out-params "
        "(every peak rate), predict each larger run's loss at the end of its schedule, and "
        "compare with Chinchilla's law fitted to the same runs' final losses (every rate; the "
        "best rate per size and length): mean |ln error| and 95% intervals holding the loss.",
    )
    _add_reading_args(p, law=False)
    add_option(p, "--held-out-params", required=True)
    add_option(
        p, "--law", action="append", help="curve law to fit (repeatable)",
        shown=", ".join(CURVE_LAWS),
    )  # fmt: skip
    add_option(p, "--bootstrap", default=200, help="resamples of whole runs for the intervals")
    add_option(p, "--cluster", default="run", shown=None, help="resample these runs together")
    add_option(p, "--starts", default=64)
    add_option(p, "--seed")
    add_option(p, "--out", metavar="ROWS.csv", help="write every held-out prediction as CSV")
    p.set_defaults(func=run_curves_holdout)


def run_curves_holdout(args: argparse.Namespace) -> int:
    """Run ``scalefit curves holdout``."""
    from ..core._io import atomic_write_csv
    from ..curves.holdout import CURVE_LAWS, holdout_summary, size_holdout
    from ..laws import get_law

    check_paths(files={"--out": args.out})
    laws = args.law or list(CURVE_LAWS)
    for name in laws:
        get_law(name)  # an unknown name is one line before any fit
    curves = _read(args)
    if args.schedule and not _is_template(args.schedule) and "schedule" not in curves:
        curves = curves.assign(schedule=args.schedule)
    rows = size_holdout(
        curves, args.held_out_params, laws=laws, bootstrap=args.bootstrap,
        cluster=args.cluster, seed=args.seed, starts=args.starts,
    )  # fmt: skip
    print(f"held out: {rows['run'].nunique()} runs of >= {args.held_out_params:g} params")
    print(holdout_summary(rows).to_string(float_format=lambda v: f"{v:.4f}"))
    if args.out:
        atomic_write_csv(args.out, rows)
        print(f"wrote {args.out}")
    return 0


def _add_reading_args(p, law: bool = True) -> None:
    """The options that say how to read the curves (and, with ``law``, which law to fit)."""
    p.add_argument("files", nargs="+", metavar="FILE", help="curve file(s) or folder(s)")
    p.add_argument(
        "--format",
        default="auto",
        choices=FORMATS,
        help="how to read FILE (auto: by suffix; a folder with history.csv is a trainer run, "
        "any other folder TensorBoard event files)",
    )
    if law:
        which = p.add_mutually_exclusive_group()
        add_option(which, "--law", shown="lr_annealing")
        which.add_argument(
            "--formula",
            metavar="EXPR",
            help='a formula over S1, S2, lr, step, tokens, params, e.g. "L0 + A*S1**(-alpha) - '
            'C*S2"',
        )
    p.add_argument(
        "--schedule",
        default=None,
        metavar="SPEC",
        help="schedule of runs that declare none, e.g. "
        "wsd:lr=3e-3,steps=10000,warmup=100,decay=0.2; {column} fields fill it per run "
        "from a CSV/JSON file, e.g. cosine:lr={peak_lr},steps={total_steps},warmup=50",
    )
    add_option(p, "--columns", help="rename columns")
    p.add_argument(
        "--run",
        default=None,
        metavar="NAME",
        help="run name of a CSV/JSON file without a run column (a file of one run)",
    )
    p.add_argument(
        "--run-columns",
        default=None,
        metavar="A,B,...",
        help="CSV/JSON columns whose values together name a run (joined by /), "
        "e.g. model,total_steps,peak_lr",
    )
    p.add_argument("--tag", default=None, help="TensorBoard loss tag or W&B metric", shown="loss")


def _add_allocation_args(p) -> None:
    """The options of the compute-optimal allocation printed after the fit."""
    add_option(
        p,
        "--budget",
        help="also print the compute-optimal params, tokens and schedule for this FLOP budget "
        "(C = 6 params tokens; needs a law with params); repeat for several budgets",
    )
    p.add_argument(
        "--train-schedule",
        default=None,
        metavar="SPEC",
        help="schedule family of the run to train for --budget, without steps, e.g. "
        "wsd:lr=3e-3,warmup=100,decay=0.2",
        shown="the schedule the fitted runs share",
    )
    add_option(
        p,
        "--tokens-per-step",
        help="tokens per update for --budget",
        shown="the curves' tokens_per_step column or tokens/step",
    )


def _read(args: argparse.Namespace):
    from pathlib import Path

    import pandas as pd

    from ..core.errors import ScaleFitError
    from ..curves import (
        read_curves,
        read_tensorboard,
        read_trainer_runs,
        read_wandb,
        validate_curves,
    )

    readers = {  # the formats read by their own reader; any other is a CSV/JSON curve file
        "tensorboard": lambda f: read_tensorboard(f, tag=args.tag),
        "wandb": lambda f: read_wandb(f, metric=args.tag or "loss"),
        "trainer": read_trainer_runs,
    }
    per_file = {
        "columns": parse_mapping(args.columns, "--columns"),
        "run": args.run,
        "run_columns": _names(args.run_columns, "--run-columns"),
        "schedule": args.schedule if _is_template(args.schedule) else None,
    }
    parts = []
    for f in args.files:
        kind = args.format
        if kind == "auto" and Path(f).is_dir():
            kind = "trainer" if (Path(f) / "history.csv").exists() else "tensorboard"
        if args.tag is not None and kind not in ("tensorboard", "wandb"):
            raise ScaleFitError(f"--tag applies to TensorBoard and W&B files, not to {f}.")
        if kind in readers:
            for key, given in per_file.items():
                if given:
                    flag = "--" + key.replace("_", "-")
                    flag += " with {column} fields" if key == "schedule" else ""
                    raise ScaleFitError(f"{flag} applies to CSV/JSON curve files, not to {f}.")
        parts.append(readers[kind](f) if kind in readers else read_curves(f, **per_file))
    if len(parts) == 1:
        return parts[0]
    return validate_curves(pd.concat(parts, ignore_index=True), source=", ".join(args.files))


def _names(text: str | None, flag: str) -> list[str] | None:
    """``a,b,c`` as a list of names (``None`` when not given)."""
    from ..core.errors import ScaleFitError

    if text is None:
        return None
    names = [t.strip() for t in text.split(",")]
    if not all(names):
        raise ScaleFitError(f"{flag}: expected column names separated by commas. Got {text!r}.")
    return names


def _is_template(schedule: str | None) -> bool:
    """Whether ``--schedule`` has ``{column}`` fields (filled per run when reading)."""
    return schedule is not None and ("{" in schedule or "}" in schedule)


def _allocation_setup(args: argparse.Namespace, curves) -> dict | None:
    """The allocation's options for --budget, checked before the fit (a bad one prints nothing)."""
    from ..core.errors import ScaleFitError
    from ..curves.optimum import check_law, defaults, family
    from ..laws import get_law

    given = {"--train-schedule": args.train_schedule, "--tokens-per-step": args.tokens_per_step}
    if args.budget is None:
        extra = [flag for flag, value in given.items() if value is not None]
        if extra:
            raise ScaleFitError(f"{extra[0]} goes with --budget; give a --budget.")
        return None
    if not args.formula:
        check_law(get_law(args.law or "lr_annealing"))
    per = args.tokens_per_step
    sched = args.train_schedule
    if sched is not None:
        sched = family(sched, where="--train-schedule")
    sched, per = defaults(curves, sched, per)
    return {"schedule": sched, "tokens_per_step": per, "curves": curves}


def _interval_note(args: argparse.Namespace, n_boot: int, clusters: int) -> str:
    """How the report's intervals treat the checkpoints of one run (``clusters``: groups fitted)."""
    group = "run (group = run id)" if args.cluster == "run" else f"value of {args.cluster!r}"
    if args.bayes:
        within = ", AR(1) errors within each run" if args.errors == "ar1" else ""
        return (
            f"Bayesian intervals with a random log-loss offset per {group}{within}, "
            "forecast bands for a new run"
        )
    runs = "whole runs" if args.cluster == "run" else f"whole runs grouped by {args.cluster!r}"
    if not n_boot:
        one = "one run" if args.cluster == "run" else f"one value of {args.cluster!r} (one cluster)"
        why = f", and {one} cannot be resampled" if clusters == 1 else " (--bootstrap 0)"
        return f"no intervals: they resample {runs}{why}"
    return f"intervals resample {runs}"


def _prepared(args: argparse.Namespace, curves):
    """The curves with the command's checkpoint discipline applied (see ``curves.prepare``)."""
    from ..curves import prepare

    return prepare(
        curves,
        schedule=args.schedule,
        momentum=args.momentum,
        drop_warmup=not args.keep_warmup,
        early=args.early,
        max_points=args.max_points,
    )


def _law(args: argparse.Namespace, prepared):
    """The law to fit and, where the schedules decide it, the line that says why.

    A constant learning rate has no annealing area (``S2 = 0`` at every checkpoint), so it
    cannot identify a law's annealing term: without ``--law`` such curves get the power law in
    ``S1``; with a decay, ``lr_annealing``.
    """
    from ..curves import constant_lr_law
    from ..laws import get_law

    decay = bool((prepared["S2"] > 0).any())
    if args.formula:
        return None, ""
    if args.law:
        inputs = get_law(args.law).inputs
        if decay or not any(i == "S2" or i.startswith("mpl_w") for i in inputs):
            return args.law, ""
        return args.law, (
            "the learning rate never decays in the fitted checkpoints (S2 = 0), so the "
            "annealing term is not identified; without --law, scalefit fits L0 + A/S1^alpha"
        )
    if decay:
        return "lr_annealing", ""
    return constant_lr_law(), (
        "L0 + A/S1^alpha (lr_constant), since the learning rate never decays in the fitted "
        "checkpoints (annealing area S2 = 0), which cannot identify lr_annealing's term C*S2; "
        "with a decay (--schedule cosine:..., wsd:...) the default is lr_annealing"
    )


def run_curves_fit(args: argparse.Namespace) -> int:
    """Run ``scalefit curves fit``."""
    from ..core._validation import Interval, validate
    from ..core.errors import ConvergenceWarning, ScaleFitError
    from ..core.schedule import parse_schedule
    from ..curves import allocation, fit_curves, truncate
    from ..curves.api import UNCONVERGED

    check_paths(files={"--out": args.out}, folders={"--plots": args.plots})
    cons = {
        "--fit-fraction": [Interval(float, 0, 1, closed="neither"), None],
        "--params": [Interval(float, 0, None, closed="neither", finite=True), None],
    }
    given = {"--fit-fraction": args.fit_fraction, "--params": args.params}
    validate("scalefit curves fit", given, cons, noun="option")
    if args.params is not None and not args.forecast:
        raise ScaleFitError("--params is the model size of a --forecast; give a --forecast.")
    forecasts = [parse_schedule(s, where="--forecast") for s in args.forecast]
    curves = _read(args)
    if _is_template(args.schedule):
        args.schedule = None  # filled into each run's schedule column when reading
    setup = _allocation_setup(args, curves)
    train = truncate(curves, args.fit_fraction) if args.fit_fraction else curves
    prepared = _prepared(args, train)
    law, why = _law(args, prepared)
    bayes = {}
    if args.bayes:
        bayes = {"bayes": True, "draws": args.draws, "warmup": args.draws, "errors": args.errors}
    elif args.errors != "ar1":
        raise ScaleFitError("--errors is the error model of --bayes; give --bayes.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the report lists them
        res = fit_curves(
            prepared,
            law,
            formula=args.formula,
            bootstrap=args.bootstrap,
            cluster=args.cluster,
            seed=args.seed,
            starts=args.starts,
            progress=False,
            **bayes,
        )
    alloc = allocation(res, args.budget, **setup) if setup else None
    meta = res.conventions["curves"]
    if why:
        print(f"law choice: {why}\n")
    print(res.report())
    runs = f"{meta['runs']} run{'s' if meta['runs'] != 1 else ''}"
    note = _interval_note(args, res.n_boot, int(prepared[args.cluster].nunique()))
    print(
        f"\ncurves: {runs}, {meta['checkpoints']} checkpoints fitted (warm-up "
        f"{'kept' if args.keep_warmup else 'dropped'}, first {args.early:g} of each run dropped, "
        f"at most {args.max_points} per run); {note}."
    )
    if "peak_lr" in res.law.inputs:  # lr_optimum: the recommended peak rate, largest run
        from ..curves.optimum import optimal_lr_text

        rng = res.conventions["data_range"]
        print(optimal_lr_text(res, rng["params"][1], rng["tokens"][1]))
    extra = {} if args.params is None else {"params": args.params}
    with warnings.catch_warnings():  # the report says "converged NO"; other warnings print
        warnings.filterwarnings("ignore", message=UNCONVERGED, category=ConvergenceWarning)
        frames = _forecasts(args, res, curves, forecasts, extra)
    if alloc is not None:
        print("\n" + alloc.report())
    if args.out:
        res.save(args.out)
        print(f"wrote {args.out}")
    if args.plots:
        from ..plot import write_figures
        from ..plot.curves import plot_curves

        fig = plot_curves(res, _prepared(args, curves), forecasts=frames)
        for path in write_figures(args.plots, {f"curves_{res.law_name}.png": fig}):
            print(f"wrote {path}")
    return 0 if res.converged else EXIT_NOT_CONVERGED
