"""Reproduction-report section: least-squares fits beside Liu et al., Hoffmann et al., Epoch AI
and Fahim & Karim. Everything is computed when called (seeded); nothing here is a stored result.
"""

from __future__ import annotations

import math
import warnings

BOOT = 1000

# Published values (papers' own numbers; sources in the table).
LIU = {"a_width": (0.98, 0.08), "a_depth": (1.2, 0.3), "a_tokens": (0.30, 0.01)}
HOFFMANN = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
EPOCH = {"E": 1.82, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658}
FAHIM = {
    "kappa": (2.43, 2.09, 2.77),
    "alpha": (0.22, -0.21, 0.65),
    "gamma": (0.18, 0.05, 0.31),
    "mu": (0.35, 0.12, 0.58),
}


def _fit(*args, **kw):
    from scalefit import fit
    from scalefit.core.errors import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit(*args, progress=False, **kw)


def _ci(res, k, digits=4):
    lo, hi = res.ci[k]
    return f"{res.params[k]:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"


def liu_rows(data_dir: str) -> list[str]:
    """Liu et al.'s decomposed fit on the 203-row Chinchilla table."""
    from scalefit.datasets import load

    tab = load("chinchilla", data_dir, drop_highest=40)
    res = _fit(tab, "decomposed", bootstrap=BOOT, seed=0)
    n = len(tab)
    cmd = "`scalefit fit chinchilla --drop-highest 40 --law decomposed --bootstrap 1000 --seed 0`"
    rows = []
    for k, label in (("a_width", "a_W"), ("a_depth", "a_ℓ"), ("a_tokens", "a_T")):
        v, e = LIU[k]
        rows.append(
            f"| Liu et al. {label} (decomposed, 203 rows) | {v} ± {e} (how ± was computed: "
            "not stated) | "
            f"{_ci(res, k)} (95% bootstrap); asymptotic SE {res.stderr[k]:.2g} | {cmd} | "
            "see notes 1, 2 |"
        )
    rows.append(
        f"| Liu et al. mean relative error | 0.4% | {res.metrics['mean_rel_err']:.3%} "
        f"| {cmd} | converged optimum: sum of squared log residuals {res.objective:.6g} "
        f"over {n} rows (mean {res.objective / n:.4g}, RMS {math.sqrt(res.objective / n):.3g}); "
        f"{res.diagnostics['n_best']}/{res.diagnostics['n_starts']} starts reach it |"
    )
    lo, hi = res.ci["a_depth"]
    rows.append(
        f"| interval of a_ℓ | ±0.3 (method not stated; see note 2) | "
        f"bootstrap [{lo:.3f}, {hi:.3f}] "
        f"({res.n_boot} resamples, {res.diagnostics['boot_failed']} not converged) | "
        f"{cmd} | see note 2 |"
    )
    return rows


def chinchilla_rows(data_dir: str) -> list[str]:
    """Hoffmann et al.'s law on Epoch AI's data: Epoch's headline (≈ LAD) fit and the
    δ = 1e-3 summed-Huber fit."""
    from scalefit.datasets import load

    tab = load("chinchilla_epoch", data_dir, drop_highest=5)
    lad = _fit(tab, "chinchilla", loss="lad", bootstrap=BOOT, seed=0)
    hub = _fit(tab, "chinchilla", loss="huber", delta=1e-3, bootstrap=BOOT, seed=0)
    base = "`scalefit fit chinchilla_epoch --drop-highest 5 --law chinchilla"
    cmd_lad = f"{base} --loss lad --bootstrap 1000 --seed 0`"
    cmd_hub = f"{base} --loss huber --delta 1e-3 --bootstrap 1000 --seed 0`"
    rows = []
    for k in ("E", "A", "B", "alpha", "beta"):
        rows.append(
            f"| Chinchilla {k}, Epoch's headline fit (Huber likelihood with fitted scale "
            f"≈ least absolute deviations; ours: `lad`, 240 rows) | Epoch {EPOCH[k]} | "
            f"{_ci(lad, k)} | {cmd_lad} | see note 3 |"
        )
    for k in ("E", "A", "B", "alpha", "beta"):
        rows.append(
            f"| Chinchilla {k}, Huber δ = 1e-3 summed (240 rows) | Hoffmann {HOFFMANN[k]} "
            f"(Epoch's δ = 1e-3 fit: note 3) | {_ci(hub, k)} | {cmd_hub} | see note 3 |"
        )
    return rows


