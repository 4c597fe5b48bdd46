"""``scalefit bayes`` and ``scalefit compare``."""

from __future__ import annotations

import argparse
import warnings

from ..core._io import MAX_CONFIG_BYTES
from . import Subcommands
from ._common import (
    add_option,
    add_table_args,
    check_paths,
    law_options_arg,
    load_table_arg,
)

#: The sampler's options of ``bayes`` and ``compare`` (declared once, in the vocabulary).
_SAMPLER = ("chains", "draws", "warmup", "likelihood")


def _sampler_args(p: argparse.ArgumentParser) -> None:
    for name in _SAMPLER:
        add_option(p, "--" + name)
    add_option(p, "--seed", help="seed of the sampler")
    add_option(p, "--no-progress")


def _sampler(args: argparse.Namespace) -> dict:
    """The sampler's keywords of :func:`~scalefit.fit.bayes.fit_bayes` from the options."""
    progress = False if args.no_progress else None
    return {**{n: getattr(args, n) for n in _SAMPLER}, "seed": args.seed, "progress": progress}


def _devices_for_chains(chains: int) -> None:
    """Give JAX one CPU device per chain (at most one per core) before it starts.

    The compiled sampler splits the chains evenly over the CPU devices
    (:func:`scalefit.fit.bayes_model.chain_devices`), so with two cores four chains sample on two
    threads. Only the console script does this (:data:`scalefit.cli.OWNS_PROCESS`): an
    in-process :func:`scalefit.cli.main` leaves JAX's settings as it found them. Nothing
    changes when the user set the device count (``JAX_NUM_CPU_DEVICES``,
    ``XLA_FLAGS=--xla_force_host_platform_device_count``), when JAX already started, or when
    only one core is available.
    """
    import os

    from . import OWNS_PROCESS

    if not OWNS_PROCESS:  # called in-process (cli.main): leave the user's JAX settings alone
        return
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    from ..fit.bayes_model import even_split

    n = even_split(chains, cores)
    if n <= 1:
        return
    import jax

    if jax.config.jax_num_cpu_devices != -1:  # set by the user
        return
    try:
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError:  # pragma: no cover - the backend already started in this process
        pass


def register(sub: Subcommands) -> None:
    """Add the ``bayes`` and ``compare`` commands."""
    p = sub.add_parser(
        "bayes",
        description="Sample the posterior of a law's parameters with numpyro's NUTS; report "
        "medians, intervals, R-hat, ESS, divergences, BFMI and PSIS-LOO.",
    )
    add_table_args(p)
    add_option(p, "--law", required=True)
    add_option(p, "--law-option")
    _sampler_args(p)
    p.add_argument(
        "--priors", default=None, metavar="PRIORS.toml", help="per-parameter prior overrides"
    )
    add_option(
        p,
        "--holdout",
        help="also fit on the lowest-compute rows and report predictive coverage on the rest",
    )
    add_option(
        p,
        "--predictive",
        default="calibrated",
        help="predictive that scores the --holdout rows: the calibrated one (random effect + "
        "discrepancy beyond the data, Student-t tails; see docs/extrapolation.md; the law's own "
        "scores are reported beside it) or the law's own posterior predictive",
    )
    add_option(p, "--out", metavar="RESULT.json", help="write the result as JSON")
    p.add_argument("--netcdf", default=None, metavar="FILE.nc", help="write the posterior")
    add_option(p, "--plots")
    p.set_defaults(func=run_bayes)

    q = sub.add_parser(
        "compare",
        description="Fit each law with NUTS and rank them by expected log predictive density "
        "(PSIS-LOO on log loss), with Pareto-k and WAIC.",
    )
    add_table_args(q)
    q.add_argument("--laws", required=True, metavar="A,B[,...]", help="laws to compare")
    _sampler_args(q)
    add_option(q, "--out", metavar="FILE.csv", help="write the table as CSV")
    q.set_defaults(func=run_compare)


