"""Figures for the trainer: per-layer diagnostics, variant comparisons and the loss grid.

Every function takes the tidy frames the trainer writes (``diagnostics.csv`` rows with
``layer, metric, value`` plus run columns, see :mod:`scalefit.train.diagnostics`; the loss table of
:mod:`scalefit.train.grid`), an optional ``ax`` and returns the figure.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import ScaleFitError
from .style import TITLE_SIZE, axes, log_ticks, ordered_colours, value_ticks

LABELS = {
    "angular_distance": "angular distance arccos(cos)/π",
    "angular_distance_last": "angular distance, last token",
    "output_variance": "variance of block output",
    "prune_drop": "loss increase when block is skipped (nats)",
    "grad_norm_hidden_rel": "‖∂L/∂h_l‖ / ‖∂L/∂h_D‖",
    "grad_norm_params_rel": "‖∂L/∂θ_l‖ / ‖∂L/∂θ_D‖ (block parameters)",
    "cr": "CR (coherence)",
    "increment_angle": "θ(Δh_{l-1}, Δh_l) (rad)",
}


def _select(diag, **where):
    sel = diag
    for key, value in where.items():
        if value is not None:
            sel = sel[sel[key] == value]
    if sel.empty:
        raise ScaleFitError(f"No diagnostics rows match {where}.")
    return sel


def plot_layer_metric(diag, metric: str, *, by: str = "variant", ax=None, **where):
    """One curve per value of ``by`` of ``metric`` against the layer index.

    Parameters
    ----------
    diag : pandas.DataFrame
        Tidy diagnostics (``layer, metric, value`` and run columns such as ``variant``, ``depth``,
        ``width``, ``tokens``).
    metric : str
        A metric name of :data:`scalefit.train.diagnostics.METRICS`.
    by : str
        Column whose values get one curve each.
    ax : matplotlib Axes, optional
    **where
        Column filters, e.g. ``depth=8, width=128``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, ax = axes(ax)
    sel = _select(diag, metric=metric, **where)
    for key, rows in sel.groupby(by):
        rows = rows.sort_values("layer")
        ax.plot(rows["layer"], rows["value"], marker="o", label=f"{by}={key}")
    ax.set_xlabel("layer l (block, from 1)")
    ax.set_ylabel(LABELS.get(metric, metric))
    if metric in ("output_variance",):
        ax.set_yscale("log")
    title = ", ".join(f"{k} {v}" for k, v in where.items() if v is not None)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    return fig


def plot_variant_comparison(
    diag, *, metrics=("output_variance", "angular_distance", "prune_drop"), **where
):
    """Side-by-side panels comparing variants (e.g. Pre-LN vs LNS) at one grid point."""
    fig, ax = axes(ncols=len(metrics), figsize=(4.2, 3.4))
    for a, metric in zip(np.atleast_1d(ax), metrics, strict=True):
        plot_layer_metric(diag, metric, by="variant", ax=a, **where)
    return fig


def plot_loss_grid(table, *, ax=None, variant: str | None = None):
    """Validation loss against depth: one line per (width, tokens), log-scaled depth axis."""
    fig, ax = axes(ax, figsize=(7.0, 4.2))
    sel = table if variant is None else table[table["variant"] == variant]
    sel = sel[~sel["diverged"].astype(bool)]
    styles = dict(zip(sorted(sel["tokens"].unique()), [":", "--", "-", "-."], strict=False))
    widths = sorted(sel["width"].unique())
    colors = dict(zip(widths, ordered_colours(len(widths)), strict=True))
    for (width, tokens), rows in sel.groupby(["width", "tokens"]):
        rows = rows.sort_values("depth")
        ax.plot(
            rows["depth"],
            rows["loss"],
            marker="o",
            color=colors[width],
            linestyle=styles.get(tokens, "-"),
            label=f"width {width}, {tokens / 1e6:.2g}M tokens",
        )
    ax.set_xscale("log", base=2)
    value_ticks(ax, values=sel["depth"])
    log_ticks(ax, "y")
    ax.set_xlabel("depth ℓ (blocks)")
    ax.set_ylabel("validation loss (nats/token)")
    names = {"pre_ln": "Pre-LN", "lns": "LayerNorm Scaling"}
    what = names.get(variant, variant) if variant else "all variants"
    ax.set_title(
        f"scalefit trainer grid ({len(sel)} runs, {what}): validation loss against depth",
        fontsize=TITLE_SIZE,
    )
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return fig
