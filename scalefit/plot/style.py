"""One figure style for every scalefit figure.

Colour-blind-safe colours (Okabe & Ito's palette; ``cividis`` for ordered series), readable log
ticks (plain numbers when an axis spans less than two decades, powers of ten otherwise, never
``3×10^0``), axis labels in words with units, and titles that name data, law and method. The style
is applied to each axes explicitly (:func:`style_axes`), so importing scalefit never changes a
user's matplotlib settings. :func:`axes` makes styled axes (with a headless backend when no
display is set) and :func:`estimates` draws estimates with their intervals (one outside its
interval open, and said so). Every figure of :mod:`scalefit.plot` uses it.
"""

from __future__ import annotations

import math
import os
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour-vision
# deficiencies. Yellow is last: it is hard to see on white.
PALETTE = (
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#F0E442",  # yellow
)
SEQUENTIAL = "cividis"  # ordered series (budgets, widths): colour-blind safe and greyscale safe

LABELS = {
    "depth": "depth (blocks)",
    "width": "width (d_model)",
    "tokens": "training tokens",
    "params": "parameters",
    "flops": "training compute (FLOP)",
    "budget": "training budget C (FLOP)",
    "tokens_per_param": "tokens per parameter",
}
METHODS = {"jax": "least squares", "lmfit": "least squares (lmfit)", "bayes": "Bayesian (NUTS)"}


def label(name: str) -> str:
    """Axis label in words with its unit for a canonical column name (else the name itself)."""
    return LABELS.get(name, name.replace("_", " "))


def loss_label(source: Any = None) -> str:
    """``loss (unit)`` with the unit its data declare, else ``loss`` (no unit is guessed).

    ``source`` is a result (its ``conventions["loss_unit"]``), a table (its
    ``attrs["scalefit"]["loss_unit"]``, set by :func:`scalefit.datasets.load`) or None.
    """
    meta = getattr(source, "conventions", None)
    if meta is None:
        meta = getattr(source, "attrs", {}).get("scalefit", {})
    unit = (meta or {}).get("loss_unit")
    return f"loss ({unit})" if unit else "loss"


def ordered_colours(n: int) -> list:
    """``n`` colours for a series: the palette's first ``n`` (up to 6), else the sequential map."""
    if n <= 6:
        return list(PALETTE[:n])
    cmap = pyplot().get_cmap(SEQUENTIAL)
    return [cmap(x) for x in np.linspace(0.0, 0.8, n)]


def flops_text(value: float) -> str:
    """A budget as ``1e21`` or ``3.2e20`` (no ``+``, no padding zeros)."""
    return _plain(value)