def _priors(args: argparse.Namespace, table) -> dict:
    """The priors file's overrides, checked against the law here so an error names the file."""
    from ..core.errors import ScaleFitError
    from ..fit.priors import read_priors_toml, resolve_priors
    from ..laws import get_law

    priors = read_priors_toml(args.priors)
    law = get_law(args.law, **law_options_arg(args.law_option))
    try:
        resolve_priors(law, table["loss"].to_numpy(dtype=float), priors)
    except ScaleFitError as exc:
        raise ScaleFitError(f"{args.priors}: {exc}") from None
    return priors


def run_bayes(args: argparse.Namespace) -> int:
    """Run ``scalefit bayes``; exit code 3 when the chains did not converge."""
    from ..core.errors import ConvergenceWarning
    from ..fit.bayes import fit_bayes, save_netcdf
    from . import EXIT_NOT_CONVERGED

    check_paths(
        inputs={"priors file (TOML)": args.priors},
        max_bytes=MAX_CONFIG_BYTES,
        files={"--out": args.out, "--netcdf": args.netcdf},
        folders={"--plots": args.plots},
    )
    _devices_for_chains(args.chains)
    table = load_table_arg(args)
    priors = _priors(args, table) if args.priors else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the report lists them
        res = fit_bayes(
            table,
            args.law,
            priors=priors,
            law_options=law_options_arg(args.law_option),
            holdout=args.holdout,
            predictive=args.predictive,
            **_sampler(args),
        )
    print(res.report())
    if args.out:
        res.save(args.out)
        print(f"\nwrote {args.out}")
    if args.netcdf:
        save_netcdf(res, args.netcdf)
        print(f"wrote {args.netcdf}")
    if args.plots:
        from ..plot.bayes import write_bayes_plots

        for path in write_bayes_plots(res, table, args.plots):
            print(f"wrote {path}")
    return 0 if res.converged else EXIT_NOT_CONVERGED


def run_compare(args: argparse.Namespace) -> int:
    """Run ``scalefit compare``; exit code 3 when any law's chains did not converge."""
    import pandas as pd

    from ..core._io import atomic_write_csv
    from ..core.errors import ConvergenceWarning, ScaleFitError
    from ..fit.compare import compare_laws
    from . import EXIT_NOT_CONVERGED

    check_paths(files={"--out": args.out})
    laws = [s.strip() for s in args.laws.split(",") if s.strip()]
    if len(laws) < 2:
        raise ScaleFitError(
            f"--laws needs at least two law names separated by commas; got {args.laws!r}."
        )
    from ..core._validation import did_you_mean
    from ..laws import list_laws

    for name in laws:  # every name checked before any law is sampled
        if name not in list_laws():
            raise ScaleFitError(
                f"--laws: unknown law {name!r}.{did_you_mean(name, list_laws())} Known laws: "
                f"{', '.join(list_laws())}."
            )
    _devices_for_chains(args.chains)
    table = load_table_arg(args)
    with warnings.catch_warnings():
        # each law's convergence is in the table and the warnings printed below it
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        frame = compare_laws(table, laws, **_sampler(args))
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(frame.to_string())
    best = frame.index[0]
    for name, row in frame.iloc[1:].iterrows():
        print(
            f"{best} beats {name} by {row['elpd_diff']:.1f} elpd (dse {row['dse']:.1f}); "
            + ("decisive (> 2 dse)" if row["elpd_diff"] > 2 * row["dse"] else "not decisive")
        )
    for name, row in frame[~frame["converged"].astype(bool)].iterrows():
        print(
            f"warning: {name} did not converge (R-hat max {row['r_hat_max']:.3f}, "
            f"{row['divergences']} divergences): its elpd is unreliable"
        )
    if (frame["n_pareto_k_bad"] > 0).any():
        print("warning: some rows have Pareto k > 0.7; their LOO terms are unreliable")
    if args.out:
        atomic_write_csv(args.out, frame.reset_index())
        print(f"\nwrote {args.out}")
    # the same rule as `fit` and `bayes`: the output is written, and exit code 3 says that a
    # fit behind it did not converge
    return 0 if frame["converged"].astype(bool).all() else EXIT_NOT_CONVERGED
