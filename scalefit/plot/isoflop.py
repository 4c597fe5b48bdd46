"""Figures of :mod:`scalefit.isoflop`: IsoFLOP curves with their optima, approaches side by side."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core._validation import interval_text
from ..isoflop import assign_budgets
from .style import axes, estimates, legend_entries


def plot_isoflops(iso, table: pd.DataFrame, *, ax=None, title: str | None = None):
    """Loss against size per budget with the fitted curves (left), ``N*`` against C (right).

    Parameters
    ----------
    iso : IsoFLOPResult
        From :func:`scalefit.isoflop.approach2`.
    table : DataFrame
        The runs it was fitted to.
    ax : pair of Axes, optional
        Where to draw.
    title : str, optional
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .style import SEQUENTIAL, flops_text, label, log_ticks, loss_label, suptitle

    fig, (left, right) = axes(ax, ncols=2)
    lab = assign_budgets(table, iso.budgets["budget"].to_numpy(), tol=iso.tol).to_numpy()
    from matplotlib import colormaps

    cmap = colormaps[SEQUENTIAL]
    bud = iso.budgets
    lc = np.log10(bud["budget"].to_numpy())
    span = max(np.ptp(lc), 1e-9)
    for j, row in bud.iterrows():
        color = cmap((lc[j] - lc.min()) / span * 0.9)
        sel = lab == row["budget"]
        n = table["params"].to_numpy(float)[sel]
        left.scatter(n, table["loss"].to_numpy(float)[sel], s=12, color=color)
        x = np.linspace(np.log(n.min()) - 0.2, np.log(n.max()) + 0.2, 100)
        curve = iso.curve_loss(j, x)
        if curve is not None:
            left.plot(np.exp(x), curve, color=color, lw=1)
        if np.isfinite(row["params_opt"]):
            estimates(
                left,
                row["params_opt"],
                row["loss_opt"],
                row["params_lo"],
                row["params_hi"],
                fmt="D",
                along="x",
                color=color,
                ms=5,
                mec="k",
                label=f"C = {flops_text(row['budget'])} FLOP",
            )
    left.set_xscale("log")
    left.set_xlabel(label("params"))
    left.set_ylabel(loss_label(table))
    log_ticks(left)
    left.legend(fontsize=6, ncol=2)
    ok = np.isfinite(bud["params_opt"].to_numpy())
    estimates(
        right,
        bud["budget"][ok],
        bud["params_opt"][ok],
        bud["params_lo"][ok],
        bud["params_hi"][ok],
        color="k",
        label=f"optimum per budget ({100 * iso.ci_prob:g}% interval)",
    )
    ex = iso.exponents.loc["params"]
    c = np.geomspace(bud["budget"].min(), bud["budget"].max(), 50)
    right.plot(
        c,
        np.exp(ex["intercept"]) * c ** ex["exponent"],
        color="C3",
        label=f"N* ∝ C^{ex['exponent']:.3f}"
        + interval_text(ex["exponent"], ex["lo"], ex["hi"], "{:.3f}".format),
    )
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel(label("flops"))
    right.set_ylabel("compute-optimal parameters N*")
    log_ticks(right)
    right.legend(fontsize=7)
    suptitle(fig, title or f"IsoFLOP profiles, Approach 2 ({iso.method})")
    return fig


def plot_comparison(frame: pd.DataFrame, *, ax=None, truth: tuple | None = None, title=None):
    """Exponents ``a`` and ``b`` with intervals, one row per approach (a forest plot).

    Parameters
    ----------
    frame : DataFrame
        From :func:`scalefit.isoflop.compare_approaches`.
    ax : pair of Axes, optional
        Where to draw.
    truth : (float, float), optional
        True ``(a, b)`` to mark (synthetic data).
    title : str, optional
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, (left, right) = axes(ax, ncols=2, figsize=(4.5, 0.45 * len(frame) + 1.5))
    y = np.arange(len(frame))[::-1]
    pub = frame["approach"].str.contains("published").to_numpy()
    for axis, q in ((left, "a"), (right, "b")):
        v, lo, hi = (frame[c].to_numpy(float) for c in (q, f"{q}_lo", f"{q}_hi"))
        estimates(axis, v[~pub], y[~pub], lo[~pub], hi[~pub], along="x", color="C0",
                  label="this data")  # fmt: skip
        if pub.any():
            estimates(
                axis, v[pub], y[pub], lo[pub], hi[pub], fmt="s", along="x", color="C1",
                label="published (10th–90th pct.)", why="published estimates are rounded",
            )  # fmt: skip
        if truth is not None:
            axis.axvline(truth[0 if q == "a" else 1], color="k", ls="--", lw=1, label="truth")
        axis.set_yticks(y, frame["approach"] if q == "a" else [""] * len(y))
        axis.set_xlabel("a  (N* ∝ C^a)" if q == "a" else "b  (T* ∝ C^b)")
    entries = legend_entries(left, right)
    fig.legend(entries.values(), entries, fontsize=7, loc="outside lower center", ncol=2)
    fig.suptitle(title or "Compute-optimal exponents by approach")
    return fig