def style_axes(ax) -> None:
    """Apply the package style to one axes (palette, light grid, no top/right frame)."""
    ax.set_prop_cycle(color=list(PALETTE))
    ax.tick_params(labelsize=8)
    ax.grid(True, which="major", color="0.85", lw=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.xaxis.label.set_size(9)
    ax.yaxis.label.set_size(9)
    ax.title.set_size(9)


def _plain(value: float, _pos=None) -> str:
    """Tick text: ``3``, ``0.02``, ``2e+09`` → ``2e9``, no trailing zeros."""
    if value == 0 or not math.isfinite(value):
        return "0"
    if 1e-3 <= abs(value) < 1e5:
        return f"{value:.6g}"
    text = f"{value:.3g}"
    if "e" in text:
        mant, exp = text.split("e")
        text = f"{mant}e{int(exp)}"
    return text


def log_ticks(ax, which: str = "both") -> None:
    """Readable ticks on log axes: call after the data (and limits) are set.

    An axis spanning less than two decades gets ticks at 1, 2, 5 × 10^k (plus 3 when it spans
    less than one) written as plain numbers; a wider one gets powers of ten as ``1e19``. Minor
    ticks are never labelled.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for name in ("x", "y") if which == "both" else (which,):
        axis = getattr(ax, f"{name}axis")
        if axis.get_scale() != "log":
            continue
        lo, hi = sorted(getattr(ax, f"get_{name}lim")())
        if not (lo > 0 and hi > lo):
            continue
        decades = math.log10(hi / lo)
        if decades < 1:
            subs = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0)
        elif decades < 1.5:
            subs = (1.0, 2.0, 5.0)
        elif decades < 3:
            subs = (1.0, 3.0)
        else:
            subs = (1.0,)
        axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
        axis.set_major_formatter(FuncFormatter(_plain))
        axis.set_minor_formatter(NullFormatter())
        if decades > 6:  # too many labels: keep every other power of ten
            axis.set_major_locator(LogLocator(base=100, numticks=12))


OUTSIDE = "estimate outside its interval"


def estimates(ax, x, y, lo=None, hi=None, *, fmt="o", along="y", band=None, why=None, **kw):
    """Estimates with their intervals; one outside its own interval is drawn open and named.

    The interval drawn is ``[lo, hi]`` itself (bars about its midpoint, or a shaded band), never
    bars clipped at the estimate, so an estimate outside its interval shows as a point beside its
    bar: an open marker, with one legend entry per axes saying so and why.

    Parameters
    ----------
    ax : matplotlib Axes
        Where to draw (call ``ax.legend()`` afterwards).
    x, y : array-like
        Positions of the estimates.
    lo, hi : array-like, optional
        The interval of each estimate along ``along`` (NaN: none drawn).
    fmt : str, default "o"
        Marker and line of the estimates (``"o-"`` joins them).
    along : {"y", "x"}
        The axis of the intervals.
    band : dict, optional
        Draw the intervals as a band (``fill_between`` keywords) instead of bars (``along="y"``).
    why : str, optional
        The legend's reason for an estimate outside (default: the draws sit to one side of it).
    **kw
        Passed to ``ax.plot`` for the estimates (``color``, ``label``, ``ms``, ...).

    Returns
    -------
    matplotlib.lines.Line2D
        The estimates' line (its colour for what the caller adds).
    """
    x, y = (np.atleast_1d(np.asarray(a, dtype=float)) for a in (x, y))
    line = ax.plot(x, y, fmt, **kw)[0]
    if lo is None or hi is None:
        return line
    colour = line.get_color()
    lo, hi = (np.broadcast_to(np.asarray(a, dtype=float), x.shape) for a in (lo, hi))
    lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    has = np.isfinite(lo) & np.isfinite(hi)
    value = y if along == "y" else x
    outside = has & ((value < lo) | (value > hi))
    if band is not None:
        ax.fill_between(x, lo, hi, **{"color": colour, "alpha": 0.2, "lw": 0, **band})
    elif has.any():
        mid, half = (lo + hi)[has] / 2, (hi - lo)[has] / 2  # half-widths >= 0: the interval
        at = (x[has], mid) if along == "y" else (mid, y[has])
        ax.errorbar(*at, **{f"{along}err": half}, fmt="none", color=colour, capsize=3, zorder=1.5)
    if outside.any():
        marker = line.get_marker() if line.get_marker() not in ("None", "", None) else "o"
        ms = max(float(line.get_markersize()), 6.0)
        style = {"ls": "none", "marker": marker, "mfc": "white", "mew": 1.5, "ms": ms}
        ax.plot(x[outside], y[outside], color=colour, zorder=3, **style)
        text = f"{OUTSIDE}:\n{why or 'the draws sit to one side of it'}"
        if text not in ax.get_legend_handles_labels()[1]:
            ax.plot([], [], color="0.3", label=text, **style)
    for swatch in [h for h in ax.lines if h.get_label().startswith(OUTSIDE)]:
        swatch.remove()  # last in the legend, after the series
        ax.add_line(swatch)
    return line


def legend_entries(*axs) -> dict:
    """Label -> handle over the legend entries of several axes (the first of each label)."""
    entries = {}
    for ax in axs:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(text, handle)
    return entries


def value_ticks(*axs, values) -> None:
    """Ticks of each x axis at exactly ``values`` (the depths run, say), plain, no minor ticks."""
    values = sorted(set(values))
    for ax in axs:
        ax.set_xticks(values, [f"{v:g}" for v in values])
        ax.minorticks_off()


def data_name(result: Any) -> str:
    """The dataset a result was fitted to, for titles (``chinchilla``, a file stem, or 'data')."""
    conv = getattr(result, "conventions", None) or {}
    name = conv.get("dataset")
    if not name and conv.get("source"):
        stem = Path(str(conv["source"])).stem
        name = {
            "chinchilla_depth_width": "Chinchilla (Liu et al.)",
            "chinchilla_epoch_svg": "Chinchilla (Epoch AI)",
            "depth_delusion": "Depth Delusion table",
            "lm_grid_shakespeare": "scalefit LM grid (Shakespeare)",
            "wandb_df_for_fitting_hot_100b+": "Gemstones (McLeish et al.)",
        }.get(stem, stem)
    n = getattr(result, "n_rows", None)
    return f"{name or 'data'}{f', {n} rows' if n else ''}"


def method_name(result: Any) -> str:
    """Fitting method in words, with the number of draws when there are any."""
    method = METHODS.get(str(getattr(result, "method", "")), str(getattr(result, "method", "")))
    draws = getattr(result, "draws", None)
    if draws is not None and len(draws):
        kind = "posterior" if getattr(result, "method", "") == "bayes" else "bootstrap"
        rows = np.asarray(draws, dtype=float).reshape(len(draws), -1)
        used = int(np.isfinite(rows).all(axis=1).sum())
        of = f" of {len(draws)}" if used < len(draws) else ""  # failed resamples are NaN rows
        method += f", {used}{of} {kind} draws"
    return method


def law_name(result: Any) -> str:
    """The law's name whether ``result.law`` is a Law object or a string."""
    name = getattr(result, "law_name", None)
    if name:
        return str(name)
    law = getattr(result, "law", "")
    return str(getattr(law, "name", law))


def title(result: Any, what: str) -> str:
    """``what`` and, on a second line, ``data; law law, method`` for a figure of a fit result."""
    if result is None:
        return what
    return f"{what}\n{data_name(result)}; {law_name(result)} law, {method_name(result)}"


TITLE_SIZE = 9


def suptitle(fig, text: str, *, size: float = TITLE_SIZE):
    """Set the figure title, each line wrapped to the figure's width (never cut by the canvas).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    text : str
        The title; explicit line breaks are kept.
    size : float, default :data:`TITLE_SIZE`
        Font size in points.

    Returns
    -------
    matplotlib.text.Text
    """
    # about 0.6 em per character on average in the default sans-serif font, with a margin
    per_line = max(20, int(0.92 * fig.get_figwidth() * 72 / (0.6 * size)))
    lines = [w for line in text.split("\n") for w in textwrap.wrap(line, per_line) or [""]]
    return fig.suptitle("\n".join(lines), fontsize=size)


def pyplot():
    """Import matplotlib's pyplot with a non-interactive backend when no display is set."""
    import matplotlib

    if not os.environ.get("DISPLAY") and matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def axes(ax=None, ncols: int = 1, figsize=(5.0, 4.0), nrows: int = 1):
    """Return ``(fig, axes)``: new styled ones, or the figure owning the ``ax`` given."""
    plt = pyplot()
    if ax is not None:
        return ax.figure if not isinstance(ax, list | tuple) else ax[0].figure, ax
    fig, ax = plt.subplots(
        nrows,
        ncols,
        figsize=(figsize[0] * ncols, figsize[1] * nrows),
        squeeze=True,
        layout="constrained",
    )
    for a in np.atleast_1d(ax).ravel():
        style_axes(a)
    return fig, ax
