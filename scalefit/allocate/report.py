"""Plain-text reports of allocations (strings; the CLI prints them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..core._validation import interval_text, spelled
from ..core.accounting import flops_text
from .api import Allocation


def _g(v: float, digits: int = 3) -> str:
    return "-" if v is None or not np.isfinite(v) else f"{v:.{digits}g}"


def _iv(row: pd.Series, name: str, digits: int = 3) -> str:
    """``value [lo, hi]`` when the interval exists (and why, when the value lies outside)."""
    value, lo, hi = (row.get(name + end, np.nan) for end in ("", "_lo", "_hi"))
    return _g(value, digits) + interval_text(value, lo, hi, lambda v: _g(v, digits))


def _range(lo: float, hi: float) -> str:
    """``4–8``, or ``4`` when both ends are the same."""
    return f"{int(lo)}" if int(lo) == int(hi) else f"{int(lo)}–{int(hi)}"


def _shapes_count(n: float) -> str:
    return f"{int(n)} shape" if int(n) == 1 else f"{int(n)} shapes"


DECISION_RULE = (
    "decision rule: recommend the practical shape with the lowest expected loss over the draws; "
    "regret = its loss above each draw's own optimum (nats), shown as mean and 95th percentile"
)


def header_text(alloc: Allocation) -> str:
    """One paragraph: law, accounting, constraints, interval source."""
    acc = alloc.accounting
    lines = [f"law {alloc.law}; C = 6 · params · tokens"]
    if alloc.kind == "shape":
        c = alloc.constraints
        bounds = f"depth ≥ {c.min_depth}" + (f", ≤ {c.max_depth}" if c.max_depth else "")
        if c.aspect_max:
            bounds += f", width/depth ≤ {c.aspect_max:g}"
        standard = acc.block == "standard"
        per = f"{4 + 2 * acc.mlp_ratio:g}" if standard else "12"  # W² per block
        mlp = f", MLP {acc.mlp_ratio:g}·width" if standard else ""
        lines.append(
            f"params = {acc.block} blocks (≈{per}·depth·width²{mlp}) + {acc.embeddings} "
            f"embeddings (vocab {acc.vocab}){', norms' if acc.norms else ''}; practical "
            f"shapes: integer depth, width a multiple of {c.head_dim}, {bounds}"
        )
    if alloc.interval:
        lines.append(f"intervals of the optimum: {alloc.interval}")
    if alloc.draws is not None:
        if alloc.kind == "shape":
            lines.append(DECISION_RULE)
    else:
        lines.append(
            f"no draws: fit with {spelled('bootstrap=B')} for the parameters' part of the intervals"
        )
    return "\n".join(lines)


def budget_text(alloc: Allocation, i: int, budget: float, show: int = 5) -> str:
    """The recommendation for one budget."""
    s = alloc.summary.iloc[i]
    lines = [f"== budget {flops_text(budget)} FLOP"]
    if alloc.kind == "params" and not np.isfinite(s["params"]):
        lines.append("  no compute-optimal split under the point estimate (see the warning)")
        lines.append(
            f"  draws        params median {_g(s.get('params_star_median', np.nan))} "
            f"[{_g(s.get('params_star_lo', np.nan))}, {_g(s.get('params_star_hi', np.nan))}]  "
            f"tokens median {_g(s.get('tokens_star_median', np.nan))} "
            f"[{_g(s.get('tokens_star_lo', np.nan))}, {_g(s.get('tokens_star_hi', np.nan))}]  "
            f"({int(s.get('n_unbounded', 0))} of {int(s.get('n_draws', 0))} draws unbounded)"
        )
        return "\n".join(lines)
    if alloc.kind == "params":
        lines.append(
            f"  optimum      params {_iv(s, 'params_star')}  tokens "
            f"{_iv(s, 'tokens_star')}  tokens/param {s['tokens'] / s['params']:.3g}"
        )
        lines.append(f"  loss         {_g(s['loss'], 5)}" + _band(s))
        return "\n".join(lines)
    if s["flat"]:
        lines.append(
            f"  FLAT in depth: every depth from {_g(s['depth_min_opt'])} to "
            f"{_g(s['depth_max_opt'])} (deepest: {_iv(s, 'depth_max_opt')}) reaches the "
            f"same loss {_iv(s, 'loss_star', 5)}; the law does not choose a depth."
        )
        lines.append(
            f"  optimum      params {_iv(s, 'params_star')}  tokens {_iv(s, 'tokens_star')}"
        )
        lines.append(
            f"  practical    {_shapes_count(s['n_within_eps'])} within {alloc.eps:g} nats: "
            f"depth {_range(s['set_depth_lo'], s['set_depth_hi'])}, width "
            f"{_range(s['set_width_lo'], s['set_width_hi'])}"
        )
        lines.append(_shapes(_spread(alloc.alternatives(budget, within="eps"), show)))
        return "\n".join(lines)
    lines.extend(_best_shape(alloc, s))
    if np.isfinite(s.get("expected_loss", np.nan)):
        lines.append(
            f"               expected loss {_g(s['expected_loss'], 5)}  regret mean "
            f"{_g(s['regret_mean'])}  p95 {_g(s['regret_p95'])} nats"
        )
    lines.append(f"  continuous   depth {_iv(s, 'depth_star')}  width {_iv(s, 'width_star', 4)}")
    lines.append(
        f"               params {_iv(s, 'params_star')}  tokens {_iv(s, 'tokens_star')}"
        f"  loss {_iv(s, 'loss_star', 5)}"
    )
    lines.append(
        f"  near-optimal {_shapes_count(s['n_within_eps'])} within {alloc.eps:g} nats: depth "
        f"{_range(s['set_depth_lo'], s['set_depth_hi'])}, width "
        f"{_range(s['set_width_lo'], s['set_width_hi'])}"
    )
    alt = alloc.alternatives(budget).iloc[1:]
    what = "within the loss interval" if np.isfinite(s["loss_hi"]) else f"within {alloc.eps:g}"
    lines.append(
        f"  runner-ups   {_shapes_count(len(alt))} {what}"
        + (f"; best {min(show, len(alt))}:" if len(alt) else "")
    )
    if len(alt) and show > 0:
        lines.append(_shapes(alt.head(show)))
    return "\n".join(lines)


def _best_shape(alloc: Allocation, s: pd.Series) -> list[str]:
    """The best practical shape: "recommended" only when the summary says it is."""
    shape = (
        f"depth {int(s['depth'])}  width {int(s['width'])}  params {_g(s['params'])}  "
        f"tokens {_g(s['tokens'])}  loss {_g(s['loss'], 5)}" + _band(s)
    )
    if s.get("recommended", True):
        return [f"  recommended  {shape}"]
    if s.get("boundary", False):
        c = alloc.constraints
        edge = c.max_depth if c.max_depth and int(s["depth"]) == c.max_depth else c.min_depth
        share = s.get("boundary_share", np.nan)
        of_draws = f"; {share:.0%} of the draws' optima on it" if np.isfinite(share) else ""
        why = (
            f"boundary solution: the optimum sits on the edge of the searched depths "
            f"(depth {edge}{of_draws}), not recommended"
        )
    elif s.get("beyond_data", ""):
        why = f"not recommended: {s['beyond_data']} (outside the data)"
    else:
        why = f"not recommended: the fit does not pin down {', '.join(alloc.not_identified)}"
    return [f"  best in grid {shape}", f"               {why}"]


def _band(s: pd.Series) -> str:
    lo, hi = s.get("loss_lo", np.nan), s.get("loss_hi", np.nan)
    return interval_text(s["loss"], lo, hi, lambda v: _g(v, 5))


def _spread(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    """``k`` shapes spread over the depth range of a flat set (best width per depth)."""
    best = frame.sort_values("loss").drop_duplicates("depth").sort_values("depth")
    if len(best) <= k:
        return best
    idx = np.unique(np.round(np.linspace(0, len(best) - 1, k)).astype(int))
    return best.iloc[idx]


SHAPE_COLUMNS = (
    ("depth", 0),
    ("width", 0),
    ("params", 3),
    ("tokens", 3),
    ("loss", 5),
    ("loss_lo", 5),
    ("loss_hi", 5),
    ("expected_loss", 5),
    ("regret_mean", 3),
    ("regret_p95", 3),
)


def _shapes(frame: pd.DataFrame) -> str:
    cols = [(c, d) for c, d in SHAPE_COLUMNS if c in frame]
    lines = ["    " + "".join(f"{c:>14}" for c, _ in cols)]
    for _, r in frame.iterrows():
        cells = [f"{int(r[c]):>14d}" if d == 0 else f"{_g(r[c], d):>14}" for c, d in cols]
        lines.append("    " + "".join(cells))
    return "\n".join(lines)


def exponents_text(source: Any, alloc: Allocation, **kw) -> str:
    """Scaling exponents between the smallest and largest budget of ``alloc``."""
    from .analysis import scaling_exponents

    lo, hi = alloc.budgets.min(), alloc.budgets.max()
    if not hi > lo:
        return "exponents: need at least two different budgets."
    budgets = np.geomspace(lo, hi, 9)
    tab = scaling_exponents(
        source,
        budgets,
        max_depth=alloc.constraints.max_depth or 1e4,
        min_depth=alloc.constraints.min_depth,
        eps=alloc.eps,
        **kw,
    )
    pct = f"{100 * alloc.ci_prob:g}%"
    lines = [f"scaling exponents q* ∝ C^a over {lo:.3g}–{hi:.3g} FLOP"]
    for _, r in tab.iterrows():
        line = f"  {r['quantity']:<24} a = {r['exponent']:.4f}"
        if "lo" in r and np.isfinite(r.get("lo", np.nan)):
            band = interval_text(r["exponent"], r["lo"], r["hi"], "{:.4f}".format)
            line += f"   {pct}{band} over {int(r['n_draws'])} draws"
        lines.append(line)
    return "\n".join(lines)


def audit_text(source: Any, shapes, **kw) -> str:
    """Critical-depth audit table as text."""
    from .analysis import audit

    tab = audit(source, shapes, **kw)
    lines = ["critical-depth audit (lc = critical depth at that width; penalty in nats)"]
    head = f"  {'name':<14}{'depth':>7}{'width':>8}{'params':>11}{'lc':>22}{'depth/lc':>22}"
    lines.append(head + f"{'penalty':>26}")
    for _, r in tab.iterrows():
        lines.append(
            f"  {str(r['name']):<14}{int(r['depth']):>7d}{int(r['width']):>8d}"
            f"{_g(r['params']):>11}{_iv(r, 'lc'):>22}{_iv(r, 'depth_over_lc'):>22}"
            f"{_iv(r, 'penalty'):>26}"
        )
    return "\n".join(lines)
