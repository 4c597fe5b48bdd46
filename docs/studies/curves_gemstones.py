"""Curves against final losses on a public sweep with cooldown branches: Gemstones (issue 26).

Data: McLeish et al., *Gemstones: A Model Suite for Multi-Faceted Scaling Laws* (arXiv
2502.06857), github.com/mcleish7/gemstone-scaling-laws at commit
1fb97a26b3a4ee647475ee3b46d67413b1844405, folder ``wandb_dfs/``: validation loss (held-out
Dolma, nats per token) of 22 width x depth shapes from 48M to 2.0B parameters, one JSON object
per checkpoint. The files are kept outside this repository and read as published (no edits):

* ``wandb_df_for_fitting_hot_477.jsonl`` - the main runs at constant learning rate ("hot"),
  every 477 steps (2B tokens) up to 100B tokens;
* ``wandb_df_for_fitting_hot_100b+.jsonl`` - the same runs every 2,385 steps (10B tokens) up
  to 350B tokens;
* ``wandb_df_for_fitting_cool_end.jsonl`` - the last checkpoint of each cooldown branch:
  forked from the main run at 10, 20, ..., 100B tokens, learning rate decayed linearly to 0
  over 10 % more tokens (the model cards). One row per branch; its ``step`` is the branch's
  last step (2,622 for the fork at 2,385).

Every step is 2,048 sequences of 2,048 tokens (``tokens = 4,194,304 x step`` in the files). The
peak learning rate per shape is not in the files (the authors' code scales it with width), so
the schedules are declared with ``lr=1``: ``S1`` counts steps at peak learning rate and a law's
coefficients absorb the scale. A branch is declared as its own WSD run,
``wsd:lr=1,steps={step},decay=0.0904,final_lr=0`` (its last 9.04 % of steps decay: 237 of
2,622), holding one checkpoint, its end; the main run before the fork is already in the hot
files, so no checkpoint is counted twice. A main run and its branches are resampled together
(``cluster="model"``): they share the stable phase. Hot checkpoints up to the first fork (10B
tokens) are dropped in every training set (``prepare``'s default, the first 10 % of a 100B
run, would move with the runs' logged length).

The study holds out the three largest shapes (2048x27, 1536x50, 3072x12; 1.90-2.01B
parameters) and predicts each of their cooldown branches' final loss (29 runs) from the
smaller shapes, three ways:

* **curves, the annealing law**: ``lr_annealing_params`` (``L0 + B/params^beta + A/S1^alpha
  - C*S2``) fitted to the hot checkpoints and the branch ends of the smaller shapes;
* **curves, annealing gain by size**: the same law with ``C`` scaled by
  ``(params/1e8)^-kappa``; the measured cooldown gain shrinks with size (about 0.10 nats at
  50M, 0.06 at 2B; printed first) and grows by a third at most from the 10B fork to the 100B
  one;
* **final losses of the same runs**: the Chinchilla law on the smaller shapes' branch ends.

Each with 200 bootstrap resamples of shapes (a main run with its branches). Three training
sets: ``base`` (every shape below 1.5B, hot checkpoints to 100B), ``small`` (shapes below
600M only, extrapolating 3.5x in size) and ``hot350`` (``base`` with the hot checkpoints from
100B to 350B added). Scored by absolute relative error, its sign, and whether the 95 %
interval holds the loss.

``--target 1b`` is the check a user can run before the ~2B shapes exist: it leaves the ~2B
shapes out entirely, holds out the three ~1B shapes (1280x36, 2560x8, 1792x18; 30 branches) and
trains on ``small`` (below 600M) or ``tiny`` (below 200M: the ~50-120M shapes only).

Run::

    SCALEFIT_GEMSTONES=/path/to/gemstones python docs/studies/curves_gemstones.py \
        --out docs/studies/results
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import scalefit
from scalefit.core._io import atomic_write_csv
from scalefit.core.errors import ScaleFitError
from scalefit.curves import final_losses, fit_curves, prepare, read_curves

sys.path.insert(0, str(Path(__file__).parent))
from public_files import run, verified_folder  # noqa: E402  (same folder)

HOT = "wandb_df_for_fitting_hot_477.jsonl"
HOT350 = "wandb_df_for_fitting_hot_100b+.jsonl"
COOL = "wandb_df_for_fitting_cool_end.jsonl"
SHA256 = {
    HOT: "bebd60d6c3f28094451b629aa717ec36baeab81097d4be39e7dd9241ee982aad",
    HOT350: "1da97ce3d1394e0223826c8f5ca081cb0fb289ec65d2707fb5430721e92e9659",
    COOL: "bdf01b6b21bafc414218124a6f9e195cee07f3d69ceacbfae2fcf069d34f4e61",
}
#: How the published columns read: ``params_active_precise`` (embeddings included) as params.
COLUMNS = {"final_loss": "loss", "params_active_precise": "params"}
HOT_SCHEDULE = "constant:lr=1,steps=83475"
COOL_SCHEDULE = "wsd:lr=1,steps={step},decay=0.0904,final_lr=0"
LAST_HOT_477 = 23850  # the hot_477 file's last step (100B tokens)
FIRST_FORK = 2385  # the earliest cooldown branch forks here (10B tokens)
HELD_OUT = ("PyGemma-2048x27_pretrain", "PyGemma-1536x50_pretrain", "PyGemma-3072x12_pretrain")
#: The ~1B shapes (1.01-1.05B), the held-out set of the inner check (``--target 1b``).
HELD_OUT_1B = ("PyGemma-1280x36_pretrain", "PyGemma-2560x8_pretrain", "PyGemma-1792x18_pretrain")
TARGETS = {"2b": HELD_OUT, "1b": HELD_OUT_1B}
SIZED = "L0 + B/params**beta + A/S1**alpha - C*S2*(params/1e8)**(-kappa)"
#: Training sets: (largest params kept, hot checkpoints past 100B added).
SETS = {
    "base": (1.5e9, False),
    "small": (6e8, False),
    "tiny": (2e8, False),
    "hot350": (1.5e9, True),
}


def data_dir(given: str | None = None) -> Path:
    """The data folder: ``given``, else ``$SCALEFIT_GEMSTONES``; files checked by sha256."""
    return verified_folder(given, "SCALEFIT_GEMSTONES", SHA256, "Gemstones")


def load(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(hot checkpoints to 350B, one row per cooldown branch) as scalefit curves, unedited.

    Both carry ``model`` (the shape's run name) to group a main run with its branches.
    """
    hot = read_curves(folder / HOT, columns={**COLUMNS, "run_name": "run"}, schedule=HOT_SCHEDULE)
    more = read_curves(
        folder / HOT350, columns={**COLUMNS, "run_name": "run"}, schedule=HOT_SCHEDULE
    )
    hot = pd.concat([hot, more[more["step"] > LAST_HOT_477]], ignore_index=True)
    cool = read_curves(
        folder / COOL, columns=COLUMNS, run_columns=("run_name", "step"), schedule=COOL_SCHEDULE
    )
    cool = cool.rename(columns={"run_name": "model"})
    return hot.assign(model=hot["run"]), cool


