"""Correlated checkpoints on the bundled curves: residual autocorrelation, rho, interval widths.

For each bundled curve file (``data/lm_wsd_curves.csv``, the CPU grid; with ``--gpu`` also
``data/lm_wsd_gpu_curves.csv``) this fits ``lr_annealing_params`` to every prepared checkpoint:

* the lag-1 autocorrelation of the residuals (log loss) within each run, in step order;
* the standard error of each parameter from the row-level sandwich (the old default) against the
  standard deviation of 200 run-bootstrap refits (the new default; a main run and its cooldown
  branches resampled together: ``main_run`` is the run name before ``/``), and both 95 % widths;
* with ``--bayes``, ``rho`` of the Bayesian fit with AR(1) errors within each run and an offset
  per main run (``fit_curves(..., bayes=True)``, two chains of ``--draws`` draws).

Run::

    python docs/studies/curves_correlation.py [--gpu] [--bayes] [--draws 300]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

import scalefit
from scalefit.curves import fit_curves, prepare, read_curves
from scalefit.curves.api import curve_table

ROOT = Path(__file__).resolve().parents[2]
LAW = "lr_annealing_params"


def lag1(tab, res, *, demean: bool) -> np.ndarray:
    """Lag-1 autocorrelation of the log residuals within each run (runs of 4 rows or more).

    ``demean``: about the run's own mean residual (the offset per run removed), else about 0
    (the run's offset counts as correlation too).
    """
    r = np.log(tab["loss"].to_numpy()) - np.log(res.predict(tab))
    out = []
    for _, idx in tab.groupby("run", sort=False).indices.items():
        e = r[idx][np.argsort(tab["step"].to_numpy()[idx])]
        if len(e) >= 4:
            e = e - e.mean() if demean else e
            out.append(float(np.sum(e[1:] * e[:-1]) / np.sum(e * e)))
    return np.asarray(out)


def study(path: Path, bayes: bool, draws: int) -> None:
    curves = read_curves(path)
    curves["main_run"] = curves["run"].str.split("/").str[0]
    prep = prepare(curves)
    tab = curve_table(prep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = scalefit.fit(tab, LAW, seed=0, progress=False)  # the old default's stderr
        t0 = time.perf_counter()
        boot = fit_curves(prep, LAW, cluster="main_run", seed=0, progress=False)
        t_boot = time.perf_counter() - t0
    print(f"\n{path.name}: {tab['run'].nunique()} runs ({curves['main_run'].nunique()} main), "
          f"{len(tab)} checkpoints; converged {rows.converged}")  # fmt: skip
    for demean, about in ((False, "about 0"), (True, "about each run's mean")):
        rho1 = lag1(tab, rows, demean=demean)
        print(
            f"lag-1 autocorrelation of residuals within a run ({about}): median "
            f"{np.median(rho1):+.2f}, quartiles {np.quantile(rho1, 0.25):+.2f} to "
            f"{np.quantile(rho1, 0.75):+.2f} ({len(rho1)} runs with 4+ checkpoints)"
        )
    print(f"run bootstrap: {boot.n_boot} refits in {t_boot:.0f} s")
    print(f"{'param':<8}{'value':>12}{'sandwich se':>14}{'run-boot sd':>14}{'ratio':>8}"
          f"{'95% width rows':>16}{'95% width runs':>16}")  # fmt: skip
    for name, value in boot.params.items():
        se, sd = rows.stderr[name], boot.stderr[name]
        lo, hi = boot.ci.get(name, (np.nan, np.nan))
        print(f"{name:<8}{value:>12.4g}{se:>14.3g}{sd:>14.3g}{sd / se:>8.2f}"
              f"{2 * 1.96 * se:>16.3g}{hi - lo:>16.3g}")  # fmt: skip
    if bayes:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fit_curves(prep, LAW, bayes=True, cluster="main_run", chains=2, draws=draws,
                             warmup=draws, seed=0, progress=False)  # fmt: skip
        a, d = res.diagnostics["ar1"], res.diagnostics
        print(
            f"Bayes AR(1): rho {a['rho']:.3f} (95% {a['rho_ci'][0]:.3f} to {a['rho_ci'][1]:.3f}) "
            f"per {a['spacing']:g} steps; divergences {d['divergences']}, R-hat max "
            f"{d['r_hat_max']:.3f}; {time.perf_counter() - t0:.0f} s"
        )
        for name in res.params:
            lo, hi = res.ci[name]
            print(f"  {name:<8} median {res.params[name]:.4g}  95% {lo:.4g} to {hi:.4g}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", action="store_true", help="also the GPU grid's curves")
    p.add_argument("--bayes", action="store_true", help="also the Bayesian AR(1) fit")
    p.add_argument("--draws", type=int, default=300, help="draws and warm-up per chain")
    args = p.parse_args()
    files = ["lm_wsd_curves.csv"] + (["lm_wsd_gpu_curves.csv"] if args.gpu else [])
    for name in files:
        study(ROOT / "data" / name, args.bayes, args.draws)


if __name__ == "__main__":
    main()
