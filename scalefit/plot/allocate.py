"""Figures of allocations: iso-FLOP loss-vs-depth curves and the compute-optimal frontier."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._base import axes, pyplot


def plot_isoflop(
    curves: dict[float, pd.DataFrame], *, summary: pd.DataFrame | None = None, ax=None
):
    """Best predicted loss against depth at fixed budgets, with bands from the draws.

    Parameters
    ----------
    curves : dict
        Budget -> :func:`scalefit.allocate.analysis.isoflop_curve` frame.
    summary : DataFrame, optional
        :attr:`Allocation.summary`; marks the optimum (a point, or the plateau of a flat optimum).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Figure
    """
    fig, ax = axes(ax, figsize=(6.0, 4.5))
    colors = pyplot().cm.viridis(np.linspace(0.0, 0.85, max(len(curves), 1)))
    for color, (budget, c) in zip(colors, sorted(curves.items()), strict=False):
        ax.plot(c["depth"], c["loss"], color=color, label=f"C = {budget:.1e}")
        if "loss_lo" in c:
            ax.fill_between(c["depth"], c["loss_lo"], c["loss_hi"], color=color, alpha=0.15, lw=0)
        if summary is None:
            continue
        s = summary.loc[np.isclose(summary["budget"], budget)]
        if s.empty:
            continue
        s = s.iloc[0]
        if bool(s.get("flat", False)):
            ax.plot(
                [s["depth_min_opt"], s["depth_max_opt"]],
                [s["loss_star"]] * 2,
                color=color,
                lw=4,
                alpha=0.6,
            )
        elif np.isfinite(s.get("depth_star", np.nan)):
            ax.plot(s["depth_star"], s["loss_star"], "o", color=color)
            if np.isfinite(s.get("depth", np.nan)):
                ax.plot(s["depth"], s["loss"], "x", color="k", ms=6)
    ax.set_xscale("log")
    ax.set_xlabel("depth (width and tokens optimal at each depth)")
    ax.set_ylabel("predicted loss")
    mins = [float(np.nanmin(c["loss"])) for c in curves.values()]
    span = max(mins) - min(mins)
    ax.set_ylim(min(mins) - 0.05 * span - 0.02, max(mins) + 0.5 * span + 0.1)
    ax.legend(fontsize=8)
    ax.set_title("iso-FLOP curves (o continuous optimum, x practical; bar = flat set)", fontsize=9)
    return fig


def plot_frontier(summary: pd.DataFrame, *, ax=None):
    """Compute-optimal depth, width, tokens and params against budget, with draw bands.

    For a flat optimum the depth panel shows the plateau ``[depth_min_opt, depth_max_opt]``
    (shaded) and the band of its deep end, since no single depth is optimal.
    """
    panels = [q for q in ("depth", "width", "tokens", "params") if f"{q}_star" in summary]
    fig, axs = axes(ax, ncols=len(panels), figsize=(3.6, 3.4))
    axs = np.atleast_1d(axs)
    c = summary["budget"].to_numpy(float)
    flat = bool(summary.get("flat", pd.Series([False])).any())
    for a, q in zip(axs, panels, strict=False):
        name = f"{q}_star"
        if flat and q in ("depth", "width"):
            name = "depth_max_opt" if q == "depth" else "width_at_depth_max_opt"
        if name is not None:
            a.plot(c, summary[name], color="C0", label=name)
            if f"{name}_lo" in summary:
                a.fill_between(
                    c, summary[f"{name}_lo"], summary[f"{name}_hi"], color="C0", alpha=0.2, lw=0
                )
        if q == "depth" and flat:
            a.fill_between(
                c,
                summary["depth_min_opt"],
                summary["depth_max_opt"],
                color="C1",
                alpha=0.15,
                lw=0,
                label="flat optimum",
            )
        if q in ("depth", "width") and flat:
            a.fill_between(
                c,
                summary[f"set_{q}_lo"],
                summary[f"set_{q}_hi"],
                color="C2",
                alpha=0.15,
                lw=0,
                label="practical, within eps",
            )
        elif q in summary and summary[q].notna().any():
            a.plot(c, summary[q], "x", color="k", ms=4, label="practical")
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("budget C (FLOP)")
        a.set_title(q)
        a.legend(fontsize=7)
    return fig


def write_allocation_plots(source: Any, alloc, folder: str | Path, **kw) -> list[Path]:
    """Write ``isoflop_<law>.png`` (shape laws) and ``frontier_<law>.png`` into ``folder``."""
    from .._io import atomic_savefig
    from ..allocate import allocate
    from ..allocate.analysis import isoflop_curve

    plt = pyplot()
    folder = Path(folder)
    paths = []
    if alloc.kind == "shape":
        curves = {float(b): isoflop_curve(source, b, **kw) for b in alloc.budgets}
        fig = plot_isoflop(curves, summary=alloc.summary)
        paths.append(atomic_savefig(fig, folder / f"isoflop_{alloc.law}.png", dpi=120))
        plt.close(fig)
    lo, hi = np.log10(alloc.budgets.min()) - 1, np.log10(alloc.budgets.max()) + 1
    cons = alloc.constraints
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
    fig = plot_frontier(wide.summary)
    paths.append(atomic_savefig(fig, folder / f"frontier_{alloc.law}.png", dpi=120))
    plt.close(fig)
    return paths
