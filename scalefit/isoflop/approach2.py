"""Approach 2: IsoFLOP curves per budget, their optima, and ``N* ∝ C^a``, ``T* ∝ C^b``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..core._readonly import ReadOnlyMappings
from ..core._validation import Interval, Options, constraints, interval_text, validate
from ..core.accounting import tokens_for_budget
from ..core.errors import ScaleFitError
from ._curves import (
    SHAPE_BOUNDS,
    Optima,
    PowerLawExponents,
    exponent_table,
    fit_parabolas,
    fit_profile,
    power_law,
    profile_value,
)
from .budgets import assign_budgets

METHODS = ("parabola", "parabola_weighted", "profile")
#: Methods whose curve per budget is Hoffmann et al.'s parabola.
PARABOLAS = ("parabola", "parabola_weighted")
#: An optimum further than this share of the sampled span from its centre is "off-centre".
OFF_CENTRE = 0.25
#: The parabola-profile check reports a disagreement when the two lines' compute-optimal tokens
#: differ by at least this share (1 %, the level the Open-Athena Approach-2 study highlights).
BIAS_TOL = 0.01
#: Default extrapolation distance of that check, in decades of compute past the largest budget:
#: the study extrapolates from 1e17-1e21 FLOPs to 1e24.
TARGET_DECADES = 3.0


@dataclass(frozen=True)
class IsoFLOPResult(PowerLawExponents, ReadOnlyMappings):
    """Result of :func:`approach2` (nothing printed; tables are DataFrames).

    Attributes
    ----------
    method : {"parabola", "parabola_weighted", "profile"}
        Curve fitted per budget and line through the optima (see :func:`approach2`).
    budgets : DataFrame
        One row per budget: ``budget, n_runs, params_min, params_max, params_opt, params_lo,
        params_hi, tokens_opt, loss_opt, offset`` (``ln N*`` minus the centre of the sampled
        ``ln params`` range, in units of that range) and ``flags``.
    exponents : DataFrame
        Rows ``params`` (a) and ``tokens`` (b): ``exponent, se, lo, hi, intercept, chi2_dof``
        (``chi2_dof`` of the weighted line; NaN for the unweighted ``"parabola"`` line).
    ci_prob : float
        Interval probability.
    interval : {"analytic", "bootstrap"}
        How the exponent intervals were computed.
    shape : dict
        ``alpha, beta`` (and standard errors) of the profile fit; empty for parabolas.
    warnings : tuple of str
        Sampling flags and the parabola-profile disagreement, in words.
    bias : dict
        For the parabola methods, the comparison with the law's own IsoFLOP profile fitted to
        the same runs: ``target`` (budget, FLOPs), ``tokens_rel_max_sampled`` and
        ``tokens_rel_target`` (relative difference of the parabola's ``T*`` from the profile's,
        largest over the sampled budgets and at ``target``), ``flagged`` (they disagree by
        :data:`BIAS_TOL` or more) and ``note``; empty for ``"profile"``.
    """

    method: str
    budgets: pd.DataFrame
    exponents: pd.DataFrame
    ci_prob: float
    interval: str
    shape: dict = field(default_factory=dict)
    warnings: tuple = ()
    curves: tuple = ()
    seed: int | None = None
    tol: float = 0.06
    bias: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dictionary."""
        return {
            "method": self.method,
            "prob": self.ci_prob,
            "interval": self.interval,
            "seed": self.seed,
            "shape": dict(self.shape),
            "warnings": list(self.warnings),
            "bias": dict(self.bias),
            "exponents": self.exponents.reset_index().to_dict(orient="records"),
            "budgets": self.budgets.to_dict(orient="records"),
        }

    def report(self) -> str:
        """A short text report."""
        pct = f"{100 * self.ci_prob:g}%"
        lines = [f"Approach 2 ({self.method}), {len(self.budgets)} budgets, {pct} {self.interval}"]
        for q, row in self.exponents.iterrows():
            band = interval_text(row["exponent"], row["lo"], row["hi"], "{:.3f}".format)
            lines.append(f"  {q:<7} exponent {row['exponent']:.3f}{band or ' [n/a]'}")
        for w in self.warnings:
            lines.append(f"  warning: {w}")
        return "\n".join(lines)

    def curve_loss(self, j: int, log_params) -> np.ndarray | None:
        """Loss on budget ``j``'s fitted curve at ``log_params`` (natural log); None if unfitted."""
        curve = self.curves[j] if j < len(self.curves) else None
        if curve is None:
            return None
        x = np.asarray(log_params, dtype=float)
        if curve["kind"] == "parabola":
            c0, c1, c2 = curve["coef"]
            return c0 + c1 * (x - curve["mean"]) + c2 * (x - curve["mean"]) ** 2
        return profile_value(x, curve, self.shape["alpha"], self.shape["beta"])


