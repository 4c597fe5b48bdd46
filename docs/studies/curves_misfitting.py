"""Curves against final losses on a public sweep: the Misfitting runs (issue 26).

Data: Li, Kudugunta & Zettlemoyer, *(Mis)Fitting Scaling Laws* (ICLR 2025, arXiv 2502.18969),
github.com/hadasah/scaling_laws at commit 1f3708c0a12df0effb0ee906b1da5f9f0ff4f4f1:
``data/scaling_results.csv`` (C4 validation loss, nats per token, at every checkpoint of each
run; a run is one ``model, total_steps, peak_lr``) and ``data/scaling_results_last_ckpt_only.csv``
(each run's final checkpoint). The files are kept outside this repository and read as published
(no edits): ``read_curves`` with a column mapping, a run name made of three columns and a
schedule filled per run from columns. The schedule (repository's ``open_lm/constants/
slurm_constants.py`` and ``open_lm/ds/scripts/train.sh``): 50 warm-up steps, then open_lm's
cosine decay to ``0.1 x peak`` at the run's own ``total_steps`` (``END_LR_RATIO`` 0.1); 512
sequences of 2,048 tokens per step, i.e. ``D = 1,048,576 x current_steps`` in the files.

The folder (argument, or ``$SCALEFIT_PUBLIC_CURVES``) holds:

* ``scaling_results_last_ckpt_only.csv`` - the complete file (sha256 below);
* ``misfitting_selected_runs.csv`` - the header and the lines (byte-exact) of 5 whole runs of
  the full file: 70m/5000/0.004, 200m/6000/0.002, 300m/8000/0.002, 400m/12000/0.001,
  1b/20000/0.001;
* ``parts/full_<offset>*`` - byte ranges of the full file; with ``--parts`` the whole runs in
  them are added (a run is whole when its ``current_epoch`` runs 1 .. ``total_epochs``; a run
  missing only its last line, cut at the end of a range, is completed by its row of the
  last-checkpoint file when the cut line is a prefix of that row).

The study holds out the largest size with a whole curve (1b) and predicts its runs' final
losses from the smaller models' runs, three ways:

* **curves**: ``lr_annealing_params`` (and ``multi_power_params``) fitted to every checkpoint of
  the smaller models' runs (checkpoint discipline of :func:`scalefit.curves.prepare`), intervals
  from 200 resamples of whole runs, then each 1b run's loss at the end of its schedule;
* **the same runs' final losses**: with 4 runs the 5-parameter Chinchilla law is not
  identified, so ``E + A/N^0.34 + B/D^0.28`` (Hoffmann et al.'s published exponents, 3 free
  coefficients); with 9 runs (``--parts``) the full Chinchilla law as well; bootstrap over runs;
* **every final loss below 1b** (the generous baseline): the Chinchilla law on all 256 final
  rows of sizes 12m-400m in the last-checkpoint file (248 once the repeated 17m rows are
  kept once), and on the best peak rate per
  (size, steps).

Scored against the 1b runs' final losses in the last-checkpoint file: absolute relative error
and whether the 95 % interval holds the loss.

Run::

    SCALEFIT_PUBLIC_CURVES=/path/to/misfitting python docs/studies/curves_misfitting.py \
        --parts --out docs/studies/results
"""

from __future__ import annotations

import argparse
import io
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import scalefit
from scalefit.core._io import atomic_write_csv
from scalefit.curves import final_losses, fit_curves, prepare, read_curves

sys.path.insert(0, str(Path(__file__).parent))
from public_files import run, verified_folder  # noqa: E402  (same folder)

FINALS = "scaling_results_last_ckpt_only.csv"
SELECTED = "misfitting_selected_runs.csv"
SHA256 = {
    FINALS: "cd96b9eb8e5b2adc80e6739a642dd8554590edc96234d36859ab6ed0f5c30562",
    SELECTED: "81c3e2ca94ccb74626e21299c800abb170c5ebcd5993e6ce378540fa0f96a185",
}
#: How the published columns read: N (all parameters, embeddings included) as params.
COLUMNS = {"current_steps": "step", "N": "params", "D": "tokens"}
RUN = ("model", "total_steps", "peak_lr")
SCHEDULE = "cosine:lr={peak_lr},steps={total_steps},warmup=50,final_lr_ratio=0.1"
HELD_OUT = "misfitting_1b"
TARGET = "misfitting_1b/20000/0.001"  # the 1b run whose whole curve is in the selected file
LAWS = ("lr_annealing_params", "multi_power_params")
FIXED_EXPONENTS = "E + A/params**0.34 + B/tokens**0.28"  # Hoffmann et al. 2022, Approach 3


def data_dir(given: str | None = None) -> Path:
    """The data folder: ``given``, else ``$SCALEFIT_PUBLIC_CURVES``; files checked by sha256."""
    return verified_folder(given, "SCALEFIT_PUBLIC_CURVES", SHA256, "Misfitting")


