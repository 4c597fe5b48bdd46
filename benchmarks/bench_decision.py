"""Decision benchmark on real ladders: compute-optimal size N* at held-out budgets, with intervals.

For each of the eight public IsoFLOP sweeps (``scalefit.datasets.load("isoflops", ...)``) the two
highest budgets are the FINAL held-out budgets (as in ``bench_isoflop_extrapolation.py``). Below
them, ROLLING ORIGINS fit every method on the budgets ``<= b_k`` and score ``b_{k+1}, b_{k+2}``
(every ``k`` with 3 or more training budgets with a vertex and ``b_{k+2}`` below the final ones):
the final budgets inform no choice and no calibration.

* reference optimum at a scored budget: vertex of a parabola of loss in ``ln N`` through its runs,
  its spread ``s_ref`` from a parametric bootstrap with the sweep's pooled parabola noise; no
  reference when the vertex falls outside the sampled sizes;
* score: ``|ln N*_pred - ln N*_ref|`` (the ``T*`` error is the same), regret (the scored budget's
  parabola at the prediction, clamped to the sampled sizes, minus its minimum; loss units and
  relative), and interval coverage at 80 % and 95 %: "within its own uncertainty" is
  ``|pred - ref| <= z sqrt(s_pred^2 + s_ref^2)``, plain is ``|pred - ref| <= z s_pred``;
* intervals: ``s_pred^2 = s_param^2 + s_misfit(d)^2`` (``s_param`` a bootstrap of runs within
  budgets, ``s_misfit = sqrt(s0^2 + (kappa d)^2)``, ``d = ln(C / C_max_train)``) with
  ``(s0, kappa)`` by maximum likelihood on the rolling-origin errors of all sweeps (each sweep
  weighted equally: "pooled"), or ``kappa`` alone on the sweep's own rolling origins when it has
  4 or more scored budgets ("own", else pooled); "param" is ``s_param`` alone;
* the recommended method is the one with the lowest rolling-origin mean ``|ln N*|`` error (mean over
  sweeps of each sweep's mean), ties by regret; every method is then scored once on the finals.
  The choice is made twice: over every method, the candidates of ``decision_candidates.py``
  (estimators not in the library) included, and over the library's methods only (its default);
* ``stack`` (a convex combination of ``STACK_PARTS`` on ``ln N*``, weights by
  ``fit_stack_weights``) is scored leave-one-sweep-out at the rolling origins (the weights for
  sweep s come from the other sweeps' rolling origins only) and, at the final budgets, with the
  weights from all eight sweeps' rolling origins (printed: the library's ``STACK_WEIGHTS``);
  Gemstones takes the all-sweep weights throughout (it is not in the learning set).

Misfitting's 26 budgets (0.09 dex apart, 3-10 runs each) are kept as they are: budgets with fewer
than 4 runs give no training vertex (as in Approach 2), the reference's noise is the sweep's pooled
one, and the equal sweep weights keep its ~20 rolling origins from outweighing the other sweeps.

    SCALEFIT_DATA_DIR=../shared/data nice -n 10 python benchmarks/bench_decision.py \
        --out docs/studies/results/decision.csv --figure docs/img/decision.png
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PROBS = (0.8, 0.95)
BASELINES = ("law_huber", "law_mse", "parabola")


def split_final(table, hold=2):
    """Rows below the ``hold`` highest budgets, and the rows of those budgets."""
    from bench_isoflop_extrapolation import split

    train, test, _ = split(table, hold)
    return train, test


def base_methods():
    """Every estimator but ``stack`` (scored in a second pass, once its weights are known)."""
    from scalefit.isoflop._estimators import METHODS

    return [m for m in METHODS if m != "stack"]


def run_sweep(
    table, exp, *, n_boot, seed, split=None, methods=None, weights=(None, None), prior=None
):
    """Rolling-origin and final rows of ``methods`` on one sweep (``split``: (train, test)).

    ``weights``: the ``stack`` weights for the rolling origins and for the final budgets. With
    ``methods=None`` the candidates of ``decision_candidates.py`` are scored too (``prior``: the
    slope prior of ``vertex_eb``, from the other sweeps).
    """
    import decision_candidates as cand
    import pandas as pd

    from scalefit.isoflop._estimators import groups_of, pooled_sigma
    from scalefit.isoflop.decision import rolling_origins, score_origin

    base = methods is None
    methods = methods or base_methods()
    train, test = split or split_final(table)
    rolling = rolling_origins(train, methods, n_boot=n_boot, seed=seed, stack_weights=weights[0])
    sigma_ref = pooled_sigma(groups_of(table))
    final = score_origin(
        groups_of(train),
        groups_of(test),
        methods,
        sigma_ref=sigma_ref,
        n_boot=n_boot,
        seed=seed,
        stack_weights=weights[1],
    )
    if base:  # the candidates of issue 36 item 2, same origins and references
        rolling = pd.concat(
            [rolling, cand.rolling_origins(train, n_boot=n_boot, seed=seed, prior=prior)]
        )
        final = pd.concat([final, cand.score_origin(groups_of(train), groups_of(test),
                                                    sigma_ref=sigma_ref, n_boot=n_boot,
                                                    seed=seed, prior=prior)])  # fmt: skip
    rolling["phase"] = "rolling"
    final["phase"] = "final"
    out = pd.concat([rolling, final], ignore_index=True)
    out.insert(0, "experiment", exp)
    return out


#: Gemstones' compute levels: every 0.2 dex (10^18.6 .. 10^21.2 FLOPs).
GEM_LEVELS = tuple(10 ** (18.6 + 0.2 * k) for k in range(14))
GEM_ID = "gemstones__cool_end"


def gemstones_profiles(table, levels=GEM_LEVELS):
    """IsoFLOP profiles from Gemstones' cooldown finals: per level C, each shape at T = C/(6N).

    Each shape's loss is interpolated linearly in ``ln T`` between its cooldown ends, and only
    where ``C/(6N)`` lies inside that shape's observed token range (no extrapolation). One shape
    gives a point at several levels: those points are correlated (one training run).
    """
    import numpy as np
    import pandas as pd

    rows = []
    for run, r in table.groupby("run", sort=True):
        r = r.sort_values("tokens")
        n = float(r["params"].iloc[0])
        lt, y = np.log(r["tokens"].to_numpy(float)), r["loss"].to_numpy(float)
        for c in levels:
            x = np.log(c / (6 * n))
            if lt[0] <= x <= lt[-1]:
                rows.append(
                    {"run": run, "params": n, "tokens": c / (6 * n), "budget": c,
                     "loss": float(np.interp(x, lt, y))}
                )  # fmt: skip
    return pd.DataFrame(rows)


def gemstones_split(profiles):
    """Levels with 4+ shapes; the two highest whose runs bracket a minimum are held out.

    Returns ``(train, test, notes)``: train is every usable level below the first held-out one.
    Levels above the held-out ones (their runs all 1-2B parameters, loss still falling with
    size: no vertex inside the sampled sizes, so nothing to score) are reported and unused.
    """
    import numpy as np

    from scalefit.isoflop._estimators import MIN_RUNS, groups_of, pooled_sigma, reference

    counts = profiles.groupby("budget")["run"].size()
    keep = profiles[profiles["budget"].isin(counts[counts >= MIN_RUNS].index)]
    groups = groups_of(keep)
    sigma = pooled_sigma(groups)
    has_ref = [np.isfinite(reference(g, sigma).x) for g in groups]
    idx = [i for i, ok in enumerate(has_ref) if ok][-2:]
    cut, hold = np.exp(groups[idx[0]].logc), [np.exp(groups[i].logc) for i in idx]
    above = [np.exp(g.logc) for g in groups[idx[-1] + 1 :]]
    train = keep[keep["budget"] < cut * 0.999].reset_index(drop=True)
    test = keep[np.isclose(keep["budget"].to_numpy()[:, None], hold, rtol=1e-6).any(1)]
    notes = {
        "levels": len(groups),
        "held_out": hold,
        "unused_above": above,
        "with_reference": int(sum(has_ref)),
    }
    return train, test.reset_index(drop=True), notes


def stack_weights(frame):
    """Leave-one-sweep-out weights per sweep, and the all-sweep weights (rolling rows only)."""
    from scalefit.isoflop.decision import fit_stack_weights

    roll = frame[(frame["phase"] == "rolling") & frame["err"].notna()]
    loso = {
        e: fit_stack_weights(roll[roll["experiment"] != e], group="experiment")
        for e in roll["experiment"].unique()
    }
    return loso, fit_stack_weights(roll, group="experiment")


#: Sweeps that share their runs or their ladder (one source each in ``vertex_eb``'s prior):
#: the two extractions of Hoffmann et al.'s runs, the two scales of Llama 3's points, Marin's
#: three data sets trained on one ladder.
SOURCES = {"massivetext__chinchilla": "chinchilla", "llama_3__": "llama_3", "marin_": "marin"}


def source_of(experiment: str) -> str:
    """The source a sweep's prior must leave out with it (:data:`SOURCES`, else the sweep)."""
    return next((v for k, v in SOURCES.items() if k in experiment), experiment)


