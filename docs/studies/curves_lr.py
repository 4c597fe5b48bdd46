"""The optimal peak learning rate eta*(N, D) fitted from curves at several rates (issue 46).

``lr_optimum`` (``scalefit.laws``) is ``lr_annealing_params`` with its areas counted per unit of
peak rate plus ``k (log eta - log eta*)^2``, ``eta* = e0 (N/1e8)^a (D/1e10)^b``: the peak rate
acts only through that penalty, so ``eta*`` is the loss's minimum over the peak rate. Fitted
jointly to every checkpoint of every run, bootstrap over runs (a main run with its cooldown
branches resampled together), 200 resamples, seed 0. Three data sets:

* **GPU WSD grid** (``data/lm_wsd_gpu_curves.csv``, bundled): 10 shapes x 3 peak rates (5e-4,
  1e-3, 2e-3), each main run with three cooldown branches; training-loss curves. Also a
  held-out check: fit on widths <= 256, compare eta* at widths 384 and 512 with the best of
  the grid's three rates there.
* **CPU WSD grid** (``data/lm_wsd_curves.csv``, bundled): one peak rate (2e-3). The fit of
  ``lr_optimum`` is refused (eta* is not identified); the message is recorded.
* **Gemstones lr ablation** (``gemstones:hot`` and ``gemstones:lr_ablation_hot``, 10B-100B
  tokens at a constant rate): the 20 shapes in both, at the main rate and at half of it (the
  model cards: "a learning rate that is half of the original"). The files do not give the
  main rate (it depends on the shape), so rates are declared relative to each shape's main
  rate (1 and 0.5): ``e0`` is then eta* over the main rate at 1e8 params and 1e10 tokens, and
  ``a``, ``b`` the exponents of that ratio. ``S2 = 0`` under a constant rate, so ``C`` is held
  at 0. Runs are independent trainings, resampled one by one.

Published learning-rate laws compared (the papers' own fits, not refitted here): DeepSeek-LLM
(DeepSeek-AI 2024, arXiv:2401.02954) eta_opt = 0.3118 C^-0.1250 (C in FLOPs, their model scale
in non-embedding FLOPs per token); Step Law (Li et al. 2025, arXiv:2503.04715) eta = 1.79
N^-0.713 D^0.307 (N non-embedding parameters, D tokens). Along a fixed tokens-per-parameter
ratio, N and D both grow as C^0.5, so eta* grows as C^((a + b)/2): -0.203 for Step Law.

Run::

    SCALEFIT_DATA_DIR=/path/to/data PYTHONPATH=. python docs/studies/curves_lr.py \\
        --out docs/studies/results

Writes ``curves_lr_params.csv`` (every fitted parameter with its interval, per data set),
``curves_lr_eta.csv`` (eta* per shape of each grid, with its interval, beside the grid's
best rate), ``curves_lr_allocation.csv`` (size, tokens and peak rate for three budgets from the
GPU grid's fit, run-bootstrap intervals) and ``curves_lr_refusals.txt``.
docs/studies/curves_lr.md has the results.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from scalefit import datasets
from scalefit.core._io import atomic_write_csv, atomic_write_text
from scalefit.core.errors import ScaleFitError
from scalefit.curves import allocation, fit_curves, optimal_lr, prepare, read_curves
from scalefit.laws import get_law

DATA = Path(__file__).resolve().parents[2] / "data"
#: Allocation of the GPU grid's fit: the grid's schedule family (its rate is replaced by eta*).
FAMILY, BUDGETS = "wsd:lr=1e-3,warmup=24,decay=0.2,final_lr=0", [1e13, 1e14, 3e14]
#: Published exponents (a, b) of eta* in N and D, and the compute exponent.
PUBLISHED = {
    "Step Law (Li et al. 2025)": {"a": -0.713, "b": 0.307, "c": (-0.713 + 0.307) / 2},
    "DeepSeek-LLM (2024)": {"a": np.nan, "b": np.nan, "c": -0.125},
}


def fit(prepared: pd.DataFrame, law, cluster: str, bootstrap: int):
    """``lr_optimum`` (or ``law``) on every checkpoint; whole clusters resampled; seed 0."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():  # the result records its warnings; the tables are the output
        warnings.simplefilter("ignore")
        res = fit_curves(
            prepared, law, bootstrap=bootstrap, cluster=cluster, seed=0, starts=32, progress=False
        )
    print(f"  fit and {bootstrap} resamples: {time.perf_counter() - t0:.0f} s", flush=True)
    return res


def params_rows(res, data: str) -> pd.DataFrame:
    """The fit's parameters with intervals, plus eta*'s compute exponent (a + b) / 2."""
    s = res.summary().reset_index()[["param", "value", "ci_lo", "ci_hi", "identified"]]
    names = list(res.params)
    if res.draws is not None:
        d = np.asarray(res.draws, float)
        d = d[np.isfinite(d).all(axis=1)]
        c = (d[:, names.index("a")] + d[:, names.index("b")]) / 2
        lo, hi = np.quantile(c, [0.025, 0.975])
    else:
        lo = hi = np.nan
    c_row = {"param": "(a+b)/2", "value": (res.params["a"] + res.params["b"]) / 2}
    s = pd.concat([s, pd.DataFrame([{**c_row, "ci_lo": lo, "ci_hi": hi, "identified": True}])])
    return s.assign(data=data, converged=res.converged, n_boot=res.n_boot)