def read(source) -> pd.DataFrame:
    """A Misfitting table (path or DataFrame) as scalefit curves, unedited."""
    return read_curves(source, columns=COLUMNS, run_columns=RUN, schedule=SCHEDULE)


def _part_lines(folder: Path) -> tuple[list[str], list[str]]:
    """(complete lines, cut lines) of the byte ranges in ``parts/``, contiguous ranges joined."""
    ranges = sorted(
        (int(p.name.split("_")[1]), p.read_bytes()) for p in (folder / "parts").glob("full_*")
    )
    blocks: list[list] = []
    for start, data in ranges:
        if blocks and blocks[-1][0] + len(blocks[-1][1]) == start:
            blocks[-1][1] += data
        else:
            blocks.append([start, data])
    whole, cut = [], []
    for start, data in blocks:
        body = data if start == 0 else data[data.index(b"\n") + 1 :]
        *done, rest = body.decode().split("\n")
        whole += [ln for ln in done if ln]
        cut += [rest] if rest else []
    return whole, cut


def whole_runs_from_parts(folder: Path) -> tuple[pd.DataFrame, list[str]]:
    """Whole runs found in ``parts/`` (rows of the full file) and a note per completed run."""
    header, *finals = (folder / FINALS).read_text().split("\n")
    rows, cut = _part_lines(folder)
    notes = []
    for line in cut:  # a run cut in its last line is completed by its final row
        match = [f for f in finals if f.startswith(line) and f != line]
        if len(match) == 1 and match[0].split(",")[9] == "1.0":
            rows.append(match[0])
            notes.append("/".join(match[0].split(",")[i] for i in (10, 12, 16)))
    frame = pd.read_csv(io.StringIO("\n".join([header, *dict.fromkeys(rows)])))
    keep = [
        g
        for _, g in frame.groupby(list(RUN))
        if sorted(g["current_epoch"]) == list(range(1, int(g["total_epochs"].iloc[0]) + 1))
    ]
    return pd.concat(keep, ignore_index=True), notes


