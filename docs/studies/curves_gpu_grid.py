"""Curves against final losses on the GPU grid with cooldown branches (issue 26).

The study of ``curves_cpu_grid.py`` (whose functions it imports) on the grid of
``configs/grid_wsd_gpu.toml``: 3 peak learning rates x depth {2, 4} x width {64, ..., 512}, 4M
byte tokens per main run (489 steps) and cooldown branches at 1M, 2M and 3M tokens.

* **Runs used.** With ``--best-lr`` each (depth, width) shape keeps the learning rate whose main
  run ends with the lowest validation loss; its main run and three branches feed both fits.
  ``--lr X`` keeps one rate for every shape instead.
* **Fits.** The widest models are held out (``--held-out-width 512``; repeat the option for
  another set, e.g. ``--held-out-width 384,512``). From the other runs: a curve law (``--law``,
  repeatable; default ``lr_annealing_params``; ``multi_power_params`` takes about ten minutes)
  fitted to their per-step curves, bootstrap over runs; and the Chinchilla law fitted to their
  final losses, bootstrap over rows. 200 resamples each by default, seed 0.
* **Training against validation loss.** The curves are training losses of single batches; the
  targets are validation losses on four held-out plays. They are not the same quantity here:
  batches are random windows drawn with replacement, so late in a run a growing share of each
  batch has been trained on before, and the validation plays differ from the training ones.
  The study therefore scores each prediction against the quantity it was fitted to:

  - ``train``: the mean training loss of each held-out run's last ``--window`` steps, against
    the curve law's mean over the same steps and against Chinchilla fitted to the training
    runs' own such means;
  - ``val``: the final validation loss, against Chinchilla fitted to validation losses, the
    curve law as it is (a training-loss prediction), and the curve law plus a gap measured on
    the training runs: the val - train gap (last-window mean) of the widest training model with
    the same depth and budget, at its own lr (labelled ``+ gap``; the gap is added to the band
    as a known constant).

Reads a grid folder (``runs/``) or the two bundled tables (``--bundled``: ``data/lm_wsd_gpu.csv``
and ``data/lm_wsd_gpu_curves.csv``); ``--export DIR`` writes those tables from a grid folder.
Both sources give the same scores: the curves are thinned the same way (every ``--every``-th
step and each run's last one) before the fits (a fit that does not converge, as the multi-power
law's here, may stop at another point of its flat direction). ``--img PNG`` draws the first
held-out set.

Run::

    scalefit data prepare shakespeare
    scalefit train grid configs/grid_wsd_gpu.toml --workers 1 --out results/lm_wsd_gpu
    python docs/studies/curves_gpu_grid.py results/lm_wsd_gpu --best-lr \\
        --held-out-width 512 --held-out-width 384,512 --out docs/studies/results
    python docs/studies/curves_gpu_grid.py results/lm_wsd_gpu --lr 1e-3 \\
        --held-out-width 512 --held-out-width 384,512 --out docs/studies/results \\
        --img docs/img/curves_gpu_grid.png
    python docs/studies/curves_gpu_grid.py results/lm_wsd_gpu --best-lr --held-out-width 512 \\
        --law multi_power_params --out docs/studies/results
    python docs/studies/curves_gpu_grid.py --bundled --lr 1e-3 ...   # the same, from data/

docs/studies/curves_grids.md, "GPU grid", has the results.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from scalefit.core._io import atomic_write_csv, atomic_write_text
from scalefit.curves import forecast, read_curves, read_trainer_runs
from scalefit.curves.prepare import run_schedule

sys.path.insert(0, str(Path(__file__).parent))
from curves_cpu_grid import (  # noqa: E402  (same folder)
    curve_predictions,
    final_predictions,
    finals,
    score,
)

DATA = Path(__file__).resolve().parents[2] / "data"
KEEP = ["run", "main", "branch", "budget", "lr", "depth", "width", "params", "tokens", "loss"]


def short_name(lr: float, depth: int, width: int, budget: int | None = None) -> str:
    """``lr=0.001_depth=2_width=64`` for a main run, ``.../tokens_1000000`` for a branch."""
    name = f"lr={lr:g}_depth={depth}_width={width}"
    return name if budget is None else f"{name}/tokens_{budget}"


def read_grid(grid: Path, window: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Finals (one row per run, ``train_end`` = mean training loss of its last steps) and curves."""
    truth = finals(grid)
    names, parts = {}, []
    for main in sorted((grid / "runs").iterdir()):
        info = json.loads((main / "run.json").read_text())
        short = short_name(info["lr"], info["depth"], info["width"])
        names[main.name] = short
        part = read_trainer_runs(main)
        part["run"] = part["run"].str.replace(main.name, short, regex=False)
        parts.append(part)
    curves = pd.concat(parts, ignore_index=True)
    head = truth["run"].str.split("/").str[0]
    truth["main"] = head.map(names)
    pairs = zip(truth["main"], truth["run"], head, strict=True)
    truth["run"] = [m + r[len(h) :] for m, r, h in pairs]
    truth["branch"] = np.where(truth["run"].str.contains("/"), "cooldown", "main")
    truth["budget"] = [_budget(r) for r in truth["run"]]
    ends = curves.groupby("run")["loss"].apply(lambda s: s.iloc[-window:].mean())
    return truth[KEEP].assign(train_end=truth["run"].map(ends)), curves


