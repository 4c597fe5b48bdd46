"""``scalefit toy run|fit``: the teacher–student toy from the shell (``probe`` is in probe.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core._io import MAX_CONFIG_BYTES
from ..core._validation import Matches
from ..core.errors import ScaleFitError
from ._common import add_option

#: A Slurm partition or submitit cluster name: it ends up in a job script, where a newline
#: would start a line of its own.
_NAME = Matches(
    r"[A-Za-z0-9_.,:-]{1,128}",
    "a name of letters, digits and _ . , : - (one line, at most 128 characters)",
)


def register(subparsers) -> None:
    """Add the ``toy`` command."""
    toy = subparsers.add_parser("toy")
    sub = toy.add_subparsers(dest="toy_command", metavar="ACTION", required=True)

    run = sub.add_parser("run", help="run (or resume) a toy sweep spec")
    run.add_argument("spec", metavar="SPEC.toml", help="the sweep spec (TOML)")
    for flag in ("--workers", "--executor"):
        add_option(run, flag)
    add_option(run, "--out", metavar="DIR", help="output folder", shown="runs/NAME of the spec")
    add_option(run, "--threads")
    run.add_argument("--slurm-partition", default=None, help="Slurm partition (executor slurm)")
    run.add_argument("--timeout-min", type=int, default=None, help="per-job limit (slurm)")
    run.add_argument("--cluster", default=None, help="submitit cluster (e.g. 'local' to test)")
    add_option(run, "--quiet")
    add_option(
        run,
        "--overwrite",
        help="replace a sweep of the same name that ran in --out with other settings",
    )
    run.add_argument(
        "--no-wait",
        action="store_true",
        help="exit (code 2) instead of waiting when another process is using --out",
    )
    run.set_defaults(func=_run)

    fit = sub.add_parser("fit", help="fit α_ℓ per group of a toy sweep")
    fit.add_argument("dir", metavar="DIR", help="sweep output folder or results CSV")
    fit.add_argument(
        "--loss",
        choices=("test_loss", "train_loss"),
        default="test_loss",
        help="which loss column to fit",
    )
    add_option(fit, "--bootstrap", default=200)
    add_option(fit, "--seed", help="seed of the bootstrap")
    fit.add_argument("--final-only", action="store_true", help="only each run's last checkpoint")
    add_option(fit, "--out", metavar="CSV", help="the exponents table", shown="DIR/alpha.csv")
    add_option(fit, "--no-plots")
    fit.set_defaults(func=_fit)


def _run(args: argparse.Namespace) -> int:
    from ..core._validation import Interval, validate
    from ..sweep import collect_results, is_finished, load_spec, run_sweep

    validate(
        "toy run",
        {
            "--timeout-min": args.timeout_min,
            "--slurm-partition": args.slurm_partition,
            "--cluster": args.cluster,
        },
        {
            "--timeout-min": [None, Interval(int, 1, 10**6)],
            "--slurm-partition": [None, _NAME],
            "--cluster": [None, _NAME],
        },
        noun="option",
    )
    from ._common import check_paths

    check_paths(
        inputs={"sweep spec (TOML file)": args.spec},
        folders={"--out": args.out},
        max_bytes=MAX_CONFIG_BYTES,
    )
    spec = load_spec(args.spec)
    if spec.task not in ("toy", "scalefit.sim.sweep_task:run_toy"):
        # A spec naming 'module:function' would import (run) that module: the command line runs
        # only the toy task; other tasks run from Python (scalefit.sweep.run_sweep).
        raise ScaleFitError(
            f"{args.spec}: [sweep] task must be 'toy' for `scalefit toy run`. Got "
            f"{spec.task!r} instead (run other tasks from Python with scalefit.sweep.run_sweep)."
        )
    _check_runs(args.spec, spec.runs(), workers=args.workers, local=args.executor == "local")
    out = Path(args.out) if args.out else Path("runs") / spec.name
    check_paths(folders={"output folder": out})  # the default runs/NAME too
    slurm = None
    if args.executor == "slurm":
        slurm = {"cluster": args.cluster} if args.cluster else {}
        if args.slurm_partition:
            slurm["slurm_partition"] = args.slurm_partition
        if args.timeout_min:
            slurm["timeout_min"] = args.timeout_min
    runs = spec.runs()
    done = sum(is_finished(out, r) for r in runs)
    print(f"{spec.name}: {len(runs)} runs, {done} already finished, output in {out}")
    table = run_sweep(
        spec,
        out,
        workers=args.workers,
        executor=args.executor,
        progress=False if args.quiet else None,
        threads_per_worker=args.threads,
        slurm=slurm,
        overwrite=args.overwrite,
        wait=not args.no_wait,
    )
    ran = len(table.attrs.get("sweep", {}).get("ran", []))
    if table.empty:
        table = collect_results(out, runs)
    print(
        f"{len(runs)} runs finished ({ran} run by this process); {len(table)} rows in "
        f"{out / 'results.csv'}"
    )
    return 0


def _check_runs(path: str, runs, *, workers: int, local: bool) -> None:
    """Validate every run's settings and refuse one that cannot fit in memory, before any work.

    The estimate is :meth:`scalefit.sim.config.ToyConfig.memory_bytes`; on the CPU the local
    workers run side by side, so the largest run counts once per worker. Runs sent to a
    cluster (``local=False``) are only validated: this machine's memory says nothing of theirs.
    """
    import os

    from ..core._torch import pick_device
    from ..sim.sweep_task import build_config
    from ..train.memory import _gb, available_memory

    worst, need = None, 0
    for run in runs:
        try:
            cfg = build_config(dict(run.config))
        except ScaleFitError as exc:
            raise ScaleFitError(f"{path}: {exc}") from None
        device = pick_device(cfg.device)
        size = cfg.memory_bytes(device_type=device.type)
        if size > need:
            worst, need = (run, device), size
    skip = os.environ.get("SCALEFIT_MEMORY_CHECK", "1").strip() == "0"
    if worst is None or skip or not local:
        return
    run, device = worst
    sharing = max(1, min(workers, len(runs))) if device.type == "cpu" else 1
    free = available_memory(device)
    if free is not None and need * sharing > free:
        each = f" for each of {sharing} workers" if sharing > 1 else ""
        raise ScaleFitError(
            f"{path}: run {run.run_id} needs about {_gb(need)}{each}, but {_gb(free)} is "
            f"available on {device}; lower width, depths, replicas, batch or test_size "
            "(SCALEFIT_MEMORY_CHECK=0 skips this check)."
        )


def _fit(args: argparse.Namespace) -> int:
    import pandas as pd

    from ..core._io import atomic_write_csv
    from ..sim.analysis import load_results
    from ..workflows.toy import fit_depth_exponents
    from ._common import check_paths

    folder = Path(args.dir).is_dir()
    base = Path(args.dir) if folder else Path(args.dir).parent
    out = Path(args.out) if args.out else base / "alpha.csv"
    plots = None if args.no_plots else base / "plots"
    check_paths(
        inputs={} if folder else {"toy results table (CSV) or sweep folder": args.dir},
        files={"--out": out},
        folders={"plots folder": plots},
    )
    table = load_results(args.dir)
    alphas = fit_depth_exponents(
        table,
        loss_column=args.loss,
        bootstrap=args.bootstrap,
        seed=args.seed,
        final_only=args.final_only,
    )
    atomic_write_csv(out, alphas)
    cols = [c for c in alphas.columns if c not in ("warnings", "c", "L0", "n_rows")]
    with pd.option_context("display.width", 140, "display.max_rows", 500):
        print(alphas[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"wrote {out}")
    if not args.no_plots:
        for path in _plots(table, alphas, base / "plots", args.loss):
            print(f"wrote {path}")
    return 0 if alphas["converged"].all() else 3


def _plots(table, alphas, folder: Path, loss_column: str) -> list[Path]:
    from ..plot import toy as toyplot
    from ..plot import write_figures

    by = "run_id" if "run_id" in table.columns else ["teacher_mode", "rho", "temperature"]
    final = table[table["steps"] == table.groupby(by)["steps"].transform("max")]
    figures = {
        f"loss_vs_depth_tau{tau:g}.png": toyplot.loss_vs_depth(
            final, temperature=tau, loss_column=loss_column, alphas=alphas
        )
        for tau in sorted(final["temperature"].unique())
    }
    figures["alpha_vs_steps.png"] = toyplot.alpha_vs_steps(alphas)
    if alphas["temperature"].nunique() > 1:
        figures["alpha_vs_temperature.png"] = toyplot.alpha_vs_temperature(alphas)
    if {"theta_mid", "dtheta_mid"} <= set(final.columns):
        figures["probes_vs_depth.png"] = toyplot.probe_summary(final)
    return write_figures(folder, figures)