def split(
    hot: pd.DataFrame,
    cool: pd.DataFrame,
    name: str,
    default_early: bool = False,
    held_out: tuple = HELD_OUT,
):
    """(training curves, the training branches' final losses, the held-out branches).

    Training shapes are below the set's size limit and below every held-out shape. The main
    runs' checkpoints up to the first fork are dropped, unless ``default_early`` leaves that
    to ``prepare``'s default rule (see :func:`fit_curve_law`).
    """
    largest, past_100b = SETS[name]
    largest = min(largest, float(cool.loc[cool["model"].isin(held_out), "params"].min()))
    keep = ~hot["model"].isin(held_out) & (hot["params"] < largest)
    if not default_early:
        keep &= hot["step"] > FIRST_FORK
    if not past_100b:
        keep &= hot["step"] <= LAST_HOT_477
    train_cool = cool[~cool["model"].isin(held_out) & (cool["params"] < largest)]
    curves = pd.concat([hot[keep], train_cool], ignore_index=True)
    return curves, train_cool, cool[cool["model"].isin(held_out)]


def cooldown_gains(hot: pd.DataFrame, cool: pd.DataFrame) -> pd.DataFrame:
    """Each branch's gain: the main run's loss at the branch's last step less the branch's loss.

    The main run's loss at that step is interpolated in log step between its checkpoints.
    Returns one row per branch: ``model, params, fork_tokens, gain``.
    """
    rows = []
    for model, part in cool.groupby("model"):
        main = hot[hot["model"] == model].sort_values("step")
        at = np.interp(np.log(part["step"]), np.log(main["step"]), main["loss"])
        rows.append(
            pd.DataFrame(
                {
                    "model": model,
                    "params": part["params"].to_numpy(),
                    "fork_tokens": np.round(part["tokens"].to_numpy() / 1.1 / 1e10) * 1e10,
                    "gain": at - part["loss"].to_numpy(),
                }
            )  # fmt: skip
        )
    return pd.concat(rows, ignore_index=True)