def _budget(run: str) -> int:
    return int(run.split("tokens_")[1]) if "/" in run else 4_000_000


def thin(curves: pd.DataFrame, every: int) -> pd.DataFrame:
    """Keep every ``every``-th step of each run and its last step."""
    last = curves.groupby("run")["step"].transform("max")
    keep = (curves["step"] % every == 0) | (curves["step"] == last)
    return curves[keep].reset_index(drop=True)


def select_runs(truth: pd.DataFrame, lr: float | None) -> pd.DataFrame:
    """Runs at one peak lr, or (``lr=None``) at each shape's best lr by its main run's loss."""
    if lr is not None:
        return truth[np.isclose(truth["lr"], lr)]
    mains = truth[truth["branch"] == "main"]
    best = mains.loc[mains.groupby(["depth", "width"])["loss"].idxmin(), "main"]
    return truth[truth["main"].isin(set(best))]


def window_mean(res, curves: pd.DataFrame, window: int, runs) -> pd.DataFrame:
    """The curve law's mean over each run's last ``window`` checkpoints: ``run, predicted, lo, hi``.

    The trainer logs the loss before each update, so the last checkpoint is one step before the
    end of the schedule: these are the steps that ``train_end`` averages.
    """
    rows = []
    for run in runs:
        sched = run_schedule(curves, run)
        part = curves[curves["run"] == run]
        last = int(part["step"].max())  # the loss before the last update: sched.steps - 1
        steps = np.arange(last - window + 1, last + 1)
        f = forecast(res, sched, steps=steps, params=float(part["params"].iloc[0]))
        rows.append({"run": run, **{k: float(f[k].mean()) for k in ("loss", "lo", "hi")}})
    return pd.DataFrame(rows).rename(columns={"loss": "predicted"})


def with_gap(pred: pd.DataFrame, truth: pd.DataFrame, train: pd.DataFrame) -> pd.DataFrame:
    """``pred`` plus the val - train gap of the widest training run of the same depth and budget."""
    gap = train.assign(gap=train["loss"] - train["train_end"])
    gap = gap.sort_values("width").groupby(["depth", "budget"])["gap"].last()
    held = truth.set_index("run").loc[pred["run"]]
    add = gap.loc[list(zip(held["depth"], held["budget"], strict=True))].to_numpy()
    return pred.assign(**{k: pred[k].to_numpy() + add for k in ("predicted", "lo", "hi")})


