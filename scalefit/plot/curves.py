"""Figure of a curve fit: observed curves, the fitted law along them, and forecasts with bands."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .style import OUTSIDE, PALETTE, axes, estimates, loss_label, ordered_colours, suptitle, title


def plot_curves(result, prepared: pd.DataFrame, *, forecasts=None, ax=None):
    """Loss against step per run (points), the fitted law along each run (lines).

    Parameters
    ----------
    result : FitResult
        A curve fit.
    prepared : DataFrame
        The prepared checkpoints that were fitted (or held out).
    forecasts : mapping of str to DataFrame, optional
        ``{label: forecast(...)}`` drawn as dashed lines with their bands.
    ax : matplotlib Axes, optional
        Axes to draw on.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.lines import Line2D

    from ..curves.multipower import with_quadrature

    fig, ax = axes(ax, figsize=(7.0, 4.6))
    prepared = with_quadrature(prepared, result.law)
    runs = list(prepared.groupby("run", sort=False))
    colours = ordered_colours(len(runs))
    for c, (_, part) in zip(colours, runs, strict=True):
        ax.plot(part["step"], part["loss"], ".", ms=3, color=c, alpha=0.6)
        ax.plot(part["step"], result.predict(part), "-", lw=1.2, color=c)
    handles = [
        Line2D(
            [], [], ls="none", marker=".", color="0.4", label=f"checkpoints of {len(runs)} runs"
        ),
        Line2D([], [], color="0.4", lw=1.2, label="fitted law along each run"),
    ]
    extra = [PALETTE[1], PALETTE[2], PALETTE[3], PALETTE[4]]
    for j, (name, frame) in enumerate(dict(forecasts or {}).items()):
        c = extra[j % len(extra)]
        lo, hi = frame.get("lo"), frame.get("hi")
        handles.append(estimates(ax, frame["step"], frame["loss"], lo, hi, fmt="--", band={},
                                 color=c, label=f"forecast: {name}"))  # fmt: skip
    handles += [h for h in ax.get_lines() if h.get_label().startswith(OUTSIDE)]
    ax.set_xlabel("optimiser step")
    ax.set_ylabel(loss_label(result))
    lo, hi = np.nanmin(prepared["loss"]), np.nanmax(prepared["loss"])
    pad = 0.05 * (hi - lo if hi > lo else 1.0)
    ax.set_ylim(lo - 3 * pad, hi + pad)
    ax.legend(handles=handles, fontsize=7, frameon=False, loc="upper right")
    suptitle(fig, title(result, f"{result.law_name} fitted to {len(runs)} loss curves"))
    return fig
