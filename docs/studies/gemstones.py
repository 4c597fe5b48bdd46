"""Gemstones' width x depth grid: held-out shapes, cooldown exponents, depth, allocation (issue 38).

Data: ``scalefit.datasets.load("gemstones", file=KEY)`` (McLeish et al., *Gemstones*, MIT: 22
shapes, width 256-3072 x depth 3-80, 48M-2.0B parameters, one row per checkpoint) and Liu et al.'s
Chinchilla table (``datasets.load("chinchilla", drop_highest=40)``, their 203 rows); the authors'
own fit of the decomposed law on ``hot_100b+`` (log-Huber, delta 1e-3) is read from
``$SCALEFIT_DATA_DIR/gemstones/published_fits/``. Four parts (``--part``):

* ``heldout``: the largest shapes are held out at every token count (``2B``: the three ~2B shapes;
  ``1B+2B``: the six ~1-2B shapes; on the Chinchilla table the shapes above 5e9 parameters), every
  law is fitted on the other shapes (log-Huber, delta 1e-3, ``--boot`` resamples of whole shapes,
  ``cluster="run"``) and predicts the held-out losses. Scores: mean |ln error| of the point
  prediction, its mean sign (bias), and coverage of the central 80 % and 95 % intervals of the
  package's calibrated loss predictive (:mod:`scalefit.fit.discrepancy`: the bootstrap draws, a
  per-shape random effect, a discrepancy growing beyond the training compute, Student-t tails),
  learned on the training shapes only. ``chinchilla_E0`` is Chinchilla's law with E held at 0
  (the critical-depth ansatz has no irreducible term). The authors' published fit is evaluated
  as published: it was fitted on all 22 shapes, so for it the held-out shapes are in-sample (no
  interval).
* ``cooldown``: the decomposed and Chinchilla laws on the hot checkpoints to 100B tokens (``hot``)
  and on the cooldown ends (``cool_end``, one row per branch forked at 10..100B tokens), same
  objective and shape bootstrap: do the exponents move?
* ``depth``: the decomposed law, one protocol (log-MSE, Liu's objective, and log-Huber 1e-3, the
  Gemstones authors'; shape bootstrap), on the Chinchilla table, on Gemstones, and on Gemstones cut
  to the Chinchilla table's depth and width range; with L0 free and held at 0 (and, log-Huber
  only, at 1.0 and 1.5 nats: a profile of what a_depth does as the floor moves); and each
  table's design (depth, width and token ranges, correlation of ln width with ln depth).
* ``allocation``: :func:`scalefit.allocate` on the decomposed and Chinchilla fits to ``hot_100b+``
  and to ``cool_end`` (calibrated intervals, the parameter count of Gemstones' own blocks; the
  decomposed law also with ``max_depth`` at the grid's deepest shape), and the slopes of ln N* and
  ln T* in ln C against the authors' Approach-1 exponents (N* ~ C^0.499, T* ~ C^0.481).

Run (5-8 minutes on 2 cores, by load)::

    SCALEFIT_DATA_DIR=/path/to/data nice -n 10 python docs/studies/gemstones.py \\
        --out docs/studies/results --figure docs/img/gemstones_depth.png

(``--part ""`` with ``--figure`` redraws the figure from the CSVs alone).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import scalefit
from scalefit import datasets
from scalefit.allocate import Accounting
from scalefit.core._io import atomic_write_csv
from scalefit.fit.discrepancy import fit_discrepancy, predictive_sims
from scalefit.fit.observation import score_holdout
from scalefit.laws import get_law

PROBS = (0.8, 0.95)
FIT = {"loss": "huber", "delta": 1e-3}
#: Laws compared out of sample (the critical-depth ansatz counts N from the table's params).
LAWS = {
    "decomposed": ("decomposed", None),
    "chinchilla": ("chinchilla", None),
    "critical_depth": ("critical_depth", {"params_from": "column"}),
    "chinchilla_E0": ("chinchilla", None),  # E held at 0: the ansatz has no irreducible term
}
PUBLISHED = "parameters_delta-3__approach_3_width_depth_grid_search_0_hot_100b+.json"
#: Gemstones' parameter count: 15 l W^2 per block (MLP ratio 5.5), untied 50,304-token
#: embeddings, RMSNorm gains; within 1.5 % of ``params_active_precise`` on every shape.
GEM_ACCOUNTING = Accounting(vocab=50304, embeddings="untied", mlp_ratio=5.5, norms=True)
BUDGETS = tuple(10.0**k for k in (19, 20, 21, 22, 23))
APPROACH1 = {"params": 0.499, "tokens": 0.481}
#: The depth part's fits: (objective, L0 held at this value or None for free).
DEPTH_FITS = (("mse", None), ("mse", 0.0), ("huber", None), ("huber", 0.0), ("huber", 1.0),
              ("huber", 1.5))  # fmt: skip


def tables() -> dict[str, pd.DataFrame]:
    """Gemstones' main runs to 350B tokens and Liu's Chinchilla table, both with a ``run``."""
    chin = datasets.load("chinchilla", drop_highest=40)
    chin = chin.assign(
        run=[f"{w:.0f}x{d:.0f}" for w, d in zip(chin.width, chin.depth, strict=True)]
    )
    return {"gemstones": datasets.load("gemstones"), "chinchilla": chin}


def published(x: pd.DataFrame) -> np.ndarray:
    """The authors' fit as published: ``exp(logsumexp(c_i - a_i ln x_i, e))``, x = W, l, T."""
    root = Path(os.environ.get("SCALEFIT_DATA_DIR", "."))
    spec = json.loads((root / "gemstones" / "published_fits" / PUBLISHED).read_text())
    a, c = (np.asarray(spec[k]["0"], dtype=float) for k in ("exponents", "coefficients"))
    e = float(spec["irreducible_error"]["0"])
    logx = np.log(x[["width", "depth", "tokens"]].to_numpy(float))
    terms = np.column_stack([c[None, :] - a[None, :] * logx, np.full(len(x), e)])
    return np.exp(np.logaddexp.reduce(terms, axis=1))


