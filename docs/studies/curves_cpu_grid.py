"""Curves against final losses on our own CPU grid with cooldown branches (issue 26).

Reads the run folders written by ``scalefit train grid configs/grid_wsd_cpu.toml`` (six WSD main
runs, depth {2, 4} x width {32, 64, 128}, each with cooldown branches at 125k, 250k and 375k
tokens: 24 final losses and their curves), holds out the widest models (width 128) and compares
two ways of predicting their final losses from the smaller models' runs:

* **curves**: ``lr_annealing_params`` (L = L0 + A*S1^-alpha - C*S2 + B/params^beta) fitted to
  every checkpoint of the smaller models' main runs and branches (checkpoint discipline of
  :func:`scalefit.curves.prepare`; the bootstrap resamples whole runs), then asked for each held-out
  run's loss at the end of its schedule;
* **final losses only**: the Chinchilla law (E + A/params^alpha + B/tokens^beta) fitted to the
  same runs' final evaluated losses (one row per main run or branch), bootstrap over rows.

Both are scored against the held-out runs' final evaluated (validation) losses: mean absolute
relative error and the share of 95 % bootstrap intervals that contain them. The curves are the
trainer's per-step training losses (one batch each, noisy); the targets are validation losses of
the same runs, which at a tenth of an epoch are close to the same quantity: in ``data/lm_wsd.csv``
the final validation loss minus the last step's training loss is -0.032 to +0.022 nats over the
24 runs, mean 0.000. (Not so on the GPU grid, 0.87 of an epoch with batches drawn with
replacement: there it reaches 0.15 nats; see ``curves_gpu_grid.py``.)

Run::

    scalefit data prepare shakespeare
    scalefit train grid configs/grid_wsd_cpu.toml --workers 1 --threads 1 --out results/lm_wsd
    python docs/studies/curves_cpu_grid.py results/lm_wsd --out docs/studies/results
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import scalefit
from scalefit.core._io import atomic_write_csv
from scalefit.curves import final_losses, fit_curves, prepare, read_trainer_runs


def finals(grid: Path) -> pd.DataFrame:
    """One row per main run and branch: name, shape, peak lr, budget and final evaluated loss."""
    rows = []
    for main in sorted((grid / "runs").iterdir()):
        folders = [(main.name, main)] + [
            (f"{main.name}/{b.name}", b) for b in sorted((main / "cooldowns").glob("tokens_*"))
        ]
        for name, folder in folders:
            info = json.loads((folder / "run.json").read_text())
            if not info.get("finished") or info["result"]["diverged"]:
                continue
            res = info["result"]
            rows.append(
                {"run": name, "width": info["width"], "depth": info["depth"],
                 "lr": float(info["lr"]), "params": float(res["params"]),
                 "tokens": float(res["tokens"]), "loss": float(res["loss"])}
            )  # fmt: skip
    return pd.DataFrame(rows)


def score(pred: pd.DataFrame, truth: pd.DataFrame) -> dict:
    """Mean absolute relative error and interval coverage of predictions against finals."""
    both = pred.merge(truth[["run", "loss"]], on="run")
    err = np.abs(both["predicted"] / both["loss"] - 1)
    cover = ((both["lo"] <= both["loss"]) & (both["loss"] <= both["hi"])).mean()
    return {"runs": len(both), "mean_abs_rel_err": float(err.mean()), "coverage": float(cover)}


def curve_predictions(
    fit_curves_of: pd.DataFrame, held_curves: pd.DataFrame, law: str, *, bootstrap: int
) -> tuple:
    """Fit ``law`` to curves (bootstrap over runs, seed 0); each held-out run's final loss.

    Returns the fit and :func:`scalefit.curves.final_losses` of the held-out runs (``run,
    predicted, lo, hi``, ...). Convergence warnings are silenced: the scores are the result.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scalefit.core.errors.ConvergenceWarning)
        res = fit_curves(prepare(fit_curves_of), law, bootstrap=bootstrap, seed=0)
    return res, final_losses(res, held_curves)


def final_predictions(train: pd.DataFrame, held: pd.DataFrame, *, bootstrap: int) -> tuple:
    """Chinchilla fitted to ``train``'s final losses (bootstrap over rows, seed 0); ``held``'s.

    Returns the fit and a frame ``run, predicted, lo, hi`` (95 % bootstrap band).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scalefit.core.errors.ConvergenceWarning)
        res = scalefit.fit(
            scalefit.read_table(train[["params", "tokens", "loss"]].reset_index(drop=True)),
            "chinchilla",
            bootstrap=bootstrap,
            seed=0,
            progress=False,
        )
    bands = res.predict(held[["params", "tokens"]].reset_index(drop=True), bands=True)
    pred = pd.DataFrame(
        {"run": held["run"].to_numpy(), "predicted": np.asarray(bands["loss"]),
         "lo": np.asarray(bands["lo"]), "hi": np.asarray(bands["hi"])}
    )  # fmt: skip
    return res, pred


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("grid", help="the grid's output folder (with runs/)")
    ap.add_argument("--held-out-width", type=int, default=128)
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--out", default=None, metavar="DIR")
    args = ap.parse_args()
    grid = Path(args.grid)
    truth = finals(grid)
    held = truth[truth["width"] == args.held_out_width]
    train = truth[truth["width"] != args.held_out_width]
    mains = sorted((grid / "runs").iterdir())
    curves = pd.concat([read_trainer_runs(m) for m in mains], ignore_index=True)
    is_held = curves["width"] == args.held_out_width
    curve_fit, pred_curves = curve_predictions(
        curves[~is_held], curves[is_held], "lr_annealing_params", bootstrap=args.bootstrap
    )
    final_fit, pred_final = final_predictions(train, held, bootstrap=args.bootstrap)
    rows = [
        {"method": "curves (lr_annealing_params)", **score(pred_curves, held)},
        {"method": "final losses only (chinchilla)", **score(pred_final, held)},
    ]
    out = pd.DataFrame(rows)
    print(
        f"{len(train)} training runs (main + branches), {len(held)} held out "
        f"(width {args.held_out_width}); {len(curves[~is_held])} checkpoints read"
    )
    print(
        f"curve fit: converged {curve_fit.converged}; "
        + ", ".join(f"{k} {v:.4g}" for k, v in curve_fit.params.items())
    )
    print(
        f"final-loss fit: converged {final_fit.converged}; "
        + ", ".join(f"{k} {v:.4g}" for k, v in final_fit.params.items())
    )
    print(out.to_string(index=False))
    if args.out:
        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_csv(folder / "curves_cpu_grid.csv", out)
        detail = pred_curves.merge(held[["run", "loss"]], on="run").assign(method="curves")
        other = pred_final.merge(held[["run", "loss"]], on="run").assign(method="final only")
        atomic_write_csv(folder / "curves_cpu_grid_runs.csv", pd.concat([detail, other]))
        print(f"wrote {folder / 'curves_cpu_grid.csv'}")


if __name__ == "__main__":
    main()
