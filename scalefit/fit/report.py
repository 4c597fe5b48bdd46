"""The text report of a :class:`~scalefit.fit.result.FitResult`.

A string: printing is the caller's business.
"""

from __future__ import annotations

from typing import Any

import numpy as np

NOT_IDENTIFIED = "not identified"


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
        f"converged  {'yes' if res.converged else 'NO'}"
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
    a pointer to the interval that does mean something.
    """
    conv = res.conventions
    lines = _header(res)
    if conv.get("outlier_rule") and conv["outlier_rule"] != "none":
        lines.append(f"outliers   {conv['outlier_rule']}")
    if conv.get("derived"):
        lines.append(f"derived    {'; '.join(conv['derived'])}")
    pct = f"{100 * res.ci_prob:g}%"
    header = f"\n{'param':<10}{'value':>14}{'stderr':>16}"
    header += f"{pct + ' lo':>14}{pct + ' hi':>14}" if res.ci else ""
    lines.append(header)
    at_bound = set(res.diagnostics.get("at_bound", ()))
    lam = conv.get("curves", {}).get("momentum") if "S2" in res.law.inputs else None
    for name, value in res.params.items():
        if name in at_bound and not np.isfinite(res.stderr.get(name, np.nan)):
            se = f"{'at bound':>16}"
        elif name in res.not_identified:
            se = f"{NOT_IDENTIFIED:>16}"
        elif conv.get("loss") == "lad" and not np.isfinite(res.stderr.get(name, np.nan)):
            se = f"{'n/a: bootstrap':>16}"
        else:
            se = f"{res.stderr.get(name, np.nan):>16.3g}"
        line = f"{name:<10}{value:>14.6g}{se}"
        if res.ci:
            lo, hi = res.ci.get(name, (np.nan, np.nan))
            if np.isfinite(lo) and np.isfinite(hi):
                line += f"{lo:>14.6g}{hi:>14.6g}"
            else:
                line += f"{'n/a':>14}{'n/a':>14}"
        if name == "C" and lam is not None:  # C is per unit of S2, whose size lam sets
            line += f"  at momentum λ = {lam:g}"
        lines.append(line)
    if conv.get("loss") == "lad" and not res.ci:
        lines.append(
            "\nstderr n/a: no asymptotic standard errors for LAD; use the bootstrap "
            "(bootstrap=B in Python, --bootstrap B on the command line) for intervals."
        )
    if at_bound:
        lines.append(f"at bound   {', '.join(n for n in res.params if n in at_bound)}")
    if res.not_identified:
        where = (
            "the interval above, which only says how far the draws wander"
            if res.ci
            else "a bootstrap (bootstrap=B), a posterior or a profile"
        )
        lines.append(
            f"\nnot identified: {', '.join(res.not_identified)} — the data do not pin "
            f"{'it' if len(res.not_identified) == 1 else 'them'} down; the asymptotic standard "
            f"error means nothing here, see {where}."
        )
    d = res.diagnostics
    if d.get("n_boot"):
        lines.append(
            f"\nbootstrap  {d['n_boot']} resamples ({d.get('resample', 'rows')}), "
            f"{d['n_boot'] - d.get('boot_failed', 0)} converged "
            f"({(d['n_boot'] - d.get('boot_failed', 0)) / d['n_boot']:.0%}), {pct} interval "
            f"{conv.get('ci_method', 'percentile')}"
        )
    if d.get("groups"):
        g = d["groups"]
        lines.append(
            f"\ngroups     {g['n_groups']} of column {g['column']!r}, each a random offset of log "
            f"loss; tau {g['tau']:.3g} ({pct} {g['tau_ci'][0]:.3g} to {g['tau_ci'][1]:.3g})"
        )
    if res.holdout:
        h = res.holdout
        lines.append(
            f"holdout    trained on the lowest-compute {h['n_train']} rows, tested on "
            f"{h['n_test']}: MAE(log loss) {h['mae_log']:.4g}, max rel err "
            f"{h['max_rel_err']:.3%}, {100 * h['band_prob']:g}% interval coverage "
            f"{h['coverage']:.0%}"
        )
        lines.extend(predictive_lines(h))
    for w in res.warnings:
        lines.append(f"warning    {w}")
    return "\n".join(lines)


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