def fit(table, name, *, boot, seed):
    """One fit with the study's objective and shape bootstrap; warnings kept, not shown."""
    law, options = LAWS.get(name, (name, None))
    if name == "chinchilla_E0":
        law = get_law("chinchilla").fixing({"E": 0.0})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = scalefit.fit(
            table, law, law_options=options, seed=seed, bootstrap=boot, cluster="run", **FIT
        )
    return res, sorted({str(w.message) for w in caught})


def largest(table: pd.DataFrame, name: str, split: str) -> pd.Series:
    """Rows of the held-out shapes (see the module docstring)."""
    size = table.groupby("run")["params"].first()
    if name == "chinchilla":
        held = size[size > 5e9].index
    else:
        held = size.nlargest(3 if split == "2B" else 6).index
    return table["run"].isin(held)


def scores(y, pred, draws=None) -> dict:
    """|ln error|, bias and (given ``(log_mean, sd, nu)`` draws) calibrated coverage."""
    err = np.log(pred) - np.log(y)
    out = {"mae_log": float(np.mean(np.abs(err))), "bias_log": float(np.mean(err))}
    if draws is not None:
        sc = score_holdout(y, draws[0], draws[1][None, :], draws[2], probs=PROBS)
        out.update({k: sc[k] for k in ("coverage_80", "coverage_95", "width_log_95")})
    return out


def heldout(*, boot: int, seed: int) -> pd.DataFrame:
    """Every law on every split: fit on the smaller shapes, score the held-out ones."""
    rows = []
    for name, table in tables().items():
        for split in ("2B", "1B+2B") if name == "gemstones" else ("5B+",):
            test_rows = largest(table, name, split)
            train, test = table[~test_rows], table[test_rows]
            y = test["loss"].to_numpy(float)
            base = {"table": name, "split": split, "n_train_shapes": train["run"].nunique(),
                    "n_test_shapes": test["run"].nunique(), "n_test_rows": len(test)}  # fmt: skip
            for law in LAWS:
                res, notes = fit(train, law, boot=boot, seed=seed)
                d = np.asarray(res.draws if res.draws is not None else np.empty((0, 1)))
                if not np.isfinite(d).all(axis=1).any():  # no resample converged: the point fit
                    res = res.replace(draws=None)
                    notes.append("no finite bootstrap draw: the predictive centres on the fit")
                disc = fit_discrepancy(train, res.law, seed=seed)
                _, log_mean, sd = predictive_sims(res, test, disc, seed=seed)
                beyond = float(np.mean(np.log(test["flops"]) > np.log(train["flops"].max())))
                rows.append(
                    {**base, "law": law, **scores(y, res.predict(test), (log_mean, sd, disc.nu)),
                     "converged": res.converged, "not_identified": " ".join(res.not_identified),
                     "tau": disc.tau, "kappa": disc.kappa, "beyond_train_compute": beyond,
                     "params": json.dumps(res.params), "notes": " | ".join(notes)}
                )  # fmt: skip
                print(f"  {name} {split} {law}: {rows[-1]['mae_log']:.4f}", flush=True)
            if name == "gemstones":
                rows.append({**base, "law": "published (in-sample)", **scores(y, published(test)),
                             "converged": True})  # fmt: skip
    return pd.DataFrame(rows)


