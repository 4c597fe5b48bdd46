"""Curves across sizes: the held-out protocol of :func:`scalefit.curves.size_holdout` (issue 46).

Fit on the smaller models' curves (every peak rate they have), predict the larger models' final
losses at the end of each run's own schedule; baselines on the same training runs: Chinchilla's
law on their final losses (every rate; the best rate per size and length). Scored by mean
``|ln(predicted / observed)|`` and 95 % intervals (run bootstrap) holding the observed final.

Sweeps (``--sweeps``, comma-separated):

* ``olmo``: the OLMo ladder (Bhagia et al. 2024; ``datasets.load("olmo_ladder")``): 190M, 370M,
  760M and 1B at 0.5-10 x Chinchilla tokens (and the 1xC reruns) -> the six 3B runs. C4
  validation loss every 200-1,000 steps. ``olmo-lr1``: the same with ``lr=1`` in every schedule
  (the areas count steps, as for Gemstones). The schedule of each run is read off its own file:
  peak rate ``learning_rate_peak``, linear warm-up over ``params / batch`` steps (one token per
  parameter), cosine decay to 0.1 x the peak at the run's last step (the logged
  ``optim/learning_rate_group0`` follows it to 0.5 % of the peak, checked on every run). One
  rate per size.
* ``gemstones``: the main ("hot", constant rate) runs to 100B tokens and the cooldown branches'
  final losses (``gemstones:hot``, ``gemstones:cool_end``), as in ``curves_gemstones.py``: shapes
  below 1.5B -> the three ~2B shapes' 29 branches; a main run and its branches are resampled
  together. ``gemstones+lr``: the same plus the learning-rate ablation's main runs
  (``gemstones:lr_ablation_hot``, 20 shapes at a lower constant rate); the files do not give the
  ratio of the two rates, so ``--ablation-lr`` declares it (default 0.5 of the main rate).
* ``gpu``, ``cpu``: the package's WSD grids (``data/lm_wsd_gpu*.csv``, ``data/lm_wsd*.csv``):
  three peak rates (GPU) x depth x width, main runs and cooldown branches; the widest models
  are held out. The curves are one-batch training losses, so the finals scored are training
  losses too: on the GPU grid ``train_end`` (the mean of each run's last 10 steps), on the CPU
  grid each run's last logged step's (one step before its schedule's end; its validation loss
  is within 0.03 nats of it, ``curves_cpu_grid.py``).

Curve laws: ``--laws`` (default ``lr_annealing,lr_annealing_params,lr_optimum``; the
multi-power laws of :data:`scalefit.curves.holdout.CURVE_LAWS` take far longer). Run::

    SCALEFIT_DATA_DIR=/path/to/data nice -n 10 python docs/studies/curves_sizes.py \\
        --out docs/studies/results
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from scalefit import datasets
from scalefit.core._io import atomic_write_csv
from scalefit.core.schedule import parse_schedule
from scalefit.curves import read_curves
from scalefit.curves.holdout import holdout_summary, size_holdout

sys.path.insert(0, str(Path(__file__).parent))
from public_files import run  # noqa: E402  (same folder)

ROOT = Path(__file__).resolve().parents[2]
OLMO_SIZES = ("190M", "370M", "760M", "1B", "3B")
#: Laws that need runs at two peak rates or more (fit_curves refuses them on one).
ONE_RATE_REFUSED = ("lr_optimum",)
GEM_HELD_OUT = 1.5e9  # the three ~2B shapes (1.90-2.01B)
GEM_COOL = "wsd:lr={lr},steps={step},decay=0.0904,final_lr=0"
GEM_HOT = "constant:lr={lr},steps=83475"


def olmo(relative: bool = False) -> tuple[pd.DataFrame, pd.DataFrame | None, float, str]:
    """The OLMo ladder's curves (190M-3B) with each run's schedule; held out: 3B.

    With ``relative`` the schedules say ``lr=1``: the areas count steps at the peak rate, as
    for Gemstones, and a law does not see that the peak rate falls with size.
    """
    table = datasets.load("olmo_ladder")  # resolved and checksummed, file by file
    folder = Path(datasets.resolve("olmo_ladder")).parent
    parts = []
    for name in sorted(set(table["run"])):
        if not name.startswith(OLMO_SIZES):
            continue
        raw = pd.read_csv(folder / f"{name}.csv")
        part = table[table["run"] == name][["run", "step", "tokens", "params", "loss"]].copy()
        peak = float(raw["learning_rate_peak"].iloc[0])
        batch = float(raw["batch_size_in_tokens"].iloc[0])
        last = int(part["step"].max())
        warm = round(float(part["params"].iloc[0]) / batch)
        sched = f"cosine:lr={peak:.6g},steps={last},warmup={warm},final_lr_ratio=0.1"
        _check_lr(name, sched, raw)
        part["schedule"] = sched.replace(f"lr={peak:.6g}", "lr=1") if relative else sched
        part["step"] = part["step"].astype(int)
        parts.append(part)
    curves = read_curves(pd.concat(parts, ignore_index=True))
    return curves, None, 3e9, "run"


def _check_lr(name: str, sched: str, raw: pd.DataFrame) -> None:
    """The declared schedule's rates against the logged ones after warm-up, to 0.5 % of the peak."""
    from scalefit.core.schedule import parse_schedule

    s = parse_schedule(sched)
    steps = raw["_step"].to_numpy(int)
    logged = raw["optim/learning_rate_group0"].to_numpy(float)
    ours = s.sequence(int(steps.max()))[steps - 1]
    after = steps > s.warmup
    worst = float(np.max(np.abs(ours[after] - logged[after]))) / s.lr
    if worst > 5e-3:
        raise SystemExit(f"{name}: the declared schedule misses the logged rate by {worst:.2%}")


