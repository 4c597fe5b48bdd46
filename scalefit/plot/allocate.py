"""Figures of allocations: iso-FLOP loss-vs-depth curves and the compute-optimal frontier."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.errors import NoRecommendationWarning
from .style import OUTSIDE, axes, estimates, flops_text, legend_entries, log_ticks, suptitle


def _bowl(c: pd.DataFrame, rise: float) -> pd.DataFrame:
    """The part of one iso-FLOP curve within ``rise`` nats of its minimum (band included)."""
    lowest = float(np.nanmin(c["loss"]))
    keep = c["loss"] <= lowest + rise
    idx = np.flatnonzero(keep.to_numpy())
    if len(idx) == 0:
        return c
    return c.iloc[max(idx[0] - 1, 0) : idx[-1] + 2]


def plot_isoflop(
    curves: dict[float, pd.DataFrame],
    *,
    summary: pd.DataFrame | None = None,
    eps: float | None = None,
    source: Any = None,
    ax=None,
):
    """Best predicted loss against depth at fixed budgets, with bands from the draws.

    Each curve is drawn over the depths where it lies within a few tenths of a nat of its
    minimum, so the axis limits come from the curves and bands (nothing is clipped). With
    ``summary`` it marks the continuous optimum (circle), the recommended practical shape
    (cross) and the near-optimal depths (thick bar: practical shapes within ``eps`` nats; for a
    flat optimum the whole plateau).

    Parameters
    ----------
    curves : dict
        Budget -> :func:`scalefit.allocate.analysis.isoflop_curve` frame.
    summary : DataFrame, optional
        :attr:`Allocation.summary`.
    eps : float, optional
        The near-optimal tolerance, for the legend.
    source : FitResult, optional
        For the title (data, law, method).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Figure
    """
    from .style import label, loss_label, ordered_colours, title

    fig, ax = axes(ax, figsize=(6.4, 4.6))
    colours = ordered_colours(len(curves))
    minima = [float(np.nanmin(c["loss"])) for c in curves.values()]
    rise = max(0.1, 0.6 * (max(minima) - min(minima)) / max(len(curves) - 1, 1))
    marks = {}
    for colour, (budget, c) in zip(colours, sorted(curves.items()), strict=False):
        c = _bowl(c, rise)
        lo, hi = c.get("loss_lo"), c.get("loss_hi")
        estimates(ax, c["depth"], c["loss"], lo, hi, fmt="-", band={"alpha": 0.18}, color=colour,
                  lw=1.8, label=f"C = {flops_text(budget)} FLOP")  # fmt: skip
        s = None if summary is None else summary.loc[np.isclose(summary["budget"], budget)]
        if s is None or s.empty:
            continue
        _mark_budget(ax, s.iloc[0], colour, eps, marks)
    ax.set_xscale("log")
    ax.set_xlabel(f"{label('depth')}; width and tokens optimal at each depth")
    ax.set_ylabel(f"predicted {loss_label(source)}")
    log_ticks(ax)
    handles, labels = ax.get_legend_handles_labels()
    keep = [
        (h, lab) for h, lab in zip(handles, labels, strict=True) if lab.startswith(("C =", OUTSIDE))
    ]
    keep += [(h, h.get_label()) for k, h in marks.items() if k in ("opt", "rec", "best", "bar")]
    ax.legend(*zip(*keep, strict=True), fontsize=7, loc="best", framealpha=0.85, edgecolor="none")
    what = "Iso-FLOP curves: best predicted loss against depth at fixed compute"
    suptitle(fig, title(source, what))
    return fig


def _mark_budget(ax, s: pd.Series, colour, eps: float | None, marks: dict) -> None:
    """Mark one budget's summary row: near-optimal depths, optimum, practical shape, boundary."""
    from matplotlib.lines import Line2D

    flat = bool(s.get("flat", False))
    lo, hi = (
        (s["depth_min_opt"], s["depth_max_opt"])
        if flat
        else (s.get("set_depth_lo", np.nan), s.get("set_depth_hi", np.nan))
    )
    if np.isfinite(lo) and np.isfinite(hi):
        bar = "flat optimum: every depth as good" if flat else "near-optimal depths"
        if not flat and eps:
            bar += f" (within {eps:g} nats)"
        ax.plot(
            [lo, max(hi, lo * 1.02)],
            [s["loss_star"]] * 2,
            color=colour,
            lw=6,
            alpha=0.45,
            solid_capstyle="butt",
        )
        # the legend's swatch is neutral: each budget's bar has that curve's colour
        marks["bar"] = Line2D([], [], color="0.55", lw=6, alpha=0.45, label=bar)
    if not flat and np.isfinite(s.get("depth_star", np.nan)):
        marks["opt"] = ax.plot(
            s["depth_star"],
            s["loss_star"],
            "o",
            mfc="white",
            mec=colour,
            mew=1.8,
            ms=7,
            label="continuous optimum",
            zorder=5,
        )[0]
    if np.isfinite(s.get("depth", np.nan)):
        recommended = bool(s.get("recommended", True))
        key = "rec" if recommended else "best"
        marks[key] = ax.plot(
            s["depth"],
            s["loss"],
            "x" if recommended else "+",
            color="black",
            ms=7,
            mew=1.6,
            label="recommended practical shape"
            if recommended
            else "best practical shape in the grid, not recommended (see the report)",
            zorder=6,
        )[0]
    if bool(s.get("boundary", False)) and np.isfinite(s.get("depth", np.nan)):
        ax.annotate(
            "optimum on the depth bound",
            (s["depth"], s["loss"]),
            xytext=(6, -12),
            textcoords="offset points",
            fontsize=7,
            color=colour,
        )


