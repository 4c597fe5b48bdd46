"""``scalefit probe``: hidden-state probes of a saved toy model or of a Hugging Face language model.

``scalefit probe STATE`` (same as ``scalefit probe toy STATE``) probes a toy run's teacher and
students; ``scalefit probe hf MODEL --text FILE --tokens N --out DIR`` probes every layer of a
pre-trained language model (optional extra ``hf``).
"""

from __future__ import annotations

import argparse
import os

from ..core.errors import ScaleFitError, require
from . import Subcommands
from ._common import add_option, check_paths

#: The file name of the probe-curves figure in the --plots folder.
FIGURE = "probes.png"


def register(subparsers: Subcommands) -> None:
    """Add the ``probe`` command with its ``toy`` (default) and ``hf`` forms."""
    probe = subparsers.add_parser(
        "probe",
        description="Probe the residual stream layer by layer. `scalefit probe STATE` is short "
        "for `scalefit probe toy STATE`.",
    )
    # any first word other than a sub-command is a toy model: `probe STATE` is `probe toy STATE`
    probe.default_command = "toy"
    sub = probe.add_subparsers(dest="probe_command", metavar="{toy,hf}", required=True)
    toy = sub.add_parser("toy", help="probes of a saved toy run (the default form)")
    toy.add_argument("model", metavar="MODEL", help="a toy run folder or its model.pt")
    toy.add_argument("--tokens", type=int, default=1024, help="probe inputs")
    add_option(toy, "--seed", help="seed of the probe inputs")
    add_option(toy, "--out", metavar="CSV", help="per-layer table (CSV)")
    add_option(toy, "--plots", help=f"write the probe curves into DIR as {FIGURE}")
    toy.set_defaults(func=_probe_toy)
    _register_hf(sub)


def _register_hf(sub) -> None:
    hf = sub.add_parser(
        "hf",
        help="layer probes and layer pruning of a pre-trained language model",
        description="Stream a local text corpus through a Hugging Face causal LM, masked LM or "
        "encoder; write per-layer angles, angular distances, CR, the early-exit split, the "
        "pruning drop and the mechanism verdict. Never downloads unless --allow-download.",
    )
    hf.add_argument("model", metavar="MODEL", help="local model folder, or a cached hub name")
    _add_corpus_options(hf)
    hf.add_argument("--tokens", type=int, default=65_536, help="token budget")
    add_option(
        hf,
        "--out",
        required=True,
        metavar="DIR",
        help="output folder: CSVs, summary.json, figures, resumable checkpoint",
    )
    hf.add_argument("--seq-len", type=int, default=256, help="tokens per window")
    hf.add_argument("--batch-size", type=int, default=8, help="windows per forward")
    hf.add_argument(
        "--max-block", type=int, default=4, help="largest n of the block distance d(l, l+n)"
    )
    hf.add_argument(
        "--prune-tokens",
        type=int,
        default=8192,
        help="tokens for the layer-pruning sweep; 0 skips it",
    )
    hf.add_argument(
        "--prune-blocks",
        default=None,
        metavar="N[,N]",
        help="also remove the N most similar consecutive blocks, e.g. '2,4'",
    )
    hf.add_argument("--no-cr", action="store_true", help="skip the CR measure")
    hf.add_argument(
        "--no-init-reference",
        action="store_true",
        help="do not build the same architecture at initialisation (saves a second copy of the "
        "model; the mechanism verdict then abstains)",
    )
    add_option(hf, "--bootstrap", default=200, help="bootstrap resamples over windows (0: none)")
    hf.add_argument(
        "--reservoir", type=int, default=20_000, help="tokens sampled for the early-exit split"
    )
    add_option(hf, "--seed", help="seed of the reservoir, the masks and the bootstrap")
    hf.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16"),
        default="float32",
        help="weights' dtype (angles are computed in float64 regardless)",
    )
    hf.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, …")
    hf.add_argument(
        "--allow-download",
        action="store_true",
        help="let transformers (and datasets) download a hub name (needs network)",
    )
    for flag in ("--no-plots", "--quiet"):
        add_option(hf, flag)
    hf.set_defaults(func=_probe_hf)