def gemstones(ablation_lr: float | None) -> tuple[pd.DataFrame, pd.DataFrame | None, float, str]:
    """Gemstones' main runs to 100B, the branches' ends (and the lr ablation's main runs)."""
    cols = ["run", "step", "tokens", "params", "loss"]
    hot = datasets.load("gemstones", file="hot")[cols].assign(lr=1.0)
    hot["model"] = hot["run"]
    cool = datasets.load("gemstones", file="cool_end")[cols].assign(lr=1.0)
    cool["model"] = cool["run"]
    cool["run"] = cool["run"] + "/" + cool["step"].astype(str)
    hot["schedule"] = [GEM_HOT.format(lr=v) for v in hot["lr"]]
    cool["schedule"] = [GEM_COOL.format(lr=1.0, step=s) for s in cool["step"]]
    parts = [hot, cool]
    if ablation_lr is not None:
        abl = datasets.load("gemstones", file="lr_ablation_hot")[cols].assign(lr=ablation_lr)
        abl["model"] = abl["run"]
        abl["schedule"] = GEM_HOT.format(lr=ablation_lr)
        parts.append(abl)
    curves = read_curves(pd.concat(parts, ignore_index=True))
    return curves, None, GEM_HELD_OUT, "model"


def grid(which: str) -> tuple[pd.DataFrame, pd.DataFrame | None, float, str]:
    """A package WSD grid's curves (and finals); held out: the widest models."""
    stem = "lm_wsd_gpu" if which == "gpu" else "lm_wsd"
    curves = read_curves(ROOT / "data" / f"{stem}_curves.csv")
    curves["main"] = curves["run"].str.split("/").str[0]
    # CPU: each run's last logged step (one before its schedule's end; validation within 0.03
    # nats of it, curves_cpu_grid.py)
    last = curves.sort_values("step").groupby("run", sort=False).tail(1)
    finals = last[["run", "params", "tokens", "loss", "main"]].reset_index(drop=True)
    if which == "gpu":
        finals = pd.read_csv(ROOT / "data" / f"{stem}.csv")
        finals = finals.assign(loss=finals["train_end"])
    widest = curves["width"].max()
    return curves, finals, float(curves.loc[curves["width"] == widest, "params"].min()), "main"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sweeps", default="olmo,olmo-lr1,gemstones,gemstones+lr,gpu,cpu")
    ap.add_argument("--laws", default="lr_annealing,lr_annealing_params,lr_optimum")
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--ablation-lr", type=float, default=0.5)
    ap.add_argument("--out", default=None, metavar="DIR")
    args = ap.parse_args()
    laws = [s for s in args.laws.split(",") if s]
    all_rows = []
    for sweep in args.sweeps.split(","):
        start = time.perf_counter()
        if sweep.startswith("olmo"):
            curves, finals, held, cluster = olmo(relative=sweep == "olmo-lr1")
        elif sweep.startswith("gemstones"):
            curves, finals, held, cluster = gemstones(args.ablation_lr if "+lr" in sweep else None)
        else:
            curves, finals, held, cluster = grid(sweep)
        rates = curves.loc[curves["params"] < held, "schedule"].map(lambda t: parse_schedule(t).lr)
        use = [law for law in laws if law not in ONE_RATE_REFUSED or rates.nunique() > 1]
        rows = size_holdout(
            curves, held, laws=use, finals=finals, bootstrap=args.bootstrap, cluster=cluster
        )
        rows.insert(0, "sweep", sweep)
        all_rows.append(rows)
        n_fit = curves.loc[curves["params"] < held, "run"].nunique()
        print(f"\n{sweep}: {n_fit} runs fitted below {held:.3g} params")
        print(holdout_summary(rows).to_string(float_format=lambda v: f"{v:.4f}"))
        print(f"({time.perf_counter() - start:.0f} s)", flush=True)
        if args.out:  # after every sweep, so a long run keeps what it has
            folder = Path(args.out)
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_csv(folder / "curves_sizes.csv", pd.concat(all_rows, ignore_index=True))
    if args.out:
        print(f"wrote {Path(args.out) / 'curves_sizes.csv'}")


if __name__ == "__main__":
    run(main)