def plot_frontier(summary: pd.DataFrame, *, source: Any = None, ax=None):
    """Compute-optimal depth, width, tokens and params against budget, with draw bands.

    For a flat optimum the depth panel shows the plateau ``[depth_min_opt, depth_max_opt]``
    (shaded) and the band of its deep end, since no single depth is optimal.

    Parameters
    ----------
    summary : DataFrame
        :attr:`Allocation.summary` over a range of budgets.
    source : FitResult, optional
        For the title (data, law, method).
    ax : array of matplotlib Axes, optional

    Returns
    -------
    matplotlib Figure
    """
    from .style import PALETTE, label, title

    panels = [q for q in ("depth", "width", "tokens", "params") if f"{q}_star" in summary]
    grid = (2, 2) if len(panels) > 2 else (1, len(panels))
    fig, axs = axes(ax, nrows=grid[0], ncols=grid[1], figsize=(3.8, 3.0))
    axs = np.atleast_1d(axs).ravel()
    c = summary["budget"].to_numpy(float)
    flat = bool(summary.get("flat", pd.Series([False])).any())
    shapes = "depth_star" in summary  # a law with shapes: practical shapes are rounded
    conv = getattr(source, "conventions", None) or {}
    fitted = conv.get("data_range", {}).get("flops")
    pct = ""
    for a, q in zip(axs, panels, strict=False):
        name = f"{q}_star"
        if flat and q in ("depth", "width"):
            name = "depth_max_opt" if q == "depth" else "width_at_depth_max_opt"
        what = "deepest optimal depth" if name == "depth_max_opt" else "continuous optimum"
        lo, hi = summary.get(f"{name}_lo"), summary.get(f"{name}_hi")
        band = {"label": "interval over the draws"}
        estimates(a, c, summary[name], lo, hi, fmt="-", band=band, color=PALETTE[0], lw=1.8,
                  label=what)  # fmt: skip
        if lo is not None:
            pct = "shaded: interval over the fit's draws"
        if q == "depth" and flat:
            a.fill_between(
                c,
                summary["depth_min_opt"],
                summary["depth_max_opt"],
                color=PALETTE[1],
                alpha=0.15,
                lw=0,
                label="flat optimum (every depth as good)",
            )
        if q in ("depth", "width") and flat:
            a.fill_between(
                c,
                summary[f"set_{q}_lo"],
                summary[f"set_{q}_hi"],
                color=PALETTE[2],
                alpha=0.15,
                lw=0,
                label="practical shapes within eps",
            )
        elif shapes and q in summary and summary[q].notna().any():
            rec = summary["recommended"].to_numpy(bool) if "recommended" in summary else None
            if rec is None or rec.all():
                a.plot(c, summary[q], "x", color="black", ms=5, label="recommended practical shape")
            else:
                a.plot(c[rec], summary[q][rec], "x", color="black", ms=5,
                       label="recommended practical shape")  # fmt: skip
                a.plot(c[~rec], summary[q][~rec], "+", color="0.4", ms=6,
                       label="best shape in grid, not recommended")  # fmt: skip
        lo_fit, hi_fit = (max(fitted[0], c.min()), min(fitted[1], c.max())) if fitted else (1, 0)
        if lo_fit < hi_fit:
            a.axvspan(lo_fit, hi_fit, color="0.5", alpha=0.08, lw=0, label="fitted data's compute")
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel(label("budget"))
        a.set_ylabel(f"optimal {label(q)}")
        log_ticks(a)
    for a in axs[len(panels) :]:
        a.set_visible(False)
    entries = legend_entries(*axs)  # an estimate outside its band may be in any panel
    axs[0].legend(entries.values(), entries, fontsize=7, frameon=False)
    what = "Compute-optimal shape against training budget" + (f" ({pct})" if pct else "")
    suptitle(fig, title(source, what))
    return fig


def write_allocation_plots(source: Any, alloc, folder: str | Path, **kw) -> list[Path]:
    """Write ``isoflop_<law>.png`` (shape laws) and ``frontier_<law>.png`` into ``folder``."""
    from ..allocate import allocate
    from ..allocate.analysis import isoflop_curve
    from . import write_figures

    figures = {}
    src = source if hasattr(source, "method") else None
    if alloc.kind == "shape":
        curves = {float(b): isoflop_curve(source, b, **kw) for b in alloc.budgets}
        figures[f"isoflop_{alloc.law}.png"] = plot_isoflop(
            curves, summary=alloc.summary, eps=alloc.eps, source=src
        )
    lo, hi = np.log10(alloc.budgets.min()) - 1, np.log10(alloc.budgets.max()) + 1
    cons = alloc.constraints
    with warnings.catch_warnings():  # the allocation being drawn has said so already
        warnings.simplefilter("ignore", NoRecommendationWarning)
        wide = allocate(
            source,
            np.logspace(lo, hi, 9),
            head_dim=cons.head_dim,
            min_depth=cons.min_depth,
            max_depth=cons.max_depth,
            aspect_max=cons.aspect_max,
            eps=alloc.eps,
            use_draws=alloc.draws is not None,
            **kw,
        )
    figures[f"frontier_{alloc.law}.png"] = plot_frontier(wide.summary, source=src)
    return write_figures(folder, figures)