def study(truth, curves, held_widths, laws, bootstrap, window) -> tuple[pd.DataFrame, list, dict]:
    """Score every method for one held-out set: scores, per-run predictions, the first fits."""
    is_held = truth["width"].isin(held_widths)
    train, held = truth[~is_held], truth[is_held]
    c_held = curves["run"].isin(held["run"])
    c_train = curves["run"].isin(train["run"])
    val_t = held
    train_t = held.assign(loss=held["train_end"])
    rows, detail, fits = [], [], {}

    def add(target, method, pred, truth_of):
        rows.append({"target": target, "method": method, **score(pred, truth_of)})
        detail.append(pred.assign(target=target, method=method))

    for law in laws:
        res, last = curve_predictions(curves[c_train], curves[c_held], law, bootstrap=bootstrap)
        print(_params(f"curves ({law})", res), flush=True)
        fits.setdefault("curves", res)
        mean = window_mean(res, curves, window, held["run"])
        add("train", f"curves ({law})", mean, train_t)
        add("val", f"curves ({law}), as fitted", last, val_t)
        add("val", f"curves ({law}) + gap", with_gap(mean, truth, train), val_t)
    on_train = train.assign(loss=train["train_end"])
    res, fin_train = final_predictions(on_train, held, bootstrap=bootstrap)
    print(_params("chinchilla on training losses", res))
    add("train", "final losses only (chinchilla)", fin_train, train_t)
    res, fin_val = final_predictions(train, held, bootstrap=bootstrap)
    print(_params("chinchilla on validation losses", res))
    fits["final"] = res
    add("val", "final losses only (chinchilla)", fin_val, val_t)
    out = pd.DataFrame(rows).assign(held_out="+".join(map(str, held_widths)))
    out.insert(0, "held_out", out.pop("held_out"))
    return out.assign(train_runs=len(train)), detail, fits