def intervals(res, names) -> dict:
    """Estimate and bootstrap interval of each of ``names``."""
    out = {}
    for k in names:
        lo, hi = res.ci.get(k, (np.nan, np.nan)) if res.ci else (np.nan, np.nan)
        out.update({k: res.params[k], f"{k}_lo": lo, f"{k}_hi": hi})
    return out


def cooldown(*, boot: int, seed: int) -> pd.DataFrame:
    """Exponents of the decomposed and Chinchilla laws on hot checkpoints and cooldown ends."""
    exps = {"decomposed": ("a_width", "a_depth", "a_tokens", "L0"),
            "chinchilla": ("alpha", "beta", "E")}  # fmt: skip
    rows = []
    for key in ("hot", "cool_end", "hot_100b+"):
        table = datasets.load("gemstones", file=key)
        for law, names in exps.items():
            res, _ = fit(table, law, boot=boot, seed=seed)
            rows.append({"file": key, "rows": len(table), "law": law, "converged": res.converged,
                         "not_identified": " ".join(res.not_identified),
                         **intervals(res, names)})  # fmt: skip
    return pd.DataFrame(rows)


def design(table: pd.DataFrame) -> dict:
    """What a table measures: its depth, width, token and tokens-per-parameter ranges."""
    lw, ld = np.log(table["width"]), np.log(table["depth"])
    tpp = table["tokens"] / table["params"]
    return {"shapes": table["run"].nunique(), "rows": len(table),
            "depth_range": f"{table['depth'].min():.0f}-{table['depth'].max():.0f}",
            "width_range": f"{table['width'].min():.0f}-{table['width'].max():.0f}",
            "tokens_range": f"{table['tokens'].min():.2g}-{table['tokens'].max():.2g}",
            "tokens_per_param": f"{tpp.min():.3g}-{tpp.max():.3g}",
            "corr_lnW_lnl": float(np.corrcoef(lw, ld)[0, 1])}  # fmt: skip


def depth(*, boot: int, seed: int) -> pd.DataFrame:
    """The decomposed law on each table, objective and L0 handling (one protocol)."""
    tabs = tables()
    g = tabs["gemstones"]
    c = tabs["chinchilla"]
    inside = g["depth"].between(c["depth"].min(), c["depth"].max()) & (
        g["width"] >= c["width"].min()
    )
    tabs["gemstones (Chinchilla's depth and width range)"] = g[inside]
    law = get_law("decomposed")
    rows = []
    for name, table in tabs.items():
        for loss, l0 in DEPTH_FITS:
            spec = law if l0 is None else law.fixing({"L0": l0})
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = scalefit.fit(table, spec, loss=loss, delta=1e-3, seed=seed,
                                   bootstrap=boot, cluster="run")  # fmt: skip
            names = ["a_width", "a_depth", "a_tokens"] + (["L0"] if l0 is None else [])
            pred = res.predict(table)
            rmse = float(np.sqrt(np.mean((np.log(pred) - np.log(table["loss"])) ** 2)))
            held = "free" if l0 is None else f"held at {l0:g}"
            rows.append({"table": name, "objective": f"log-{loss}", "L0_handling": held,
                         **intervals(res, names), "rmse_log": rmse, "converged": res.converged,
                         "not_identified": " ".join(res.not_identified),
                         **design(table)})  # fmt: skip
            print(f"  {name} {loss} L0 {held}: a_depth {res.params['a_depth']:.3f}", flush=True)
    return pd.DataFrame(rows)


def allocation(*, boot: int, seed: int) -> pd.DataFrame:
    """N*, T* (and depth, width) per budget from each law and file, calibrated intervals.

    The decomposed law is allocated twice: with no depth limit, and with ``max_depth`` at the
    grid's deepest shape (80), past which its depth term is extrapolated.
    """
    frames = []
    for key in ("hot_100b+", "cool_end"):
        table = datasets.load("gemstones", file=key)
        for law in ("decomposed", "chinchilla"):
            res, _ = fit(table, law, boot=boot, seed=seed)
            for max_depth in (None, int(table["depth"].max())) if law == "decomposed" else (None,):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    kw = {"accounting": GEM_ACCOUNTING, "max_depth": max_depth}
                    alloc = scalefit.allocate(res, list(BUDGETS), interval="calibrated", **kw)
                s = alloc.summary.copy()
                lc = np.log(s["budget"].to_numpy(float))
                for var in ("params", "tokens"):
                    slope = np.polyfit(lc, np.log(s[f"{var}_star"].to_numpy(float)), 1)[0]
                    s[f"slope_{var}_star"], s[f"approach1_{var}"] = slope, APPROACH1[var]
                s.insert(0, "max_depth", max_depth)
                s.insert(0, "law", law)
                s.insert(0, "file", key)
                s["interval"] = alloc.interval
                s["fit_not_identified"] = " ".join(res.not_identified)
                notes = list(alloc.warnings) + [str(w.message) for w in caught]
                s["warnings"] = " | ".join(notes)
                frames.append(s)
    return pd.concat(frames, ignore_index=True)


