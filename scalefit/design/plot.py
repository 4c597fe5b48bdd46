"""Figure of a design: candidates and chosen runs, and the interval as runs are added."""

from __future__ import annotations

import numpy as np

from ..plot._base import axes


def plot_design(design, *, ax=None):
    """Candidates and the chosen runs (left), the interval against runs added (right).

    Candidates are coloured by their gain alone and the chosen runs numbered in order; the right
    panel shows the quantity's interval half-width as runs are added.

    Parameters
    ----------
    design : DesignResult
        From :func:`scalefit.design.next_runs`.
    ax : pair of Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from scipy import stats

    fig, (left, right) = axes(ax, ncols=2)
    cand, runs = design.candidates, design.runs
    sc = left.scatter(
        cand["params"], cand["tokens"], c=cand["gain_alone"], s=10, cmap="viridis", alpha=0.7
    )
    fig.colorbar(sc, ax=left, label="variance drop if trained alone")
    left.scatter(runs["params"], runs["tokens"], s=60, facecolors="none", edgecolors="C3", lw=1.5,
                 label="chosen runs (order)")  # fmt: skip
    for i, r in runs.iterrows():
        left.annotate(str(i + 1), (r["params"], r["tokens"]), fontsize=7, color="C3",
                      xytext=(3, 3), textcoords="offset points")  # fmt: skip
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("parameters N")
    left.set_ylabel("training tokens T")
    left.legend(fontsize=7)
    z = stats.norm.ppf((1 + design.prob) / 2)
    sd = np.concatenate([[design.sd_before], runs["sd_after"].to_numpy()])
    flops = np.concatenate([[0.0], np.cumsum(runs["flops"].to_numpy())])
    right.plot(np.arange(len(sd)), z * sd, "o-", color="C0")
    for i, f in enumerate(flops[1:], start=1):
        right.annotate(f"{f:.1e}", (i, z * sd[i]), fontsize=6, rotation=45,
                       xytext=(2, 4), textcoords="offset points")  # fmt: skip
    name = design.quantity.replace("log_", "log ")
    right.set_xlabel("runs added (labels: cumulative FLOPs)")
    right.set_ylabel(f"{100 * design.prob:g}% half-width of {name}")
    right.set_ylim(bottom=0)
    fig.suptitle(
        f"Next runs for {name} at {design.target_budget:.0e} FLOPs ({design.law}, "
        f"{design.total_flops:.2e} of {design.budget_for_runs:.0e} FLOPs)"
    )
    return fig
