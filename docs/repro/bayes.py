"""Reproduction-report section: Bayesian posteriors beside the bootstrap, and PSIS-LOO comparisons.

Everything is computed when called (seeded); nothing here is a stored result.
"""

from __future__ import annotations

import warnings

BOOT = 1000
LIU_A_DEPTH = (1.2, 0.3)


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


def _iv(lo: float, hi: float, digits: int = 3) -> str:
    return f"[{lo:.{digits}f}, {hi:.{digits}f}]"


def posterior_rows(data_dir: str) -> list[str]:
    """a_depth (and the other exponents): posterior interval beside the bootstrap one."""
    from scalefit import fit
    from scalefit.datasets import load
    from scalefit.fit.bayes import fit_bayes

    tab = load("chinchilla", data_dir, drop_highest=40)
    post = _quiet(fit_bayes, tab, "decomposed", seed=0)
    boot = _quiet(fit, tab, "decomposed", bootstrap=BOOT, seed=0, progress=False)
    d = post.diagnostics
    cmd_b = "`scalefit bayes chinchilla --drop-highest 40 --law decomposed --seed 0`"
    cmd_f = f"`scalefit fit chinchilla --drop-highest 40 --law decomposed --bootstrap {BOOT}`"
    rows = []
    for k, label in (("a_width", "a_W"), ("a_depth", "a_ℓ"), ("a_tokens", "a_T")):
        lo, hi = post.ci[k]
        blo, bhi = boot.ci[k]
        ratio = (hi - lo) / (bhi - blo)
        paper = f"{LIU_A_DEPTH[0]} ± {LIU_A_DEPTH[1]}" if k == "a_depth" else "—"
        rows.append(
            f"| {label}: posterior median, 95% equal-tailed interval (HDI {_iv(*d['hdi'][k])}) | "
            f"{paper} | {post.params[k]:.3f} {_iv(lo, hi)}; bootstrap {boot.params[k]:.3f} "
            f"{_iv(blo, bhi)} | {cmd_b}; {cmd_f} | posterior/bootstrap width {ratio:.2f}; "
            f"see note B1 |"
        )
    rows.append(
        f"| sampler health (decomposed, 203 rows) | — | R-hat max {d['r_hat_max']:.3f}, bulk ESS "
        f"min {d['ess_bulk_min']:.0f}, {d['divergences']} divergences, BFMI min "
        f"{d['bfmi_min']:.2f}; noise: Student-t ν {d['noise']['nu']:.1f}, σ "
        f"{d['noise']['sigma']:.4f} | {cmd_b} | acceptance: R-hat ≤ 1.01, ESS ≥ 400, none |"
    )
    return rows


def loo_rows(data_dir: str) -> list[str]:
    """PSIS-LOO: decomposed vs chinchilla (Chinchilla, 203 rows); critical_depth vs decomposed
    (Depth Delusion, 30 rows)."""
    from scalefit.datasets import load
    from scalefit.fit.compare import compare_laws

    rows = []
    cases = (
        (
            "chinchilla",
            40,
            ["decomposed", "chinchilla"],
            "— (Liu et al. report decomposed's in-sample error, 0.4%, no comparison)",
        ),
        (
            "depth_delusion",
            0,
            ["critical_depth", "decomposed"],
            "Fahim & Karim prefer the critical-depth ansatz (R² 0.922)",
        ),
    )
    for name, drop, laws, paper in cases:
        tab = load(name, data_dir, drop_highest=drop)
        frame = _quiet(compare_laws, tab, laws, seed=0)
        best, other = frame.index[0], frame.index[1]
        r = frame.loc[other]
        verdict = "decisive" if r["elpd_diff"] > 2 * r["dse"] else "not decisive"
        health = "; ".join(
            f"{law}: R-hat {frame.loc[law, 'r_hat_max']:.3f}, {frame.loc[law, 'divergences']} div, "
            f"Pareto k max {frame.loc[law, 'pareto_k_max']:.2f}"
            for law in frame.index
        )
        cmd = f"`scalefit compare {name}" + (f" --drop-highest {drop}" if drop else "")
        cmd += f" --laws {','.join(laws)}`"
        rows.append(
            f"| PSIS-LOO on {name} ({len(tab)} rows): {laws[0]} vs {laws[1]} | {paper} | "
            f"best {best}; elpd_loo {frame.loc[best, 'elpd_loo']:.1f} vs "
            f"{r['elpd_loo']:.1f}, difference {r['elpd_diff']:.1f} ± {r['dse']:.1f} ({verdict}) | "
            f"{cmd} | {health}; see note B2 |"
        )
    return rows


NOTES = """\
B1. The posterior assumes independent Student-t noise on log loss around the law, with weak
    priors (docs/bayes.md); the bootstrap resamples rows, so it also reflects how the fit moves
    when influential rows (the few deepest or widest models) come and go, and it does not
    regularise the exponents. Where the bootstrap interval is wider, the row-to-row structure of
    the residuals (digitised points, 99 distinct losses, several rows per model) carries more
    uncertainty than iid noise allows; where the posterior is wider, the prior and the skewed
    likelihood along the (c_depth, a_depth) direction, which a percentile bootstrap of point
    optima does not see, dominate. Liu et al.'s ±0.3 comes from a bootstrap of a short Adam run
    (REFERENCE §3), not from a converged fit.
B2. elpd_loo is the expected log predictive density of a left-out row's log loss (higher is
    better); both laws of a pair are scored on the same observable, rows and likelihood family.
    A difference larger than about twice its standard error (dse) is decisive. Pareto k > 0.7
    marks rows whose leave-one-out term is unreliable. A law whose chains did not converge
    (R-hat > 1.01) gives an unreliable elpd; the table says so.
"""


def section(data_dir: str) -> str:
    """Markdown for the Bayesian part of the reproduction report."""
    head = "| quantity | paper | ours | command | explanation |\n|---|---|---|---|---|"
    rows = posterior_rows(data_dir) + loo_rows(data_dir)
    return (
        "## Bayesian fits and model comparison\n\n"
        + head
        + "\n"
        + "\n".join(rows)
        + ("\n\nNotes:\n" + NOTES)
    )