def fit_curve_law(
    curves: pd.DataFrame,
    law: str | None,
    formula: str | None,
    bootstrap: int,
    default_early: bool = False,
):
    """A curve law fitted to every kept checkpoint; shapes (with their branches) resampled.

    The early checkpoints are dropped by :func:`split` (before the first fork, 10B tokens) for
    every training set alike; ``prepare``'s default (the first 10 % of each run, used with
    ``default_early``) moves the cut to 35B tokens when the hot runs reach 350B.
    """
    early = {} if default_early else {"early": 0.0}
    with warnings.catch_warnings():  # the result records convergence; the scores are the output
        warnings.simplefilter("ignore", scalefit.core.errors.ConvergenceWarning)
        return fit_curves(
            prepare(curves, **early), law, formula=formula, bootstrap=bootstrap, cluster="model",
            seed=0, progress=False,
        )  # fmt: skip


def fit_finals(rows: pd.DataFrame, bootstrap: int):
    """The Chinchilla law on branch final losses; shapes resampled."""
    table = scalefit.read_table(rows[["params", "tokens", "loss", "model"]].reset_index(drop=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scalefit.core.errors.ConvergenceWarning)
        return scalefit.fit(
            table, "chinchilla", bootstrap=bootstrap, cluster="model" if bootstrap else None,
            seed=0, progress=False,
        )  # fmt: skip


def predict(res, held: pd.DataFrame, is_curve: bool) -> pd.DataFrame:
    """Each held-out branch's predicted final loss, with the 95 % band when there are draws."""
    if is_curve:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", scalefit.core.errors.ConvergenceWarning)
            out = final_losses(res, held)
        return out.rename(columns={"final_step": "step"})[
            ["run", "predicted"] + (["lo", "hi"] if "lo" in out else [])
        ]
    x = held[["params", "tokens"]].reset_index(drop=True)
    if res.draws is None:
        return pd.DataFrame({"run": held["run"].to_numpy(), "predicted": res.predict(x)})
    bands = res.predict(x, bands=True)
    out = pd.DataFrame({"run": held["run"].to_numpy(), "predicted": np.asarray(bands["loss"])})
    if "lo" in bands:
        out["lo"], out["hi"] = np.asarray(bands["lo"]), np.asarray(bands["hi"])
    return out


def _bands_hold(res) -> bool:
    """Whether 80 % of the bootstrap resamples converged (scalefit's rule for an interval)."""
    return res.draws is not None and np.isfinite(res.draws).all(axis=1).mean() >= 0.8


def compare(
    folder: Path,
    sets=("base", "small", "hot350"),
    bootstrap: int = 200,
    default_early: bool = False,
    target: str = "2b",
) -> pd.DataFrame:
    """Every method's prediction of each held-out branch on each training set, scored."""
    hot, cool = load(folder)
    out = []
    for name in sets:
        curves, train_cool, held = split(hot, cool, name, default_early, TARGETS[target])
        methods = [
            ("curves: lr_annealing_params", curves, fit_curve_law(
                curves, "lr_annealing_params", None, bootstrap, default_early), True),
            ("curves: annealing gain by size", curves, fit_curve_law(
                curves, None, SIZED, bootstrap, default_early), True),
            ("finals of the same runs: chinchilla", train_cool, fit_finals(
                train_cool, bootstrap), False),
        ]  # fmt: skip
        for label, data, res, is_curve in methods:
            pred = predict(res, held, is_curve)
            both = pred.merge(held[["run", "model", "params", "tokens", "loss"]], on="run")
            if not _bands_hold(res) or "lo" not in both:
                both["lo"] = both["hi"] = np.nan
            both = both.assign(
                set=name,
                method=label,
                fitted=f"{data['model'].nunique()} shapes, {len(data)} rows",
                converged=bool(res.converged),
                rel_err=both["predicted"] / both["loss"] - 1,
            )
            inside = (both["lo"] <= both["loss"]) & (both["loss"] <= both["hi"])
            both["covered"] = inside.where(both["lo"].notna(), None)
            out.append(both)
    return pd.concat(out, ignore_index=True)


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Per training set and method: mean |relative error|, mean error, intervals holding."""
    return rows.groupby(["set", "method"], sort=False).agg(
        fitted=("fitted", "first"),
        runs=("run", "size"),
        mean_abs_rel_err=("rel_err", lambda e: float(np.abs(e).mean())),
        mean_rel_err=("rel_err", "mean"),
        covered=("covered", lambda c: "n/a" if c.isna().all() else f"{int(c.sum())}"),
        converged=("converged", "all"),
    )


def figure(rows: pd.DataFrame, hot: pd.DataFrame, path: Path, name: str = "base") -> None:
    """Per held-out shape: its hot curve, its branches' final losses and the two predictions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scalefit.core._io import atomic_savefig

    rows = rows[rows["set"] == name]
    shown = {
        "curves: annealing gain by size": ("tab:blue", "curves (annealing gain by size)"),
        "finals of the same runs: chinchilla": ("tab:orange", "Chinchilla, same runs' finals"),
    }
    fig, axes = plt.subplots(1, len(HELD_OUT), figsize=(15, 4.4), sharey=True)
    for ax, model in zip(axes, HELD_OUT, strict=True):
        curve = hot[(hot["model"] == model) & (hot["step"] <= LAST_HOT_477)]
        ax.plot(curve["tokens"] / 1e9, curve["loss"], color="0.6", lw=1, label="hot run (held out)")
        for method, (color, label) in shown.items():
            part = rows[(rows["model"] == model) & (rows["method"] == method)]
            part = part.sort_values("tokens")
            x = part["tokens"] / 1e9
            ax.plot(x, part["predicted"], color=color, lw=1.6, label=label)
            if part["lo"].notna().all():
                ax.fill_between(x, part["lo"], part["hi"], color=color, alpha=0.18, lw=0)
        obs = rows[(rows["model"] == model)].drop_duplicates("run").sort_values("tokens")
        ax.plot(obs["tokens"] / 1e9, obs["loss"], "ko", ms=4, label="branch final loss (held out)")
        ax.set_title(f"{model.split('-')[1].split('_')[0]} ({obs['params'].iloc[0] / 1e9:.2f}B)")
        ax.set_xlabel("tokens (billions)")
        ax.set_ylim(2.45, 3.05)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("validation loss (nats/token)")
    axes[0].legend(fontsize=8, loc="upper right")
    fig.suptitle(
        "Gemstones: the three ~2B shapes predicted from the shapes below 1.5B (95 % bands, "
        "200 resamples of shapes)",
        fontsize=11,
    )
    atomic_savefig(fig, path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("folder", nargs="?", default=None, help="the data (or $SCALEFIT_GEMSTONES)")
    ap.add_argument(
        "--sets", default="base,small,hot350", help=f"training sets ({', '.join(SETS)})"
    )
    ap.add_argument(
        "--target",
        choices=sorted(TARGETS),
        default="2b",
        help="held-out shapes: the ~2B ones, or the ~1B ones (an inner check, which trains on "
        "shapes below 1B only)",
    )
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--out", default=None, metavar="DIR")
    ap.add_argument("--figure", default=None, metavar="PNG", help="figure of the base set")
    ap.add_argument(
        "--default-early",
        action="store_true",
        help="drop early checkpoints by prepare's default (first 10 %% of each run) instead",
    )
    args = ap.parse_args()
    unknown = [n for n in args.sets.split(",") if n not in SETS]
    if unknown:
        raise ScaleFitError(f"--sets: unknown {', '.join(unknown)}; choose from {', '.join(SETS)}.")
    folder = data_dir(args.folder)
    gains = cooldown_gains(*load(folder))
    table = gains.pivot_table(index=["params", "model"], columns="fork_tokens", values="gain")
    table.columns = [f"{c / 1e9:.0f}B" for c in table.columns]
    with pd.option_context("display.width", 200):
        print("cooldown gain (nats) by fork, each shape (the main run's loss less the branch's):")
        print(table.to_string(float_format=lambda v: f"{v:.3f}"), "\n")
    rows = compare(
        folder,
        args.sets.split(","),
        bootstrap=args.bootstrap,
        default_early=args.default_early,
        target=args.target,
    )
    with pd.option_context("display.width", 200, "display.max_colwidth", 40):
        print(summarise(rows).to_string(float_format=lambda v: f"{v:.4f}"))
        print("\nmean relative error per held-out shape:")
        per = rows.pivot_table(index=["set", "method"], columns="model", values="rel_err")
        print(per.to_string(float_format=lambda v: f"{v:+.4f}"))
    if args.out:
        folder_out = Path(args.out)
        folder_out.mkdir(parents=True, exist_ok=True)
        name = f"curves_gemstones_{args.target}.csv"
        atomic_write_csv(folder_out / name, rows)
        print(f"wrote {folder_out / name}")
    if args.figure and args.target == "2b" and "base" in args.sets.split(","):
        figure(rows, load(folder)[0], Path(args.figure))
        print(f"wrote {args.figure}")


if __name__ == "__main__":
    run(main)
