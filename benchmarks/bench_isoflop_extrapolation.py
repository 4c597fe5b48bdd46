"""Extrapolation on the published IsoFLOP sweeps: scalefit against the peers, in one run.

For every experiment of ``scalefit.datasets.load("isoflops", experiment=...)`` the rows of the
``--hold`` highest budgets are held out; every method is fitted on the budgets below and
predicts, at each held-out budget, the loss of every held-out run and the compute-optimal
``N*`` (``T* = C / (6 N*)``). The reference optimum of a held-out budget is the vertex of a
parabola of loss against ``ln N`` through that budget's own runs (no reference where the vertex
falls outside the sampled sizes).

Methods (the Chinchilla law ``E + A/N^alpha + B/D^beta`` unless said otherwise):

* ``scalefit lsq {log,linear} {mse,huber}``: ``scalefit.fit`` (256 starts, Huber delta 1e-3)
  with ``--boot`` bootstrap resamples for the intervals (95 %: draws x normal noise of the
  training RMSE on log loss); the log-MSE fit is also scored with the calibrated predictive;
* ``scalefit bayes``: ``scalefit.fit.bayes.fit_bayes`` (Student-t likelihood, 4 chains,
  ``--bayes-draws`` draws after as many warm-up steps), scored with the calibrated predictive
  (``--no-bayes`` leaves it out);
* ``approach2 parabola`` / ``approach2 profile``: ``scalefit.isoflop.approach2`` on the training
  budgets, ``N*`` from the fitted power law (no loss prediction, no interval at a new budget);
* peers, each from the same 162-point grid of starts in Hoffmann et al.'s coordinates
  ``(log E, log A, log B, alpha, beta)``: ``scipy least_squares`` (Huber, ``f_scale`` 1e-3 on
  log loss: the plain reference), ``lmfit`` (``leastsq`` on log residuals: MSE) and the
  ``chinchilla`` package (PyPI, its BFGS on the mean log-Huber loss, delta 1e-3).

The Approach 3 rows are the law fits themselves (scalefit's and the peers'); their ``N*`` is the
closed-form optimum of the fitted law.

Columns of the table (``--out``): ``experiment, method, n_train, n_test, n_ref, mae_log``
(mean absolute error of log loss over the held-out runs), ``max_abs_log``, ``cov95_loss``
(share of held-out runs inside the 95 % predictive interval), ``nstar_log_err`` (mean
``|ln N*_pred - ln N*_ref|`` over held-out budgets with a reference; the ``T*`` error is the same
by construction), ``nstar_ratio`` (geometric mean of pred/ref), ``cov95_nstar``, ``obj_huber``
and ``obj_mse`` (training objective on log loss: sum of Huber delta 1e-3 and of squared
residuals, evaluated at each method's parameters), ``time_s`` and ``cpu_s`` of the point fit
(scalefit: a warm fit, after one untimed fit of the same rows) and ``time_total_s`` including
the intervals.

    SCALEFIT_DATA_DIR=../shared/data nice -n 10 python benchmarks/bench_isoflop_extrapolation.py \
        --out docs/studies/results/isoflop_extrapolation.csv --figure docs/img/peers.png
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

DELTA = 1e-3
PROB = 0.95
LSQ = [(r, lo) for r in ("log", "linear") for lo in ("mse", "huber")]
PEERS = ("scipy least_squares", "lmfit", "chinchilla (PyPI)")
GRID = {
    "e": (-1.0, 0.5),
    "a": (0.0, 10.0, 20.0),
    "b": (0.0, 10.0, 20.0),
    "alpha": (0.2, 0.6, 1.0),
    "beta": (0.2, 0.6, 1.0),
}


# ---- shared pieces ---------------------------------------------------------------------------


def split(table, hold: int):
    """Training rows (budgets below the cut) and held-out rows (the ``hold`` highest budgets)."""
    import numpy as np

    budgets = np.sort(table["budget"].unique())
    if len(budgets) <= hold + 2:
        raise ValueError(f"{len(budgets)} budgets: too few to hold out {hold}")
    cut = budgets[-hold]
    train = table[table["budget"] < cut].reset_index(drop=True)
    test = table[table["budget"] >= cut].reset_index(drop=True)
    return train, test, budgets[-hold:]


def reference_optima(test, budgets):
    """The library's reference optimum (:func:`scalefit.isoflop._estimators.reference`) per
    held-out budget: a parabola's vertex (NaN when not a minimum inside the sampled sizes)."""
    import numpy as np

    from scalefit.isoflop._estimators import Budget, reference

    out = []
    for c in budgets:
        rows = test[test["budget"] == c]
        n, t, y = (rows[k].to_numpy(float) for k in ("params", "tokens", "loss"))
        out.append(float(np.exp(reference(Budget(float(np.log(c)), n, t, y), np.nan).x)))
    return np.array(out)


def law_log(theta, n, d):
    """Log of the Chinchilla law in Hoffmann's coordinates ``(e, a, b, alpha, beta)``."""
    import numpy as np

    e, a, b, alpha, beta = theta
    return np.logaddexp(e, np.logaddexp(a - alpha * np.log(n), b - beta * np.log(d)))


def law_log_jac(theta, n, d):
    """Jacobian of :func:`law_log` in ``theta`` (rows x 5)."""
    import numpy as np

    e, a, b, alpha, beta = theta
    terms = np.stack([np.full(len(n), e), a - alpha * np.log(n), b - beta * np.log(d)], axis=1)
    w = np.exp(terms - terms.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    return np.stack([w[:, 0], w[:, 1], w[:, 2], -w[:, 1] * np.log(n), -w[:, 2] * np.log(d)], 1)


def params_of(theta) -> dict:
    import numpy as np

    e, a, b, alpha, beta = (float(v) for v in theta)
    return {"E": np.exp(e), "A": np.exp(a), "B": np.exp(b), "alpha": alpha, "beta": beta}


def theta_of(p) -> tuple:
    import numpy as np

    return (np.log(p["E"]), np.log(p["A"]), np.log(p["B"]), p["alpha"], p["beta"])


def objectives(p, train) -> tuple[float, float]:
    """Sum of Huber (delta 1e-3) and of squared residuals of log loss at parameters ``p``."""
    import numpy as np

    r = np.log(train["loss"].to_numpy(float)) - law_log(
        theta_of(p), train["params"].to_numpy(float), train["tokens"].to_numpy(float)
    )
    a = np.abs(r)
    huber = np.where(a <= DELTA, 0.5 * r**2, DELTA * (a - 0.5 * DELTA))
    return float(huber.sum()), float((r**2).sum())


def nstar(p, budgets):
    from scalefit.allocate import chinchilla_optimum

    n, _ = chinchilla_optimum(p["E"], p["A"], p["B"], p["alpha"], p["beta"], budgets)
    return n


def starts():
    return list(itertools.product(*GRID.values()))


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


# ---- methods: each returns (params or None, extras dict) -------------------------------------


def scalefit_lsq(train, test, residuals, loss, n_boot, seed):
    import numpy as np

    from scalefit import fit
    from scalefit.fit.observation import score_holdout

    kw = dict(residuals=residuals, loss=loss, delta=DELTA, seed=seed, progress=False)
    fit(train, "chinchilla", **kw)  # untimed: compile or load the programs for these rows
    res, wall, cpu = timed(lambda: fit(train, "chinchilla", **kw))
    out = {"time_s": wall, "cpu_s": cpu, "converged": bool(res.converged)}
    p = dict(res.params)
    if n_boot:
        t0 = time.perf_counter()
        boot = fit(train, "chinchilla", bootstrap=n_boot, **kw)
        d = np.asarray(boot.draws, dtype=float)
        d = d[np.all(np.isfinite(d), axis=1)]
        draws = [dict(zip(boot.params, row, strict=True)) for row in d]
        logmean = np.array(
            [
                law_log(theta_of(q), test["params"].to_numpy(), test["tokens"].to_numpy())
                for q in draws
            ]
        )
        scale = float(boot.metrics["rmse_log"])
        out["cov95_loss"] = score_holdout(test["loss"], logmean, scale, probs=(PROB,))[
            "coverage_95"
        ]
        out["_nstar_draws"] = draws
        if residuals == "log" and loss == "mse":
            out["calibrated"] = _calibrated(boot, train, test, seed)
        out["time_total_s"] = wall + time.perf_counter() - t0
    return p, out


def _calibrated(res, train, test, seed):
    from scalefit.fit.discrepancy import fit_discrepancy, predictive_sims
    from scalefit.fit.observation import score_holdout

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        disc = fit_discrepancy(train, "chinchilla", seed=seed)
    _, logmean, sd = predictive_sims(res, test, disc, seed=seed)
    return score_holdout(test["loss"], logmean, sd[None, :], disc.nu, probs=(PROB,))["coverage_95"]


def scalefit_bayes(train, test, seed, draws=1000):
    import numpy as np

    from scalefit.core.errors import ConvergenceWarning
    from scalefit.fit.bayes import fit_bayes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res, wall, cpu = timed(
            lambda: fit_bayes(
                train, "chinchilla", seed=seed, draws=draws, warmup=draws, progress=False
            )
        )
        t0 = time.perf_counter()
        cov = _calibrated(res, train, test, seed)
    d = np.asarray(res.draws, dtype=float)
    idx = np.linspace(0, len(d) - 1, min(1000, len(d))).astype(int)
    draws = [dict(zip(res.params, row, strict=True)) for row in d[idx]]
    extras = {"time_s": wall, "cpu_s": cpu, "cov95_loss": cov, "_nstar_draws": draws}
    extras["time_total_s"] = wall + time.perf_counter() - t0
    return dict(res.params), extras


def approach2_line(train, method):
    import numpy as np

    from scalefit.isoflop import approach2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res, wall, cpu = timed(lambda: approach2(train, method=method))
    row = res.exponents.loc["params"]
    a, icpt = float(row["exponent"]), float(row["intercept"])
    return None, {
        "time_s": wall,
        "cpu_s": cpu,
        "_nstar_fn": lambda c: np.exp(icpt + a * np.log(c)),
    }


def _arrays(train):
    import numpy as np

    n, d = train["params"].to_numpy(float), train["tokens"].to_numpy(float)
    return n, d, np.log(train["loss"].to_numpy(float))


def peer_scipy(train):
    from scipy.optimize import least_squares

    n, d, logy = _arrays(train)

    def run():
        best = None
        for x0 in starts():
            r = least_squares(
                lambda t: logy - law_log(t, n, d),
                x0,
                jac=lambda t: -law_log_jac(t, n, d),
                loss="huber",
                f_scale=DELTA,
                method="trf",
            )
            if best is None or r.cost < best.cost:
                best = r
        return best.x

    theta, wall, cpu = timed(run)
    return params_of(theta), {"time_s": wall, "cpu_s": cpu}


def peer_lmfit(train):
    import lmfit

    n, d, logy = _arrays(train)
    names = list(GRID)

    def resid(pars):
        return logy - law_log([pars[k].value for k in names], n, d)

    def run():
        best = None
        for x0 in starts():
            pars = lmfit.Parameters()
            for k, v in zip(names, x0, strict=True):
                pars.add(k, value=v)
            r = lmfit.minimize(resid, pars, method="leastsq")
            if best is None or r.chisqr < best.chisqr:
                best = r
        return [best.params[k].value for k in names]

    theta, wall, cpu = timed(run)
    return params_of(theta), {"time_s": wall, "cpu_s": cpu}


def peer_chinchilla(train):
    import logging

    from chinchilla import Chinchilla
    from chinchilla._metrics import log_huber

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("chinchilla").setLevel(logging.ERROR)
        cc = Chinchilla(
            tmp,
            param_grid={k: list(v) for k, v in GRID.items()},
            loss_fn=functools.partial(log_huber, delta=DELTA),
            log_level=50,
        )
        for n, d, y in train[["params", "tokens", "loss"]].itertuples(index=False):
            cc.database.append(N=n, D=d, loss=y)
        _, wall, cpu = timed(lambda: cc.fit(parallel=False))
        return dict(cc.get_params()), {"time_s": wall, "cpu_s": cpu}


# ---- one experiment --------------------------------------------------------------------------


def score(name, p, extras, train, test, budgets, ref):
    """One table row: errors, coverage, objective and time of one method."""
    import numpy as np

    y = test["loss"].to_numpy(float)
    row = {"method": name, "n_train": len(train), "n_test": len(test)}
    row["n_ref"] = int(np.isfinite(ref).sum())
    if p is not None:
        err = np.log(y) - law_log(theta_of(p), test["params"].to_numpy(), test["tokens"].to_numpy())
        row.update(mae_log=float(np.mean(np.abs(err))), max_abs_log=float(np.max(np.abs(err))))
        row["obj_huber"], row["obj_mse"] = objectives(p, train)
        pred = nstar(p, budgets)
    else:
        pred = extras["_nstar_fn"](budgets)
    ok = np.isfinite(ref)
    lr = np.log(pred[ok]) - np.log(ref[ok])
    row["nstar_log_err"] = float(np.mean(np.abs(lr))) if ok.any() else np.nan
    row["nstar_ratio"] = float(np.exp(np.mean(lr))) if ok.any() else np.nan
    draws = extras.get("_nstar_draws")
    if draws and ok.any():
        dn = np.array([nstar(q, budgets[ok]) for q in draws])
        lo, hi = np.quantile(dn, [(1 - PROB) / 2, (1 + PROB) / 2], axis=0)
        row["cov95_nstar"] = float(np.mean((ref[ok] >= lo) & (ref[ok] <= hi)))
    for k in ("cov95_loss", "time_s", "cpu_s", "time_total_s", "converged"):
        if k in extras:
            row[k] = extras[k]
    row.setdefault("time_total_s", row["time_s"])
    return row


def run_experiment(
    table, experiment, *, hold=2, methods=None, n_boot=50, seed=0, bayes_draws=1000, log=print
):
    """Every selected method on one experiment; a list of table rows (dicts)."""
    train, test, budgets = split(table, hold)
    ref = reference_optima(test, budgets)
    rows = []

    def add(name, fn):
        if methods is not None and name not in methods:
            return None
        try:
            p, extras = fn()
        except Exception as exc:  # noqa: BLE001 - a method that fails is a result, reported
            log(f"  {name}: failed ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")
            rows.append({"experiment": experiment, "method": name, "error": type(exc).__name__})
            return None
        row = {"experiment": experiment, **score(name, p, extras, train, test, budgets, ref)}
        rows.append(row)
        log(f"  {name:<28} mae_log {row.get('mae_log', float('nan')):.4f}  "
            f"N* err {row['nstar_log_err']:.3f}  time {row['time_s']:.2f} s")  # fmt: skip
        return extras

    for residuals, loss in LSQ:
        ex = add(
            f"scalefit lsq {residuals} {loss}",
            lambda r=residuals, lo=loss: scalefit_lsq(train, test, r, lo, n_boot, seed),
        )
        if ex and "calibrated" in ex:
            rows[-1]["cov95_loss_calibrated"] = ex["calibrated"]
    add("scalefit bayes", lambda: scalefit_bayes(train, test, seed, bayes_draws))
    add("approach2 parabola", lambda: approach2_line(train, "parabola"))
    add("approach2 profile", lambda: approach2_line(train, "profile"))
    add("scipy least_squares", lambda: peer_scipy(train))
    add("lmfit", lambda: peer_lmfit(train))
    add("chinchilla (PyPI)", lambda: peer_chinchilla(train))
    return rows


# ---- figure and command line -----------------------------------------------------------------


def figure(frame, path):
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from scalefit.core._io import atomic_savefig

    exps = list(dict.fromkeys(frame["experiment"]))
    meths = list(dict.fromkeys(frame["method"]))
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5), sharey=True)
    for ax, col, label in (
        (axes[0], "mae_log", "held-out loss: mean |log error|"),
        (axes[1], "nstar_log_err", "held-out budgets: mean |ln N* error|"),
    ):
        for j, m in enumerate(meths):
            sub = frame[frame["method"] == m].set_index("experiment").reindex(exps)
            vals = sub[col].to_numpy(float) if col in sub else np.full(len(exps), np.nan)
            ax.scatter(vals, np.arange(len(exps)) + (j - len(meths) / 2) * 0.07, s=18, label=m)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_yticks(range(len(exps)), [e.replace("__", " ") for e in exps], fontsize=7)
    axes[1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)


def main(argv=None) -> int:
    from _harness import header, loadavg, pin_threads

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hold", type=int, default=2, help="highest budgets held out (default 2)")
    ap.add_argument("--boot", type=int, default=50, help="bootstrap resamples (0: no intervals)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--experiments", default="", help="comma-separated ids (default: all)")
    ap.add_argument("--no-bayes", action="store_true", help="leave out the Bayesian fit")
    ap.add_argument(
        "--bayes-draws", type=int, default=1000, help="NUTS draws and warm-up steps per chain"
    )
    ap.add_argument("--out", default="isoflop_extrapolation.csv")
    ap.add_argument("--figure", default="isoflop_extrapolation.png")
    ap.add_argument("--replot", metavar="CSV", help="only redraw the figure from a written table")
    args = ap.parse_args(argv)
    if args.replot:
        import pandas as pd

        figure(pd.read_csv(args.replot), args.figure)
        print(f"wrote {args.figure}")
        return 0
    threads = pin_threads(args.threads)
    header("IsoFLOP extrapolation: scalefit against the peers", threads)

    import pandas as pd

    from scalefit import datasets
    from scalefit.core._io import atomic_write_csv

    ids = [e for e in args.experiments.split(",") if e] or list(
        datasets.isoflop_experiments()["experiment"]
    )
    rows = []
    t0 = time.perf_counter()
    for exp in ids:
        print(f"{exp} (load {loadavg()})", flush=True)
        table = datasets.load("isoflops", experiment=exp)
        methods = None
        if args.no_bayes:
            methods = {f"scalefit lsq {r} {lo}" for r, lo in LSQ} | {
                "approach2 parabola", "approach2 profile", *PEERS
            }  # fmt: skip
        rows += run_experiment(
            table,
            exp,
            hold=args.hold,
            methods=methods,
            n_boot=args.boot,
            seed=args.seed,
            bayes_draws=args.bayes_draws,
        )
    frame = pd.DataFrame(rows)
    atomic_write_csv(args.out, frame)
    figure(frame, args.figure)
    print(f"wrote {args.out}\nwrote {args.figure}")
    print(f"total {time.perf_counter() - t0:.0f} s; load average at end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
