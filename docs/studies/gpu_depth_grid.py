"""Does the GPU depth grid pin the depth exponent? A cost projection and a simulated fit.

For ``configs/grid_gpu_depth.toml`` (or another trainer grid), this script

1. **projects the H100 time** of every run: compilation (``COMPILE_S + COMPILE_PER_BLOCK_S``
   per block) plus training tokens over a throughput of ``MFU(width) * 989 TFLOP/s`` divided by
   the FLOPs per token (``scalefit.core.accounting.flops_per_token`` with the attention term,
   parameters counted with the run's vocabulary), plus evaluation. The model's constants come from
   the two H100 measurements in docs/performance.md ("Trainer on a GPU": 12 x 768 at sequence 1024,
   37.6 % MFU, 35.8 s to compile; 8 x 512 at sequence 512, 22.1 % MFU); MFU is taken to fall in
   proportion to width below 512 (an assumption the GPU run will check).
2. **simulates the grid** from a truth: the decomposed law fitted to Liu et al.'s 203 Chinchilla
   rows (our reproduction of their law; their exponents 0.98 / 1.2 / 0.30, ours below), with
   multiplicative log-normal noise whose sd is the log-residual RMS of the decomposed fit to our
   own 52 Pre-LN CPU runs (``data/lm_grid_shakespeare.csv`` + ``data/lm_grid_depth.csv``), which
   includes seed noise and misfit, so it overstates the noise of a well-fitted grid.
3. **fits each simulated table** with ``scalefit.fit(..., "decomposed", bootstrap=B)`` and
   reports, per replicate, a_depth's 95 % percentile interval, its half-width relative to the
   estimate, whether it covers the truth, and whether the fit converged. A replicate identifies
   a_depth when its interval lies inside [0, 5] with a half-width below 50 % of the estimate
   (issue 29's acceptance for the real grid); the design does when most replicates do.

The truth's coefficients are Chinchilla-scale, so simulated losses are not the losses a small
BPE model will reach; what the study tests is the leverage of the design (which depths, widths and
token counts, how many runs) against noise of our size.

Run::

    SCALEFIT_DATA_DIR=/path/to/data python docs/studies/gpu_depth_grid.py \
        configs/grid_gpu_depth.toml --replicates 20 --bootstrap 100 --out docs/studies/results
"""

from __future__ import annotations

import argparse
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import scalefit
from scalefit.core._io import atomic_write_csv
from scalefit.core.accounting import flops_per_token, param_count
from scalefit.sweep import load_spec

ROOT = Path(__file__).resolve().parents[2]
PEAK_FLOPS = 989e12  # H100 SXM dense bf16
#: Compilation seconds per run: a constant plus a share per block (35.8 s measured at depth 12).
COMPILE_S, COMPILE_PER_BLOCK_S = 15.0, 1.75
#: A later run of a shape already compiled (same depth, width, sequence, batch) finds inductor's
#: on-disk graph cache and pays only tracing, assumed this many seconds.
WARM_COMPILE_S = 5.0
#: Evaluation and checkpoint overhead per run, seconds.
EVAL_S = 5.0
#: H100 time the grid must fit in, seconds.
BUDGET_S = 25 * 60


def mfu(width: int) -> float:
    """Assumed model FLOP utilisation at a width (22.1 % at 512, 37.6 % at 768, linear below)."""
    if width >= 768:
        return 0.376
    if width >= 512:
        return 0.221 + (0.376 - 0.221) * (width - 512) / 256
    return 0.221 * width / 512


def vocab_of(config: dict) -> int:
    """The run's vocabulary: the BPE size, or 256 for bytes."""
    return int(config.get("bpe_vocab", 1024)) if config.get("tokenizer") == "bpe" else 256


def run_cost(config: dict, *, warm: bool = False) -> dict:
    """Projected H100 seconds of one trainer run (compile, train, evaluate).

    ``warm``: an earlier run compiled the same shape (see :data:`WARM_COMPILE_S`).
    """
    depth, width = int(config["depth"]), int(config["width"])
    params = param_count(
        depth,
        width,
        vocab=vocab_of(config),
        block=config.get("block", "standard"),
        embeddings=config.get("embeddings", "tied"),
    )
    per_token = flops_per_token(params, depth=depth, width=width, seq_len=int(config["seq_len"]))
    rate = mfu(width) * PEAK_FLOPS / per_token
    train_s = float(config["tokens"]) / rate
    compile_s = 0.0
    if config.get("compile", True):
        compile_s = WARM_COMPILE_S if warm else COMPILE_S + COMPILE_PER_BLOCK_S * depth
    steps = float(config["tokens"]) / (int(config["seq_len"]) * int(config["batch_size"]))
    return {
        "depth": depth,
        "width": width,
        "tokens": float(config["tokens"]),
        "seed": int(config.get("seed", 0)),
        "params": float(params),
        "steps": steps,
        "tokens_per_s": rate,
        "seconds": compile_s + train_s + EVAL_S,
    }


def grid_runs(spec_path: str | Path) -> pd.DataFrame:
    """One row per run of the spec with its shape, tokens and projected seconds."""
    rows, seen = [], set()
    for run in load_spec(spec_path).runs():
        c = run.config
        shape = (c["depth"], c["width"], c["seq_len"], c["batch_size"])
        rows.append(run_cost(c, warm=shape in seen))
        seen.add(shape)
    return pd.DataFrame(rows)


def truth_params(starts: int = 64) -> dict:
    """The decomposed law fitted to Liu et al.'s 203 Chinchilla rows (needs that table)."""
    with warnings.catch_warnings():  # the study reads the estimate, not the diagnostics
        warnings.simplefilter("ignore", scalefit.core.errors.ConvergenceWarning)
        res = scalefit.fit("chinchilla", "decomposed", drop_highest=40, starts=starts, seed=0)
    return dict(res.params)


def cpu_noise(starts: int = 64) -> float:
    """Log-residual RMS of the decomposed law on our 52 Pre-LN CPU runs."""
    frames = [
        pd.read_csv(ROOT / "data" / n) for n in ("lm_grid_shakespeare.csv", "lm_grid_depth.csv")
    ]
    rows = pd.concat(frames)
    rows = rows[rows["variant"] == "pre_ln"][["depth", "width", "params", "tokens", "loss"]]
    table = scalefit.read_table(rows.reset_index(drop=True))
    with warnings.catch_warnings():  # L0 sits on its bound here; only the residuals are used
        warnings.simplefilter("ignore", scalefit.core.errors.ConvergenceWarning)
        res = scalefit.fit(table, "decomposed", starts=starts, seed=0)
    return float(res.metrics["rmse_log"])


def simulate(
    runs: pd.DataFrame, truth: dict, sigma: float, rng: np.random.Generator
) -> pd.DataFrame:
    """The grid's table with losses from the truth times log-normal noise of sd ``sigma``."""
    law = scalefit.get_law("decomposed")
    x = {c: runs[c].to_numpy(float) for c in law.inputs}
    mean = np.asarray(law.evaluate(truth, x), dtype=float)
    loss = mean * np.exp(sigma * rng.standard_normal(len(runs)))
    table = runs[["depth", "width", "params", "tokens"]].copy()
    table["loss"] = loss
    return scalefit.read_table(table.reset_index(drop=True))


def replicate(runs, truth, sigma, seed, *, bootstrap, starts) -> dict:
    """Fit one simulated grid; a_depth's interval, relative half-width and coverage."""
    table = simulate(runs, truth, sigma, np.random.default_rng(seed))
    with warnings.catch_warnings():  # recorded per replicate below, not printed
        warnings.simplefilter("ignore", scalefit.core.errors.ConvergenceWarning)
        res = scalefit.fit(
            table, "decomposed", starts=starts, seed=seed, bootstrap=bootstrap, progress=False
        )
    lo, hi = (float(v) for v in res.ci["a_depth"])
    est = float(res.params["a_depth"])
    half = (hi - lo) / 2
    return {
        "seed": seed,
        "a_depth": est,
        "lo": lo,
        "hi": hi,
        "rel_half_width": half / abs(est) if est else math.inf,
        "covers": bool(lo <= truth["a_depth"] <= hi),
        "converged": bool(res.converged),
        "flagged_not_identified": "a_depth" in res.not_identified,
        "identified": bool(half < 0.5 * abs(est) and 0.0 <= lo and hi <= 5.0),
    }


