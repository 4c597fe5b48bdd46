"""Figure of a curve fit: observed curves, the fitted law along them, and forecasts with bands."""

from __future__ import annotations

import numpy as np
import pandas as pd


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
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
    else:
        fig = ax.figure
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (run, part) in enumerate(prepared.groupby("run", sort=False)):
        c = colours[i % len(colours)]
        ax.plot(part["step"], part["loss"], ".", ms=3, color=c, alpha=0.6, label=f"{run} (data)")
        ax.plot(part["step"], result.predict(part), "-", lw=1.2, color=c)
    for j, (label, frame) in enumerate(dict(forecasts or {}).items()):
        c = colours[(j + prepared["run"].nunique()) % len(colours)]
        ax.plot(frame["step"], frame["loss"], "--", color=c, label=f"forecast: {label}")
        if "lo" in frame:
            ax.fill_between(frame["step"], frame["lo"], frame["hi"], color=c, alpha=0.2)
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("loss (nats/token)")
    lo, hi = np.nanmin(prepared["loss"]), np.nanmax(prepared["loss"])
    pad = 0.05 * (hi - lo if hi > lo else 1.0)
    ax.set_ylim(lo - 3 * pad, hi + pad)
    ax.set_title(f"{result.law_name} fitted to {prepared['run'].nunique()} curves (least squares)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig
