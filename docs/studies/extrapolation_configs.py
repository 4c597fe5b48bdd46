"""Every calibration configuration tried for issue 14, scored on the same fits.

For each table and cut of :mod:`extrapolation_study` (least squares, 100 bootstrap resamples) or
of the Bayesian fitter (``--method bayes``; defaults, seed 0), the law is fitted once on the rows
below the cut; forward-validation residuals inside those training rows (point fits on the lowest
``1 - h`` of them, ``h`` in 0.1-0.5) are computed once; then each configuration below builds its
calibrated predictive from the training rows only and the held-out rows are scored (coverage at
50/80/95 %, mean 95 % width on log loss, mean log predictive density; the intervals and
coverages are exact for the mixture over draws, :func:`scalefit.fit.observation.score_holdout`).
``today`` is the uncalibrated predictive, the one ``scalefit fit/bayes --holdout --predictive
law`` scores: bootstrap draws x normal noise with the training RMSE, or the posterior draws x
Student-t noise with each draw's own sigma and nu.

Configurations (combinations of these switches):

* ``shift``: shift a held-out row of a model seen in training by that model's shrunken mean
  residual (and shrink its scatter), in the forward validation too; ``auto`` picks shift or no
  shift by the forward-validation likelihood;
* ``t``: Student-t predictive with nu estimated jointly with kappa (else normal);
* ``hold``: hold the scatter s(C) at its value at the edge of the data instead of extrapolating
  its trend gamma;
* ``box``: a second discrepancy term growing with the distance beyond the training range of
  each input of the law (log width/depth/tokens or log params/tokens), its own kappa by ML;
* ``inner5``: inner shares 0.1, 0.2, 0.3, 0.4, 0.5 instead of 0.15, 0.25, 0.35;
* ``auto``: picks shift, t and box by the forward-validation likelihood plus one per extra
  parameter (AIC).

Run::

    nice -n 10 python docs/studies/extrapolation_configs.py --method lsq \\
        --out docs/studies/results/extrapolation_configs_lsq.csv
    nice -n 10 python docs/studies/extrapolation_configs.py --method bayes \\
        --out docs/studies/results/extrapolation_configs_bayes.csv
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize, stats

from scalefit import fit
from scalefit.core._io import atomic_write_csv
from scalefit.experimental.extrapolation import _baseline
from scalefit.fit.discrepancy import _groups, _moments, _scatter, log_compute
from scalefit.fit.holdout import split_by_compute
from scalefit.fit.observation import score_holdout
from scalefit.laws import get_law

sys.path.insert(0, str(Path(__file__).parent))
from extrapolation_study import cases  # noqa: E402

PROBS = (0.5, 0.8, 0.95)
INNER_ALL = (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)
CONFIGS = {
    "A_shift_normal": {},
    "B_hold": {"hold": True},
    "C_t (shipped)": {"t": True},
    "D_hold_t": {"hold": True, "t": True},
    "E_noshift": {"shift": False},
    "F_hold_t_noshift": {"hold": True, "t": True, "shift": False},
    "G_inner5": {"inner": (0.1, 0.2, 0.3, 0.4, 0.5)},
    "H_hold_t_inner5": {"hold": True, "t": True, "inner": (0.1, 0.2, 0.3, 0.4, 0.5)},
    "I_box": {"box": True},
    "J_box_t": {"box": True, "t": True},
    "K_box_noshift": {"box": True, "shift": False},
    "L_box_t_noshift": {"box": True, "t": True, "shift": False},
    "M_box_hold": {"box": True, "hold": True},
    "N_hold_noshift": {"hold": True, "shift": False},
    "O_autoshift": {"shift": "auto"},
    "P_hold_autoshift": {"hold": True, "shift": "auto"},
    "Q_hold_t_autoshift": {"hold": True, "t": True, "shift": "auto"},
    "R_t_autoshift": {"t": True, "shift": "auto"},
    "S_auto": {"auto": True},
    "T_auto_hold": {"auto": True, "hold": True},
}


def prepare(name, tab, law, kw, cut, method):
    """The expensive part: the outer fit's draws and the forward-validation residuals."""
    lawo = get_law(law)
    train, test, _, _ = split_by_compute(tab, lawo, cut)
    if method == "lsq":
        res = fit(train, lawo, bootstrap=100, seed=0, progress=False, **kw)
    else:
        from scalefit.fit.bayes import fit_bayes

        res = fit_bayes(train, lawo, seed=0, progress=False)
    # today's predictive: the same draws, noise scale and tails as `holdout_check` /
    # `holdout_bayes(predictive="law")` score
    logmean, scale, nu = _baseline(res, test, method)
    full = fit(train, lawo, starts=64, seed=0, progress=False)
    inner = {}
    for h in INNER_ALL:
        tr, te, _, _ = split_by_compute(train, lawo, h)
        r1 = fit(tr, lawo, starts=64, seed=0, progress=False)
        inner[h] = {
            "r": np.log(te["loss"].to_numpy(float)) - np.log(r1.predict(te)),
            "lc": log_compute(te, lawo),
            "lcmax": float(log_compute(tr, lawo).max()),
            "tr": tr,
            "te": te,
            "tr_resid": np.log(tr["loss"].to_numpy(float)) - np.log(r1.predict(tr)),
        }
    return {
        "train": train,
        "test": test,
        "law": lawo,
        "mean": np.exp(logmean),
        "noise": {"sigma": scale, "nu": nu},
        "resid": np.log(train["loss"].to_numpy(float)) - np.log(full.predict(train)),
        "lc_train": log_compute(train, lawo),
        "lc_test": log_compute(test, lawo),
        "inner": inner,
        "group": _groups(train, lawo),
    }


def _keys(tab, group):
    return tab[list(group)].astype(str).agg("|".join, axis=1).to_numpy()


def _effects(resid, keys_tr, keys_x, tau, sw):
    t2, sw2 = tau**2, sw**2
    shift, keep = np.zeros(len(keys_x)), np.ones(len(keys_x))
    if t2 == 0:
        return shift, keep
    rho = t2 / (t2 + sw2)
    g = pd.DataFrame({"g": keys_tr, "r": resid}).groupby("g")["r"].agg(["mean", "size"])
    for i, k in enumerate(keys_x):
        if k in g.index:
            m, n = g.loc[k]
            w = n * t2 / (n * t2 + sw2)
            shift[i], keep[i] = w * m, 1 - rho * w
    return shift, keep


def _box(tr, x, inputs):
    d2 = np.zeros(len(x))
    for k in inputs:
        lo, hi = np.log(tr[k].to_numpy(float).min()), np.log(tr[k].to_numpy(float).max())
        v = np.log(x[k].to_numpy(float))
        d2 += np.clip(v - hi, 0, None) ** 2 + np.clip(lo - v, 0, None) ** 2
    return np.sqrt(d2)


def _ml(r, d, dx, s0, student, box):
    """ML of kappa (and kappa_box, nu) on forward-validation residuals."""

    def nll(th):
        k1 = np.exp(th[0])
        k2 = np.exp(th[1]) if box else 0.0
        sc = np.sqrt(s0**2 + k1**2 * d**2 + k2**2 * dx**2)
        if student:
            return -np.sum(stats.t.logpdf(r / sc, 1 + np.exp(th[-1])) - np.log(sc))
        return -np.sum(stats.norm.logpdf(r / sc) - np.log(sc))

    best = None
    for a0 in (-8, -5, -3):
        for b0 in (-8, -5, -3) if box else (None,):
            for c0 in (0.5, 1.5, 3.0) if student else (None,):
                x0 = [v for v in (a0, b0, c0) if v is not None]
                if len(x0) == 1:
                    sol = optimize.minimize_scalar(
                        lambda a: nll([a]), bounds=(-12, 2), method="bounded"
                    )
                    sol.x = np.atleast_1d(sol.x)
                else:
                    sol = optimize.minimize(
                        nll,
                        x0,
                        method="Nelder-Mead",
                        options={"xatol": 1e-6, "fatol": 1e-9, "maxiter": 4000},
                    )
                if best is None or sol.fun < best.fun:
                    best = sol
    k1 = float(np.exp(best.x[0]))
    k2 = float(np.exp(best.x[1])) if box else 0.0
    nu = min(float(1 + np.exp(best.x[-1])), 1e3) if student else None
    return (0.0 if k1 < 1e-5 else k1), (0.0 if k2 < 1e-5 else k2), nu


def calibrate(c, cfg):
    """Calibrated predictive of the held-out rows: (shift, sd, nu, info)."""
    if cfg.get("auto"):
        best = None
        for sh in (True, False):
            for t in (False, True):
                for box in (False, True):
                    o = _calibrate(c, {**cfg, "shift": sh, "t": t, "box": box})
                    aic = o[3]["inner_nll"] + int(t) + int(box)
                    if best is None or aic < best[0]:
                        best = (aic, o, f"shift={sh},t={t},box={box}")
        best[1][3]["chosen"] = best[2]
        return best[1]
    if cfg.get("shift") == "auto":
        a, b = _calibrate(c, {**cfg, "shift": True}), _calibrate(c, {**cfg, "shift": False})
        pick = a if a[3]["inner_nll"] <= b[3]["inner_nll"] else b
        pick[3]["chosen"] = f"shift={pick is a}"
        return pick
    return _calibrate(c, cfg)


