"""The text report of a :class:`~scalefit.fit.result.FitResult`.

A string: printing is the caller's business.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core._validation import spelled

NOT_IDENTIFIED = "not identified"


def _verdict(res: Any) -> str:
    if res.converged:
        return "yes"
    if res.diagnostics.get("stationary"):
        return "NO (stationary: the second-order test finds descent; not a minimum)"
    return "NO"


def _header(res: Any) -> list[str]:
    conv = res.conventions
    loss = conv.get("loss", "?")
    scale = conv.get("residuals", "log")
    return [
        f"law        {res.law.name}: {res.law.formula}",
        f"method     {res.method}, loss {loss}"
        + (f" (delta {conv['delta']:g})" if loss == "huber" else "")
        + f" on {scale} residuals"
        + (f", weights {conv['weights']}" if conv.get("weights") else "")
        + f", {res.n_rows} rows, objective {res.objective:.10g}",
        f"converged  {_verdict(res)}"
        + (
            f"; {res.diagnostics['n_best']}/{res.diagnostics['n_starts']} starts reached "
            f"the best objective"
            if "n_best" in res.diagnostics
            else ""
        ),
        "metrics    " + ", ".join(f"{k} {v:.4g}" for k, v in res.metrics.items()),
    ]


def format_report(res: Any) -> str:
    """A readable text report of a fit result.

    Standard errors of parameters in ``res.not_identified`` are printed as "not identified", with
    a pointer to the interval that does mean something. A Bayesian fit (``method="bayes"``) gets
    its own layout: posterior medians and intervals, R-hat, ESS, divergences and PSIS-LOO.
    """
    if res.method == "bayes":
        return _bayes_report(res)
    conv = res.conventions
    lines = _header(res)
    if conv.get("outlier_rule") and conv["outlier_rule"] != "none":
        lines.append(f"outliers   {conv['outlier_rule']}")
    if conv.get("derived"):
        lines.append(f"derived    {'; '.join(conv['derived'])}")
    pct = f"{100 * res.ci_prob:g}%"
    lines.extend(_param_lines(res, pct))
    at_bound = set(res.diagnostics.get("at_bound", ()))
    stderr_na = res.diagnostics.get("stderr_na", {})
    if conv.get("loss") == "lad" and not res.ci:
        lines.append(
            "\nstderr n/a: no asymptotic standard errors for LAD; use the bootstrap "
            f"({spelled('bootstrap=B')}) for intervals."
        )
    for reason in dict.fromkeys(stderr_na.values()):
        who = ", ".join(n for n, r in stderr_na.items() if r == reason)
        lines.append(f"\nstderr n/a ({who}): {reason}.")
    for name in (n for n, v in res.params.items() if not _inside(v, res.ci.get(n))):
        lines.append(
            f"\noutside    the estimate of {name} lies outside its own "
            f"{conv.get('ci_method', 'percentile')} interval: {_outside_why(res, name)}; read the "
            "interval as the spread of refits, not as centred on the estimate."
        )
    if not res.ci:  # a floor that reaches 0 (with a bootstrap, its warning says so)
        lines.extend(f"\nfloor      {t}" for t in floor_lines(res.law, res.params, res.stderr))
    if conv.get("stderr"):  # a curve fit: where its standard errors come from (or why none)
        lines.append(f"\nstderr     {conv['stderr']}")
    if at_bound:
        lines.append(f"at bound   {', '.join(n for n in res.params if n in at_bound)}")
    if res.not_identified:
        where = (
            "the interval above, which only says how far the draws wander"
            if res.ci
            else "the stderr line above"
            if str(conv.get("stderr", "")).startswith("n/a")
            else f"a posterior, a profile or a bootstrap: {spelled('bootstrap=B')}"
        )
        lines.append(
            f"\nnot identified: {', '.join(res.not_identified)} — the data do not pin "
            f"{'it' if len(res.not_identified) == 1 else 'them'} down; the asymptotic standard "
            f"error means nothing here, see {where}."
        )
    d = res.diagnostics
    if d.get("n_boot"):
        lines.append(_bootstrap_line(d, pct, conv.get("ci_method", "percentile")))
    return "\n".join(lines + _footer(res))


def _bootstrap_line(d: dict, pct: str, ci_method: str) -> str:
    """How many resamples converged and how many the intervals use (the warnings' counts)."""
    n, ranged = d["n_boot"], d.get("boot_out_of_range", 0)
    usable = n - d.get("boot_failed", 0)  # boot_failed counts the out-of-range ones too
    text = f"\nbootstrap  {n} resamples ({d.get('resample', 'rows')}), {usable + ranged} converged"
    if ranged:
        text += f", {ranged} of them outside a declared range; the intervals use the other {usable}"
    return text + f" ({usable / n:.0%}), {pct} interval {ci_method}"


def _se_cell(res: Any, name: str, at_bound: set, stderr_na: dict) -> str:
    """The stderr column of one parameter: a number, or why there is none."""
    conv, missing = res.conventions, not np.isfinite(res.stderr.get(name, np.nan))
    if name in at_bound and missing:
        return f"{'at bound':>16}"
    if name in res.not_identified:
        return f"{NOT_IDENTIFIED:>16}"
    if (conv.get("loss") == "lad" or name in stderr_na) and missing:
        return f"{'n/a: bootstrap':>16}"
    if str(conv.get("stderr", "")).startswith("n/a") and missing:
        return f"{'n/a: run boot.':>16}"
    return f"{res.stderr.get(name, np.nan):>16.3g}"


def _param_lines(res: Any, pct: str) -> list[str]:
    """The table of parameters: value, stderr (or why none) and the interval."""
    conv = res.conventions
    header = f"\n{'param':<10}{'value':>14}{'stderr':>16}"
    header += f"{pct + ' lo':>14}{pct + ' hi':>14}" if res.ci else ""
    lines = [header]
    at_bound = set(res.diagnostics.get("at_bound", ()))
    stderr_na = res.diagnostics.get("stderr_na", {})
    lam = conv.get("curves", {}).get("momentum") if "S2" in res.law.inputs else None
    d = res.diagnostics
    dropped = int(d.get("boot_out_of_range", 0)) if res.ci else 0
    for name, value in res.params.items():
        line = f"{name:<10}{value:>14.6g}{_se_cell(res, name, at_bound, stderr_na)}"
        if res.ci:
            lo, hi = res.ci.get(name, (np.nan, np.nan))
            if np.isfinite(lo) and np.isfinite(hi):
                line += f"{lo:>14.6g}{hi:>14.6g}" + (" *" if dropped else "")
            else:
                line += f"{'n/a':>14}{'n/a':>14}"
        if not _inside(value, res.ci.get(name)):
            share = res.diagnostics.get("boot_out_of_range_share", {}).get(name)
            line += f"  outside: {share:.0%} of resamples out of range" if share else "  outside"
        if name == "C" and lam is not None:  # C is per unit of S2, whose size lam sets
            line += f"  at momentum λ = {lam:g}"
        lines.append(line)
    if dropped:  # the interval is over the resamples inside every range: say so beside it
        kept = d["n_boot"] - int(d.get("boot_failed", 0))
        lines.append(
            f"* interval over the {kept} of {d['n_boot']} resamples inside every declared range; "
            f"{dropped} converged outside one and were dropped"
        )
    return lines


def _outside_why(res: Any, name: str) -> str:
    """Why an estimate lies outside its interval: the share of resamples out of its range."""
    share = res.diagnostics.get("boot_out_of_range_share", {}).get(name)
    if not share:
        return (
            "the resamples' estimates sit to one side of the full data's (a skewed or biased "
            "sampling distribution)"
        )
    lo, hi = res.law.param(name).bounds
    return (
        f"{share:.0%} of the converged resamples put {name} outside its declared range "
        f"[{lo:g}, {hi:g}] and the interval uses only the others"
    )


def _inside(value: float, ci) -> bool:
    """Whether ``value`` lies in ``ci`` (True when there is no finite interval)."""
    if ci is None or not (np.isfinite(ci[0]) and np.isfinite(ci[1])):
        return True
    return bool(ci[0] <= value <= ci[1])


def _bayes_report(res: Any) -> str:
    """Text report of a Bayesian fit: header, posterior table, diagnostics, LOO, warnings."""
    import pandas as pd

    d = res.diagnostics
    c = res.conventions
    pct = f"{100 * res.ci_prob:g}%"
    lines = [
        f"law        {res.law_name}: {res.law.formula}",
        f"method     bayes (NUTS), likelihood {c['likelihood']}, {res.n_rows} rows, "
        f"{d['chains']} chains x ({d['warmup']} warm-up + {d['draws']} draws), seed {c['seed']}",
        f"converged  {'yes' if res.converged else 'NO'}: R-hat max {d['r_hat_max']:.4f}, "
        f"bulk ESS min {d['ess_bulk_min']:.0f}, tail ESS min {d['ess_tail_min']:.0f}, "
        f"{d['divergences']} divergences, BFMI min {d['bfmi_min']:.2f}",
        f"timing     sampling {d['mcmc_seconds']:.1f} s wall, "
        f"{d.get('mcmc_cpu_seconds', float('nan')):.1f} s CPU (incl. compilation); "
        f"{d['ess_bulk_per_s_min']:.0f} bulk-ESS per wall second for the slowest parameter",
        "metrics    " + ", ".join(f"{k} {v:.4g}" for k, v in res.metrics.items()),
        f"loo        elpd_loo {d['loo']['elpd_loo']:.2f} (se {d['loo']['se']:.2f}), p_loo "
        f"{d['loo']['p_loo']:.1f}, Pareto k max {d['loo']['pareto_k_max']:.2f}; elpd_waic "
        f"{d['loo']['elpd_waic']:.2f}",
        "ppc        " + _ppc_text(d.get("ppc", {})),
        f"\nposterior medians; {pct} equal-tailed (eti) and highest-density (hdi) intervals",
    ]
    with pd.option_context("display.width", 120, "display.float_format", "{:.6g}".format):
        lines.append(hdi_frame(res).to_string())
    lam = c.get("curves", {}).get("momentum") if "S2" in res.law.inputs else None
    if lam is not None:  # as in the least-squares table: C is per unit of S2, sized by lam
        lines.append(f"C is per unit of S2 at momentum λ = {lam:g}")
    return "\n".join(lines + _footer(res))


def _footer(res: Any) -> list[str]:
    """The error structure, the hold-out's scores and the warnings (both layouts)."""
    lines, h = _groups_lines(res), res.holdout
    if h:
        pct, bayes = f"{100 * h['band_prob']:g}%", res.method == "bayes"
        lines.append(
            f"{chr(10) * bayes}holdout    trained on the lowest-compute {h['n_train']} rows, "
            f"tested on {h['n_test']}: MAE(log loss) {h['mae_log']:.4g}, "
            + (
                f"{pct} predictive coverage {h['coverage']:.0%}, 50% coverage "
                f"{h['coverage_50']:.0%}"
                if bayes
                else f"max rel err {h['max_rel_err']:.3%}, {pct} interval coverage "
                f"{h['coverage']:.0%}"
            )
        )
        lines.extend(predictive_lines(h))
    return lines + [f"warning    {w}" for w in res.warnings]


def _ppc_text(ppc: dict) -> str:
    """``posterior: 70% of rows in its 50% interval, 96% in its 90%; prior: ...``."""
    parts = []
    for group in ("posterior", "prior"):
        shares = [(k.rsplit("_", 1)[1], v) for k, v in ppc.items() if k.startswith(f"{group}_")]
        if shares:
            first, *rest = (f"{v:.0%} in its {p}%" for p, v in shares)
            first = first.replace(" in", " of rows in", 1) + " interval"
            parts.append(f"{group}: " + ", ".join([first, *rest]))
    return "; ".join(parts) or "n/a"


def _groups_lines(res: Any) -> list[str]:
    """The lines of a fit's error structure: an offset per group (``group=``), AR(1) errors."""
    d, pct, out = res.diagnostics, f"{100 * res.ci_prob:g}%", []
    if d.get("groups"):
        g = d["groups"]
        out.append(
            f"\ngroups     {g['n_groups']} of column {g['column']!r}, each a random offset of log "
            f"loss; tau {g['tau']:.3g} ({pct} {g['tau_ci'][0]:.3g} to {g['tau_ci'][1]:.3g})"
        )
    if d.get("ar1"):
        a = d["ar1"]
        out.append(
            f"ar1        errors within each {a['series']!r} AR(1) in {a['order']!r}: rho "
            f"{a['rho']:.3g} ({pct} {a['rho_ci'][0]:.3g} to {a['rho_ci'][1]:.3g}) between rows "
            f"{a['spacing']:g} apart"
        )
    return out


def hdi_frame(result: Any):
    """Posterior summary: median, equal-tailed interval, HDI, R-hat and ESS per parameter.

    Parameters
    ----------
    result : FitResult
        A Bayesian fit (``method="bayes"``).

    Returns
    -------
    pandas.DataFrame
        One row per parameter.
    """
    import pandas as pd

    d = result.diagnostics
    rows = [
        {
            "param": n,
            "median": v,
            "sd": result.stderr.get(n, np.nan),
            "eti_lo": result.ci[n][0],
            "eti_hi": result.ci[n][1],
            "hdi_lo": d["hdi"][n][0],
            "hdi_hi": d["hdi"][n][1],
            "r_hat": d.get("r_hat", {}).get(n, np.nan),
            "ess_bulk": d.get("ess_bulk", {}).get(n, np.nan),
            "ess_tail": d.get("ess_tail", {}).get(n, np.nan),
        }
        for n, v in result.params.items()
    ]
    return pd.DataFrame(rows).set_index("param")


def predictive_lines(holdout: dict) -> list[str]:
    """Report lines naming a hold-out's predictive, with the law's scores beside calibrated ones.

    Parameters
    ----------
    holdout : dict
        A hold-out record (``FitResult.holdout``) of least squares or of the Bayesian fitter.

    Returns
    -------
    list of str
        The ``predictive`` line and, for a calibrated predictive, the uncalibrated scores.
    """
    lines = []
    if holdout.get("predictive"):
        lines.append(f"predictive {holdout['predictive']}")
    u = holdout.get("uncalibrated")
    if u:
        text = (
            f"           without calibration ({u['predictive']}): "
            f"{100 * holdout['band_prob']:g}% coverage {u['coverage']:.0%}"
        )
        if "coverage_50" in u:
            text += f", 50% coverage {u['coverage_50']:.0%}"
        if "width_log" in u:
            text += f", width (log) {u['width_log']:.4f} vs {holdout['width_log']:.4f}"
        if "lpd" in u:
            text += f", lpd {_lpd(u['lpd'])} vs {_lpd(holdout.get('lpd'))}"
        lines.append(text)
    pit = holdout.get("pit")
    if pit:
        lines.append("           " + _pit_line(np.asarray(pit, float), holdout["band_prob"]))
    return lines


def _pit_line(pit: np.ndarray, prob: float) -> str:
    """Rows below, above and near the edges of the central ``prob`` interval, from their PIT."""
    lo, hi = (1 - prob) / 2, (1 + prob) / 2
    edge = np.sum((np.abs(pit - lo) < 0.005) | (np.abs(pit - hi) < 0.005))
    return (
        f"outside the {100 * prob:g}% interval: {np.sum(pit < lo)} below, {np.sum(pit > hi)} "
        f"above, of {len(pit)} (exact predictive CDF); {edge} within 0.005 of its ends"
    )


def _lpd(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


#: What a floor whose interval reaches 0 is called in a report (the bootstrap replaces the line).
FLOOR_LINE = "the data bound it from above only"


def floor_lines(law, values: dict[str, float], stderr: dict[str, float]) -> list[str]:
    """A floor (irreducible loss) whose asymptotic 95 % interval reaches 0: an upper bound only.

    Such a floor is not identified on its own (on Gemstones, L0 anywhere in [0, 1] fits almost
    as well), although the fit converged; its trade-off with the other terms is what the data
    leave open, which a bootstrap carries into predictions and allocations.
    """
    out = []
    for p in law.params:
        v, se = values[p.name], stderr.get(p.name, np.nan)
        if p.kind == "floor" and p.bounds[0] == 0 and np.isfinite(se) and v - 1.96 * se <= 0:
            out.append(
                f"{p.name} = {v:.3g} +- 1.96 x {se:.3g} reaches 0: {FLOOR_LINE}, so its value "
                f"is not identified; {spelled('bootstrap=B')} gives the upper bound (resample "
                f"runs when rows are checkpoints)."
            )
    return out