def slope_priors(tables):
    """``vertex_eb``'s slope prior per sweep (from the OTHER sources), and all sources' prior.

    Only the budgets below each sweep's two final ones enter (``split_final``); a source's
    sweeps enter as one ``(slope, variance)``: their means.
    """
    import decision_candidates as cand
    import numpy as np

    from scalefit.isoflop._estimators import groups_of

    slopes = {e: cand.sweep_slope(groups_of(split_final(t)[0])) for e, t in tables.items()}
    by_source = {}
    for e, av in slopes.items():
        by_source.setdefault(source_of(e), []).append(av)
    pooled = {s: tuple(np.mean(v, axis=0)) for s, v in by_source.items()}
    loso = {
        e: cand.slope_prior([av for s, av in pooled.items() if s != source_of(e)]) for e in slopes
    }
    return slopes, loso, cand.slope_prior(list(pooled.values()))


def run_gemstones(*, n_boot, seed, weights=None, prior=None):
    """Gemstones' IsoFLOP profiles through the same protocol (or None without its files)."""
    from scalefit import datasets

    try:
        cool = datasets.load("gemstones", file="cool_end", download=False)
    except datasets.TableNotFound:
        return None, None
    prof = gemstones_profiles(cool)
    train, test, notes = gemstones_split(prof)
    import pandas as pd

    both = pd.concat([train, test])
    frame = run_sweep(both, GEM_ID, n_boot=n_boot, seed=seed, split=(train, test), prior=prior)
    stacked = run_sweep(both, GEM_ID, n_boot=n_boot, seed=seed, split=(train, test),
                        methods=["stack"], weights=(weights, weights))  # fmt: skip
    return pd.concat([frame, stacked], ignore_index=True), notes


def check_parabola(table, frame, exp):
    """Our ``parabola`` estimator is Approach 2 as the package runs it (same N* at the finals)."""
    import warnings

    import numpy as np

    from scalefit.isoflop import approach2

    train, _ = split_final(table)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = approach2(train, method="parabola")
    row = res.exponents.loc["params"]
    f = frame[(frame["phase"] == "final") & (frame["method"] == "parabola")]
    want = row["intercept"] + row["exponent"] * np.log(f["budget"].to_numpy())
    if not np.allclose(f["pred"].to_numpy(), want, atol=1e-8):
        raise AssertionError(f"{exp}: parabola estimator differs from approach2")


def calibrate(frame):
    """Pooled and own calibrations per method from the rolling rows; adds s_mis_* columns."""
    import numpy as np

    from scalefit.isoflop.decision import MIN_OWN, fit_calibration

    roll = frame[frame["phase"] == "rolling"]
    pooled, own = {}, {}
    for m in frame["method"].unique():
        pooled[m] = fit_calibration(roll, method=m, source="pooled", group="experiment")
        for exp, sub in roll[roll["method"] == m].groupby("experiment"):
            if np.isfinite(sub["err"]).sum() >= MIN_OWN:
                own[m, exp] = fit_calibration(sub, method=m, source="own", floor=False)
    frame = frame.copy()
    frame["s_mis_pooled"] = [
        float(pooled[m].s_misfit(d))
        for m, d in zip(frame["method"], frame["distance"], strict=True)
    ]
    frame["s_mis_own"] = [
        float(own.get((m, e), pooled[m]).s_misfit(d))
        for m, e, d in zip(frame["method"], frame["experiment"], frame["distance"], strict=True)
    ]
    return frame, pooled, own


