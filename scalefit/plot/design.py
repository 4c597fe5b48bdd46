"""Figure of a design: candidates and chosen runs, and the interval as runs are added."""

from __future__ import annotations

import numpy as np

from .style import PALETTE, SEQUENTIAL, TITLE_SIZE, axes, flops_text, label, log_ticks


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

    fig, (left, right) = axes(ax, ncols=2, figsize=(5.0, 4.2))
    cand, runs = design.candidates, design.runs
    sc = left.scatter(
        cand["params"], cand["tokens"], c=cand["gain_alone"], s=10, cmap=SEQUENTIAL, alpha=0.8,
        edgecolors="none",
    )  # fmt: skip
    fig.colorbar(sc, ax=left, label="variance drop if trained alone")
    left.scatter(runs["params"], runs["tokens"], s=60, facecolors="none", edgecolors=PALETTE[1],
                 lw=1.5, label="chosen runs (order)")  # fmt: skip
    # runs at (nearly) one point get one label listing their positions ("3, 6")
    order: dict[tuple[float, float], list[int]] = {}
    for i, (_, r) in enumerate(runs.iterrows(), start=1):
        here = np.log10([float(r["params"]), float(r["tokens"])])
        near = [k for k in order if np.all(np.abs(np.log10(k) - here) < 0.08)]
        order.setdefault(near[0] if near else (float(r["params"]), float(r["tokens"])), [])
        order[near[0] if near else (float(r["params"]), float(r["tokens"]))].append(i)
    for (n, t), positions in order.items():
        left.annotate(", ".join(map(str, positions)), (n, t), fontsize=7, color=PALETTE[1],
                      xytext=(4, 4), textcoords="offset points")  # fmt: skip
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel(label("params"))
    left.set_ylabel(label("tokens"))
    log_ticks(left)
    left.legend(fontsize=7, frameon=False, loc="upper right")
    z = stats.norm.ppf((1 + design.ci_prob) / 2)
    sd = np.concatenate([[design.sd_before], runs["sd_after"].to_numpy()])
    flops = np.concatenate([[0.0], np.cumsum(runs["flops"].to_numpy())])
    right.plot(np.arange(len(sd)), z * sd, "o-", color=PALETTE[0])
    right.set_xticks(np.arange(len(sd)))
    right.set_xticklabels(
        ["none"] + [f"{i}\n{flops_text(float(f))}" for i, f in enumerate(flops[1:], start=1)],
        fontsize=7,
    )
    name = design.quantity.replace("log_", "log ")
    right.set_xlabel("runs added (below: cumulative training FLOP)")
    right.set_ylabel(f"{100 * design.ci_prob:g}% half-width of {name}")
    right.set_ylim(bottom=0)
    fig.suptitle(
        f"Next runs for {name} at {flops_text(design.target_budget)} FLOP\n{design.law} law; "
        f"runs use {flops_text(design.total_flops)} of {flops_text(design.budget_for_runs)} FLOP",
        fontsize=TITLE_SIZE,
    )
    return fig
