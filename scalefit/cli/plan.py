"""``scalefit plan init|ask|tell|status|run``: the ask/tell loop of :mod:`scalefit.plan`."""

from __future__ import annotations

import argparse

from ._common import add_option, check_paths, rows_where


def register(subparsers) -> None:
    """Add the ``plan`` command."""
    plan = subparsers.add_parser(
        "plan",
        description="Choose runs that pin down the compute-optimal N* at a target budget, a "
        "round at a time: init a plan over candidate runs, ask for runs, train them (here with "
        "'plan run', or elsewhere), tell their losses; each tell refits, records the decision "
        "with its interval and checks the stopping rule. The state lives in FOLDER/plan.json.",
    )
    sub = plan.add_subparsers(dest="plan_command", metavar="ACTION", required=True)

    init = sub.add_parser("init", help="start a plan in FOLDER over the candidate runs")
    init.add_argument(
        "folder", metavar="FOLDER", help="the folder for the plan (one plan per folder)"
    )
    init.add_argument(
        "candidates",
        metavar="CANDIDATES",
        help="the runs the plan may ask for: a CSV (params, tokens; depth, width to train them) "
        "or a dataset name (its rows as an oracle grid)",
    )
    add_option(
        init, "--where", help="keep only the candidates matching a filter (fit's --where grammar)"
    )
    add_option(init, "--budget", action="store", required=True, help="the target budget")
    add_option(init, "--law", default="chinchilla")
    for flag in ("--max-run-flops", "--total-flops", "--stop-width", "--n-boot", "--seed"):
        add_option(init, flag)
    add_option(init, "--trainer")
    add_option(init, "--data-dir")
    init.set_defaults(func=_init)

    ask = sub.add_parser("ask", help="choose the next runs and print them")
    ask.add_argument("folder", metavar="FOLDER", help="the plan's folder")
    add_option(ask, "--k")
    add_option(ask, "--out", metavar="CSV", help="also write the runs as CSV")
    ask.set_defaults(func=_ask)

    tell = sub.add_parser("tell", help="add the losses of asked runs, refit and decide")
    tell.add_argument("folder", metavar="FOLDER", help="the plan's folder")
    tell.add_argument(
        "results",
        metavar="RESULTS.csv",
        help="loss and run_id (or params, tokens) of asked runs",
    )
    tell.set_defaults(func=_tell)

    status = sub.add_parser("status", help="print the plan's runs, decision and stop reason")
    status.add_argument("folder", metavar="FOLDER", help="the plan's folder")
    status.set_defaults(func=_status)

    run = sub.add_parser("run", help="ask, train and tell until the plan stops (resumable)")
    run.add_argument("folder", metavar="FOLDER", help="a plan started with --trainer")
    for flag in ("--k", "--rounds", "--workers", "--executor"):
        add_option(run, flag)
    run.set_defaults(func=_run)


def _init(args: argparse.Namespace) -> int:
    from ..core._io import read_toml
    from ..core.table import read_csv
    from ..datasets import is_dataset_name, load
    from ..plan import plan

    named = is_dataset_name(args.candidates)
    check_paths(
        inputs={"candidates CSV": None if named else args.candidates, "trainer": args.trainer}
    )
    cand = load(args.candidates, args.data_dir) if named else read_csv(args.candidates)
    if args.where:
        cand = rows_where(cand, args.where)
    trainer = read_toml(args.trainer, what="trainer settings") if args.trainer else None
    p = plan(
        args.budget,
        args.folder,
        candidates=cand,
        law=args.law,
        max_run_flops=args.max_run_flops,
        total_flops=args.total_flops,
        stop_width=args.stop_width,
        n_boot=args.n_boot,
        seed=args.seed,
        trainer=trainer,
    )
    print(f"plan started in {p.folder}: {len(p.candidates)} candidate runs")
    return 0


def _ask(args: argparse.Namespace) -> int:
    from ..core._io import atomic_write_csv
    from ..plan import load

    check_paths(files={"--out": args.out})
    runs = load(args.folder).ask(args.k)
    if runs.empty:
        print("no run to ask: the plan has stopped (see 'scalefit plan status')")
        return 0
    cols = ["run_id", "round", "depth", "width", "params", "tokens", "flops"]
    print(f"{len(runs)} runs, chosen by {runs.attrs['choice']}:")
    print(runs[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if args.out:
        print(f"wrote {atomic_write_csv(args.out, runs[cols])}")
    return 0


def _tell(args: argparse.Namespace) -> int:
    from ..core.errors import ScaleFitError
    from ..core.table import read_csv
    from ..plan import load

    check_paths(inputs={"results CSV": args.results})
    p = load(args.folder)
    try:
        p.tell(read_csv(args.results))
    except ScaleFitError as exc:  # the rows are the file's: name it
        raise ScaleFitError(f"{args.results}: {exc}") from None
    print(p.report())
    return 0


def _status(args: argparse.Namespace) -> int:
    from ..plan import load

    print(load(args.folder).report())
    return 0


def _run(args: argparse.Namespace) -> int:
    from ..plan import run_plan

    p = run_plan(
        args.folder, k=args.k, rounds=args.rounds, workers=args.workers, executor=args.executor
    )
    print(p.report())
    return 0