def coverage_columns(frame):
    """Coverage flags (1/0, NaN without a reference) at each probability and interval kind."""
    import numpy as np
    from scipy import stats

    frame = frame.copy()
    ok = np.isfinite(frame["err"])
    sp2 = np.nan_to_num(frame["s_param"]) ** 2
    sr2 = np.nan_to_num(frame["s_ref"]) ** 2
    for kind, s2 in (
        ("param", sp2),
        ("pooled", sp2 + frame["s_mis_pooled"] ** 2),
        ("own", sp2 + frame["s_mis_own"] ** 2),
    ):
        for p in PROBS:
            z = stats.norm.ppf(0.5 + p / 2)
            tag = f"{100 * p:g}"
            e = frame["err"].abs()
            frame[f"cov{tag}_{kind}"] = np.where(
                ok, (e <= z * np.sqrt(s2 + sr2)).astype(float), np.nan
            )
            frame[f"cov{tag}_{kind}_plain"] = np.where(
                ok, (e <= z * np.sqrt(s2)).astype(float), np.nan
            )
    return frame


def summarise(frame):
    """Per phase and method: sweep-mean |err|, regret, coverage (pooled over budgets)."""
    import numpy as np
    import pandas as pd

    rows = []
    cov = [c for c in frame.columns if c.startswith("cov")]
    for (phase, m), sub in frame.groupby(["phase", "method"], sort=False):
        ref = sub[np.isfinite(sub["err"])]
        per = ref.groupby("experiment")
        row = {
            "phase": phase,
            "method": m,
            "n_scored": len(sub),
            "n_ref": len(ref),
            "abs_err": float(per["err"].apply(lambda e: e.abs().mean()).mean()),
            "abs_err_pooled": float(ref["err"].abs().mean()),
            "regret": float(per["regret"].mean().mean()),
            "regret_rel": float(per["regret_rel"].mean().mean()),
        }
        row.update({c: float(ref[c].mean()) for c in cov})
        rows.append(row)
    return pd.DataFrame(rows)


def choose(summary, among=None):
    """Lowest rolling-origin mean |error| (ties: regret), over ``among`` (default: every method)."""
    roll = summary[summary["phase"] == "rolling"].sort_values(["abs_err", "regret"])
    if among is not None:
        roll = roll[roll["method"].isin(among)]
    return str(roll.iloc[0]["method"])


def _short(experiment: str) -> str:
    """A sweep's name short enough for an axis label (``llama 3 raw``, ``marin dclm``)."""
    source, data = experiment.split("__")[:2]
    name = {"epochai_chinchilla": "epochai", "llama_3": "llama 3", "marin_202603": "marin"}
    extra = data.split("_")[0] if source in ("llama_3", "marin_202603") else ""
    return f"{name.get(source, source)} {extra}".strip()