def _calibrate(c, cfg):
    resid, lc = c["resid"], c["lc_train"]
    ref, lcmax = lc.mean(), lc.max()
    sigma, gamma = _scatter(resid, lc - ref)

    def scat(x):
        x = np.minimum(x, lcmax) if cfg.get("hold") else x
        return sigma * np.exp(gamma * (x - ref))

    ktr = _keys(c["train"], c["group"])
    sw, tau = _moments(resid, pd.Series(ktr))
    use_shift = cfg.get("shift", True)
    inputs = c["law"].inputs
    rs, ds, ss, dxs = [], [], [], []
    for h in cfg.get("inner", (0.15, 0.25, 0.35)):
        it = c["inner"][h]
        r, s0 = it["r"], scat(it["lc"])
        if use_shift:
            sh, kp = _effects(
                it["tr_resid"], _keys(it["tr"], c["group"]), _keys(it["te"], c["group"]), tau, sw
            )
            r, s0 = r - sh, s0 * np.sqrt(kp)
        rs.append(r)
        ds.append(np.clip(it["lc"] - it["lcmax"], 0, None))
        ss.append(s0)
        dxs.append(_box(it["tr"], it["te"], inputs))
    R, D, DX, S = (np.concatenate(v) for v in (rs, ds, dxs, ss))
    kappa, kx, nu = _ml(R, D, DX, S, cfg.get("t", False), cfg.get("box", False))
    sc = np.sqrt(S**2 + (kappa * D) ** 2 + (kx * DX) ** 2)
    z = R / sc
    inner_nll = -float(np.sum((stats.t.logpdf(z, nu) if nu else stats.norm.logpdf(z)) - np.log(sc)))
    kte = _keys(c["test"], c["group"])
    if use_shift:
        shift, keep = _effects(resid, ktr, kte, tau, sw)
    else:
        shift, keep = np.zeros(len(kte)), np.ones(len(kte))
    dx = _box(c["train"], c["test"], inputs)
    dc = np.clip(c["lc_test"] - lcmax, 0, None)
    sd = np.sqrt(scat(c["lc_test"]) ** 2 * keep + (kappa * dc) ** 2 + (kx * dx) ** 2)
    info = {"sigma": sigma, "gamma": gamma, "tau": tau, "kappa": kappa, "kappa_box": kx}
    return shift, sd, nu, {**info, "nu": nu, "inner_nll": inner_nll}


def score(logy, logmean, sd, nu):
    """Exact coverage, 95 % width and lpd of a location-scale predictive mixed over draws."""
    sc = score_holdout(np.exp(logy), logmean, sd, nu, probs=PROBS)
    out = {f"cov{round(100 * p)}": sc[f"coverage_{100 * p:g}"] for p in PROBS}
    out["width95"] = sc["width_log_95"]
    out["lpd"] = sc["lpd"]
    return out


def main() -> None:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", choices=["lsq", "bayes"], default="lsq")
    ap.add_argument("--tables", default="chinchilla,chinchilla_epoch,lm_grid_shakespeare,synthetic")
    ap.add_argument("--cuts", default="0.1,0.2,0.3")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    which = args.tables.split(",")
    rows = []
    for name, tab, law, kw in cases():
        if name.split()[0] not in which:
            continue
        for cut in (float(v) for v in args.cuts.split(",")):
            t0 = time.time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                c = prepare(name, tab, law, kw, cut, args.method)
            logy = np.log(c["test"]["loss"].to_numpy(float))
            logmean = np.log(c["mean"])
            base = {"dataset": name, "cut": cut, "method": args.method, "n_test": len(logy)}
            n = c["noise"]
            today = score(logy, logmean, n["sigma"], n["nu"])
            rows.append({**base, "config": "today", **today})
            for cname, cfg in CONFIGS.items():
                shift, sd, nu, info = calibrate(c, cfg)
                got = score(logy, logmean + shift[None, :], sd[None, :], nu)
                rows.append({**base, "config": cname, **got, **info})
            print(name, cut, f"{time.time() - t0:.0f} s", flush=True)
            atomic_write_csv(args.out, pd.DataFrame(rows))
    frame = pd.DataFrame(rows)
    today = frame[frame.config == "today"].set_index(["dataset", "cut"])
    summary = []
    for cname, g in frame[frame.config != "today"].groupby("config", sort=False):
        g = g.set_index(["dataset", "cut"])
        t = today.reindex(g.index)
        summary.append(
            {
                "config": cname,
                "cases": len(g),
                "cov95_not_lower": int((g.cov95 >= t.cov95).sum()),
                "width_within_2x": int((g.width95 <= 2 * t.width95).sum()),
                "lpd_not_worse": int((g.lpd >= t.lpd).sum()),
                "worst_lpd_change": float((g.lpd - t.lpd).min()),
                "mean_cov95": float(g.cov95.mean()),
                "mean_lpd": float(g.lpd.mean()),
            }
        )
    with pd.option_context("display.width", 200):
        print(pd.DataFrame(summary).to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