def _groups(table: pd.DataFrame, budgets, tol: float) -> tuple[np.ndarray, list, list[str]]:
    if "loss" not in table.columns or "params" not in table.columns:
        raise ScaleFitError(
            "approach2: the table needs 'params' and 'loss' columns. "
            f"Got {sorted(map(str, table.columns))} instead."
        )
    lab = assign_budgets(table, budgets, tol=tol, where="approach2").to_numpy()
    notes, keep, groups = [], [], []
    x = np.log(table["params"].to_numpy(float))
    y = table["loss"].to_numpy(float)
    for c in np.unique(lab[np.isfinite(lab)]):
        sel = lab == c
        if sel.sum() < 4 or np.ptp(x[sel]) <= 0:
            notes.append(
                f"budget {c:.3g} FLOPs has {int(sel.sum())} run(s) of distinct size: skipped"
            )
            continue
        keep.append(c)
        groups.append((x[sel], y[sel]))
    if len(keep) < 3:
        raise ScaleFitError(
            f"approach2: needs at least 3 budgets with 4 or more runs each; found {len(keep)}."
        )
    return np.array(keep), groups, notes


def _fit(groups, method: str, shape) -> Optima:
    return fit_parabolas(groups) if method in PARABOLAS else fit_profile(groups, shape)


def approach2(
    table: pd.DataFrame,
    *,
    budgets=None,
    tol: float = 0.06,
    method: str = "parabola",
    shape: tuple[float, float] | None = None,
    ci_prob: float = 0.95,
    interval: str = "analytic",
    n_boot: int = 200,
    seed: int = 0,
    target: float | None = None,
) -> IsoFLOPResult:
    """Chinchilla's Approach 2: fit an IsoFLOP curve per budget and a power law through the optima.

    Parameters
    ----------
    table : DataFrame
        Runs with ``params``, ``loss`` and ``flops`` (or ``tokens``); optionally a ``budget``.
    budgets : array-like, optional
        Nominal budgets (rows within ``tol`` dex of one belong to it); default: the ``budget``
        column, else clusters found by :func:`scalefit.isoflop.detect_budgets`.
    tol : float, default 0.06
        Budget half-width in dex.
    method : {"parabola", "parabola_weighted", "profile"}, default "parabola"
        ``"parabola"`` is Hoffmann et al.'s procedure as published: a parabola of loss against
        ``ln N`` per budget, its vertex ``N*``, then an ordinary (unweighted) least-squares line
        of ``ln N*`` against ``ln C``. On a noise-free asymmetric surface sampled off-centre its
        vertices move off the minima. ``"parabola_weighted"`` keeps the parabolas but weights
        the line by the delta-method covariance of the vertices (generalised least squares).
        ``"profile"`` fits the law's own asymmetric IsoFLOP profile with a shape shared by all
        budgets and weights the line the same way (see :mod:`scalefit.isoflop._curves`); it is
        exact when the runs follow the law, and extrapolated worse than the parabola on the
        public held-out sweeps. Open-Athena's remedy is Approach 3: the law fitted to every run
        by variable projection (``fit(table, "chinchilla", method="varpro")``, then
        :func:`scalefit.isoflop.approach3`).
    shape : (float, float), optional
        Hold the profile's ``(alpha, beta)`` fixed (e.g. from an Approach 3 fit).
    ci_prob : float, default 0.95
        Interval probability.
    interval : {"analytic", "bootstrap"}, default "analytic"
        The line's own standard error (OLS for ``"parabola"``; for the weighted methods, from the
        optima's delta-method covariance scaled by the Birge ratio), or a bootstrap that resamples
        runs within each budget and refits everything.
    n_boot : int, default 200
        Bootstrap resamples.
    seed : int, default 0
        Seed of the bootstrap.
    target : float, optional
        The budget (FLOPs) the fit will be extrapolated to, for the parabola-profile check
        (default: three decades past the largest budget). For the parabola methods the law's
        asymmetric IsoFLOP profile is fitted to the same runs and both lines of optima are
        compared; when their compute-optimal token counts disagree by 1 % or more at a sampled
        budget or at ``target``, a warning says by how much (``bias`` holds the numbers). On
        noise-free runs of the law the difference is the parabola's error (the Open-Athena
        study's numbers); on real runs neither line is the truth and part of it can be noise.

    Returns
    -------
    IsoFLOPResult

    Examples
    --------
    >>> from scalefit.isoflop import approach2, synthetic_isoflops
    >>> runs = synthetic_isoflops(seed=0)
    >>> r = approach2(runs)
    >>> 0.4 < r.a < 0.6
    True
    """
    validate(
        "approach2",
        locals(),
        {
            "method": [Options(set(METHODS))],
            **constraints("ci_prob", "seed"),
            "interval": [Options({"analytic", "bootstrap"})],
            "n_boot": [Interval(int, 10, None)],
            "target": [Interval(float, 0, None, closed="neither"), None],
        },
    )
    if shape is not None:
        shape = _check_shape(shape)
    cs, groups, notes = _groups(table, budgets, tol)
    opt = _fit(groups, method, shape)
    logc = np.log(cs)
    ok = opt.ok & np.isfinite(opt.x)
    if ok.sum() < 3:
        raise ScaleFitError(
            f"approach2 ({method}): only {int(ok.sum())} budgets have a minimum; need 3."
        )
    law = power_law(
        logc[ok], opt.x[ok], opt.cov[np.ix_(ok, ok)], ci_prob, weighted=method != "parabola"
    )
    if interval == "bootstrap":
        lo, hi, se = _bootstrap(groups, logc, method, shape, ci_prob, n_boot, seed)
        law.update(lo=lo, hi=hi, se=se)
    frame = _budget_frame(cs, groups, opt, ci_prob)
    warns = tuple(notes) + _bias_flags(frame, method) + ((opt.note,) if opt.note else ())
    bias: dict = {}
    if method in PARABOLAS:
        bias = _profile_check(groups, logc, opt, shape, target)
        if bias["flagged"] or bias["note"]:
            warns += (bias["note"],)
    shp, shape_note = _shape_of(opt)
    return IsoFLOPResult(
        method,
        frame,
        _exponents(law),
        float(ci_prob),
        interval,
        shp,
        warns + shape_note,
        tuple(opt.curve),
        seed,
        float(tol),
        bias,
    )