def figure(frame, summary, pooled, chosen, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from scalefit.core._io import atomic_savefig

    fig, axes = plt.subplots(1, 3, figsize=(16, 8.5))
    ax = axes[0]
    meths = list(summary[summary["phase"] == "rolling"].sort_values("abs_err")["method"])
    y = np.arange(len(meths))
    for off, phase, col in ((-0.2, "rolling", "tab:blue"), (0.2, "final", "tab:orange")):
        s = summary[summary["phase"] == phase].set_index("method").reindex(meths)
        ax.barh(y + off, s["abs_err"], height=0.38, color=col, label=f"{phase} budgets")
    ax.set_yticks(y, [m + (" (chosen)" if m == chosen else "") for m in meths], fontsize=8)
    ax.invert_yaxis()
    par = summary[(summary["phase"] == "final") & (summary["method"] == "parabola")]["abs_err"]
    ax.axvline(float(par.iloc[0]), color="k", lw=0.8, ls="--", label="parabola, final budgets")
    ax.set_xlabel("mean |ln N* error| (mean over sweeps)")
    ax.set_title("Point estimate: rolling origins choose, final budgets score", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="x")

    ax = axes[1]
    roll = frame[(frame["phase"] == "rolling") & (frame["method"] == chosen)]
    fin = frame[(frame["phase"] == "final") & (frame["method"] == chosen)]
    ax.scatter(roll["distance"], roll["err"].abs(), s=12, alpha=0.6, label="rolling origins")
    ax.scatter(fin["distance"], fin["err"].abs(), s=28, marker="D", label="final budgets")
    d = np.linspace(0, max(3.0, float(frame["distance"].max())), 100)
    ax.plot(d, 1.96 * pooled[chosen].s_misfit(d), "k-", label="1.96 x s_misfit(d), pooled fit")
    ax.set_xlabel("extrapolation distance d = ln(C / C_max train)")
    ax.set_ylabel(f"|ln N* error| of {chosen}")
    ax.set_title("Misfit term fitted on rolling origins only", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)

    ax = axes[2]
    fin = frame[(frame["phase"] == "final") & (frame["method"] == chosen)].reset_index(drop=True)
    lab = [f"{_short(e)} {b:.2g}" for e, b in zip(fin["experiment"], fin["budget"], strict=True)]
    yy = np.arange(len(fin))
    s_tot = np.sqrt(np.nan_to_num(fin["s_param"]) ** 2 + fin["s_mis_pooled"] ** 2)
    s_par = np.nan_to_num(fin["s_param"])
    ax.errorbar(
        fin["err"], yy, xerr=1.96 * s_tot, fmt="o", ms=3, capsize=2, label="95 % calibrated"
    )
    ax.errorbar(
        fin["err"],
        yy + 0.25,
        xerr=1.96 * s_par,
        fmt="none",
        ecolor="tab:red",
        label="95 % parameters only",
    )
    ax.errorbar(
        np.zeros(len(fin)),
        yy - 0.25,
        xerr=1.96 * np.nan_to_num(fin["s_ref"]),
        fmt="none",
        ecolor="0.5",
        label="reference +/- 1.96 s_ref",
    )
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(yy, lab, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel(f"ln N*_pred - ln N*_ref ({chosen}), final held-out budgets")
    ax.set_title("Final budgets: error and its intervals", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)


def print_gemstones(gem, summary):
    """Gemstones' scores per phase and method, and its scored levels."""
    for phase in ("rolling", "final"):
        s = summary[summary["phase"] == phase].sort_values("abs_err")
        cols = ["method", "n_scored", "n_ref", "abs_err", "regret", "regret_rel"]
        cols += ["cov80_pooled", "cov95_pooled", "cov80_pooled_plain", "cov95_pooled_plain"]
        cols += ["cov80_param", "cov95_param"]
        print(f"\n{GEM_ID}, {phase}:\n" + s[cols].to_string(index=False, float_format="%.3f"))
    one = gem[gem["method"] == gem["method"].iloc[0]]
    cols = ["phase", "origin", "budget", "distance", "ref", "s_ref"]
    print("\nscored levels:\n" + one[cols].to_string(index=False, float_format="%.3g"))


def main(argv=None) -> int:
    from _harness import header, loadavg, pin_threads

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boot", type=int, default=30, help="run-bootstrap resamples for s_param")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--experiments", default="", help="comma-separated ids (default: all)")
    ap.add_argument("--out", default="decision.csv")
    ap.add_argument("--figure", default="decision.png")
    args = ap.parse_args(argv)
    header(
        "Decision benchmark: N* at held-out budgets of the public IsoFLOP sweeps", pin_threads(1)
    )

    import pandas as pd

    from scalefit import datasets
    from scalefit.core._io import atomic_write_csv

    ids = [e for e in args.experiments.split(",") if e] or list(
        datasets.isoflop_experiments()["experiment"]
    )
    t0 = time.perf_counter()
    frames = []
    tables = {exp: datasets.load("isoflops", experiment=exp) for exp in ids}
    slopes, priors, prior_all = slope_priors(tables)
    print("vertex_eb: each sweep's training slope (variance) and the prior from the others:")
    for exp, (a, v) in slopes.items():
        print(f"    {exp}: {a:.4f} ({v:.2e}); prior {priors[exp][0]:.4f} "
              f"(sd {priors[exp][1] ** 0.5:.4f})")  # fmt: skip
    for exp, table in tables.items():
        f = run_sweep(table, exp, n_boot=args.boot, seed=args.seed, prior=priors[exp])
        check_parabola(table, f, exp)
        frames.append(f)
        n_roll = int((f["phase"] == "rolling").sum() / f["method"].nunique())
        took = time.perf_counter() - t0
        print(
            f"{exp}: {n_roll} rolling budgets scored, {took:.0f} s (load {loadavg()})", flush=True
        )
    loso, w_all = stack_weights(pd.concat(frames, ignore_index=True))
    print("stack weights, leave-one-sweep-out (for each sweep's rolling origins):")
    for exp, w in loso.items():
        print(f"    {exp}: " + ", ".join(f"{k} {v:.3f}" for k, v in w.items()))
    print("stack weights from all sweeps' rolling origins (final budgets; STACK_WEIGHTS):")
    for k, v in w_all.items():
        print(f"    {k!r}: {v:.4f},")
    for exp in ids:
        frames.append(run_sweep(tables[exp], exp, n_boot=args.boot, seed=args.seed,
                                methods=["stack"], weights=(loso[exp], w_all)))  # fmt: skip
    print(f"stack scored: {time.perf_counter() - t0:.0f} s (load {loadavg()})", flush=True)
    frame, pooled, own = calibrate(pd.concat(frames, ignore_index=True))
    frame = coverage_columns(frame)
    summary = summarise(frame)
    chosen = choose(summary)
    library = choose(summary, among=base_methods() + ["stack"])
    gem, gem_notes = run_gemstones(n_boot=args.boot, seed=args.seed, weights=w_all,
                                   prior=prior_all)  # fmt: skip
    if gem is not None:  # beside the sweeps: scored with the sweeps' pooled calibration only
        for col in ("s_mis_pooled", "s_mis_own"):
            gem[col] = [
                float(pooled[m].s_misfit(d))
                for m, d in zip(gem["method"], gem["distance"], strict=True)
            ]
        gem = coverage_columns(gem)
        gem_summary = summarise(gem)
        print(f"\n{GEM_ID}: {gem_notes} ({time.perf_counter() - t0:.0f} s)")
    pd.set_option("display.width", 200)
    for phase in ("rolling", "final"):
        s = summary[summary["phase"] == phase].sort_values("abs_err")
        cols = ["method", "n_ref", "abs_err", "regret", "regret_rel"] + [
            c for c in s.columns if c.startswith("cov") and "own" not in c
        ]
        print(f"\n{phase} budgets:\n" + s[cols].to_string(index=False, float_format="%.3f"))
    print(f"\nchosen on the rolling origins: {chosen} (among the library's methods: {library})")
    print("pooled calibrations (s0, kappa, n_origins, n_scored):")
    for m, c in pooled.items():
        print(f"    {m!r}: ({c.s0:.4f}, {c.kappa:.4f}, {c.n_origins}, {c.n_scored}),")
    print(f"own calibrations: {sorted({e for _, e in own})} ({len(own)} method x sweep)")
    per = frame[(frame["phase"] == "final")].groupby(["method", "experiment"])["err"]
    print("\nfinal |ln N*| error per sweep:")
    print(per.apply(lambda e: e.abs().mean()).unstack().round(3).to_string())
    out = os.path.splitext(args.out)[0]
    atomic_write_csv(args.out, pd.concat([frame, gem], ignore_index=True))
    atomic_write_csv(out + "_summary.csv", summary)
    if gem is not None:
        print_gemstones(gem, gem_summary)
        atomic_write_csv(out + "_gemstones_summary.csv", gem_summary)
    folds = [("all sweeps", w_all)] + [(f"without {e}", w) for e, w in loso.items()]
    weights = pd.DataFrame([{"fold": f, **w} for f, w in folds])
    atomic_write_csv(out + "_stack_weights.csv", weights)
    cal = pd.DataFrame([{"method": m, **c.to_dict()} for m, c in pooled.items()])
    atomic_write_csv(out + "_calibration.csv", cal)
    figure(frame, summary, pooled, chosen, args.figure)
    print(f"wrote {args.out}, {out}_summary.csv, {out}_calibration.csv, {out}_stack_weights.csv, "
          f"{args.figure}")  # fmt: skip
    print(f"total {time.perf_counter() - t0:.0f} s; load average at end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