def figure(fits: dict, truth: pd.DataFrame, curves: pd.DataFrame, widths, path: Path) -> None:
    """Held-out runs: training curves, the curve law along them, final val losses, Chinchilla's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scalefit.core._io import atomic_savefig

    held = truth[truth["width"].isin(widths)]
    depths = sorted(held["depth"].unique())
    fig, axes = plt.subplots(1, len(depths), figsize=(5.2 * len(depths), 4.2), sharey=True)
    final = fits["final"].predict(held[["params", "tokens"]].reset_index(drop=True), bands=True)
    final.index = held["run"].to_numpy()
    for ax, depth in zip(np.atleast_1d(axes), depths, strict=True):
        for k, (_, row) in enumerate(held[held["depth"] == depth].iterrows()):
            colour = f"C{k}"
            part = curves[curves["run"] == row["run"]]
            mb = part["tokens"] / 1e6
            ax.plot(mb, part["loss"], ".", ms=3, color=colour, alpha=0.5)
            sched = run_schedule(curves, row["run"])
            grid = np.unique(np.linspace(part["step"].min(), sched.steps, 60).astype(int))
            law = forecast(fits["curves"], sched, steps=grid, bands=False, params=row["params"])
            ax.plot(grid * 8192 / 1e6, law["loss"], "-", color=colour, lw=1.2)
            x = row["tokens"] / 1e6
            ax.plot(x, row["loss"], "k*", ms=9)
            f = final.loc[row["run"]]
            err = [[f["loss"] - f["lo"]], [f["hi"] - f["loss"]]]
            ax.errorbar(x + 0.06, f["loss"], yerr=err, fmt="s", ms=4, color="grey", capsize=2)
        ax.set_title(f"depth {depth}, width {'+'.join(map(str, widths))}, held out")
        ax.set_xlabel("training tokens (millions)")
        ax.set_ylim(1.3, 2.6)
    np.atleast_1d(axes)[0].set_ylabel("loss (nats per byte)")
    from matplotlib.lines import Line2D

    handles = [
        Line2D(
            [],
            [],
            marker=".",
            ls="",
            color="C0",
            label="training loss, one batch every 8th step (colour: run)",
        ),
        Line2D([], [], color="C0", label=f"{fits['curves'].law.name}, fitted to smaller models"),
        Line2D([], [], marker="*", ls="", color="k", ms=9, label="final validation loss"),
        Line2D([], [], marker="s", ls="", color="grey", label="Chinchilla on final val, 95 %"),
    ]
    np.atleast_1d(axes)[-1].legend(handles=handles, fontsize=8, loc="upper right")
    rates = sorted(held["lr"].unique())
    fig.suptitle(f"GPU WSD grid, peak lr {', '.join(f'{r:g}' for r in rates)}: held-out runs")
    atomic_savefig(fig, path, dpi=110, bbox_inches="tight")


def _params(label: str, res) -> str:
    values = ", ".join(f"{k} {v:.4g}" for k, v in res.params.items())
    return f"{label}: converged {res.converged}; {values}"


def export(truth: pd.DataFrame, curves: pd.DataFrame, folder: Path) -> None:
    """Write the bundled tables: finals of every run, and the thinned curves."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, frame in (("lm_wsd_gpu.csv", truth), ("lm_wsd_gpu_curves.csv", curves)):
        atomic_write_text(folder / name, frame.to_csv(index=False, float_format="%.9g"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("grid", nargs="?", help="the grid's output folder (with runs/)")
    ap.add_argument("--bundled", action="store_true", help="read data/lm_wsd_gpu*.csv instead")
    pick = ap.add_mutually_exclusive_group()
    pick.add_argument("--best-lr", action="store_true", help="each shape at its best peak lr")
    pick.add_argument("--lr", type=float, default=None, help="one peak lr for every shape")
    ap.add_argument(
        "--held-out-width", action="append", dest="held", metavar="W[,W...]",
        help="widths held out together; repeat for another set (default 512)",
    )  # fmt: skip
    ap.add_argument("--law", action="append", dest="laws")
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--every", type=int, default=8)
    ap.add_argument("--export", default=None, metavar="DIR")
    ap.add_argument("--out", default=None, metavar="DIR")
    ap.add_argument("--img", default=None, metavar="PNG", help="figure of the first held-out set")
    args = ap.parse_args()
    if args.bundled == (args.grid is not None):
        ap.error("give a grid folder or --bundled")
    if args.bundled:
        truth = pd.read_csv(DATA / "lm_wsd_gpu.csv")
        curves = read_curves(DATA / "lm_wsd_gpu_curves.csv")
    else:
        truth, curves = read_grid(Path(args.grid), args.window)
        curves = thin(curves, args.every)
    if args.export:
        export(truth, curves, Path(args.export))
        print(f"wrote {len(truth)} finals and {len(curves)} checkpoints to {args.export}")
        return
    if not (args.best_lr or args.lr):
        ap.error("pass --best-lr or --lr")
    chosen = select_runs(truth, None if args.best_lr else args.lr)
    curves = curves[curves["run"].isin(chosen["run"])]
    gaps = chosen.assign(gap=chosen["loss"] - chosen["train_end"])
    print("val - train gap (last-window mean), mean over depths, by budget x width:")
    print(gaps.pivot_table(index="budget", columns="width", values="gap").round(3).to_string())
    sets = [[int(w) for w in text.split(",")] for text in args.held or ["512"]]
    laws = args.laws or ["lr_annealing_params"]
    parts, detail = [], []
    for i, held in enumerate(sets):
        out, det, fits = study(chosen, curves, held, laws, args.bootstrap, args.window)
        if args.img and i == 0:
            figure(fits, chosen, curves, held, Path(args.img))
        parts.append(out)
        detail += [d.assign(held_out="+".join(map(str, held))) for d in det]
        print(out.to_string(index=False), flush=True)
    if args.out:
        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"curves_gpu_grid_{'best_lr' if args.best_lr else f'lr{args.lr:g}'}_{'+'.join(laws)}"
        atomic_write_csv(folder / f"{stem}.csv", pd.concat(parts))
        atomic_write_csv(folder / f"{stem}_runs.csv", pd.concat(detail))
        print(f"wrote {folder / stem}.csv and {stem}_runs.csv")


if __name__ == "__main__":
    main()