def load(folder: Path, parts: bool) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(curves of every whole run, the last-checkpoint file, runs completed from it)."""
    raw = pd.read_csv(folder / SELECTED)
    notes: list[str] = []
    if parts:
        extra, notes = whole_runs_from_parts(folder)
        raw = pd.concat([raw, extra], ignore_index=True).drop_duplicates(ignore_index=True)
    return read(raw), pd.read_csv(folder / FINALS), notes


def run_name(tab: pd.DataFrame) -> pd.Series:
    """The run name :func:`read` gives (``model/total_steps/peak_lr``) for rows of a file."""
    return tab["model"] + "/" + tab["total_steps"].map(str) + "/" + tab["peak_lr"].map(str)


def final_table(last: pd.DataFrame) -> pd.DataFrame:
    """Final losses as a loss table (params = N, tokens = D), one row per run and loss.

    The file repeats some 17m runs' final rows with another ``total_epochs`` (checkpoint
    spacing) and the same loss to the last digit; those repeats are kept once.
    """
    tab = last.drop_duplicates([*RUN, "loss"]).reset_index(drop=True)
    return pd.DataFrame(
        {"run": run_name(tab), "model": tab["model"], "params": tab["N"].astype(float),
         "tokens": tab["D"].astype(float), "loss": tab["loss"].astype(float)}
    )  # fmt: skip


def fit_curve_law(curves: pd.DataFrame, law: str, bootstrap: int, seed: int = 0):
    """``law`` fitted to every checkpoint of the runs in ``curves`` (prepare's defaults)."""
    with warnings.catch_warnings():  # the result records convergence; the scores are the output
        warnings.simplefilter("ignore", scalefit.core.errors.ConvergenceWarning)
        return fit_curves(prepare(curves), law, bootstrap=bootstrap, seed=seed, progress=False)


def predict_curves(res, last: pd.DataFrame) -> pd.DataFrame:
    """Each held-out run's loss at the end of its schedule (its final row gives the schedule)."""
    return final_losses(res, read(last[last["model"] == HELD_OUT]))


def fit_finals(rows: pd.DataFrame, law: str | None, bootstrap: int, formula=None):
    """A final-loss law on ``rows`` (one per run), bootstrap over rows."""
    table = scalefit.read_table(rows[["params", "tokens", "loss"]].reset_index(drop=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scalefit.core.errors.ConvergenceWarning)
        return scalefit.fit(
            table, law, formula=formula, bootstrap=bootstrap, seed=0, progress=False
        )


def predict_finals(res, held: pd.DataFrame) -> pd.DataFrame:
    """Predicted final loss and band of each held-out run from a final-loss fit."""
    bands = res.predict(held[["params", "tokens"]].reset_index(drop=True), bands=True)
    return pd.DataFrame(
        {"run": held["run"].to_numpy(), "predicted": np.asarray(bands["loss"]),
         "lo": np.asarray(bands["lo"]), "hi": np.asarray(bands["hi"])}
    )  # fmt: skip


def _bands_hold(res) -> bool:
    """Whether 80 % of the bootstrap resamples converged (scalefit's rule for an interval)."""
    return res.draws is not None and np.isfinite(res.draws).all(axis=1).mean() >= 0.8


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Per method: mean absolute relative error and intervals holding the loss, over the runs."""
    return rows.groupby("method", sort=False).agg(
        runs=("run", "size"),
        mean_abs_rel_err=("abs_rel_err", "mean"),
        covered=("covered", lambda c: "n/a" if c.isna().all() else f"{int(c.sum())}"),
    )


def compare(folder: Path, *, parts: bool, laws, bootstrap: int) -> tuple[pd.DataFrame, dict]:
    """Every method's prediction of each held-out run, scored; and what was fitted."""
    curves, last, completed = load(folder, parts)
    train = curves[~curves["run"].str.startswith(HELD_OUT + "/")]
    finals = final_table(last)
    held = finals[finals["model"] == HELD_OUT]
    same = finals[finals["run"].isin(set(train["run"]))]
    below = finals[finals["model"] != HELD_OUT]
    best = below.loc[below.groupby(["model", "tokens"])["loss"].idxmin()]
    methods = []
    for law in laws:
        res = fit_curve_law(train, law, bootstrap)
        methods.append((f"curves ({law})", f"{train['run'].nunique()} curves", res, True))
    methods.append(
        ("same runs' finals (E + A/N^0.34 + B/D^0.28)", f"{len(same)} finals",
         fit_finals(same, None, bootstrap, formula=FIXED_EXPONENTS), False)
    )  # fmt: skip
    if len(same) >= 6:
        methods.append(("same runs' finals (chinchilla)", f"{len(same)} finals",
                        fit_finals(same, "chinchilla", bootstrap), False))  # fmt: skip
    for label, rows in (("every final < 1b", below), ("best lr per size and steps < 1b", best)):
        methods.append((f"{label} (chinchilla)", f"{len(rows)} finals",
                        fit_finals(rows, "chinchilla", bootstrap), False))  # fmt: skip
    out = []
    for name, data, res, is_curve in methods:
        pred = predict_curves(res, last) if is_curve else predict_finals(res, held)
        both = pred[["run", "predicted", "lo", "hi"]].merge(held[["run", "loss"]], on="run")
        if not _bands_hold(res):  # too few resamples converged: no interval to report
            both[["lo", "hi"]] = np.nan
        both = both.assign(method=name, fitted=data, converged=bool(res.converged))
        both["abs_rel_err"] = np.abs(both["predicted"] / both["loss"] - 1)
        inside = (both["lo"] <= both["loss"]) & (both["loss"] <= both["hi"])
        both["covered"] = inside.where(both["lo"].notna(), None)
        out.append(both)
    info = {
        "train_runs": sorted(train["run"].unique()),
        "completed_from_finals": completed,
        "checkpoints": len(train),
        "finals_below": len(below),
        "best_rows": len(best),
    }
    return pd.concat(out, ignore_index=True), info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("folder", nargs="?", default=None, help="the data (or $SCALEFIT_PUBLIC_CURVES)")
    ap.add_argument("--parts", action="store_true", help="add the whole runs found in parts/")
    ap.add_argument("--laws", default=",".join(LAWS), help="curve laws, comma-separated")
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--out", default=None, metavar="DIR")
    args = ap.parse_args()
    folder = data_dir(args.folder)
    rows, info = compare(
        folder, parts=args.parts, laws=args.laws.split(","), bootstrap=args.bootstrap
    )
    print(f"fitted curves: {', '.join(info['train_runs'])} ({info['checkpoints']} checkpoints)")
    if info["completed_from_finals"]:
        print(f"last line from {FINALS}: {', '.join(info['completed_from_finals'])}")
    print(
        f"final rows below 1b: {info['finals_below']}; best lr per size/steps: {info['best_rows']}"
    )
    cols = ["method", "fitted", "run", "loss", "predicted", "lo", "hi", "abs_rel_err", "covered"]
    with pd.option_context("display.width", 200, "display.max_colwidth", 48):
        print(rows[cols + ["converged"]].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        for label, part in (
            ("the run with a whole curve (1b/20000/0.001)", rows[rows["run"] == TARGET]),
            ("the 1b runs at peak lr <= 1e-3", rows[~rows["run"].str.endswith("/0.004")]),
        ):
            print(f"\n{label}:")
            print(summarise(part).to_string(float_format=lambda v: f"{v:.4g}"))
    if args.out:
        folder_out = Path(args.out)
        folder_out.mkdir(parents=True, exist_ok=True)
        name = "curves_misfitting" + ("_parts" if args.parts else "") + ".csv"
        atomic_write_csv(folder_out / name, rows)
        print(f"wrote {folder_out / name}")


if __name__ == "__main__":
    run(main)