def prefix_study(
    spec_path, truth, sigma, prefixes, *, replicates, bootstrap, starts
) -> pd.DataFrame:
    """How often the first ``k`` runs identify a_depth, in the chunk order and the spec's order.

    The chunk order is :func:`scalefit.train.chunk.information_order` (what
    ``scalefit train grid --resume-from`` runs first); the spec's order is depth-major.
    """
    from scalefit.train.chunk import information_order

    spec_runs = load_spec(spec_path).runs()
    runs = grid_runs(spec_path)
    index = {r.run_id: i for i, r in enumerate(spec_runs)}
    chunk = [index[r.run_id] for r in information_order(spec_runs, [])]
    rows = []
    for k in prefixes:
        for name, order in (("chunk", chunk), ("spec", list(range(len(spec_runs))))):
            part = runs.iloc[order[:k]].reset_index(drop=True)
            for i in range(replicates):
                r = replicate(part, truth, sigma, i, bootstrap=bootstrap, starts=starts)
                rows.append({"runs": k, "order": name, **r})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("spec", nargs="?", default=str(ROOT / "configs" / "grid_gpu_depth.toml"))
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--bootstrap", type=int, default=100)
    ap.add_argument("--starts", type=int, default=64)
    ap.add_argument("--sigma", type=float, default=None, help="noise sd (default: measured)")
    ap.add_argument("--out", default=None, metavar="DIR")
    ap.add_argument(
        "--prefixes",
        default=None,
        metavar="K,K,...",
        help="instead: how often the first K runs identify a_depth, chunk order vs spec order",
    )
    args = ap.parse_args()
    if args.prefixes:
        truth = truth_params(args.starts)
        sigma = cpu_noise(args.starts) if args.sigma is None else args.sigma
        ks = [int(k) for k in args.prefixes.split(",")]
        res = prefix_study(
            args.spec, truth, sigma, ks,
            replicates=args.replicates, bootstrap=args.bootstrap, starts=args.starts,
        )  # fmt: skip
        summary = res.groupby(["runs", "order"])[["identified", "rel_half_width"]].median()
        summary["identified"] = res.groupby(["runs", "order"])["identified"].mean()
        print(summary.to_string())
        if args.out:
            atomic_write_csv(Path(args.out) / "gpu_depth_grid_prefixes.csv", res)
        return

    runs = grid_runs(args.spec)
    total = runs["seconds"].sum()
    print(
        f"grid {args.spec}: {len(runs)} runs, depth {runs.depth.min()}-{runs.depth.max()}, "
        f"widths {sorted(runs.width.unique())}, {runs.tokens.sum():.3g} tokens"
    )
    print(
        f"projected H100 time {total / 60:.1f} min (budget {BUDGET_S / 60:.0f} min); "
        f"steps per run {runs.steps.min():.0f}-{runs.steps.max():.0f}"
    )
    truth = truth_params(args.starts)
    sigma = cpu_noise(args.starts) if args.sigma is None else args.sigma
    print(
        "truth (decomposed on Liu et al.'s 203 Chinchilla rows): "
        + ", ".join(f"{k} {v:.4g}" for k, v in truth.items())
    )
    print(f"noise sd (log): {sigma:.4f}")
    rows = []
    for i in range(args.replicates):
        rows.append(replicate(runs, truth, sigma, i, bootstrap=args.bootstrap, starts=args.starts))
        r = rows[-1]
        print(
            f"  replicate {i}: a_depth {r['a_depth']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}] "
            f"half-width {100 * r['rel_half_width']:.0f} % covers {r['covers']}"
        )
    res = pd.DataFrame(rows)
    print(
        f"identified (inside [0, 5], half-width < 50 %): {res.identified.mean():.0%} of "
        f"{len(res)}; "
        f"median half-width {100 * res.rel_half_width.median():.0f} %; "
        f"coverage {res.covers.mean():.0%}"
    )
    if args.out:
        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_csv(folder / "gpu_depth_grid.csv", res)
        atomic_write_csv(folder / "gpu_depth_grid_runs.csv", runs)
        print(f"wrote {folder / 'gpu_depth_grid.csv'}")


if __name__ == "__main__":
    main()