def _exponents(law: dict) -> pd.DataFrame:
    """The line through the optima as exponents of N* and T* (no weights: no chi²)."""
    chi2 = law["chi2_dof"] if law["weighted"] else np.nan
    return exponent_table(
        law["exponent"], law["lo"], law["hi"], law["intercept"], se=law["se"], chi2_dof=chi2
    )


def _shape_of(opt: Optima) -> tuple[dict, tuple[str, ...]]:
    """The profile's shared shape (with standard errors), and a warning if it sits at a bound."""
    if opt.shape is None:
        return {}, ()
    shp = {"alpha": opt.shape[0], "beta": opt.shape[1]}
    if opt.shape_se is not None:
        shp.update(alpha_se=float(opt.shape_se[0]), beta_se=float(opt.shape_se[1]))
    if not opt.at_bound:
        return shp, ()
    return shp, (
        f"the profile's shape (alpha {opt.shape[0]:.3g}, beta {opt.shape[1]:.3g}) sits at a "
        f"bound {SHAPE_BOUNDS}: the data do not identify the curve's asymmetry; pass "
        "shape=(alpha, beta) from a law fit",
    )


def _check_shape(shape) -> tuple[float, float]:
    try:
        a, b = (float(v) for v in shape)
    except (TypeError, ValueError):
        a = b = float("nan")
    if not (np.isfinite(a) and np.isfinite(b) and a > 0 and b > 0):
        raise ScaleFitError(
            f"The 'shape' parameter of approach2 must be two positive floats (alpha, beta). "
            f"Got {shape!r} instead."
        )
    return a, b


def _budget_frame(cs, groups, opt: Optima, prob: float) -> pd.DataFrame:
    from scipy import stats

    z = stats.norm.ppf((1 + prob) / 2)
    se = np.sqrt(np.clip(np.diag(opt.cov), 0, None))
    rows = []
    for j, (c, (x, _)) in enumerate(zip(cs, groups, strict=True)):
        lo, hi = float(x.min()), float(x.max())
        xs = opt.x[j]
        offset = (xs - 0.5 * (lo + hi)) / (hi - lo) if np.isfinite(xs) else np.nan
        flags = []
        if not opt.ok[j]:
            flags.append("no_minimum")
        elif xs < lo or xs > hi:
            flags.append("optimum_outside_range")
        elif abs(offset) > OFF_CENTRE:
            flags.append("off_centre")
        rows.append(
            {
                "budget": float(c),
                "n_runs": len(x),
                "params_min": float(np.exp(lo)),
                "params_max": float(np.exp(hi)),
                "params_opt": float(np.exp(xs)),
                "params_lo": float(np.exp(xs - z * se[j])),
                "params_hi": float(np.exp(xs + z * se[j])),
                "tokens_opt": float(tokens_for_budget(c, np.exp(xs))),
                "loss_opt": float(opt.loss[j]),
                "offset": float(offset),
                "flags": ",".join(flags),
            }
        )
    return pd.DataFrame(rows)


def _bias_flags(frame: pd.DataFrame, method: str) -> tuple[str, ...]:
    out = []
    bad = frame[frame["flags"].str.contains("outside|off_centre")]
    if len(bad):
        out.append(
            f"{len(bad)} of {len(frame)} budgets have their optimum off-centre or outside the "
            "sampled sizes ("
            + ", ".join(f"{c:.3g}" for c in bad["budget"])
            + " FLOPs)"
            + (
                "; a parabola's vertex moves off an asymmetric minimum there"
                if method in PARABOLAS
                else ""
            )
        )
    off = frame["offset"].to_numpy(float)
    ok = np.isfinite(off)
    if ok.sum() >= 3:
        slope = np.polyfit(np.log10(frame["budget"].to_numpy(float)[ok]), off[ok], 1)[0]
        if abs(slope) > 0.1:
            out.append(
                f"the sampling window drifts relative to the optimum ({slope:+.2f} sampled spans "
                "per decade of compute); a parabola's vertex bias then tilts the exponent"
            )
    return tuple(out)


def _profile_check(groups, logc: np.ndarray, par: Optima, shape, target) -> dict:
    """Compare the parabola's optima with the law profile's on the same runs (see ``target``)."""
    top = float(np.exp(logc.max()))
    tgt = float(target) if target is not None else top * 10.0**TARGET_DECADES
    out = {
        "target": tgt,
        "tokens_rel_max_sampled": np.nan,
        "tokens_rel_target": np.nan,
        "flagged": False,
        "note": "",
    }
    ref = fit_profile(groups, shape)
    ok = par.ok & ref.ok & np.isfinite(par.x) & np.isfinite(ref.x)
    if ok.sum() < 3 or ref.at_bound or ref.note:
        why = "its shape sits at a bound" if ref.at_bound else ref.note or "too few budgets"
        out["note"] = (
            "the parabola could not be compared with the law's IsoFLOP profile: the profile does "
            f"not fit these runs ({why})"
        )
        return out
    # OLS lines of ln N* on ln C through both sets of optima; T* = C/(6 N*), so the parabola's
    # T* differs from the profile's by the factor exp(-(ln N*_parabola - ln N*_profile)).
    lines = [np.polyfit(logc[ok], x[ok], 1) for x in (par.x, ref.x)]
    grid = np.append(logc[ok], np.log(tgt))
    gap = np.polyval(lines[0], grid) - np.polyval(lines[1], grid)
    rel = np.expm1(-gap)
    out["tokens_rel_max_sampled"] = float(rel[:-1][np.argmax(np.abs(rel[:-1]))])
    out["tokens_rel_target"] = float(rel[-1])
    worst = max(abs(out["tokens_rel_max_sampled"]), abs(out["tokens_rel_target"]))
    if worst >= BIAS_TOL:
        out["flagged"] = True
        out["note"] = (
            "parabola and profile disagree: the parabola's compute-optimal tokens differ from "
            "those of the law's IsoFLOP profile fitted to the same runs by "
            f"{100 * out['tokens_rel_max_sampled']:+.1f}% within the sampled budgets and "
            f"{100 * out['tokens_rel_target']:+.1f}% at {tgt:.3g} FLOPs (reported from "
            f"{100 * BIAS_TOL:g}%)"
        )
    return out


def _bootstrap(groups, logc, method, shape, prob, n_boot, seed):
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(n_boot):
        res = []
        for x, y in groups:
            i = rng.integers(0, len(x), len(x))
            res.append((x[i], y[i]))
        opt = _fit(res, method, shape)
        ok = opt.ok & np.isfinite(opt.x)
        if ok.sum() >= 3:
            vals.append(np.polyfit(logc[ok], opt.x[ok], 1)[0])
    vals = np.asarray(vals)
    if len(vals) < max(10, n_boot // 2):
        return np.nan, np.nan, np.nan
    lo, hi = np.quantile(vals, [(1 - prob) / 2, (1 + prob) / 2])
    return float(lo), float(hi), float(vals.std(ddof=1))