def gpu_grid(bootstrap: int):
    """The GPU grid: all shapes, and widths <= 256 (eta* at 384 and 512 held out)."""
    curves = read_curves(DATA / "lm_wsd_gpu_curves.csv")
    curves["main"] = curves["run"].str.split("/").str[0]
    finals = pd.read_csv(DATA / "lm_wsd_gpu.csv")
    mains = finals[finals["branch"] == "main"]
    best = mains.loc[mains.groupby(["depth", "width"])["loss"].idxmin()]
    rows, etas = [], []
    sets = {"gpu grid, all": curves["width"] > 0, "gpu grid, width<=256": curves["width"] <= 256}
    for label, keep in sets.items():
        print(label, flush=True)
        res = fit(prepare(curves[keep]), "lr_optimum", "main", bootstrap)
        rows.append(params_rows(res, label))
        eta = optimal_lr(res, best["params"], best["tokens"]).assign(
            data=label, width=best["width"].to_numpy(), depth=best["depth"].to_numpy(),
            best_rate_of_grid=best["lr"].to_numpy(),
        )  # fmt: skip
        etas.append(eta)
        if label == "gpu grid, all":
            alloc = allocation(res, BUDGETS, schedule=FAMILY, tokens_per_step=8192)
            print(alloc.report(), flush=True)
            rows.append(alloc.summary.assign(data=label, param="allocation"))
    return rows, etas


def cpu_grid() -> str:
    """The CPU grid (one peak rate): the refusal."""
    prepared = prepare(read_curves(DATA / "lm_wsd_curves.csv"))
    try:
        fit_curves(prepared, "lr_optimum", bootstrap=0)
    except ScaleFitError as exc:
        return f"cpu grid (data/lm_wsd_curves.csv): ScaleFitError: {exc}"
    raise AssertionError("lr_optimum was fitted on one peak rate")


def gemstones(bootstrap: int):
    """Gemstones: main runs (relative rate 1) and the lr ablation (0.5), 10B-100B tokens."""
    hot = datasets.load("gemstones", file="hot")
    low = datasets.load("gemstones", file="lr_ablation_hot")
    shape = lambda t: t["width"].astype(int).astype(str) + "x" + t["depth"].astype(int).astype(str)  # noqa: E731
    both = set(shape(hot)) & set(shape(low))
    parts = []
    for table, rate, tag in ((hot, 1.0, "main"), (low, 0.5, "half")):
        t = table[shape(table).isin(both)].copy()
        last = int(t["step"].max())
        t["run"] = shape(t) + "/" + tag
        t["schedule"] = f"constant:lr={rate:g},steps={last}"
        parts.append(t[["run", "step", "tokens", "loss", "params", "width", "depth", "schedule"]])
    curves = read_curves(pd.concat(parts, ignore_index=True))
    print(f"gemstones: {curves['run'].nunique()} runs, {len(both)} shapes", flush=True)
    law = get_law("lr_optimum").fixing({"C": 0.0})
    res = fit(prepare(curves, early=0.0), law, "run", bootstrap)
    sizes = curves.groupby("run")[["params", "tokens", "width", "depth"]].max()
    sizes = sizes[sizes.index.str.endswith("/main")]
    eta = optimal_lr(res, sizes["params"], sizes["tokens"]).assign(
        data="gemstones (rate / main rate)", width=sizes["width"].to_numpy(),
        depth=sizes["depth"].to_numpy(), best_rate_of_grid=np.nan,
    )  # fmt: skip
    return [params_rows(res, "gemstones (rate / main rate)")], [eta]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--bootstrap", type=int, default=200)
    args = ap.parse_args(argv)
    rows, etas = gpu_grid(args.bootstrap)
    refusal = cpu_grid()
    print(refusal)
    more_rows, more_etas = gemstones(args.bootstrap)
    alloc = pd.concat([r for r in rows if "budget" in r.columns], ignore_index=True)
    rows = [r for r in rows if "budget" not in r.columns]
    params = pd.concat(rows + more_rows, ignore_index=True)
    eta = pd.concat(etas + more_etas, ignore_index=True)
    pub = pd.DataFrame(
        [{"data": k, "param": p, "value": v[p[0]] if p != "(a+b)/2" else v["c"]}
         for k, v in PUBLISHED.items() for p in ("a", "b", "(a+b)/2")]
    )  # fmt: skip
    params = pd.concat([params, pub], ignore_index=True)
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_csv(args.out / "curves_lr_params.csv", params)
    atomic_write_csv(args.out / "curves_lr_eta.csv", eta)
    atomic_write_csv(args.out / "curves_lr_allocation.csv", alloc)
    atomic_write_text(args.out / "curves_lr_refusals.txt", refusal + "\n")
    with pd.option_context("display.width", 160, "display.max_rows", 200):
        print(params.to_string(index=False, float_format="{:.4g}".format))
        print(eta.to_string(index=False, float_format="{:.4g}".format))


if __name__ == "__main__":
    main()