def fahim_rows(data_dir: str) -> list[str]:
    """Fahim & Karim's critical-depth ansatz on their own Table 6."""
    from scalefit.datasets import load

    tab = load("depth_delusion", data_dir)
    res = _fit(tab, "critical_depth", bootstrap=BOOT, seed=0)
    cmd = "`scalefit fit depth_delusion --law critical_depth --bootstrap 1000 --seed 0`"
    rows = []
    for k, (v, lo, hi) in FAHIM.items():
        rows.append(
            f"| Depth Delusion {k} | {v} [{lo}, {hi}] | {_ci(res, k)} | {cmd} | see note 4 |"
        )
    rows.append(f"| Depth Delusion R² | 0.922 | {res.metrics['r2']:.3f} | {cmd} | note 4 |")
    rows.append(
        f"| Depth Delusion RMSE (nats) | 0.113 | {res.metrics['rmse']:.3f} | {cmd} | note 4 |"
    )
    pw = _fit(tab, "critical_depth_power", bootstrap=200, seed=0)
    rows.append(
        f"| Depth Delusion a (ℓc = c·W^a) | 0.44 [0.38, 0.50] | {_ci(pw, 'a_crit')} "
        f"(200 resamples) | `scalefit fit depth_delusion --law critical_depth_power "
        f"--bootstrap 200` | note 4 |"
    )
    return rows


NOTES = """
1. Liu et al. fit with Adam for a fixed number of steps, which stops before the minimum; we run
   every fit (and every bootstrap resample, warm-started from the optimum plus 7 random starts)
   to a Newton-decrement convergence test. Our point values are the converged least-squares
   optimum of the same objective (squared error of log loss on the same 203 rows; a sum and a
   mean have the same optimum, and the objective we print is the sum).
2. The paper gives a_W = 0.98 ± 0.08, a_ℓ = 1.2 ± 0.3, a_T = 0.30 ± 0.01 without saying how
   the ± was computed or at what level (seed 000, "Key Designs" l. 26 and the results table
   l. 44-46); it is not stated to be an asymptotic standard error, so we do not call it one.
   Their public code (github.com/liuyz0/DepthScaling, named in seed 000 l. 4) computes it from
   200 bootstrap resamples of a short Adam run. Beside it we print our percentile bootstrap
   interval over resamples that each converge (warm start plus random starts), and our
   asymptotic standard error from the converged fit's Jacobian.
3. Hoffmann et al. fitted their own (unreleased) data. Epoch AI's headline values (Besiroglu et
   al. 2024: E 1.82, A 482.01, B 2085.43, α 0.3478, β 0.3658) come from a Huber *likelihood*
   whose scale is fitted too (≈ 5e-6 in log-loss units, so the fit is effectively least absolute
   deviations), not from the δ = 1e-3 summed-Huber procedure their paper describes; we set our
   `lad` fit beside them. Our `huber` δ = 1e-3 fit (5 highest losses dropped, summed over
   log-loss residuals, LSE-equivalent coordinates) corresponds to Epoch's *other*, δ = 1e-3 fit;
   on that objective we reach a value at least as low as a reimplementation of their 4,500-start
   L-BFGS-B grid (`tests/fit/test_epoch_grid.py`, opt-in).
4. The paper reports neither its fitting objective nor its starting points, nor per-row token
   counts for the 12 large-scale models (we assume tokens = 20 · params; see data/README.md), and
   one row's parameter count is inconsistent with its shape (data/README.md). With tokens nearly
   collinear with params in this table, the A/B/α/δ terms trade off (our fit warns about it), so
   the intervals are wide; κ, γ and μ depend on the handful of rows past the critical depth.
"""


def section(data_dir: str) -> str:
    """Markdown for the least-squares part of the reproduction report."""
    head = (
        "| quantity | paper | ours (95% interval) | command | explanation |\n|---|---|---|---|---|"
    )
    rows = liu_rows(data_dir) + chinchilla_rows(data_dir) + fahim_rows(data_dir)
    return "## Least-squares fits\n\n" + head + "\n" + "\n".join(rows) + "\n\nNotes:\n" + NOTES