def figure(out: Path, path: Path) -> None:
    """a_depth against the floor L0 on both tables, and the held-out errors (from the CSVs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scalefit.core._io import atomic_savefig

    depth_rows = pd.read_csv(out / "gemstones_depth.csv")
    held = pd.read_csv(out / "gemstones_heldout.csv")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.6))
    huber = depth_rows[depth_rows["objective"] == "log-huber"]
    tables_ = huber.groupby("table", sort=False)
    for (name, sub), color in zip(tables_, ("C0", "C1", "C2"), strict=True):
        held_at = [float(h.split()[-1]) if h != "free" else np.nan for h in sub["L0_handling"]]
        l0 = np.where(sub["L0_handling"] == "free", sub["L0"], held_at)
        for fixed in (True, False):
            pick = (sub["L0_handling"] != "free").to_numpy() == fixed
            lo, hi = sub["a_depth_lo"].to_numpy()[pick], sub["a_depth_hi"].to_numpy()[pick]
            mid = sub["a_depth"].to_numpy()[pick]
            ax.errorbar(l0[pick] + (0.02 if fixed else 0.0), mid, yerr=[mid - lo, hi - mid],
                        fmt="o-" if fixed else "*", ms=6 if fixed else 14, color=color,
                        capsize=3, label=f"{name}" + ("" if fixed else ": L0 fitted"))  # fmt: skip
    ax.axhline(1.2, color="0.5", ls=":", label="Liu et al.: 1.2 (Chinchilla table)")
    ax.axhline(0.1416, color="0.5", ls="--", label="McLeish et al.: 0.142 (Gemstones)")
    ax.set_yscale("log")
    ax.set_ylim(0.01, 4)
    ax.set_xlabel("irreducible loss L0 (nats; held fixed, or fitted: star)")
    ax.set_ylabel("depth exponent a_depth, 95 % shape-bootstrap interval")
    ax.set_title("Decomposed law, log-Huber: a_depth follows the floor", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    splits = list(held.groupby(["table", "split"], sort=False).groups)
    laws = ["chinchilla", "decomposed", "critical_depth", "published (in-sample)"]
    for j, law in enumerate(laws):
        vals = [held[(held["table"] == t) & (held["split"] == s) & (held["law"] == law)]
                for t, s in splits]  # fmt: skip
        err = [100 * v["mae_log"].iloc[0] if len(v) else np.nan for v in vals]
        bx.bar(np.arange(len(splits)) + 0.2 * (j - 1.5), err, width=0.2, label=law)
    bx.set_xticks(range(len(splits)), [f"{t}: {s} held out" for t, s in splits], fontsize=8)
    bx.set_yscale("log")
    bx.set_ylim(0.5, 30)
    bx.set_ylabel("mean |ln(predicted / observed)| (%), held-out checkpoints")
    bx.set_title("Largest shapes held out at every token count", fontsize=10)
    bx.legend(fontsize=7)
    bx.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)


PARTS = {"heldout": heldout, "cooldown": cooldown, "depth": depth, "allocation": allocation}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS))
    ap.add_argument("--boot", type=int, default=100, help="shape-bootstrap resamples per fit")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="docs/studies/results")
    ap.add_argument("--figure", default="", help="draw the figure from the CSVs in --out here")
    args = ap.parse_args(argv)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 40)
    for part in [p for p in args.part.split(",") if p]:
        t0 = time.perf_counter()
        frame = PARTS[part](boot=args.boot, seed=args.seed).assign(seed=args.seed, boot=args.boot)
        atomic_write_csv(Path(args.out) / f"gemstones_{part}.csv", frame)
        show = frame.drop(columns=[c for c in ("notes", "warnings") if c in frame.columns])
        print(f"\n{part} ({time.perf_counter() - t0:.0f} s):")
        print(show.to_string(index=False, float_format=lambda v: f"{v:.4g}"), flush=True)
    if args.figure:
        figure(Path(args.out), Path(args.figure))
        print(f"wrote {args.figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