def _add_corpus_options(hf) -> None:
    """The text the probes read: a local file, or a ``datasets`` dataset with its settings."""
    source = hf.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--text",
        metavar="FILE",
        help=".txt (documents separated by blank lines) or .jsonl (field 'text')",
    )
    source.add_argument(
        "--dataset",
        metavar="NAME",
        help="a `datasets` dataset instead: a local folder, or a hub name with --allow-download "
        "(needs `pip install datasets`)",
    )
    hf.add_argument("--dataset-config", default=None, metavar="CONFIG", help="dataset config")
    hf.add_argument("--split", default="train", help="dataset split")
    add_option(hf, "--text-field", help="dataset text column")


def _probe_toy(args: argparse.Namespace) -> int:
    import pandas as pd

    from ..core._io import atomic_write_csv
    from ..sim.probe import probe_saved_model

    check_paths(files={"--out": args.out}, folders={"--plots": args.plots})
    if args.tokens < 4:
        raise ScaleFitError(f"--tokens must be ≥ 4, got {args.tokens}.")
    report = probe_saved_model(args.model, tokens=args.tokens, seed=args.seed)
    summary = report["summary"]
    with pd.option_context("display.width", 140):
        print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    teacher = report["teacher_verdict"].report(thresholds=False)
    print("\nteacher: " + teacher.replace("\n", "\n  "))
    print("students: " + report["student_verdict"].report().replace("\n", "\n  "))
    if args.out:
        print(f"wrote {atomic_write_csv(args.out, report['layers'])}")
    if args.plots:
        from ..plot import toy as toyplot
        from ..plot import write_figures

        fig = toyplot.probe_curves(report["layers"])
        for path in write_figures(args.plots, {FIGURE: fig}):
            print(f"wrote {path}")
    return 0


def _prune_blocks(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        return tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ScaleFitError(
            f"--prune-blocks must be integers separated by commas, e.g. '2,4'. Got {text!r}."
        ) from None


def _probe_hf(args: argparse.Namespace) -> int:
    import pandas as pd

    from ..probes.hf import load_model, probe_hf

    if args.text and not os.path.lexists(args.text):
        raise ScaleFitError(f"{args.text}: no such text file.")
    check_paths(inputs={"text file (.txt or .jsonl)": args.text}, folders={"--out": args.out})
    if args.dataset:
        from ..probes.hf import DatasetDocuments

        text = DatasetDocuments(
            args.dataset,
            config=args.dataset_config,
            split=args.split,
            text_field=args.text_field,
            allow_download=args.allow_download,
        )
    else:
        text = args.text
    blocks = _prune_blocks(args.prune_blocks)
    if args.quiet:
        require("transformers", "hf").utils.logging.disable_progress_bar()
    lm = load_model(
        args.model, dtype=args.dtype, device=args.device, allow_download=args.allow_download
    )
    result = probe_hf(
        lm,
        text,
        tokens=args.tokens,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        max_block=args.max_block,
        prune=args.prune_tokens > 0,
        prune_tokens=args.prune_tokens,
        prune_blocks=blocks,
        cr=not args.no_cr,
        bootstrap=args.bootstrap,
        reservoir=args.reservoir,
        seed=args.seed,
        out=args.out,
        progress=not args.quiet,
        init_reference=not args.no_init_reference,
    )
    cols = ["layer", "theta", "angular_distance", "dtheta", "step", "norm_out", "cr"]
    cols += ["cr_debiased", "prune_drop"]
    with pd.option_context("display.width", 140, "display.max_rows", 200):
        print(result.layers[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    s = result.summary
    print(
        f"\n{s['model']} ({s['family']}, {s['depth']} blocks, {s['tokens']} tokens, "
        f"final norm excluded: {s['final_norm_excluded'] or 'none'})"
    )
    if s.get("cr_batch"):
        print(f"CR: on each block's {s['cr_on']}, batches of {s['cr_batch']} windows")
    print(result.verdict.report())
    paths = result.save(args.out)
    if not args.no_plots:
        from ..plot.probes import write_probe_plots

        paths += write_probe_plots(result, args.out)
    for path in paths:
        print(f"wrote {path}")
    return 0
